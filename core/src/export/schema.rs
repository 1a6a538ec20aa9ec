//! The API description of `/users/export/ids`.

use serde_json::json;

use crate::describe::op::Op;
use crate::describe::schema::{
    any, array, boolean, closed, email, external_id, free_object, lenient_id, nullable, number, object, phone, refer,
    string, success_body, time, values, with,
};
use crate::export::{FIELDS, MAX_IDS};

/// POST /users/export/ids.
pub fn export_ids() -> Op {
    // `null` is read as absent.
    let ids = |item, what: &str| nullable(with(array(item, what), "maxItems", json!(MAX_IDS)));
    let body = object(
        &format!("At least one identifier; at most {MAX_IDS} external IDs and aliases together (and {MAX_IDS} identifiers in all)."),
        &[
            ("external_ids", ids(lenient_id("An external ID."), "Users by external ID.")),
            ("user_aliases", ids(refer("UserAlias"), "Users by alias.")),
            ("service_id", nullable(external_id("One user by internal ID."))),
            ("braze_id", nullable(external_id("The same as `service_id`."))),
            ("service_ids", ids(external_id("An internal ID."), "Users by internal ID.")),
            ("email_address", nullable(email("Every user with this email."))),
            ("phone", nullable(phone("Every user with this phone (E.164)."))),
            ("fields_to_export", nullable(array(values(FIELDS, "A field."), "Only these fields of each user (default: all)."))),
        ],
        &[],
    );
    // At least one identifier, given and not empty.
    let given = |n: &str, many: bool| {
        if many {
            json!({"type": "object", "required": [n], "properties": {n: {"type": "array", "items": {}, "minItems": 1}}})
        } else {
            json!({"type": "object", "required": [n], "properties": {n: {"type": "string"}}})
        }
    };
    let body = with(
        body,
        "anyOf",
        json!([
            given("external_ids", true),
            given("user_aliases", true),
            given("service_ids", true),
            given("service_id", false),
            given("braze_id", false),
            given("email_address", false),
            given("phone", false),
        ]),
    );
    let summaries = |what: &str| array(crate::users::schema::summary("name", "The event name or product id."), what);
    let states = |what: &str| values(&["subscribed", "unsubscribed", "opted_in"], what);
    let group = object(
        "",
        &[
            ("id", string("The group's id.")),
            ("name", nullable(string("Its name (null: the group no longer exists)."))),
            (
                "channel",
                nullable(string("`email`, `sms`, `whatsapp`, `rcs` or `line` (null: the group no longer exists).")),
            ),
            ("status", values(&["Subscribed", "Unsubscribed"], "The stored status.")),
            (
                "effective_status",
                values(&["Subscribed", "Unsubscribed"], "The status after the global email state's mask."),
            ),
        ],
        &["id", "status", "effective_status"],
    );
    // Every field `render` writes (no other): a field without a value is left out.
    let user = closed(object(
        "A profile. Fields without a value are left out; `fields_to_export` keeps only those named.",
        &[
            ("external_id", string("External ID.")),
            ("service_id", string("Internal ID.")),
            ("user_aliases", array(refer("UserAlias"), "Aliases.")),
            ("created_at", time("When the profile was made.")),
            ("updated_at", time("When it last changed.")),
            ("email", string("Email.")),
            ("phone", string("Phone (E.164).")),
            ("first_name", string("")),
            ("last_name", string("")),
            ("home_city", string("")),
            ("image_url", string("")),
            ("gender", values(&["M", "F", "O", "N", "P"], "")),
            ("dob", with(string("Date of birth, `YYYY-MM-DD`."), "format", json!("date"))),
            ("country", string("ISO 3166-1 alpha-2.")),
            ("language", string("ISO 639-1.")),
            ("time_zone", string("IANA time zone.")),
            ("email_open_tracking_disabled", boolean("")),
            ("email_click_tracking_disabled", boolean("")),
            ("date_of_first_session", time("")),
            ("date_of_last_session", time("")),
            ("marked_email_as_spam_at", time("")),
            (
                "current_location",
                object("", &[("latitude", number("")), ("longitude", number(""))], &["latitude", "longitude"]),
            ),
            ("custom_attributes", free_object("Custom attributes.")),
            ("custom_events", summaries("Custom events: one summary per name.")),
            ("purchases", summaries("Purchases: one summary per product.")),
            ("total_revenue", number("The sum of purchases (price times quantity).")),
            ("email_subscribe", states("The global email subscription state.")),
            ("push_subscribe", states("The global push subscription state.")),
            ("email_hard_bounced", boolean("Whether the email hard bounced (or was blocklisted).")),
            ("subscription_groups", array(group, "Groups in the user's history.")),
        ],
        &[],
    ));
    Op::new("Reads profiles back by identifier (an Engage reading of the platform's export endpoint): every user each identifier names, once, in request order. Identifiers that name nobody are listed in `invalid_user_ids`.")
        .body(body)
        .example(json!({"external_ids": ["user-123", "user-000"], "fields_to_export": ["external_id", "email", "first_name", "custom_attributes", "custom_events", "purchases", "total_revenue"]}))
        .reply(201, "The users found (201, as the platform answers).", success_body("", &[
            ("users", array(user, "The users.")),
            ("invalid_user_ids", array(any("An identifier as sent."), "Identifiers that name no user (present when some do not).")),
        ], &["users"]))
        .with_example("users", json!({"message": "success", "invalid_user_ids": ["user-000"], "users": [{
            "external_id": "user-123", "email": "ada@example.com", "first_name": "Ada",
            "custom_attributes": {"loyalty_tier": "gold", "visits": 1},
            "custom_events": [{"name": "played_song", "first": "2026-11-26T10:00:00.000Z", "last": "2026-11-26T10:00:00.000Z", "count": 1}],
            "purchases": [{"name": "album-42", "first": "2026-11-26T10:01:00.000Z", "last": "2026-11-26T10:01:00.000Z", "count": 1}],
            "total_revenue": 9.99
        }]}))
}
