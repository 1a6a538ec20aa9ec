//! The generators: the vocabularies parsers read (body fields, query keys,
//! meaningful strings and numbers), arbitrary JSON and bytes, changes to a valid
//! body ([`Mutation`]), path parameters, query strings, headers (credentials, media
//! types, `X-Request-Origin`, others) and paths, as proptest strategies and the
//! values they generate.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::scim::protocol::{ENTERPRISE_URN, PATCH_URN, SEARCH_URN, USER_URN};

/// Every body field some parser reads (track, export, identity, subscriptions,
/// preference centers, operator routes, SCIM resources, PATCH and search bodies).
#[rustfmt::skip]
const FIELDS: &[&str] = &[
    "attributes", "events", "purchases", "external_id", "user_alias", "alias_name", "alias_label", "braze_id",
    "service_id", "email", "phone", "_update_existing_only", "_merge_objects", "push_token_import",
    "email_subscribe", "push_subscribe", "subscription_groups", "subscription_group_id", "subscription_state",
    "first_name", "last_name", "home_city", "image_url", "gender", "dob", "country", "language", "time_zone",
    "email_open_tracking_disabled", "email_click_tracking_disabled", "date_of_first_session",
    "date_of_last_session", "marked_email_as_spam_at", "current_location", "latitude", "longitude", "name", "time",
    "app_id", "properties", "product_id", "currency", "price", "quantity", "inc", "add", "remove", "$time", "$add",
    "$remove", "$update", "$identifier_key", "$identifier_value", "$new_object", "external_ids", "user_aliases",
    "service_ids", "braze_ids", "email_address", "fields_to_export", "aliases_to_identify", "emails_to_identify",
    "phone_numbers_to_identify", "prioritization", "merge_updates", "identifier_to_merge", "identifier_to_keep",
    "email_addresses", "phone_numbers", "alias_updates", "old_alias_name", "new_alias_name",
    "use_double_opt_in_logic", "emails", "phones", "preference_center_title", "preference_center_page_html",
    "confirmation_page_html", "state", "options", "meta-viewport-content", "links-tags", "rel", "href", "type",
    "sizes", "color", "workspace", "permissions", "origin", "source", "table", "kind", "schedule_secs",
    "contact_emails", "channel", "schemas", "id", "externalId", "meta", "userName", "givenName", "familyName",
    "department", "createdAt", "lastSignInAt", "active", "displayName", "formatted", "middleName",
    "companyPermissions", "roles", "appGroup", "roleId", "roleName", "appGroupId", "appGroupName",
    "appGroupPermissions", "appGroupPermissionSets", "appGroupPermissionSetId", "appGroupPermissionSetName", "team",
    "teamId", "teamName", "teamPermissions", "Operations", "op", "path", "value", "excludedAttributes", "filter",
    "startIndex", "count", "sortBy", "sortOrder", "USERNAME", "Active",
];

/// Every query parameter some route reads, and near misses.
#[rustfmt::skip]
const QUERY_KEYS: &[&str] = &[
    "external_id", "external_id[]", "email", "email[]", "phone", "phone[]", "limit", "offset",
    "subscription_group_id", "cursor", "integration_id", "filter", "startIndex", "startindex", "count",
    "attributes", "excludedAttributes", "sortBy", "sortOrder", "expires_in", "workspace", "FILTER", "",
];

