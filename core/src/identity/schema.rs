//! The API description of the identity endpoints: identify, merge, delete and the
//! alias endpoints.

use serde_json::{json, Value};

use super::merge::{messages, MAX_UPDATES};
use super::{alias, delete as del, identify as ident};
use crate::openapi::op::Op;
use crate::openapi::schema::{array, integer, object, one_of, refer, string, success_body, with};

fn bounded(items: Value, max: usize, description: &str) -> Value {
    with(array(items, description), "maxItems", json!(max))
}

/// An email or phone entry: the address and which user it means.
fn shared_entry(key: &'static str, description: &str) -> Value {
    object(
        description,
        &[(key, string("The address.")), ("prioritization", refer("Prioritization"))],
        &[key, "prioritization"],
    )
}

/// POST /users/identify.
pub fn identify() -> Op {
    let entry = |key: &'static str, value: Value, extra: bool| {
        let mut props = vec![("external_id", string("The external ID to give.")), (key, value)];
        let mut required = vec!["external_id", key];
        if extra {
            props.push(("prioritization", refer("Prioritization")));
            required.push("prioritization");
        }
        object("", &props, &required)
    };
    let max = ident::MAX_ENTRIES;
    Op::new(format!("Gives an external ID to anonymous profiles (alias-only, email-only, phone-only). When no user has the external ID, the anonymous profile becomes the identified one; otherwise its data is merged into the identified profile (fields it lacks, custom attributes it lacks, event and purchase summaries combined) and the anonymous profile is removed. A user that already has an alias with the same label is not merged. Up to {max} entries per request."))
        .body(object("At least one entry.", &[
            ("aliases_to_identify", bounded(entry("user_alias", refer("UserAlias"), false), max, "Alias-only profiles to identify.")),
            ("emails_to_identify", bounded(entry("email", string("The email."), true), max, "Email-only profiles to identify.")),
            ("phone_numbers_to_identify", bounded(entry("phone", string("The phone (E.164)."), true), max, "Phone-only profiles to identify.")),
        ], &[]))
        .reply(201, "Identified.", success_body("", &[("aliases_processed", integer("Entries processed."))], &[]))
}

/// One identifier of a merge update.
fn merge_identifier() -> Value {
    one_of(
        vec![
            object("", &[("external_id", string("External ID."))], &["external_id"]),
            object("", &[("user_alias", refer("UserAlias"))], &["user_alias"]),
            shared_entry("email", "By email."),
            shared_entry("phone", "By phone (E.164)."),
        ],
        "One identifier; email and phone carry `prioritization`.",
    )
}

/// POST /users/merge.
pub fn merge() -> Op {
    let update = object(
        "",
        &[("identifier_to_merge", merge_identifier()), ("identifier_to_keep", merge_identifier())],
        &["identifier_to_merge", "identifier_to_keep"],
    );
    Op::new(format!("Merges each source profile (`identifier_to_merge`) into a target (`identifier_to_keep`): fields missing on the target are filled from the source, custom attributes the target lacks are added, session counts and event and purchase summaries are combined (counts summed, first dates the earlier, last dates the later); the source is removed. Updates are applied in no guaranteed order; an update whose identifiers do not resolve to exactly one user each is skipped. At most {MAX_UPDATES} updates."))
        .body(object("", &[("merge_updates", bounded(crate::openapi::schema::closed(update), MAX_UPDATES, "The merges."))], &["merge_updates"]))
        .reply(202, "Merged.", success_body("", &[], &[]))
        .bad_request("Invalid input; the message names the rule.", &[
            ("not_array", messages::NOT_ARRAY),
            ("too_many", messages::TOO_MANY),
            ("bad_identifier", messages::BAD_IDENTIFIER),
            ("extra_keys", messages::EXTRA_KEYS),
        ])
}

/// POST /users/delete.
pub fn delete() -> Op {
    let max = del::MAX_ENTRIES;
    let list = |item: Value, what: &str| bounded(item, max, what);
    Op::new(format!("Deletes whole profiles (identifiers, attributes, events, purchases, subscription states): nothing of them can be read back, and a later track with one of their identifiers creates a fresh profile. The arrays may be combined, at most {max} entries in all. An email or phone entry that still matches several users after prioritization deletes nobody."))
        .body(object("At least one entry.", &[
            ("external_ids", list(string("External ID."), "By external ID.")),
            ("user_aliases", list(refer("UserAlias"), "By alias.")),
            ("service_ids", list(string("Internal ID."), "By internal ID (`braze_ids` is accepted too).")),
            ("email_addresses", list(shared_entry("email", "By email."), "By email.")),
            ("phone_numbers", list(shared_entry("phone", "By phone (E.164)."), "By phone.")),
        ], &[]))
        .reply(201, "Deleted.", success_body("", &[("deleted", integer("Profiles removed."))], &["deleted"]))
}

/// POST /users/alias/new.
pub fn alias_new() -> Op {
    let max = alias::MAX_ENTRIES;
    let entry = object(
        "",
        &[
            ("alias_name", string("The alias.")),
            ("alias_label", string("Its label.")),
            ("external_id", string("The user to add it to; without one, a new alias-only profile is made.")),
        ],
        &["alias_name", "alias_label"],
    );
    Op::new(format!("Adds aliases: to the user with `external_id`, or as new alias-only profiles. Nothing happens for an entry whose alias exists already, whose user does not exist, or whose user has an alias with that label already (one alias per label). At most {max} entries, applied in order."))
        .body(object("", &[("user_aliases", bounded(entry, max, "The aliases to add."))], &["user_aliases"]))
        .reply(201, "Added.", success_body("", &[("aliases_processed", integer("Entries processed."))], &[]))
}

/// POST /users/alias/update.
pub fn alias_update() -> Op {
    let max = alias::MAX_ENTRIES;
    let entry = object(
        "",
        &[
            ("alias_label", string("The label.")),
            ("old_alias_name", string("The alias now.")),
            ("new_alias_name", string("The alias to have instead.")),
        ],
        &["alias_label", "old_alias_name", "new_alias_name"],
    );
    Op::new(format!("Renames aliases: the user with `old_alias_name` under the label gets `new_alias_name`; nothing happens when the old alias does not exist or the new one is taken. At most {max} entries, applied in order."))
        .body(object("", &[("alias_updates", bounded(entry, max, "The renames."))], &["alias_updates"]))
        .reply(201, "Renamed.", success_body("", &[], &[]))
}
