//! What each route is sent when it is sent something valid: the valid request
//! ([`example`]) of every route of the table, its query pairs and body, with
//! `§...` placeholders for the world's ids, and the media type each kind of route
//! takes.

use serde_json::{json, Value};

use crate::http::Method;
use crate::routes::{Auth, Route};
use crate::scim::protocol::{ENTERPRISE_URN, PATCH_URN, SEARCH_URN, USER_URN};

/// A body as generated: JSON, an urlencoded form, or nothing.
#[derive(Clone, Debug)]
pub(super) enum Body {
    None,
    Json(Value),
    Form(Vec<(String, String)>),
}

/// A valid request of a route: its query pairs and body.
#[derive(Clone, Debug)]
pub(super) struct Example {
    pub(super) query: Vec<(String, String)>,
    pub(super) body: Body,
}

pub(super) fn center_body(name: Option<&str>) -> Value {
    let page = "<html><head><meta charset=\"utf-8\"></head><body>\
        <p>Hi {{ ${first_name} | default: 'there' | capitalize }}</p>\
        <form method=\"post\" action=\"{{preference_center_submit_url}}\">\
        <input name=\"{% form_field_name :email_global_state %}\" value=\"opted_in\" \
        {% if subscribed_state.${email_global} != 'unsubscribed' %}checked{% endif %}>\
        <input name=\"{% form_field_name :subscription_group §email_group %}\" value=\"subscribed\" \
        {% if subscribed_state.${§email_group} == 'subscribed' %}checked{% endif %}>\
        </form></body></html>";
    let mut body = json!({
        "preference_center_title": "Prefs",
        "preference_center_page_html": page,
        "confirmation_page_html": "<p>Saved, {{subscribed_state.${email_global}}} {{ ${email_address} }}</p>",
        "state": "active",
        "options": {"meta-viewport-content": "width=device-width",
                    "links-tags": [{"rel": "icon", "href": "/f.png", "type": "image/png", "sizes": "32x32"}]},
    });
    if let Some(n) = name {
        body["name"] = json!(n);
    }
    body
}

pub(super) fn scim_user(name: &str) -> Value {
    json!({
        "schemas": [USER_URN],
        "userName": name,
        "externalId": "x-1",
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "department": "engineering",
        "permissions": {
            "companyPermissions": ["manage_company_settings"],
            "appGroup": [{"appGroupName": "W", "appGroupPermissions": ["basic_access"],
                          "team": [{"teamName": "T", "teamPermissions": ["basic_access"]}]}]
        }
    })
}

fn track_body() -> Value {
    json!({
        "attributes": [
            {"external_id": "u1", "first_name": "B", "email": "a@x.test", "phone": "+14155550100",
             "gender": "f", "country": "de", "time_zone": "Etc/GMT+5", "current_location": {"latitude": 1, "longitude": 2},
             "date_of_last_session": "2024-01-01", "email_subscribe": "unsubscribed", "push_subscribe": "opted_in",
             "visits": {"inc": 2}, "tags": {"add": ["c"], "remove": ["a"]}, "since": {"$time": "2020-01-01"},
             "address": {"zip": "1"}, "_merge_objects": true,
             "pets": {"$update": [{"$identifier_key": "id", "$identifier_value": 1, "$new_object": {"age": 2}}]},
             "subscription_groups": [{"subscription_group_id": "§email_group", "subscription_state": "unsubscribed"}]},
            {"user_alias": {"alias_name": "n1", "alias_label": "crm"}, "color": null},
            {"braze_id": "§service_id", "pets": {"$remove": [{"$identifier_key": "type", "$identifier_value": "dog"}]}},
            {"email": "d@x.test", "last_name": "C"}
        ],
        "events": [{"external_id": "u1", "app_id": "a", "name": "play", "time": "2024-01-01T00:00:00Z",
                    "properties": {"level": 2, "nested": {"a": [1, 2]}}},
                   {"phone": "+14155550101", "name": "call", "time": "2099-01-01T00:00:00+02:00"}],
        "purchases": [{"external_id": "u2", "product_id": "sku", "currency": "EUR", "price": 1.5, "quantity": 3,
                       "time": "2024-01-01T00:00:00Z", "properties": {"size": "L"}}]
    })
}

