//! The API description of the identity endpoints: identify, merge, delete and the
//! alias endpoints.

use serde_json::{json, Value};

use super::merge::{messages, MAX_UPDATES};
use super::{alias, delete as del, external_ids, identify as ident};
use crate::describe::op::Op;
use crate::describe::schema::{
    array, closed, email, external_id, integer, lenient_id, nullable, object, one_of, phone, refer, success_body, with,
};

fn bounded(items: Value, max: usize, description: &str) -> Value {
    with(array(items, description), "maxItems", json!(max))
}

/// An optional list: `null` is read as absent.
fn optional(items: Value, max: usize, description: &str) -> Value {
    nullable(bounded(items, max, description))
}

/// An email or phone entry: the address and which user it means.
fn shared_entry(key: &'static str, description: &str) -> Value {
    object(
        description,
        &[
            (key, if key == "email" { email("The address.") } else { phone("The number (E.164).") }),
            ("prioritization", refer("Prioritization")),
        ],
        &[key, "prioritization"],
    )
}

/// The external ID an identify gives: not one of the placeholders the platform
/// refuses (`undefined`, `null`, ... in any case).
fn identified() -> Value {
    with(
        lenient_id(
            "The external ID to give; not a placeholder such as `undefined`, `null`, `0` or `-1` (in any case).",
        ),
        "not",
        json!({"enum": crate::ids::BLOCKED_EXTERNAL_IDS}),
    )
}

/// POST /users/identify.
pub fn identify() -> Op {
    let entry = |key: &'static str, value: Value, extra: bool| {
        let mut props = vec![("external_id", identified()), (key, value)];
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
            ("aliases_to_identify", optional(entry("user_alias", refer("UserAlias"), false), max, "Alias-only profiles to identify.")),
            ("emails_to_identify", optional(entry("email", email("The email."), true), max, "Email-only profiles to identify.")),
            ("phone_numbers_to_identify", optional(entry("phone", phone("The phone (E.164)."), true), max, "Phone-only profiles to identify.")),
        ], &[]))
        .at_least_one(&["aliases_to_identify", "emails_to_identify", "phone_numbers_to_identify"])
        .example(json!({"aliases_to_identify": [{"external_id": "user-456", "user_alias": {"alias_name": "anon-42", "alias_label": "device"}}]}))
        .reply(201, "Identified.", success_body("", &[("aliases_processed", integer("Entries processed."))], &[]))
        .with_example("identified", json!({"message": "success", "aliases_processed": 1}))
}

/// One identifier of a merge update.
fn merge_identifier() -> Value {
    one_of(
        vec![
            closed(object("", &[("external_id", lenient_id("External ID."))], &["external_id"])),
            closed(object("", &[("user_alias", refer("UserAlias"))], &["user_alias"])),
            closed(shared_entry("email", "By email.")),
            closed(shared_entry("phone", "By phone (E.164).")),
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
        .body(object("", &[("merge_updates", bounded(closed(update), MAX_UPDATES, "The merges."))], &["merge_updates"]))
        .example(json!({"merge_updates": [{"identifier_to_merge": {"external_id": "user-456"}, "identifier_to_keep": {"external_id": "user-123"}}]}))
        .reply(202, "Merged.", success_body("", &[], &[]))
        .with_example("merged", json!({"message": "success"}))
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
    let list = |item: Value, what: &str| optional(item, max, what);
    Op::new(format!("Deletes whole profiles (identifiers, attributes, events, purchases, subscription states): nothing of them can be read back, and a later track with one of their identifiers creates a fresh profile. The arrays may be combined, at most {max} entries in all. An email or phone entry that still matches several users after prioritization deletes nobody."))
        .body(object("At least one entry.", &[
            ("external_ids", list(lenient_id("External ID."), "By external ID.")),
            ("user_aliases", list(refer("UserAlias"), "By alias.")),
            ("service_ids", list(external_id("Internal ID."), "By internal ID (`braze_ids` is accepted too).")),
            ("email_addresses", list(shared_entry("email", "By email."), "By email.")),
            ("phone_numbers", list(shared_entry("phone", "By phone (E.164)."), "By phone.")),
        ], &[]))
        .at_least_one(&["external_ids", "user_aliases", "service_ids", "email_addresses", "phone_numbers"])
        .example(json!({"external_ids": ["user-789"], "email_addresses": [{"email": "old@example.com", "prioritization": ["unidentified"]}]}))
        .reply(201, "Deleted.", success_body("", &[("deleted", integer("Profiles removed."))], &["deleted"]))
        .with_example("deleted", json!({"message": "success", "deleted": 1}))
}

/// POST /users/alias/new.
pub fn alias_new() -> Op {
    let max = alias::MAX_ENTRIES;
    let entry = object(
        "",
        &[
            ("alias_name", external_id("The alias.")),
            ("alias_label", external_id("Its label.")),
            (
                "external_id",
                nullable(lenient_id(
                    "The user to add it to; without one (or `null`), a new alias-only profile is made.",
                )),
            ),
        ],
        &["alias_name", "alias_label"],
    );
    Op::new(format!("Adds aliases: to the user with `external_id`, or as new alias-only profiles. Nothing happens for an entry whose alias exists already, whose user does not exist, or whose user has an alias with that label already (one alias per label). At most {max} entries, applied in order."))
        .body(object("", &[("user_aliases", bounded(entry, max, "The aliases to add."))], &["user_aliases"]))
        .example(json!({"user_aliases": [
            {"alias_name": "crm-123", "alias_label": "crm", "external_id": "user-123"},
            {"alias_name": "anon-42", "alias_label": "device"}
        ]}))
        .reply(201, "Added.", success_body("", &[("aliases_processed", integer("Entries processed."))], &[]))
        .with_example("added", json!({"message": "success", "aliases_processed": 2}))
}

/// POST /users/alias/update.
pub fn alias_update() -> Op {
    let max = alias::MAX_ENTRIES;
    let entry = object(
        "",
        &[
            ("alias_label", external_id("The label.")),
            ("old_alias_name", external_id("The alias now.")),
            ("new_alias_name", external_id("The alias to have instead.")),
        ],
        &["alias_label", "old_alias_name", "new_alias_name"],
    );
    Op::new(format!("Renames aliases: the user with `old_alias_name` under the label gets `new_alias_name`; nothing happens when the old alias does not exist or the new one is taken. At most {max} entries, applied in order."))
        .body(object("", &[("alias_updates", bounded(entry, max, "The renames."))], &["alias_updates"]))
        .example(json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "crm-123", "new_alias_name": "crm-0123"}]}))
        .reply(201, "Renamed.", success_body("", &[], &[]))
        .with_example("renamed", json!({"message": "success"}))
}

