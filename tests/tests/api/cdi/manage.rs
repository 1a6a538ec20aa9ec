//! Managing an integration through the operator routes: change it, pause and resume
//! it, rewind its cursor, delete it.

use engage_tests::{admin, Api};
use serde_json::{json, Value};

use super::Warehouse;

fn route(id: &str) -> String {
    format!("/_engage/cdi/integrations/{id}")
}

#[tokio::test]
async fn creating_an_integration_refuses_a_kind_that_is_not_a_string() {
    let api = Api::new().await;
    let body = |kind: Value| {
        json!({"workspace": api.workspace, "name": "k", "source": "postgres://engage@127.0.0.1:9/warehouse",
               "table": "USERS", "kind": kind})
    };
    for kind in [json!({}), json!(7), json!(["users"]), json!("people")] {
        let r = admin("POST", "/_engage/cdi/integrations", body(kind.clone())).await;
        assert_eq!(r.status, 400, "{kind}: {}", r.body);
        assert!(r.body["message"].as_str().unwrap().contains("'kind' must be"), "{kind}: {}", r.body);
    }
    // Left out or null: users.
    let r = admin("POST", "/_engage/cdi/integrations", body(Value::Null)).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn an_integration_can_be_changed_paused_rewound_and_deleted() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("MANAGED", true)]);
    wh.add(
        "MANAGED",
        &[
            ("2024-01-01T00:00:00Z", Some("m1"), r#"{"seen": "first"}"#),
            ("2099-01-01T00:00:00Z", Some("m2"), r#"{"seen": "future"}"#),
        ],
    );
    let id = api.integration("managed", &wh.source(), "MANAGED", "users").await;

    // Bad changes are refused whole.
    for (body, message) in [
        (json!({"colour": "blue"}), "unknown field 'colour'"),
        (json!({"schedule_secs": 5}), "the schedule must be 60"),
        (json!({"source": "sqlite:relative.db"}), "absolute path"),
        (json!({"paused": "yes"}), "'paused' must be true or false"),
    ] {
        let r = admin("PATCH", &route(&id), body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body["message"].as_str().unwrap().contains(message), "{body}: {}", r.body);
    }
    // A whole number written with a fraction of zero is a whole number (JSON Schema's `integer`).
    let r =
        admin("PATCH", &route(&id), json!({"name": "renamed", "schedule_secs": 3600.0, "contact_emails": ["a@b.co"]}))
            .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((&r.body["integration_name"], &r.body["schedule_secs"]), (&json!("renamed"), &json!(3600)));
    let entry = api.get("/cdi/integrations").await.body["results"][0].clone();
    assert_eq!((&entry["integration_name"], &entry["contact_emails"]), (&json!("renamed"), &json!("a@b.co")));
    assert!(entry["next_scheduled_run"].is_string(), "{entry}");

    // Paused: listed so, and no job runs.
    let r = admin("PATCH", &route(&id), json!({"paused": true, "schedule_secs": null})).await;
    assert_eq!((r.status, &r.body["integration_status"]), (200, &json!("paused")), "{}", r.body);
    let r = admin("POST", &format!("{}/sync", route(&id)), json!({})).await;
    if r.body["message"].as_str().is_some_and(|m| m.contains("does not run warehouse syncs")) {
        return; // The edge runs no syncs.
    }
    // 409, not 400: the same request succeeds once the integration is resumed.
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains("paused"), "{}", r.body);
    let r = admin("PATCH", &route(&id), json!({"paused": false})).await;
    assert_eq!(r.body["integration_status"], "active");
    let job = api.sync(&id).await.expect("native");
    // The schedule set above may have made a run due before the pause, and the server
    // running syncs (another one, when several share a database) may have read the
    // rows in it: every row is read once, by whichever job.
    let jobs = api.get(&format!("/cdi/integrations/{id}/job_sync_status")).await.body;
    let synced: u64 = jobs["results"].as_array().unwrap().iter().filter_map(|j| j["rows_synced"].as_u64()).sum();
    assert_eq!(synced, 2, "{job} {jobs}");

    // A row stamped 2099 moved the cursor there: a later row at an earlier time is
    // not read until the cursor is rewound.
    wh.add("MANAGED", &[("2024-06-01T00:00:00Z", Some("m3"), r#"{"seen": "late"}"#)]);
    assert_eq!(api.sync(&id).await.expect("native")["rows_synced"], 0);
    let r = admin("POST", &format!("{}/rewind", route(&id)), json!({"to": "not a time"})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = admin("POST", &format!("{}/rewind", route(&id)), json!({"to": "2024-01-01T00:00:00Z"})).await;
    assert_eq!((r.status, &r.body["last_updated_at"]), (200, &json!("2024-01-01T00:00:00.000Z")), "{}", r.body);
    let job = api.sync(&id).await.expect("native");
    assert_eq!(job["rows_synced"], 2, "the late row and the 2099 one again: {job}");
    assert_eq!(api.user("m3").await["custom_attributes"], json!({"seen": "late"}));

    // Deleted: gone from the list and the status endpoint, with its jobs.
    let r = admin("DELETE", &route(&id), Value::Null).await;
    assert_eq!((r.status, &r.body), (200, &json!({"deleted": id})));
    assert_eq!(api.get("/cdi/integrations").await.body["results"], json!([]));
    let r = api.get(&format!("/cdi/integrations/{id}/job_sync_status")).await;
    assert_eq!((r.status, &r.body["message"]), (400, &json!("Invalid integration ID")));
    assert_eq!(admin("DELETE", &route(&id), Value::Null).await.status, 404);
    assert_eq!(admin("GET", &format!("{}/jobs", route(&id)), Value::Null).await.status, 404);
}
