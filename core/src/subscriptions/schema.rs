//! The API description of the subscription endpoints: the group set endpoints (v1
//! and v2), the two reads, the global email state and the blocklist.

use serde_json::{json, Value};

use super::read::MAX_LIMIT;
use super::set::MAX_GROUP_ENTRIES;
use crate::describe::op::Op;
use crate::describe::schema::{
    array, boolean, email, external_id, integer, lenient_id, nullable, object, one_or_many, phone, string,
    success_body, values, with,
};
use crate::subscriptions::email::BAD_EMAIL_STATE;
use crate::subscriptions::{BAD_GROUP_ID, BAD_GROUP_STATE, EMAIL_AND_PHONE, MAX_IDS, TOO_MANY_IDS, UNKNOWN_GROUP};

/// The email group the examples name (`tests/openapi/examples.py` makes one and
/// puts its id in their place).
pub const EXAMPLE_GROUP: &str = "6c2bdb0e-3e57-4a8b-9d0a-0c4d1f5e8a21";

fn group_state() -> Value {
    values(&["subscribed", "unsubscribed"], "The state to set.")
}

fn double_opt_in() -> Value {
    boolean("Accepted (top level or per group) and checked to be a boolean; Engage runs no SMS double opt-in workflow.")
}

/// `errors` of a set or read: identifiers that name no user (the rest is applied).
fn not_found() -> Value {
    array(
        with(
            object(
                "`type` says which kind of identifier; the identifier's own field holds it.",
                &[("type", string("`No user found with this <kind>`."))],
                &["type"],
            ),
            "additionalProperties",
            json!(true),
        ),
        "Identifiers that name no user (present when some do not).",
    )
}

fn set_errors(op: Op) -> Op {
    op.bad_request(
        "Invalid input; nothing is applied.",
        &[
            ("email_and_phone", EMAIL_AND_PHONE),
            ("bad_group", BAD_GROUP_ID),
            ("unknown_group", UNKNOWN_GROUP),
            ("bad_state", BAD_GROUP_STATE),
            ("too_many", TOO_MANY_IDS),
        ],
    )
}

/// POST /subscription/status/set.
pub fn set_v1() -> Op {
    let ids = |item: fn(&str) -> Value, what: &str| {
        one_or_many(item(what), MAX_IDS, &format!("{what}: one, or an array of 1 to {MAX_IDS}."))
    };
    let body = object(&format!("One group; users by `external_id`, `email` or `phone` (external IDs may come with emails or phones; emails and phones not together); at most {MAX_IDS} identifiers."), &[
        ("subscription_group_id", string("The group.")),
        ("subscription_state", group_state()),
        ("external_id", ids(lenient_id, "External IDs")),
        ("email", ids(email, "Emails")),
        ("phone", ids(phone, "Phones (E.164)")),
        ("use_double_opt_in_logic", double_opt_in()),
    ], &["subscription_group_id", "subscription_state"]);
    // Emails and phones never together.
    let body = with(body, "not", json!({"required": ["email", "phone"]}));
    let op = Op::new("Sets users' state in one subscription group. Every user sharing a given email or phone is updated; for SMS and RCS groups give `external_id` or `phone`, for email groups `external_id` or `email`. Identifiers that name no user are listed in `errors` and the rest is applied.")
        .body(body)
        .example(json!({"subscription_group_id": EXAMPLE_GROUP, "subscription_state": "unsubscribed", "external_id": ["user-123"]}))
        .reply(201, "Set.", success_body("", &[("errors", not_found())], &[]))
        .with_example("set", json!({"message": "success"}))
        .with_example("some_not_found", json!({"message": "success", "errors": [{"type": "No user found with this external_id", "external_id": "user-000"}]}));
    set_errors(op)
}

/// POST /v2/subscription/status/set.
pub fn set_v2() -> Op {
    let ids = |item: fn(&str) -> Value, what: &str, single: bool| {
        let many = with(
            with(array(item(what), &format!("1 to {MAX_IDS}.")), "minItems", json!(1)),
            "maxItems",
            json!(MAX_IDS),
        );
        if single {
            one_or_many(item(what), MAX_IDS, &format!("{what}: one, or 1 to {MAX_IDS}."))
        } else {
            many
        }
    };
    let entry = object(
        "One group: exactly one of `external_ids`, `emails`, `phones`.",
        &[
            ("subscription_group_id", string("The group.")),
            ("subscription_state", group_state()),
            ("external_ids", ids(lenient_id, "External IDs", true)),
            ("emails", ids(email, "Emails", true)),
            ("phones", ids(phone, "Phones (E.164)", true)),
            ("use_double_opt_in_logic", double_opt_in()),
        ],
        &["subscription_group_id", "subscription_state"],
    );
    let groups =
        with(with(array(entry, "The groups to set."), "minItems", json!(1)), "maxItems", json!(MAX_GROUP_ENTRIES));
    let body = object(
        &format!("At most {MAX_IDS} distinct identifiers in all; emails and phones never in the same request."),
        &[("subscription_groups", groups), ("use_double_opt_in_logic", double_opt_in())],
        &["subscription_groups"],
    );
    let op = Op::new("Sets users' states in several subscription groups in one request. With `external_ids`, email and SMS groups may be set together; with `emails` or `phones` they need separate requests. Every user sharing a given email or phone is updated.")
        .body(body)
        .example(json!({"subscription_groups": [{"subscription_group_id": EXAMPLE_GROUP, "subscription_state": "subscribed", "external_ids": ["user-123"]}]}))
        .reply(201, "Set.", success_body("", &[("errors", not_found())], &[]))
        .with_example("set", json!({"message": "success"}));
    set_errors(op)
}

