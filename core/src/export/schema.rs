//! The API description of `/users/export/ids`.

use serde_json::json;

use crate::export::{FIELDS, MAX_IDS};
use crate::openapi::op::Op;
use crate::openapi::schema::{
    any, array, email, external_id, free_object, nullable, object, phone, refer, string, success_body, values, with,
};

/// POST /users/export/ids.
pub fn export_ids() -> Op {
    // `null` is read as absent.
    let ids = |item, what: &str| nullable(with(array(item, what), "maxItems", json!(MAX_IDS)));
    let body = object(
        &format!("At least one identifier; at most {MAX_IDS} external IDs and aliases together (and {MAX_IDS} identifiers in all)."),
        &[
            ("external_ids", ids(external_id("An external ID."), "Users by external ID.")),
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
    let user = with(
        object(
            "A profile: identifiers, standard attributes, `custom_attributes`, `custom_events` and `purchases` summaries (`name`, `first`, `last`, `count`), `total_revenue`, subscription states and groups.",
            &[
                ("external_id", string("External ID.")),
                ("service_id", string("Internal ID.")),
                ("user_aliases", array(refer("UserAlias"), "Aliases.")),
                ("email", string("Email.")),
                ("phone", string("Phone.")),
                ("custom_attributes", free_object("Custom attributes.")),
            ],
            &[],
        ),
        "additionalProperties",
        json!(true),
    );
    Op::new("Reads profiles back by identifier (an Engage reading of the platform's export endpoint): every user each identifier names, once, in request order. Identifiers that name nobody are listed in `invalid_user_ids`.")
        .body(body)
        .reply(200, "The users found.", success_body("", &[
            ("users", array(user, "The users.")),
            ("invalid_user_ids", array(any("An identifier as sent."), "Identifiers that name no user (present when some do not).")),
        ], &["users"]))
}