/// Values that mean something to some parser, placeholders for the world's ids,
/// and edge cases of each kind of value.
#[rustfmt::skip]
const STRINGS: &[&str] = &[
    "", " ", "u1", "u2", "u3", "nobody", "n1", "crm", "a@x.test", "b@x.test", "c@x.test", "A@X.TEST",
    "not-an-email", "a@", "+14155550100", "+14155550101", " 14155550100", "+0", "+1234567890123456", "subscribed",
    "unsubscribed", "opted_in", "Subscribed", "active", "draft", "identified", "unidentified",
    "most_recently_updated", "least_recently_updated", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00+23:59",
    "2016-12-31T23:59:60Z", "+262143-12-31T23:59:59Z", "-9999-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999999999Z", "2020-02-29", "1900-02-29", "99999-01-01", "-0001-01-01", "USD", "usd", "EU",
    "M", "f", "DE", "en", "UTC", "America/New_York", "Etc/GMT+5", "/", "all", "users.track", "scim", "email", "sms",
    "whatsapp", "line", "users", "events", "purchases", "deletes", "sqlite:/tmp/x.db", "sqlite:", "postgres://db/x",
    "a.b", "a.b.c", "$x", "https://idp.example.com", "https://IDP.example.com/", "engineering", "icon",
    "shortcut icon", "image/png", "§email_group", "§sms_group", "§center", "§token", "§scim_user", "§integration",
    "§service_id", "§cursor_i", "§cursor_j", USER_URN, PATCH_URN, SEARCH_URN, ENTERPRISE_URN,
    "userName eq \"ada@example.com\"", "userName eq \"x\" and userName eq \"y\"", "userName pr",
    "USERNAME EQ \"ADA@EXAMPLE.COM\"", "emails[type eq \"work\"].value", "userName eq \"\\u12\"", "replace", "add",
    "remove", "name.givenName", "name", "permissions.appGroup", "permissions.companyPermissions",
    "urn:ietf:params:scim:schemas:core:2.0:User:userName", "admin", "basic_access", "view_pii",
    "{{ ${first_name} }}", "{% if x %}", "{{", "{% form_field_name :subscription_group §email_group %}",
    "{% form_field_name :subscription_group nope %}", "{{subscribed_state.${nope}}}", "$time", "{\"a\":1}", "null",
    "true", "0", "-1", "1e400", "18446744073709551616", "NaN", "é", "日本語", "\u{0}", "\u{1f}", "\u{feff}", "\\u0000",
    "<script>", "%", "%zz", "%00", "%2F", "../..", "*", "W/\"1\"", "W/\"2\"", "a,b", "email_global_state",
    "subscription_group_§email_group", "0123456789abcdef01234567",
];

/// Numbers at the edges of the ranges parsers check.
#[rustfmt::skip]
const NUMBERS: &[f64] = &[
    0.0, -0.0, 0.5, 1.0, 1.5, -1.5, 49.0, 50.0, 51.0, 59.0, 60.0, 75.0, 76.0, 100.0, 101.0, 255.0, 256.0, 1e15,
    1e15 + 1.0, -1e15, 1e16, 1e300, -1e300, 5e-324, 9.2e18, 1.8446744073709552e19,
];

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        5 => prop::sample::select(STRINGS).prop_map(str::to_string),
        3 => ".{0,24}",
        1 => "[ -~]{0,40}",
        1 => prop::sample::select(vec![255usize, 256, 987, 988, 1024, 1025, 5000])
            .prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        (-3i64..130).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(NUMBERS).prop_map(Value::from),
    ]
    .boxed()
}

/// A value nested `n` deep, inside arrays or objects.
fn deep(n: usize, objects: bool) -> Value {
    let mut v = json!("bottom");
    for _ in 0..n {
        v = if objects { json!({ "a": v }) } else { json!([v]) };
    }
    v
}

/// A long array of one kind of item (past the "at most 50/75" bounds).
fn long_array(kind: usize, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| match kind % 4 {
                0 => json!(format!("u{i}")),
                1 => json!({"external_id": format!("u{i}"), "name": "e", "time": "2024-01-01T00:00:00Z"}),
                2 => json!({"alias_name": format!("n{i}"), "alias_label": "crm"}),
                _ => json!(i),
            })
            .collect(),
    )
}

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => number(),
        6 => text().prop_map(Value::String),
        1 => (0usize..4, 45usize..90).prop_map(|(k, n)| long_array(k, n)),
        1 => (1usize..140, any::<bool>()).prop_map(|(n, o)| deep(n, o)),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![5 => prop::sample::select(FIELDS).prop_map(str::to_string), 1 => text()].boxed()
}

/// Arbitrary JSON whose object keys are mostly the fields parsers read.
fn json_value() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                2 => prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                3 => prop::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
            ]
        })
        .boxed()
}

/// A whole body: mostly an object, as nearly every endpoint wants.
pub(super) fn json_body() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => json_value(),
        4 => prop::collection::vec((key(), json_value()), 0..8)
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
    ]
    .boxed()
}

/// Arbitrary bytes for a body, mostly made from the route's valid body.
#[derive(Clone, Debug)]
pub(super) enum Bytes {
    Random(Vec<u8>),
    Text(String),
    /// The valid body cut after this many bytes.
    Truncated(usize),
    /// The valid body with a token inserted at a byte offset.
    Spliced(usize, Vec<u8>),
    /// The valid body with bytes replaced.
    Flipped(Vec<(usize, u8)>),
}

#[rustfmt::skip]
const SPLICES: &[&[u8]] = &[
    b"1e400", b"-0", b"1E+2", b"123456789012345678901234567890", b"NaN", b"Infinity", b"\"\\ud800\"",
    b"\"\\u0000\"", b"\0", b"\xef\xbb\xbf", b"{", b"}", b"[", b"]", b",", b":", b"\"", b"\\", b"null", b"0x10",
    b"01", b"-", b"1.", b"\x7f", b"\"a\":1,", b"\xff\xfe", b"\xc3", b"%", b"&", b"=", b"+", b"%zz", b"%ff",
];

