//! A job's steps through the engine's store, read back through the API.

use serde_json::{json, Value};

use super::integration::{DataKind, Integration, JobStatus, Spec};
use super::pipeline::Pipeline;
use super::rows::Row;
use super::sync::{begin, commit_batch, finish, prepare_batch, Begun, INTERRUPTED};
use crate::http::Method;
use crate::ids::WorkspaceName;
use crate::store::Store;
use crate::testkit::{Held, Hold, Kit};
use crate::time::Timestamp;

fn spec(kind: DataKind) -> Spec {
    Spec {
        name: "users".into(),
        source: "sqlite:/tmp/w.db".into(),
        table: "USERS_SYNC".into(),
        kind,
        schedule_secs: None,
        contact_emails: vec!["ops@example.com".into()],
    }
}

fn row(ms: i64, external_id: &str, payload: &str) -> Row {
    Row {
        updated_at: Timestamp(ms),
        external_id: Some(external_id.into()),
        payload: Some(payload.into()),
        ..Row::default()
    }
}

#[test]
fn a_job_applies_rows_counts_failures_and_moves_the_cursor() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let i = pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Users), kit.ctx())).unwrap();
    let begun = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
    let rows = [row(1000, "u1", r#"{"color":"red"}"#), row(2000, "u2", "{bad"), row(2000, "u3", r#"{"dob":"never"}"#)];
    let (report, _) = pollster::block_on(commit_batch(store, &begun, None, &rows, false, kit.ctx())).unwrap();
    assert_eq!((report.synced, report.failed), (1, 2));
    let job = pollster::block_on(finish(store, &begun, None, kit.ctx())).unwrap();
    assert_eq!(job.status, JobStatus::Partial);
    assert_eq!(job.errors.len(), 2);
    assert!(job.errors[0].reason.contains("not valid JSON"), "{:?}", job.errors);
    assert_eq!(kit.user("u1")["custom_attributes"], json!({"color": "red"}));
    assert_eq!(kit.user("u3"), Value::Null, "a failed row changes nothing");

    let (status, body) = kit.call(Method::Get, &format!("/cdi/integrations/{}/job_sync_status", i.id), Value::Null);
    assert_eq!(status, 200);
    assert_eq!(body["results"][0]["job_status"], "partial");
    assert_eq!(
        (body["results"][0]["rows_synced"].clone(), body["results"][0]["rows_failed_with_errors"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(body["results"][0]["last_timestamp_synced"], "1970-01-01T00:00:02.000Z");
    let (_, list) = kit.call(Method::Get, "/cdi/integrations", Value::Null);
    assert_eq!(list["results"][0]["last_job_status"], "partial");
    assert_eq!(list["results"][0]["last_updated_at"], "1970-01-01T00:00:02.000Z");
    assert_eq!(list["results"][0]["contact_emails"], "ops@example.com");
}

#[test]
fn a_crashed_job_is_closed_and_the_next_resumes_after_its_last_commit() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let i = pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Events), kit.ctx())).unwrap();
    let first = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
    let batch = [row(1000, "u1", r#"{"name":"e"}"#)];
    pollster::block_on(commit_batch(store, &first, None, &batch, false, kit.ctx())).unwrap();
    // The process dies here: no finish. The next job closes the first.
    let second = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
    let cursor = second.integration.cursor.clone();
    assert_eq!(cursor.as_ref().map(|c| c.updated_at), Some(Timestamp(1000)));
    // A batch read after a stale cursor is refused: nothing is applied twice.
    let stale = pollster::block_on(commit_batch(store, &second, None, &batch, false, kit.ctx()));
    assert!(stale.is_err());
    let next = [row(2000, "u1", r#"{"name":"e"}"#)];
    pollster::block_on(commit_batch(store, &second, cursor.as_ref(), &next, false, kit.ctx())).unwrap();
    pollster::block_on(finish(store, &second, None, kit.ctx())).unwrap();
    assert_eq!(kit.user("u1")["custom_events"][0]["count"], 2, "each event once");
    let (_, body) = kit.call(Method::Get, &format!("/cdi/integrations/{}/job_sync_status", i.id), Value::Null);
    assert_eq!(body["results"][0]["job_status"], "success");
    assert_eq!(body["results"][1]["job_status"], "error");
    assert_eq!(body["results"][1]["rows_synced"], 1);
    let _ = INTERRUPTED;
}

#[test]
fn a_state_that_refuses_a_valid_request_is_a_409() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let i = pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Users), kit.ctx())).unwrap();
    let begun = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
    let running = pollster::block_on(super::manage::rewind(store, &i.id, None, kit.ctx())).unwrap_err();
    assert_eq!((running.status(), running.message().contains("running")), (409, true), "{running:?}");
    pollster::block_on(finish(store, &begun, None, kit.ctx())).unwrap();
    pollster::block_on(super::manage::rewind(store, &i.id, None, kit.ctx())).expect("rewound once the job ended");

    let pause = super::manage::Update { paused: Some(true), ..Default::default() };
    pollster::block_on(super::manage::update(store, &i.id, &pause, kit.ctx())).unwrap();
    let paused = pollster::block_on(super::manage::request_run(store, &i.id, kit.ctx())).unwrap_err();
    assert_eq!((paused.status(), paused.message().contains("paused")), (409, true), "{paused:?}");
    assert!(!pollster::block_on(super::manage::requested(store, &i.id)).unwrap(), "nothing asked for");
}