/// `[index, message]`: an entry that was not applied, and why.
fn entry_errors(description: &str) -> Value {
    array(
        with(
            with(
                array(one_of(vec![integer("The entry's index."), crate::describe::schema::string("Why.")], ""), ""),
                "minItems",
                json!(2),
            ),
            "maxItems",
            json!(2),
        ),
        description,
    )
}

/// POST /users/external_ids/rename.
pub fn external_ids_rename() -> Op {
    let max = external_ids::MAX_ENTRIES;
    let entry = object(
        "",
        &[
            ("current_external_id", lenient_id("The user's primary external ID now.")),
            ("new_external_id", lenient_id("Its new primary external ID.")),
        ],
        &["current_external_id", "new_external_id"],
    );
    let renamed = object(
        "A rename done.",
        &[
            ("current_external_id", external_id("The ID now deprecated.")),
            ("new_external_id", external_id("The new primary ID.")),
        ],
        &["current_external_id", "new_external_id"],
    );
    Op::new(format!("Gives users new (primary) external IDs and keeps each current one as deprecated: either names the user (in every endpoint) until `/users/external_ids/remove` removes the deprecated one. The current ID must be a user's primary ID, the new one must name nobody (as a primary or deprecated ID), and the two must differ; an entry that breaks a rule is listed in `rename_errors` with its index, and the others apply. 1 to {max} entries, applied in order in one unit of work."))
        .body(object("", &[("external_id_renames", with(bounded(entry, max, "The renames."), "minItems", json!(1)))], &["external_id_renames"]))
        .example(json!({"external_id_renames": [{"current_external_id": "user-123", "new_external_id": "customer-123"}]}))
        .reply(201, "Done, entry by entry.", success_body("", &[
            ("external_ids", array(renamed, "The renames done.")),
            ("rename_errors", entry_errors("The entries not applied: `[index, message]`.")),
        ], &["external_ids", "rename_errors"]))
        .with_example("renamed", json!({"external_ids": [{"current_external_id": "user-123", "new_external_id": "customer-123"}], "rename_errors": [[1, external_ids::NEW_TAKEN]], "message": "success"}))
}

/// POST /users/external_ids/remove.
pub fn external_ids_remove() -> Op {
    let max = external_ids::MAX_ENTRIES;
    Op::new(format!("Removes deprecated external IDs (left by renames): the ID names nobody afterwards. A primary ID, or one naming nobody, is listed in `removal_errors` with its index; the others are removed. 1 to {max} IDs, in one unit of work."))
        .body(object("", &[("external_ids", with(bounded(lenient_id("A deprecated external ID."), max, "The IDs to remove."), "minItems", json!(1)))], &["external_ids"]))
        .example(json!({"external_ids": ["user-123"]}))
        .reply(201, "Done, ID by ID.", success_body("", &[
            ("removed_ids", array(external_id("An ID removed."), "The IDs removed.")),
            ("removal_errors", entry_errors("The IDs not removed: `[index, message]`.")),
        ], &["removed_ids", "removal_errors"]))
        .with_example("removed", json!({"removed_ids": ["user-123"], "removal_errors": [[1, external_ids::PRIMARY]], "message": "success"}))
}