/// The valid request of every route; `None` for a route this module does not know
/// (which [`super::every_route_has_an_example`] refuses).
pub(super) fn example(route: &Route) -> Option<Example> {
    let json = |v: Value| Example { query: Vec::new(), body: Body::Json(v) };
    let query = |pairs: &[(&str, &str)]| Example {
        query: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        body: Body::None,
    };
    let alias = json!({"alias_name": "n1", "alias_label": "crm"});
    Some(match (route.method, route.pattern) {
        (Method::Post, "/users/track") => json(track_body()),
        (Method::Post, "/users/track/sync") => {
            json(json!({"attributes": [{"external_id": "u1", "first_name": "S", "visits": {"inc": 1}}]}))
        }
        (Method::Post, "/users/export/ids") => json(json!({
            "external_ids": ["u1", "u2", "nobody"], "user_aliases": [alias], "email_address": "a@x.test",
            "fields_to_export": ["email", "custom_attributes", "custom_events", "purchases", "subscription_groups",
                                 "total_revenue", "user_aliases", "braze_id"]
        })),
        (Method::Post, "/users/identify") => json(json!({
            "aliases_to_identify": [{"external_id": "u3", "user_alias": alias}],
            "emails_to_identify": [{"external_id": "u4", "email": "c@x.test",
                                    "prioritization": ["unidentified", "most_recently_updated"]}],
            "phone_numbers_to_identify": [{"external_id": "u5", "phone": "+14155550101",
                                           "prioritization": ["least_recently_updated"]}]
        })),
        (Method::Post, "/users/merge") => json(json!({"merge_updates": [
            {"identifier_to_merge": {"external_id": "u2"}, "identifier_to_keep": {"external_id": "u1"}},
            {"identifier_to_merge": {"email": "c@x.test", "prioritization": ["unidentified"]},
             "identifier_to_keep": {"user_alias": alias}}
        ]})),
        (Method::Post, "/users/delete") => json(json!({
            "external_ids": ["u2"], "user_aliases": [{"alias_name": "n9", "alias_label": "crm"}],
            "email_addresses": [{"email": "c@x.test", "prioritization": ["unidentified"]}],
            "phone_numbers": [{"phone": "+14155550102", "prioritization": ["identified"]}],
            "braze_ids": ["0123456789abcdef01234567"]
        })),
        (Method::Post, "/users/alias/new") => json(json!({"user_aliases": [
            {"alias_name": "n2", "alias_label": "web", "external_id": "u1"},
            {"alias_name": "n3", "alias_label": "web"}
        ]})),
        (Method::Post, "/users/alias/update") => {
            json(json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "n1", "new_alias_name": "n4"}]}))
        }
        // Ids of their own: the world's users keep theirs for the other routes.
        (Method::Post, "/users/external_ids/rename") => {
            json(json!({"external_id_renames": [{"current_external_id": "r1", "new_external_id": "r2"}]}))
        }
        (Method::Post, "/users/external_ids/remove") => json(json!({"external_ids": ["r1"]})),
        (Method::Post, "/subscription/status/set") => json(json!({
            "subscription_group_id": "§email_group", "subscription_state": "unsubscribed",
            "external_id": "u1", "email": ["a@x.test"], "use_double_opt_in_logic": false
        })),
        (Method::Post, "/v2/subscription/status/set") => json(json!({"subscription_groups": [
            {"subscription_group_id": "§sms_group", "subscription_state": "subscribed", "phones": ["+14155550100"]},
            {"subscription_group_id": "§email_group", "subscription_state": "subscribed", "external_ids": ["u1"],
             "use_double_opt_in_logic": true}
        ]})),
        (Method::Get, "/subscription/user/status") => {
            query(&[("external_id", "u1"), ("email", "a@x.test"), ("limit", "10"), ("offset", "0")])
        }
        (Method::Get, "/subscription/status/get") => {
            query(&[("subscription_group_id", "§email_group"), ("external_id[]", "u1"), ("phone", "+14155550100")])
        }
        (Method::Post, "/email/status") => json(json!({"email": "a@x.test", "subscription_state": "opted_in"})),
        (Method::Post, "/email/blacklist" | "/email/blocklist") => json(json!({"email": ["a@x.test", "B@x.test"]})),
        (Method::Get, "/email/hard_bounces") => {
            query(&[("start_date", "2020-01-01"), ("end_date", "2099-12-31"), ("limit", "10")])
        }
        (Method::Get, "/email/unsubscribes") => query(&[("email", "a@x.test"), ("sort_direction", "asc")]),
        (Method::Post, "/email/bounce/remove" | "/email/spam/remove") => json(json!({"email": "B@x.test"})),
        (Method::Get, "/sms/invalid_phone_numbers") => {
            query(&[("phone_numbers[]", "12183095514"), ("phone_numbers[]", "+14255551212")])
        }
        (Method::Post, "/sms/invalid_phone_numbers/remove") => {
            json(json!({"phone_numbers": ["12183095514", "+14255551212"]}))
        }
        (Method::Post, "/preference_center/v1") => json(center_body(Some("second"))),
        (Method::Put, "/preference_center/v1/{}") => json(center_body(None)),
        (Method::Get, "/preference_center/v1/{}/url/{}") => query(&[("expires_in", "60")]),
        (Method::Post, "/preferences/{}") => Example {
            query: Vec::new(),
            body: Body::Form(vec![
                ("email_global_state".into(), "opted_in".into()),
                ("subscription_group_§email_group".into(), "unsubscribed".into()),
                ("subscription_group_§email_group".into(), "subscribed".into()),
            ]),
        },
        (Method::Get, "/scim/v2/Users") => query(&[
            ("filter", "userName eq \"ada@example.com\""),
            ("startIndex", "1"),
            ("count", "10"),
            ("attributes", "userName,name.givenName"),
        ]),
        (Method::Post, "/scim/v2/Users") => json(scim_user("grace@example.com")),
        (Method::Post, "/scim/v2/Users/.search" | "/scim/v2/.search") => json(json!({
            "schemas": [SEARCH_URN], "filter": "userName eq \"ada@example.com\"", "startIndex": 1, "count": 5,
            "excludedAttributes": ["permissions"]
        })),
        (Method::Get, "/scim/v2/Users/{}") => query(&[("excludedAttributes", "permissions")]),
        (Method::Put, "/scim/v2/Users/{}") => {
            let mut u = scim_user("ada@example.com");
            u["schemas"] = json!([USER_URN, ENTERPRISE_URN]);
            u["department"] = json!("finance");
            json(u)
        }
        (Method::Patch, "/scim/v2/Users/{}") => json(json!({"schemas": [PATCH_URN], "Operations": [
            {"op": "replace", "path": "name.givenName", "value": "Grace"},
            {"op": "add", "value": {"department": "finance", "permissions": {"companyPermissions": ["admin"]}}},
            {"op": "remove", "path": "externalId"}
        ]})),
        (Method::Post | Method::Put | Method::Patch, "/scim/v2/Me") => json(scim_user("me@example.com")),
        (Method::Post, "/scim/v2/Bulk") => json(json!({
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"],
            "Operations": [{"method": "POST", "path": "/Users", "bulkId": "1", "data": scim_user("bulk@example.com")}]
        })),
        // A workspace of its own: the rest of the world stays for the routes after it.
        (Method::Post, "/_engage/reset") => query(&[("workspace", "scratch"), ("keep", "none")]),
        (Method::Post, "/_engage/clock") => json(json!({"advance_secs": 0})),
        (Method::Post, "/_engage/seed") => json(
            json!({"workspaces": {"seeded": {"groups": [{"id": "g-seed", "name": "Seeded", "channel": "email"}]}}}),
        ),
        (Method::Get, "/_engage/journal") => query(&[("limit", "5")]),
        (Method::Post, "/_engage/requests/find" | "/_engage/requests/count") => {
            json(json!({"method": "POST", "path": "/users/track", "status": 201, "since": "2020-01-01T00:00:00Z"}))
        }
        (Method::Delete, "/_engage/requests" | "/_engage/faults") => query(&[("workspace", "scratch")]),
        (Method::Post, "/_engage/faults") => {
            json(json!({"method": "GET", "path": "/nowhere", "status": 503, "times": 1, "retry_after_secs": 2}))
        }
        (Method::Post, "/_engage/workspaces") => json(json!({"name": "fresh", "permissions": ["users.track"]})),
        (Method::Post, "/_engage/snapshots/{}" | "/_engage/snapshots/{}/restore")
        | (Method::Get, "/_engage/snapshots" | "/_engage/state")
        | (Method::Delete, "/_engage/snapshots/{}") => query(&[("workspace", "test")]),
        (Method::Get, "/_engage/workspaces/{}/users") => query(&[("q", "u1")]),
        (Method::Get, "/_engage/cdi/integrations") => query(&[("workspace", "test")]),
        (Method::Post, "/_engage/inspector/login") => {
            Example { query: Vec::new(), body: Body::Form(vec![("token".into(), crate::testkit::ADMIN_TOKEN.into())]) }
        }
        (Method::Get, "/cdi/integrations") => query(&[("cursor", "§cursor_i")]),
        (Method::Get, "/cdi/integrations/{}/job_sync_status") => query(&[("cursor", "§cursor_j")]),
        (Method::Post, "/_engage/keys") => {
            json(json!({"workspace": "test", "permissions": ["users.track", "users.export.ids"]}))
        }
        (Method::Post, "/_engage/groups") => json(json!({"workspace": "test", "name": "g2", "channel": "whatsapp"})),
        (Method::Post, "/_engage/scim-tokens") => json(json!({"origin": "https://other.example.com/"})),
        (Method::Post, "/_engage/cdi/integrations") => json(json!({
            "workspace": "test", "name": "n", "source": "postgres://db/x", "table": "public.users",
            "kind": "events", "schedule_secs": 3600, "contact_emails": ["ops@x.test"]
        })),
        (Method::Patch, "/_engage/cdi/integrations/{}") => json(json!({"name": "renamed", "schedule_secs": null})),
        (Method::Post, "/_engage/cdi/integrations/{}/rewind") => json(json!({"to": "2024-01-01T00:00:00Z"})),
        (Method::Get, "/_engage/groups") => query(&[("workspace", "test")]),
        (Method::Get, "/preference_center/v1/list" | "/preference_center/v1/{}" | "/preferences/{}")
        | (Method::Get, "/scim/v2/ServiceProviderConfig" | "/scim/v2/ResourceTypes")
        | (Method::Get, "/scim/v2/ResourceTypes/{}" | "/scim/v2/Schemas" | "/scim/v2/Schemas/{}")
        | (
            Method::Get,
            "/_engage/cdi/integrations/{}"
            | "/_engage/cdi/integrations/{}/jobs"
            | "/_engage/queue/set-aside"
            | "/_engage/queue",
        )
        | (Method::Get, "/_engage/keys" | "/_engage/workspaces" | "/_engage/faults")
        | (Method::Delete, "/_engage/keys/{}" | "/_engage/cdi/integrations/{}" | "/_engage/faults/{}")
        | (Method::Get, "/" | "/healthz" | "/readyz" | "/openapi.json" | "/metrics")
        | (Method::Delete, "/scim/v2/Users/{}")
        | (Method::Get | Method::Delete, "/scim/v2/Me")
        | (
            Method::Get,
            "/_engage/workspaces/{}/preference-centers" | "/_engage/workspaces/{}/preference-centers/{}/url/{}",
        )
        | (Method::Get, "/_engage/inspector")
        | (Method::Post, "/_engage/inspector/logout")
        | (Method::Post, "/_engage/cdi/integrations/{}/sync" | "/_engage/conformance")
        | (Method::Get | Method::Head, "/playground/{..}" | "/playground") => query(&[]),
        _ => return None,
    })
}

/// The media type a route's body is sent with.
pub(super) fn right_content_type(route: &Route) -> &'static str {
    match route.auth {
        Auth::Scim => "application/scim+json",
        Auth::Public => "application/x-www-form-urlencoded",
        Auth::Key(..) | Auth::Admin | Auth::SignIn => "application/json",
    }
}