pub(super) fn bytes() -> BoxedStrategy<Bytes> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::Random),
        ".{0,80}".prop_map(Bytes::Text),
        any::<usize>().prop_map(Bytes::Truncated),
        (any::<usize>(), prop::sample::select(SPLICES)).prop_map(|(i, s)| Bytes::Spliced(i, s.to_vec())),
        prop::collection::vec((any::<usize>(), any::<u8>()), 1..4).prop_map(Bytes::Flipped),
    ]
    .boxed()
}

/// A change to a valid body (or, for a route without one, its query).
#[derive(Clone, Debug)]
pub(super) enum Mutation {
    /// Replace the n-th node (pre-order) by a value.
    Replace(usize, Value),
    /// Remove the n-th node from its parent.
    Remove(usize),
    /// Insert a field (object) or an item (array) into the n-th node.
    Insert(usize, String, Value),
    /// Repeat the n-th node's items (array) or fields (object) this many times.
    Grow(usize, usize),
}

pub(super) fn mutation() -> BoxedStrategy<Mutation> {
    let small = prop_oneof![4 => leaf(), 1 => json_value()].boxed();
    prop_oneof![
        4 => (any::<usize>(), small.clone()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        2 => (any::<usize>(), key(), small).prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
        1 => (any::<usize>(), 2usize..90).prop_map(|(i, n)| Mutation::Grow(i, n)),
    ]
    .boxed()
}

/// A path parameter.
#[derive(Clone, Debug)]
pub(super) enum Param {
    /// An id that exists (the n-th known one for the slot).
    Known(usize),
    /// A known id changed a little (a character added, removed, replaced; case; spaces).
    Tweaked(usize, u8, char),
    /// Any text, percent-encoded into one segment.
    Text(String),
    /// Any text as it is (it may hold `/`, `%`, ...).
    Raw(String),
}

pub(super) fn param() -> BoxedStrategy<Param> {
    prop_oneof![
        4 => any::<usize>().prop_map(Param::Known),
        2 => (any::<usize>(), any::<u8>(), any::<char>()).prop_map(|(i, t, c)| Param::Tweaked(i, t, c)),
        3 => text().prop_map(Param::Text),
        1 => "[^?#]{0,20}".prop_map(Param::Raw),
    ]
    .boxed()
}

/// One part of a query string.
#[derive(Clone, Debug)]
pub(super) enum QueryPart {
    /// `key=value`, percent-encoded or not.
    Pair(String, String, bool),
    /// A key without `=`.
    Bare(String),
    /// Any text.
    Raw(String),
}

pub(super) fn query_part() -> BoxedStrategy<QueryPart> {
    let qkey = prop_oneof![4 => prop::sample::select(QUERY_KEYS).prop_map(str::to_string), 1 => text()].boxed();
    let qvalue = prop_oneof![
        4 => text(),
        2 => number().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec!["a,b", "userName,name.givenName", "permissions", "meta,id", "x.y.z"])
            .prop_map(str::to_string),
    ];
    prop_oneof![
        6 => (qkey.clone(), qvalue, any::<bool>()).prop_map(|(k, v, e)| QueryPart::Pair(k, v, e)),
        1 => qkey.prop_map(QueryPart::Bare),
        1 => ".{0,30}".prop_map(QueryPart::Raw),
    ]
    .boxed()
}

/// The `Content-Type` of a request.
#[derive(Clone, Debug)]
pub(super) enum ContentType {
    Right,
    Missing,
    Some(String),
}

pub(super) fn content_type() -> BoxedStrategy<ContentType> {
    prop_oneof![
        4 => Just(ContentType::Right),
        2 => Just(ContentType::Missing),
        3 => prop::sample::select(vec![
            "application/json", "application/scim+json", "application/x-www-form-urlencoded",
            "APPLICATION/X-WWW-FORM-URLENCODED; charset=utf-8", "application/json; charset=utf-8", "text/plain",
            "multipart/form-data; boundary=x", ";", "",
        ])
        .prop_map(|s| ContentType::Some(s.to_string())),
        1 => ".{0,30}".prop_map(ContentType::Some),
    ]
    .boxed()
}

