//! The API description's schemas of the identifiers every family names users by:
//! a user alias and a prioritization array.

use serde_json::Value;

use crate::describe::schema::{array, external_id, integer, object, string, time, values, with};

/// An event's or a product's summary on a profile, its name under `key`: what
/// `/users/export/ids` and `/users/track/sync` answer.
pub fn summary(key: &str, name: &str) -> Value {
    object(
        "",
        &[
            (key, string(name)),
            ("first", time("First occurrence.")),
            ("last", time("Last occurrence.")),
            ("count", integer("Occurrences.")),
        ],
        &[key, "first", "last", "count"],
    )
}

/// `#/components/schemas` of users' identifiers.
pub fn components() -> Vec<(&'static str, Value)> {
    let alias = object(
        "A user alias: a user has at most one alias per label. A profile known only by an alias is alias-only.",
        &[
            ("alias_name", external_id("The alias.")),
            ("alias_label", external_id("Its label (`crm_id`, `device`, ...).")),
        ],
        &["alias_name", "alias_label"],
    );
    let all = ["identified", "unidentified", "most_recently_updated", "least_recently_updated"];
    let priority = values(&all, "`identified` prefers users with an external ID, `unidentified` users without one (at most one of the two); `most_recently_updated` / `least_recently_updated` the latest or earliest updated.");
    let prioritization = with(
        with(
            array(priority, "Which user an email or phone means when several share it: applied in order, each value narrowing the candidates. When more than one user is left, the entry is not performed. `/users/delete` does not allow `least_recently_updated`."),
            "minItems",
            serde_json::json!(1),
        ),
        // `identified` and `unidentified` exclude each other.
        "not",
        serde_json::json!({"allOf": [{"contains": {"const": "identified"}}, {"contains": {"const": "unidentified"}}]}),
    );
    vec![("UserAlias", alias), ("Prioritization", prioritization)]
}