fn id_params(op: Op, required_note: &str) -> Op {
    let list = |item: Value| {
        with(
            array(item, &format!("1 to {MAX_IDS}; repeat the parameter (`key=a&key=b` or `key[]=a`).")),
            "maxItems",
            json!(MAX_IDS),
        )
    };
    op.query("external_id", false, &format!("External IDs. {required_note}"), list(external_id("External ID.")))
        .query("email", false, "Emails.", list(email("Email.")))
        .query(
            "phone",
            false,
            "Phones (E.164; a leading space, an unencoded `+`, is read as `+`).",
            list(phone("Phone.")),
        )
}

/// GET /subscription/user/status.
pub fn user_status() -> Op {
    let group = object(
        "",
        &[
            ("id", string("The group's id.")),
            ("name", string("Its name.")),
            ("channel", string("`email`, `sms`, `whatsapp`, `rcs` or `line`.")),
            ("status", values(&["Subscribed", "Unsubscribed"], "The last stored status.")),
        ],
        &["id", "name", "channel", "status"],
    );
    let user = object(
        "",
        &[
            ("external_id", nullable(string("External ID."))),
            ("email", nullable(string("Email."))),
            ("phone", nullable(string("Phone."))),
            (
                "subscription_groups",
                array(group, "Groups with a status update in the user's history (newly created groups are absent)."),
            ),
        ],
        &["subscription_groups"],
    );
    let op = Op::new("Lists the subscription groups in each named user's history. Users sharing an email or phone are listed separately. External IDs are used when given (emails and phones are then ignored); otherwise emails or phones, not both.");
    id_params(op, "One of `external_id`, `email`, `phone` is required.")
        .query(
            "limit",
            false,
            &format!("Users per page, 1 to {MAX_LIMIT} (default {MAX_LIMIT})."),
            with(integer(""), "maximum", json!(MAX_LIMIT)),
        )
        .query("offset", false, "Users to skip.", with(integer(""), "minimum", json!(0)))
        .reply(
            200,
            "The users.",
            success_body(
                "",
                &[
                    ("users", array(user, "One page of the users.")),
                    ("total_count", integer("Users in all pages.")),
                    ("errors", not_found()),
                ],
                &["users", "total_count"],
            ),
        )
        .with_example("users", json!({"message": "success", "total_count": 1, "users": [{
            "external_id": "user-123", "email": "ada@example.com", "phone": null,
            "subscription_groups": [{"id": EXAMPLE_GROUP, "name": "Weekly newsletter", "channel": "email", "status": "Unsubscribed"}]
        }]}))
}

/// GET /subscription/status/get.
pub fn status_get() -> Op {
    let op = Op::new("Reads each queried user's stored status in one group (the group status, independent of the global email state). For an email or phone shared by several users, the user an update by it would pick (identified first, then most recently updated). When `external_id` is sent, email and phone are ignored; email and phone without it are refused.")
        .query("subscription_group_id", true, "The group.", string(""));
    id_params(op, "One of `external_id`, `email`, `phone` is required.")
        .reply(
            200,
            "The statuses.",
            success_body(
                "",
                &[(
                    "status",
                    with(
                        object("Each queried identifier, as sent, to its status.", &[], &[]),
                        "additionalProperties",
                        values(&["Subscribed", "Unsubscribed", "Unknown"], ""),
                    ),
                )],
                &["status"],
            ),
        )
        .with_example(
            "statuses",
            json!({"message": "success", "status": {"user-123": "Unsubscribed", "user-000": "Unknown"}}),
        )
        .bad_request(
            "Invalid input.",
            &[("email_and_phone", EMAIL_AND_PHONE), ("bad_group", BAD_GROUP_ID), ("unknown_group", UNKNOWN_GROUP)],
        )
}

fn emails(description: &str) -> Value {
    one_or_many(email("An email address."), MAX_IDS, description)
}

/// POST /email/status.
pub fn email_status() -> Op {
    Op::new("Sets the global email subscription state of addresses. An address not yet on any user is remembered and applied when a user gets it.")
        .body(object("", &[
            ("email", emails(&format!("One address, or 1 to {MAX_IDS}."))),
            ("subscription_state", values(&["subscribed", "unsubscribed", "opted_in"], "The global state.")),
        ], &["email", "subscription_state"]))
        .example(json!({"email": "ada@example.com", "subscription_state": "opted_in"}))
        .reply(201, "Set.", success_body("", &[], &[]))
        .with_example("set", json!({"message": "success"}))
        .bad_request("Invalid input.", &[("bad_state", BAD_EMAIL_STATE)])
}

