//! `--strict`: every form the hosted platform accepts beyond the reference (the
//! black-box suite's `fidelity` tests show each accepted by default) is refused
//! with a 400 that says what the reference expects, and the reference's own forms
//! still pass: fidelity-number-ids, fidelity-time-forms, fidelity-nested-alias,
//! fidelity-singular-fields.

use crate::support;

use std::path::Path;

use serde_json::{json, Value};
use support::Server;

const KEY: &str = "strict-known-key-0123456789abcdef012345";

#[test]
fn every_lenient_form_is_refused_with_what_the_reference_expects() {
    let server = Server::start(Path::new(":memory:"), &["--api-key", KEY, "--strict", "--no-rate-limits"], &[]);
    let mut conn = server.conn();
    let mut post = |path: &str, body: Value| conn.post(path, KEY, &body).unwrap();
    assert_eq!(
        post("/users/track", json!({"attributes": [{"external_id": "u1", "email": "u1@example.com"}]})).status,
        201
    );
    // Refused before the group is looked up: any id will do.
    let group_id = "0a0a0a0a-0000-4000-8000-000000000000";
    let event = |time: Value| json!({"events": [{"external_id": "u1", "name": "e", "time": time}]});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/users/track", json!({"attributes": [{"external_id": 1, "a": 1}]}), "'external_id' must be a string"),
        ("/users/track", event(json!("2019-02-15 00:00:00 -0500")), "'time' must be an ISO 8601 time with 'T'"),
        ("/users/track", event(json!("2015-02-20T13:14:47")), "'time' must be an ISO 8601 time with 'T'"),
        (
            "/users/track",
            json!({"purchases": [{"external_id": "u1", "product_id": 1, "currency": "USD", "price": 1, "time": "2019-02-15T00:00:00Z"}]}),
            "'product_id' must be a string",
        ),
        ("/users/track/sync", json!({"attributes": [{"external_id": 7}]}), "'external_id' must be a string"),
        ("/users/export/ids", json!({"external_ids": [1]}), "'external_ids[0]' must be a string"),
        ("/users/delete", json!({"external_ids": [400]}), "'external_ids[0]' must be a string"),
        (
            "/users/identify",
            json!({"aliases_to_identify": [{"external_id": 2, "user_alias": {"alias_name": "a", "alias_label": "l"}}]}),
            "'aliases_to_identify[0].external_id' must be a string",
        ),
        (
            "/users/merge",
            json!({"merge_updates": [{"identifier_to_merge": {"external_id": 1}, "identifier_to_keep": {"external_id": "u1"}}]}),
            "'merge_updates[0].identifier_to_merge.external_id' must be a string",
        ),
        (
            "/users/alias/new",
            json!({"user_aliases": [{"user_alias": {"alias_name": "n", "alias_label": "l"}}]}),
            "'user_aliases[0].user_alias' must be 'alias_name' and 'alias_label' in the entry itself",
        ),
        (
            "/subscription/status/set",
            json!({"subscription_group_id": group_id, "subscription_state": "subscribed", "external_id": "u1"}),
            "'external_id' must be an array of strings",
        ),
        (
            "/v2/subscription/status/set",
            json!({"subscription_groups": [{"subscription_group_id": group_id, "subscription_state": "subscribed", "external_id": "u1"}]}),
            "'subscription_groups[0].external_id' must be 'external_ids', 'emails' or 'phones'",
        ),
    ];
    for (path, body, want) in cases {
        let r = post(path, body.clone());
        let text = r.json().to_string();
        let message = r.json()["message"].as_str().unwrap_or_default().to_string();
        let errors = r.json()["errors"].to_string();
        assert!(r.status == 400, "{path} {body}: {} {text}", r.status);
        assert!(message.contains(want) || errors.contains(want), "{path} {body}: {text}");
        assert!(message.contains("--strict") || errors.contains("--strict"), "{path}: the refusal says why: {text}");
    }
    // The reference's own forms pass.
    assert_eq!(post("/users/track", event(json!("2019-02-15T00:00:00.5+01:00"))).status, 201);
    assert_eq!(post("/users/export/ids", json!({"external_ids": ["u1"]})).status, 201);
    assert_eq!(
        post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n", "alias_label": "l"}]})).status,
        201
    );
}