/// The `Authorization` (and `X-Request-Origin`) of a request.
#[derive(Clone, Debug)]
pub(super) enum Credentials {
    /// What the route expects.
    Right,
    /// No `Authorization` at all.
    Missing,
    /// The right token under another scheme (`Basic`, `Token`, `bearer`, ...).
    Scheme(String),
    /// `Bearer` and this text as the token.
    Bearer(String),
    /// Another kind's valid credential (API key, admin token, SCIM token), the n-th.
    Other(usize),
    /// The header's whole value.
    Value(String),
    /// A wrong `Authorization` first, then the right one.
    WrongThenRight(String),
}

fn credentials() -> BoxedStrategy<Credentials> {
    prop_oneof![
        2 => Just(Credentials::Right),
        2 => Just(Credentials::Missing),
        3 => prop_oneof![
            prop::sample::select(vec![
                "Basic", "Token", "bearer", "BEARER", "Bearer:", "Digest", "", " ", "Bearer\t", "Bearer Bearer",
            ])
            .prop_map(str::to_string),
            "[ -~]{0,10}",
        ]
        .prop_map(Credentials::Scheme),
        2 => text().prop_map(Credentials::Bearer),
        2 => any::<usize>().prop_map(Credentials::Other),
        2 => ".{0,40}".prop_map(Credentials::Value),
        1 => text().prop_map(Credentials::WrongThenRight),
    ]
    .boxed()
}

/// The `X-Request-Origin` of a request.
#[derive(Clone, Debug)]
pub(super) enum RequestOrigin {
    /// The one the route expects (only SCIM expects one).
    Right,
    Missing,
    Some(String),
}

fn request_origin() -> BoxedStrategy<RequestOrigin> {
    prop_oneof![
        3 => Just(RequestOrigin::Right),
        1 => Just(RequestOrigin::Missing),
        1 => prop::sample::select(vec![
            "HTTPS://IDP.EXAMPLE.COM", "https://idp.example.com/", " https://idp.example.com ",
            "https://idp.example.com//", "https://other.example.com", "",
        ])
        .prop_map(|s| RequestOrigin::Some(s.to_string())),
        1 => ".{0,30}".prop_map(RequestOrigin::Some),
    ]
    .boxed()
}

/// Every header of a request, as generated.
#[derive(Clone, Debug)]
pub(super) struct Headers {
    pub(super) credentials: Credentials,
    pub(super) content_type: ContentType,
    pub(super) request_origin: RequestOrigin,
    /// Other headers (`If-Match`, `Host`, `Content-Length`, ...).
    pub(super) extra: Vec<(String, String)>,
    /// The origin the host saw.
    pub(super) origin: Option<String>,
    /// Header names in lower case (true) or as written.
    pub(super) lower_names: bool,
}

pub(super) fn headers() -> BoxedStrategy<Headers> {
    let name = prop_oneof![
        4 => prop::sample::select(vec![
            "If-Match", "Host", "Content-Length", "Accept", "content-type", "authorization", "x-request-origin",
            "Cookie", "Transfer-Encoding",
        ])
        .prop_map(str::to_string),
        1 => ".{0,12}",
    ];
    let value = prop_oneof![
        2 => prop::sample::select(vec![
            "*", "W/\"1\"", "W/\"2\"", "\"1\"", "W/\"1\", W/\"2\"", "W/", "0", "99999999999999999999", "-1",
            "example.com", "exa mple.com:99999",
        ])
        .prop_map(str::to_string),
        1 => text(),
    ];
    (
        credentials(),
        content_type(),
        request_origin(),
        prop::collection::vec((name, value), 0..4),
        prop::option::of(prop_oneof!["https?://[a-z.]{1,12}(:[0-9]{1,6})?", ".{0,20}"]),
        any::<bool>(),
    )
        .prop_map(|(credentials, content_type, request_origin, extra, origin, lower_names)| Headers {
            credentials,
            content_type,
            request_origin,
            extra,
            origin,
            lower_names,
        })
        .boxed()
}

/// A segment of a path made of the table's own segments, ids and arbitrary text.
#[derive(Clone, Debug)]
pub(super) enum Segment {
    Literal(usize),
    Param(Param),
}

/// A path: segments (and a trailing `/` or not), or any text at all.
#[derive(Clone, Debug)]
pub(super) enum PathGen {
    Segments(Vec<Segment>, bool),
    Raw(String),
}

pub(super) fn path_gen() -> BoxedStrategy<PathGen> {
    let segment = prop_oneof![
        3 => any::<usize>().prop_map(Segment::Literal),
        1 => param().prop_map(Segment::Param),
    ];
    prop_oneof![
        6 => (prop::collection::vec(segment, 0..6), any::<bool>()).prop_map(|(s, t)| PathGen::Segments(s, t)),
        1 => ".{0,40}".prop_map(PathGen::Raw),
    ]
    .boxed()
}
