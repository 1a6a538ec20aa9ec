//! Syncs from a SQLite table: good, changed and broken rows; incremental runs;
//! events, purchases and deletes; rows sharing a timestamp across a batch boundary;
//! users that exist after batches of new ones; `config_error`.

use engage_tests::Api;
use serde_json::json;

use super::Warehouse;

#[tokio::test]
async fn a_users_table_syncs_incrementally_and_broken_rows_are_counted() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("USERS_SYNC", true)]);
    wh.add(
        "USERS_SYNC",
        &[
            ("2024-01-01T00:00:00Z", Some("u1"), r#"{"color": "red", "visits": 1}"#),
            ("2024-01-01T00:00:01Z", Some("u2"), r#"{"color": "blue"}"#),
            ("2024-01-01T00:00:02Z", Some("u3"), "{not json"),
            ("2024-01-01T00:00:03Z", None, r#"{"color": "nobody"}"#),
            ("2024-01-01T00:00:04Z", Some("u4"), r#"{"dob": "not a date"}"#),
        ],
    );
    let id = api.integration("users", &wh.source(), "USERS_SYNC", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!(job["job_status"], "partial", "{job}");
    assert_eq!((&job["rows_synced"], &job["rows_failed_with_errors"]), (&json!(2), &json!(3)));
    assert_eq!(job["last_timestamp_synced"], "2024-01-01T00:00:04.000Z");
    assert_eq!(api.user("u1").await["custom_attributes"], json!({"color": "red", "visits": 1}));
    assert_eq!(api.user("u2").await["custom_attributes"], json!({"color": "blue"}));
    assert!(api.user("u3").await.is_null() && api.user("u4").await.is_null(), "failed rows change nothing");

    // Only rows after the last synced UPDATED_AT: a change to u1 and a new user.
    wh.add(
        "USERS_SYNC",
        &[
            ("2024-01-02T00:00:00Z", Some("u1"), r#"{"color": "green"}"#),
            ("2024-01-02T00:00:01Z", Some("u5"), r#"{"color": "black"}"#),
        ],
    );
    let second = api.sync(&id).await.expect("native");
    assert_eq!(
        (&second["job_status"], &second["rows_synced"], &second["rows_failed_with_errors"]),
        (&json!("success"), &json!(2), &json!(0))
    );
    assert_eq!(api.user("u1").await["custom_attributes"], json!({"color": "green", "visits": 1}));
    assert_eq!(api.user("u5").await["custom_attributes"], json!({"color": "black"}));
    let third = api.sync(&id).await.expect("native");
    assert_eq!(
        (&third["rows_synced"], &third["last_timestamp_synced"]),
        (&json!(0), &json!("2024-01-02T00:00:01.000Z"))
    );

    let list = api.get("/cdi/integrations").await.body;
    let entry = &list["results"][0];
    assert_eq!((&entry["integration_id"], &entry["last_job_status"]), (&json!(id), &json!("success")));
    assert_eq!((&entry["integration_type"], &entry["warehouse_type"]), (&json!("user_attributes"), &json!("sqlite")));
    assert_eq!(entry["last_updated_at"], "2024-01-02T00:00:01.000Z");
}

#[tokio::test]
async fn events_purchases_and_deletes() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("EVENTS", true), ("PURCHASES", true), ("DELETES", false)]);
    wh.add(
        "EVENTS",
        &[
            ("2024-03-01T10:00:00Z", Some("e1"), r#"{"name": "played", "properties": {"level": 3}}"#),
            ("2024-03-01T11:00:00Z", Some("e1"), r#"{"name": "played", "time": "2024-02-01T00:00:00Z"}"#),
            ("2024-03-01T12:00:00Z", Some("e1"), r#"{"properties": {}}"#),
        ],
    );
    wh.add(
        "PURCHASES",
        &[("2024-03-02T10:00:00Z", Some("e1"), r#"{"product_id": "hat", "currency": "USD", "price": 12.5}"#)],
    );
    let events = api.integration("events", &wh.source(), "EVENTS", "events").await;
    let Some(job) = api.sync(&events).await else { return };
    assert_eq!((&job["rows_synced"], &job["rows_failed_with_errors"]), (&json!(2), &json!(1)));
    let user = api.user("e1").await;
    let played = &user["custom_events"][0];
    assert_eq!((&played["name"], &played["count"]), (&json!("played"), &json!(2)));
    assert_eq!(played["first"], "2024-02-01T00:00:00.000Z", "a PAYLOAD time wins");
    assert_eq!(played["last"], "2024-03-01T10:00:00.000Z", "without one, UPDATED_AT is the time");

    let purchases = api.integration("purchases", &wh.source(), "PURCHASES", "purchases").await;
    assert_eq!(api.sync(&purchases).await.expect("native")["rows_synced"], 1);
    assert_eq!(api.user("e1").await["purchases"][0]["name"], "hat");

    wh.conn
        .execute("INSERT INTO DELETES (UPDATED_AT, EXTERNAL_ID) VALUES ('2024-03-03T00:00:00Z', 'e1'), ('2024-03-03T00:00:01Z', NULL)", [])
        .expect("rows");
    let deletes = api.integration("deletes", &wh.source(), "DELETES", "deletes").await;
    let job = api.sync(&deletes).await.expect("native");
    assert_eq!((&job["rows_synced"], &job["rows_failed_with_errors"]), (&json!(1), &json!(1)));
    assert!(api.user("e1").await.is_null(), "the user is deleted");
}

#[tokio::test]
async fn rows_sharing_a_timestamp_across_a_batch_boundary_are_synced_once() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("USERS_SYNC", true)]);
    // The native host's batch holds 750 rows: 745 rows, then 20 sharing one timestamp
    // across the 750th, 730 more, 20 sharing another across the 1,500th, then more.
    let mut rows: Vec<(String, String)> = Vec::new();
    let distinct = |rows: &mut Vec<(String, String)>, day: u32, prefix: &str, count: u32| {
        for n in 0..count {
            rows.push((format!("2024-05-{day:02}T00:{:02}:{:02}Z", n / 60, n % 60), format!("{prefix}{n}")));
        }
    };
    let shared = |rows: &mut Vec<(String, String)>, day: u32, prefix: &str| {
        for n in 0..20 {
            rows.push((format!("2024-05-{day:02}T00:00:00Z"), format!("{prefix}{n}")));
        }
    };
    distinct(&mut rows, 1, "a", 745);
    shared(&mut rows, 2, "b");
    distinct(&mut rows, 3, "c", 730);
    shared(&mut rows, 4, "d");
    distinct(&mut rows, 5, "e", 5);
    let tx = wh.conn.unchecked_transaction().expect("tx");
    for (at, x) in &rows {
        tx.execute("INSERT INTO USERS_SYNC (UPDATED_AT, EXTERNAL_ID, PAYLOAD) VALUES (?1, ?2, '{\"n\": 1}')", [at, x])
            .expect("row");
    }
    tx.commit().expect("commit");
    let id = api.integration("many", &wh.source(), "USERS_SYNC", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("success"), &json!(1520)));
    for x in ["a0", "a744", "b0", "b19", "c0", "c729", "d0", "d19", "e4"] {
        assert_eq!(api.user(x).await["custom_attributes"], json!({"n": 1}), "{x}");
    }
    assert_eq!(api.sync(&id).await.expect("native")["rows_synced"], 0, "nothing twice");
}

#[tokio::test]
async fn users_that_exist_are_updated_and_deleted_after_batches_of_new_ones() {
    let api = Api::new().await;
    for old in ["old1", "old2", "old3"] {
        let reply = api.post("/users/track/sync", json!({"attributes": [{"external_id": old, "a": 0}]})).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
    }
    let wh = Warehouse::new(&[("USERS_SYNC", true), ("DELETES", false)]);
    // The native host's batch holds 750 rows. The first batch's users are all new, so
    // the next batches take theirs as new without looking them up; old1's batch must
    // still update old1, and so must old2's (an update of existing users only), once
    // batches of new users have again been found new.
    let batch = |n: u32, first: Option<(&str, &str)>| -> Vec<(String, String, String)> {
        let mut rows = Vec::new();
        if let Some((x, payload)) = first {
            rows.push((format!("2024-06-{n:02}T00:00:00Z"), x.to_string(), payload.to_string()));
        }
        for k in rows.len() as u32..750 {
            let at = format!("2024-06-{n:02}T{:02}:{:02}:{:02}Z", k / 3600, k / 60 % 60, k % 60);
            rows.push((at, format!("n{n}-{k}"), format!("{{\"n\": {n}}}")));
        }
        rows
    };
    let mut rows = batch(1, None);
    rows.extend(batch(2, Some(("old1", r#"{"b": 1}"#))));
    for n in 3..=5 {
        rows.extend(batch(n, None));
    }
    rows.extend(batch(6, Some(("old2", r#"{"_update_existing_only": true, "b": 2}"#))));
    rows.extend(batch(7, Some(("nobody", r#"{"_update_existing_only": true, "b": 3}"#))));
    let tx = wh.conn.unchecked_transaction().expect("tx");
    for (at, x, payload) in &rows {
        tx.execute("INSERT INTO USERS_SYNC (UPDATED_AT, EXTERNAL_ID, PAYLOAD) VALUES (?1, ?2, ?3)", [at, x, payload])
            .expect("row");
    }
    // Deletes: 750 users that do not exist, then old3 among 749 more.
    for k in 0..1500 {
        let x = if k == 750 { "old3".to_string() } else { format!("gone{k}") };
        let at = format!("2024-07-01T{:02}:{:02}:{:02}Z", k / 3600, k / 60 % 60, k % 60);
        tx.execute("INSERT INTO DELETES (UPDATED_AT, EXTERNAL_ID) VALUES (?1, ?2)", [&at, &x]).expect("row");
    }
    tx.commit().expect("commit");

    let id = api.integration("mixed", &wh.source(), "USERS_SYNC", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("success"), &json!(5250)), "{job}");
    assert_eq!(api.user("old1").await["custom_attributes"], json!({"a": 0, "b": 1}));
    assert_eq!(api.user("old2").await["custom_attributes"], json!({"a": 0, "b": 2}));
    assert!(api.user("nobody").await.is_null(), "an update of existing users only makes no one");
    for x in ["n1-0", "n2-1", "n5-749", "n6-1", "n7-749"] {
        assert_eq!(api.user(x).await["custom_attributes"]["n"], json!(x[1..2].parse::<u32>().unwrap()), "{x}");
    }

    let deletes = api.integration("deletes", &wh.source(), "DELETES", "deletes").await;
    let job = api.sync(&deletes).await.expect("native");
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("success"), &json!(1500)), "{job}");
    assert!(api.user("old3").await.is_null(), "old3 is deleted");
    assert_eq!(api.user("old1").await["custom_attributes"]["a"], 0, "the others stay");
}

#[tokio::test]
async fn more_than_fifty_thousand_rows_on_one_timestamp_sync_with_the_rows_around_them() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("BACKFILL", true)]);
    // A backfill stamps 60,000 rows with one time: 60 increments for each of 1,000
    // users, between rows before and after it.
    let tx = wh.conn.unchecked_transaction().expect("tx");
    {
        let mut insert =
            tx.prepare("INSERT INTO BACKFILL (UPDATED_AT, EXTERNAL_ID, PAYLOAD) VALUES (?1, ?2, ?3)").expect("insert");
        insert.execute(["2024-06-01T00:00:00Z", "before-1", r#"{"n": 1}"#]).expect("row");
        for n in 0..60_000 {
            insert
                .execute(["2024-06-02T00:00:00Z", &format!("g{}", n % 1000), r#"{"visits": {"inc": 1}}"#])
                .expect("row");
        }
        insert.execute(["2024-06-03T00:00:00Z", "after-1", r#"{"n": 1}"#]).expect("row");
    }
    tx.commit().expect("commit");
    let id = api.integration("backfill", &wh.source(), "BACKFILL", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("success"), &json!(60_002)), "{job}");
    assert_eq!(job["last_timestamp_synced"], "2024-06-03T00:00:00.000Z");
    for x in ["before-1", "after-1"] {
        assert_eq!(api.user(x).await["custom_attributes"], json!({"n": 1}), "{x}");
    }
    for x in ["g0", "g517", "g999"] {
        assert_eq!(api.user(x).await["custom_attributes"]["visits"], 60, "{x}");
    }
    assert_eq!(api.sync(&id).await.expect("native")["rows_synced"], 0, "nothing twice");
}

#[tokio::test]
async fn an_unusable_source_is_a_config_error() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("USERS_SYNC", true), ("DELETES_WITH_PAYLOAD", true)]);
    let missing_table = api.integration("missing", &wh.source(), "NO_SUCH_TABLE", "users").await;
    let Some(job) = api.sync(&missing_table).await else { return };
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("config_error"), &json!(0)));
    let missing_file = api.integration("file", "sqlite:/nonexistent/warehouse.db", "USERS_SYNC", "users").await;
    assert_eq!(api.sync(&missing_file).await.expect("native")["job_status"], "config_error");
    // A delete table must not have a PAYLOAD column (the platform's guard).
    let guarded = api.integration("guard", &wh.source(), "DELETES_WITH_PAYLOAD", "deletes").await;
    assert_eq!(api.sync(&guarded).await.expect("native")["job_status"], "config_error");
    let unreachable = api.integration("pg", "postgres://engage@127.0.0.1:1/warehouse", "users_sync", "users").await;
    assert_eq!(api.sync(&unreachable).await.expect("native")["job_status"], "config_error");
    let list = api.get("/cdi/integrations").await.body;
    assert!(list["results"].as_array().unwrap().iter().all(|i| i["last_job_status"] == "config_error"), "{list}");
}

#[tokio::test]
async fn a_scheduled_integration_runs_by_itself_and_is_next_due_an_interval_later() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("USERS_SYNC", true)]);
    wh.add("USERS_SYNC", &[("2024-07-01T00:00:00Z", Some("s1"), r#"{"plan": "gold"}"#)]);
    let body = json!({"workspace": api.workspace, "name": "scheduled", "source": wh.source(), "table": "USERS_SYNC",
                      "kind": "users", "schedule_secs": 3600});
    let r = engage_tests::admin("POST", "/_engage/cdi/integrations", body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["integration_id"].as_str().unwrap().to_string();
    let listed = api.get(&format!("/cdi/integrations?integration_id={id}")).await.body;
    assert!(listed["results"][0]["next_scheduled_run"].is_string(), "due at once: {listed}");
    // Hosts that run syncs run it without being asked; others never do (asked about
    // another integration, so that this one is run by its schedule alone).
    let probe = api.integration("probe", &wh.source(), "USERS_SYNC", "users").await;
    let runs = engage_tests::admin("POST", &format!("/_engage/cdi/integrations/{probe}/sync"), json!({})).await;
    if runs.status == 400 {
        return;
    }
    let started = std::time::Instant::now();
    loop {
        let state = engage_tests::admin("GET", &format!("/_engage/cdi/integrations/{id}"), json!(null)).await.body;
        if state["jobs"].as_u64() >= Some(1) && state["last_job_status"] == "success" {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the scheduled job did not run: {state}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(api.user("s1").await["custom_attributes"], json!({"plan": "gold"}));
    let entry = api.get(&format!("/cdi/integrations?integration_id={id}")).await.body["results"][0].clone();
    let start = entry["last_job_start_time"].as_str().unwrap().to_string();
    let next = entry["next_scheduled_run"].as_str().unwrap().to_string();
    assert!(next > start, "the next run is an interval after the last job: {entry}");
}

#[tokio::test]
async fn a_row_that_would_take_a_profile_over_its_bound_fails_alone() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("WIDE", true)]);
    let attrs = |from: usize, n: usize| {
        let m: serde_json::Map<String, serde_json::Value> =
            (from..from + n).map(|i| (format!("a{i}"), json!(i))).collect();
        serde_json::Value::Object(m).to_string()
    };
    let (first, more) = (attrs(0, 999), attrs(999, 5));
    wh.add(
        "WIDE",
        &[
            ("2024-01-01T00:00:00Z", Some("before-1"), r#"{"n": 1}"#),
            ("2024-01-01T00:00:01Z", Some("big"), &first),
            ("2024-01-01T00:00:02Z", Some("big"), &more),
            ("2024-01-01T00:00:03Z", Some("after-1"), r#"{"n": 2}"#),
        ],
    );
    let id = api.integration("wide", &wh.source(), "WIDE", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!(
        (&job["job_status"], &job["rows_synced"], &job["rows_failed_with_errors"]),
        (&json!("partial"), &json!(3), &json!(1)),
        "{job}"
    );
    assert_eq!(api.user("before-1").await["custom_attributes"], json!({"n": 1}));
    assert_eq!(api.user("after-1").await["custom_attributes"], json!({"n": 2}));
    assert_eq!(api.user("big").await["custom_attributes"].as_object().unwrap().len(), 999);
    // The failed row's reason is kept with the job.
    let jobs = engage_tests::admin("GET", &format!("/_engage/cdi/integrations/{id}/jobs"), json!(null)).await;
    let reason = jobs.body["jobs"][0]["row_errors"][0]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("would have 1004 custom attributes"), "{}", jobs.body);
    // The integration goes on.
    wh.add("WIDE", &[("2024-01-02T00:00:00Z", Some("after-2"), r#"{"n": 3}"#)]);
    let next = api.sync(&id).await.expect("native");
    assert_eq!((&next["job_status"], &next["rows_synced"]), (&json!("success"), &json!(1)), "{next}");
}

#[tokio::test]
async fn every_row_is_synced_or_counted_failed_whatever_its_updated_at() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("TIMES", true)]);
    wh.add(
        "TIMES",
        &[
            ("2026-02-01T10:00:00Z", Some("upper"), r#"{"n": 1}"#),
            ("2026-02-01t10:00:16z", Some("lower"), r#"{"n": 2}"#),
            ("2026-02-01T10:00:17+02:00", Some("offset"), r#"{"n": 3}"#),
            ("Feb 1 2026 10:00:07", Some("words"), r#"{"n": 4}"#),
            ("Sun, 01 Feb 2026 10:00:08 +0000", Some("rfc2822"), r#"{"n": 5}"#),
        ],
    );
    let id = api.integration("times", &wh.source(), "TIMES", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    let counted =
        |j: &serde_json::Value| j["rows_synced"].as_u64().unwrap() + j["rows_failed_with_errors"].as_u64().unwrap();
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&json!("partial"), &json!(3)), "{job}");
    assert_eq!(counted(&job), 5, "every row accounted for: {job}");
    assert_eq!(api.user("lower").await["custom_attributes"], json!({"n": 2}));
    assert!(api.user("words").await.is_null() && api.user("rfc2822").await.is_null());
    let jobs = engage_tests::admin("GET", &format!("/_engage/cdi/integrations/{id}/jobs"), json!(null)).await;
    let reasons = jobs.body["jobs"][0]["row_errors"].to_string();
    assert!(reasons.contains("'Feb 1 2026 10:00:07' is not a time this sync reads"), "{reasons}");
}