/// A users integration of the workspace `test`, and its first job begun.
fn users_job(kit: &Kit) -> (Integration, Begun) {
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let i = pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Users), kit.ctx())).unwrap();
    let begun = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
    (i, begun)
}

/// Reads `rows` as a batch of `i` and pushes it into `pipeline`.
fn push_rows<S: Store>(kit: &Kit, i: &Integration, pipeline: &mut Pipeline<'_, S>, rows: Vec<Row>) {
    let batch = pollster::block_on(prepare_batch(kit.engine().store(), i, rows, kit.ctx().now)).unwrap();
    pollster::block_on(pipeline.push(batch, false, kit.ctx())).unwrap();
}

#[test]
fn a_pipelined_job_applies_each_row_once_whatever_happens_between_its_batches() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let (i, begun) = users_job(&kit);
    let mut pipeline = Pipeline::new(store, &begun, None);
    let mut push = |rows: Vec<Row>| push_rows(&kit, &i, &mut pipeline, rows);
    push(vec![row(1000, "u1", r#"{"a":1}"#), row(1001, "u2", r#"{"a":1}"#)]);
    // u1 again, in a batch built while the one that made u1 is still in flight.
    push(vec![row(2000, "u1", r#"{"b":2}"#), row(2001, "u3", r#"{"a":3}"#)]);
    // A request makes u3 while the batch that makes it is in flight: that commit
    // conflicts, and it and the batch built on it are committed the plain way.
    let (status, body) = kit.post("/users/track/sync", json!({"attributes": [{"external_id": "u3", "c": 3}]}));
    assert_eq!(status, 201, "{body}");
    push(vec![row(3000, "u5", r#"{"a":5}"#)]);
    // A row too large for its profile, in a batch built on one in flight: it fails alone.
    let wide = |from: usize, n: usize| {
        let m: serde_json::Map<String, Value> = (from..from + n).map(|k| (format!("k{k}"), json!(k))).collect();
        Value::Object(m).to_string()
    };
    push(vec![row(4000, "u4", &wide(0, 999)), row(4001, "u4", &wide(999, 5)), row(4002, "u6", r#"{"a":6}"#)]);
    pollster::block_on(pipeline.flush(kit.ctx())).unwrap();
    let job = pollster::block_on(finish(store, &begun, None, kit.ctx())).unwrap();
    assert_eq!((job.rows_synced, job.rows_failed, job.status), (7, 1, JobStatus::Partial), "{job:?}");
    assert!(job.errors[0].reason.contains("1004 custom attributes"), "{:?}", job.errors);
    let attrs = |id: &str| kit.user(id)["custom_attributes"].clone();
    assert_eq!(attrs("u1"), json!({"a": 1, "b": 2}));
    assert_eq!(attrs("u2"), json!({"a": 1}));
    assert_eq!(attrs("u3"), json!({"a": 3, "c": 3}));
    assert_eq!(attrs("u4").as_object().map(|m| m.len()), Some(999));
    assert_eq!((attrs("u5"), attrs("u6")), (json!({"a": 5}), json!({"a": 6})));
    let (_, list) = kit.call(Method::Get, "/cdi/integrations", Value::Null);
    assert_eq!(list["results"][0]["last_updated_at"], "1970-01-01T00:00:04.002Z");
}

#[test]
fn batches_that_take_their_users_as_new_are_committed_again_with_lookups_when_one_is_not() {
    let kit = Kit::new();
    for old in ["old1", "old2"] {
        let (status, body) = kit.post("/users/track/sync", json!({"attributes": [{"external_id": old, "a": 0}]}));
        assert_eq!(status, 201, "{body}");
    }
    let store = kit.engine().store();
    let (i, begun) = users_job(&kit);
    let mut pipeline = Pipeline::new(store, &begun, None);
    let mut push = |rows: Vec<Row>| push_rows(&kit, &i, &mut pipeline, rows);
    // None of these users exists: the next batch takes its users as new, unread.
    push(vec![row(1000, "u1", r#"{"a":1}"#), row(1001, "u2", r#"{"a":2}"#)]);
    // old1 exists: this batch's commit conflicts, and it goes again with lookups (as
    // do the batches after it until that conflict is seen, two pushes on).
    push(vec![row(2000, "old1", r#"{"b":1}"#), row(2001, "u3", r#"{"a":3}"#)]);
    push(vec![row(3000, "u4", r#"{"a":4}"#)]);
    push(vec![row(4000, "u5", r#"{"a":5}"#)]);
    // Looked up, none found: the next batch takes its users as new again, and an
    // update of existing users only is not skipped for that.
    push(vec![row(5000, "u6", r#"{"a":6}"#)]);
    push(vec![row(6000, "old2", r#"{"_update_existing_only":true,"b":2}"#), row(6001, "u7", r#"{"a":7}"#)]);
    push(vec![row(7000, "nobody", r#"{"_update_existing_only":true,"b":3}"#)]);
    pollster::block_on(pipeline.flush(kit.ctx())).unwrap();
    let job = pollster::block_on(finish(store, &begun, None, kit.ctx())).unwrap();
    assert_eq!((job.rows_synced, job.rows_failed, job.status), (10, 0, JobStatus::Success), "{job:?}");
    assert_eq!(kit.user("old1")["custom_attributes"], json!({"a": 0, "b": 1}));
    assert_eq!(kit.user("old2")["custom_attributes"], json!({"a": 0, "b": 2}));
    for (n, id) in ["u1", "u2", "u3", "u4", "u5", "u6", "u7"].into_iter().enumerate() {
        assert_eq!(kit.user(id)["custom_attributes"], json!({"a": n + 1}), "{id}");
    }
    assert_eq!(kit.user("nobody"), Value::Null);
    let prefix = crate::repo::keys::workspace_prefix(&i.workspace);
    let profiles = pollster::block_on(store.scan(crate::store::Table::Profile, &prefix, 100)).unwrap();
    assert_eq!(profiles.len(), 9, "one profile a user, none made twice");
}

#[test]
fn a_batch_built_on_one_whose_commit_failed_never_commits_even_when_its_versions_line_up() {
    use crate::store::{ChangeSet, Expect, Op, Store, Table};
    let kit = Kit::new();
    let store = kit.engine().store();
    let (i, begun) = users_job(&kit);
    let mut pipeline = Pipeline::new(store, &begun, None);
    let mut push = |rows: Vec<Row>| push_rows(&kit, &i, &mut pipeline, rows);
    push(vec![row(1000, "u1", r#"{"a":1}"#)]);
    // Something else writes the integration and its job once each (as closing a job
    // thought stale would): the batch just built fails at commit, and the next one,
    // built on it, expects exactly the versions that write left.
    let job_key = super::job::job_key(&i.workspace, &i.id, begun.seq);
    let mut ops = Vec::new();
    for (table, key) in [(Table::CdiIntegration, i.id.clone()), (Table::CdiJob, job_key)] {
        let e = pollster::block_on(store.get(table, &key)).unwrap().expect("stored");
        ops.push(Op::Put { table, key, value: e.value, expect: Expect::Version(e.version) });
    }
    pollster::block_on(store.commit(ChangeSet { ops, ack: None })).unwrap();
    push(vec![row(2000, "u2", r#"{"a":2}"#)]);
    push(vec![row(3000, "u3", r#"{"a":3}"#)]);
    pollster::block_on(pipeline.flush(kit.ctx())).unwrap();
    let job = pollster::block_on(finish(store, &begun, None, kit.ctx())).unwrap();
    assert_eq!((job.rows_synced, job.rows_failed, job.status), (3, 0, JobStatus::Success), "{job:?}");
    for (id, a) in [("u1", 1), ("u2", 2), ("u3", 3)] {
        assert_eq!(kit.user(id)["custom_attributes"], json!({"a": a}), "{id}");
    }
}

#[test]
fn a_user_named_by_email_in_a_batch_in_flight_is_found_by_a_later_batch() {
    let kit = Kit::new();
    let (i, begun) = users_job(&kit);
    let store = Held(kit.engine().store(), Hold::Commits);
    let mut pipeline = Pipeline::new(&store, &begun, None);
    let by_email = |ms: i64, payload: &str| Row {
        updated_at: Timestamp(ms),
        email: Some("shared@example.com".into()),
        payload: Some(payload.into()),
        ..Row::default()
    };
    let mut push = |rows: Vec<Row>| push_rows(&kit, &i, &mut pipeline, rows);
    push(vec![by_email(1000, r#"{"a":1}"#)]);
    push(vec![row(2000, "u2", r#"{"a":2}"#)]);
    push(vec![by_email(3000, r#"{"b":3}"#)]);
    push(vec![row(4000, "u4", r#"{"a":4}"#)]);
    pollster::block_on(pipeline.flush(kit.ctx())).unwrap();
    let users = kit.users(json!({"email_address": "shared@example.com"}));
    assert_eq!(users.len(), 1, "one user has the address: {users:?}");
    assert_eq!(users[0]["custom_attributes"], json!({"a": 1, "b": 3}));
}

#[test]
fn pages_of_ten_with_links_and_bad_cursors_and_ids() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let i = pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Users), kit.ctx())).unwrap();
    for _ in 0..25 {
        let b = pollster::block_on(begin(store, &i.id, kit.ctx())).unwrap();
        pollster::block_on(finish(store, &b, None, kit.ctx())).unwrap();
    }
    let path = format!("/cdi/integrations/{}/job_sync_status", i.id);
    let first = kit.send(Method::Get, &path, Value::Null);
    let link = first.header_value("Link").expect("link").to_string();
    assert!(!link.contains("rel=\"prev\"") && link.contains("rel=\"next\""), "{link}");
    let next = link.split('<').nth(1).and_then(|s| s.split('>').next()).unwrap().to_string();
    let second = kit.send(Method::Get, &next, Value::Null);
    let link2 = second.header_value("Link").unwrap().to_string();
    assert!(link2.contains("rel=\"prev\"") && link2.contains("rel=\"next\""), "{link2}");
    assert_eq!(
        kit.call(Method::Get, &format!("{path}?cursor=nope"), Value::Null),
        (400, json!({"message": "Invalid cursor"}))
    );
    assert_eq!(
        kit.call(Method::Get, "/cdi/integrations/nope/job_sync_status", Value::Null),
        (400, json!({"message": "Invalid integration ID"}))
    );
    // A one-item list has no Link header.
    assert!(kit.send(Method::Get, "/cdi/integrations", Value::Null).header_value("Link").is_none());
}

#[test]
fn a_cursor_of_the_whole_list_is_not_one_of_a_narrowed_list() {
    let kit = Kit::new();
    let store = kit.engine().store();
    let ws = WorkspaceName::parse("test").unwrap();
    let mut ids = Vec::new();
    for _ in 0..11 {
        ids.push(pollster::block_on(super::manage::create(store, &ws, &spec(DataKind::Users), kit.ctx())).unwrap().id);
    }
    let link = kit.send(Method::Get, "/cdi/integrations", Value::Null).header_value("Link").unwrap().to_string();
    let cursor = link.split("cursor=").nth(1).and_then(|c| c.split('>').next()).unwrap().to_string();
    for id in [&ids[0], &ids[10]] {
        let path = format!("/cdi/integrations?integration_id={id}&cursor={cursor}");
        assert_eq!(kit.call(Method::Get, &path, Value::Null), (400, json!({"message": "Invalid cursor"})));
    }
}

#[test]
fn schedules_are_bounded() {
    let with = |s: u64| Spec { schedule_secs: Some(s), ..spec(DataKind::Users) }.check();
    assert!(with(60).is_ok() && with(366 * 86_400).is_ok());
    assert!(with(59).is_err() && with(366 * 86_400 + 1).is_err() && with(u64::MAX).is_err());
}
