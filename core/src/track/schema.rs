//! The API description of `/users/track` and `/users/track/sync`: the attribute,
//! event and purchase objects, the success bodies and the fatal error's shape.

use serde_json::{json, Value};

use super::parse::{MAX_OBJECTS, MAX_PROPERTIES_BYTES};
use crate::describe::op::Op;
use crate::describe::schema::{
    array, boolean, free_object, integer, lenient_id, number, object, one_of, refer, string, success_body, time,
    values, with,
};
use crate::profile::standard::STANDARD_KEYS;

/// The identifier fields of an object: exactly one kind must be present.
fn identifiers(events: bool) -> Vec<(&'static str, Value)> {
    let email = if events {
        "Identifies the user by email when no other identifier is given."
    } else {
        "Identifies the user when no `external_id`, `user_alias` or `service_id` is given; otherwise sets the profile's email (`null` removes it)."
    };
    vec![
        ("external_id", lenient_id("The user's external ID.")),
        ("user_alias", refer("UserAlias")),
        ("service_id", string("The service's internal user ID (`braze_id` is accepted too).")),
        ("email", string(email)),
        ("phone", string("E.164. As `email`, after it: when both are sent the email identifies the user.")),
    ]
}

fn common(props: &mut Vec<(&'static str, Value)>) {
    props.push(("app_id", string("App identifier.")));
    props.push(("time", time("When it happened: ISO 8601 with an offset or `Z` (a future time is recorded as now).")));
    let limit = format!("Arbitrary nested objects and arrays, at most {} KB; keys 1 to 255 characters, not starting with `$`, not `time` or `event_name`.", MAX_PROPERTIES_BYTES / 1024);
    props.push(("properties", free_object(&limit)));
}

/// `#/components/schemas` of the track objects.
pub fn components() -> Vec<(&'static str, Value)> {
    let mut attrs = identifiers(false);
    attrs.extend([
        ("_update_existing_only", boolean("`true`: a missing user is not created. `false`: an alias-only user is created for a `user_alias`. Omitted: a user is created for an external ID, email or phone, never for an alias.")),
        ("_merge_objects", boolean("`true`: nested object attributes are merged into the stored ones instead of replacing them.")),
        ("email_subscribe", values(&["subscribed", "unsubscribed", "opted_in"], "The global email subscription state; it also updates every user with the same email.")),
        ("push_subscribe", values(&["subscribed", "unsubscribed", "opted_in"], "The global push subscription state.")),
        ("subscription_groups", array(object("", &[
            ("subscription_group_id", string("The group.")),
            ("subscription_state", values(&["subscribed", "unsubscribed"], "The state to set.")),
        ], &["subscription_group_id", "subscription_state"]), "Group states to set; every user with the same email (or phone) is updated too.")),
    ]);
    let standard = format!("Standard attributes: {}. Any other key is a custom attribute: a string, number, boolean, array, nested object, or an operation (`{{\"inc\": n}}`, `{{\"add\": [..], \"remove\": [..]}}`, `{{\"$time\": \"..\"}}`, and `$add`, `$remove`, `$update` on arrays of objects); `null` removes it. When a nested value is invalid, every nested custom-attribute update of the request is skipped.", STANDARD_KEYS.join(", "));
    let attributes = with(
        object(
            &format!("An attribute object: one user's profile update. Exactly one kind of identifier. {standard}"),
            &attrs,
            &[],
        ),
        "additionalProperties",
        json!(true),
    );
    let mut ev = identifiers(true);
    ev.push(("name", string("The event name (1 to 255 characters).")));
    common(&mut ev);
    let event = object("An event object: one occurrence of a custom event (two identical objects are two events). Exactly one kind of identifier.", &ev, &["name", "time"]);
    let mut pu = identifiers(true);
    pu.extend([
        (
            "product_id",
            one_of(
                vec![string("A name."), integer("A whole number, read as its decimal text (refused with `--strict`).")],
                "Product name or identifier (1 to 255 characters).",
            ),
        ),
        ("currency", string("ISO 4217 three-letter code.")),
        ("price", number("Unit price (at most 1e15 in magnitude).")),
        ("quantity", with(integer("1 to 100; default 1."), "maximum", json!(100))),
    ]);
    common(&mut pu);
    let purchase =
        object("A purchase object. Exactly one kind of identifier.", &pu, &["product_id", "currency", "price", "time"]);
    vec![("TrackAttributes", attributes), ("TrackEvent", event), ("TrackPurchase", purchase)]
}

fn body(max: usize, description: &str) -> Value {
    let list = |item: &str, what: &str| {
        with(array(refer(item), &format!("At most {max} {what} objects.")), "maxItems", json!(max))
    };
    object(
        description,
        &[
            ("attributes", list("TrackAttributes", "attribute")),
            ("events", list("TrackEvent", "event")),
            ("purchases", list("TrackPurchase", "purchase")),
        ],
        &[],
    )
}

fn non_fatal() -> Value {
    array(
        object(
            "",
            &[
                ("type", string("The message.")),
                ("input_array", string("The array.")),
                ("index", integer("The object's index.")),
            ],
            &["type"],
        ),
        "Non-fatal errors: the objects (or fields) listed were not processed; the rest was.",
    )
}

/// POST /users/track.
pub fn track() -> Op {
    let counted = |what: &str| integer(&format!("{what} objects accepted (present when the array was sent)."));
    Op::new(format!("Records events and purchases and updates profile attributes. The request is acknowledged once durably queued (201); it is applied shortly after, and every other endpoint first applies what was acknowledged before it (read your writes).\n\nEach request holds at most {MAX_OBJECTS} attribute, {MAX_OBJECTS} event and {MAX_OBJECTS} purchase objects; each object updates one user. Invalid objects are listed in `errors` and the rest is processed; when nothing is valid the request fails as a whole."))
        .body(body(MAX_OBJECTS, "At least one of the three arrays, not empty."))
        .at_least_one(&["attributes", "events", "purchases"])
        .example(json!({
            "attributes": [{"external_id": "user-123", "first_name": "Ada", "email": "ada@example.com",
                            "country": "GB", "loyalty_tier": "gold", "visits": {"inc": 1}}],
            "events": [{"external_id": "user-123", "name": "played_song", "time": "2026-11-26T10:00:00Z",
                        "properties": {"song": "Blue Moon", "seconds": 185}}],
            "purchases": [{"external_id": "user-123", "product_id": "album-42", "currency": "EUR", "price": 9.99,
                           "quantity": 1, "time": "2026-11-26T10:01:00Z"}]
        }))
        .reply(201, "Queued. `errors` lists what was not processed.", success_body("", &[
            ("attributes_processed", counted("Attribute")),
            ("events_processed", counted("Event")),
            ("purchases_processed", counted("Purchase")),
            ("errors", non_fatal()),
        ], &[]))
        .with_example("queued", json!({"message": "success", "attributes_processed": 1, "events_processed": 1, "purchases_processed": 1}))
        .errors(refer("TrackError"))
}

/// For `/users/track/sync`: one array holds one object, the others nothing.
fn exactly_one() -> Value {
    let arrays = ["attributes", "events", "purchases"];
    let options: Vec<Value> = arrays
        .iter()
        .map(|one| {
            let mut props = serde_json::Map::new();
            for a in arrays {
                // `items: {}` spelled out: client generators need an item type.
                let count = if a == *one {
                    json!({"type": "array", "items": {}, "minItems": 1})
                } else {
                    json!({"type": "array", "items": {}, "maxItems": 0})
                };
                props.insert(a.to_string(), count);
            }
            json!({"type": "object", "required": [one], "properties": props})
        })
        .collect();
    Value::Array(options)
}

/// POST /users/track/sync.
pub fn track_sync() -> Op {
    let summary = |key: &str| crate::users::schema::summary(key, "Its name.");
    let user = with(
        object(
            "The request's identifier, and what the request named as now stored.",
            &[
                ("custom_attributes", free_object("The custom attributes the request set, as stored.")),
                ("custom_events", array(summary("name"), "The event's summary.")),
                ("purchase_events", array(summary("product_id"), "The product's summary.")),
            ],
            &[],
        ),
        "additionalProperties",
        json!(true),
    );
    Op::new("As `/users/track`, for one object, applied before answering: the answer shows the result (a value over a bound, or a missing user with `_update_existing_only`, is not applied, so treat the answer as the outcome). A request holds exactly one attribute, event or purchase object.")
        .body(with(body(1, "Exactly one object in one of the three arrays."), "oneOf", exactly_one()))
        .example(json!({"events": [{"external_id": "user-123", "name": "signed_up", "time": "2026-11-26T10:00:00Z"}]}))
        .reply(201, "Applied.", success_body("", &[
            ("users", array(user, "The user updated (empty when none was found and `_update_existing_only` is true).")),
            ("errors", non_fatal()),
        ], &["users"]))
        .with_example("applied", json!({"message": "success", "users": [{"external_id": "user-123",
            "custom_events": [{"name": "signed_up", "first": "2026-11-26T10:00:00.000Z", "last": "2026-11-26T10:00:00.000Z", "count": 1}]}]}))
        .errors(refer("TrackError"))
}