/// POST /email/blocklist and /email/blacklist.
pub fn email_blocklist() -> Op {
    Op::new("Unsubscribes addresses from email globally and marks them as hard bounced. `/email/blocklist` and `/email/blacklist` are the same endpoint; `blocklist` is preferred.")
        .body(object("", &[("email", emails(&format!("One address, or 1 to {MAX_IDS}.")))], &["email"]))
        .example(json!({"email": ["bounced@example.com"]}))
        .reply(201, "Blocklisted.", success_body("", &[], &[]))
        .with_example("blocklisted", json!({"message": "success"}))
}

/// GET /email/hard_bounces, GET /email/unsubscribes and GET /sms/invalid_phone_numbers.
pub fn email_list(list: super::lists::List) -> Op {
    use super::lists::{List, DEFAULT_LIMIT, MAX_LIMIT, MAX_PHONES};
    let (listed, by, field) = list.names();
    let what = match list {
        List::HardBounces => "The addresses that hard-bounced (here: were blocklisted, or a fixtures file says so)",
        List::Unsubscribes => "The addresses that unsubscribed from email globally",
        List::InvalidPhones => "The phone numbers found invalid (Engage sends no SMS: those a fixtures file names)",
    };
    let day = |d: &str| json!({"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}], "description": d});
    let (subject, example) = match list {
        List::InvalidPhones => (string("The number, E.164 without its `+` (as the platform answers)."), "12183095514"),
        _ => (email("The address."), "ada@example.com"),
    };
    let entry = object("", &[(by, subject), (field, string("When (RFC 3339)."))], &[by, field]);
    let mut op = Op::new(format!("{what}, with when, newest first: by `{by}`, or from `start_date` to `end_date` (both days in, UTC). What Engage's own state knows: each global email state change and each blocklisting notes the address; subscribing again, or the matching removal, takes it off."));
    op = match list {
        List::InvalidPhones => op.query(
            "phone_numbers",
            false,
            &format!("Up to {MAX_PHONES} numbers in E.164 (the `+` optional; the dates are then not used). Repeat the parameter for several."),
            json!({"type": "array", "items": {"type": "string", "pattern": "^\\+?[1-9][0-9]{1,14}$"}, "minItems": 1, "maxItems": MAX_PHONES}),
        ),
        _ => op.query("email", false, "One address (the dates are then not used).", email("")),
    };
    op = op
        .query("start_date", false, "First day, `YYYY-MM-DD` (needed without a subject).", day(""))
        .query("end_date", false, "Last day, `YYYY-MM-DD` (needed without a subject).", day(""))
        .query(
            "limit",
            false,
            &format!("At most this many (default {DEFAULT_LIMIT})."),
            with(with(integer(""), "minimum", json!(1)), "maximum", json!(MAX_LIMIT)),
        )
        .query("offset", false, "Skip this many.", with(integer(""), "minimum", json!(0)));
    if list == List::Unsubscribes {
        op = op.query(
            "sort_direction",
            false,
            "`desc` (newest first, the default) or `asc`.",
            values(&["asc", "desc"], ""),
        );
    }
    op.reply(200, "The entries.", success_body("", &[(listed, array(entry, "The entries, newest first."))], &[listed]))
        .with_example("listed", json!({listed: [{by: example, field: "2026-11-01T10:00:00.000Z"}], "message": "success"}))
        .bad_request(&format!("Neither `{by}` nor both dates, a date out of form, `start_date` after `end_date`, or `limit` out of 1 to 500."), &[("no_range", &format!("give '{}', or 'start_date' and 'end_date'", if list == List::InvalidPhones { "phone_numbers" } else { by }))])
}

/// POST /email/bounce/remove, POST /email/spam/remove and POST /sms/invalid_phone_numbers/remove.
pub fn email_removal(removal: super::lists::Removal) -> Op {
    use super::lists::{Removal, MAX_PHONES};
    let what = match removal {
        Removal::Bounce => "Takes addresses off the hard bounces: every profile with the address, and any that gets it later, is no longer marked hard-bounced.",
        Removal::Spam => "Takes addresses off the spam list. Engage sends no email, so no spam report ever puts one there: the request is checked and changes nothing.",
        Removal::InvalidPhones => "Takes phone numbers off the invalid numbers.",
    };
    let op = Op::new(what);
    let op = match removal {
        Removal::InvalidPhones => op
            .body(object("", &[("phone_numbers", json!({"type": "array", "items": {"type": "string", "pattern": "^\\+?[1-9][0-9]{1,14}$"}, "minItems": 1, "maxItems": MAX_PHONES, "description": "1 to 50 numbers in E.164, the `+` optional."}))], &["phone_numbers"]))
            .example(json!({"phone_numbers": ["12183095514", "+14255551212"]})),
        _ => op
            .body(object("", &[("email", emails(&format!("One address, or 1 to {MAX_IDS}.")))], &["email"]))
            .example(json!({"email": ["bounced@example.com"]})),
    };
    op.reply(201, "Done.", success_body("", &[], &[])).with_example("removed", json!({"message": "success"}))
}
