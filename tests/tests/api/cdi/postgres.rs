//! Syncs from a real PostgreSQL server (`ENGAGE_TEST_POSTGRES_URL`, which
//! `tests/run.sh` starts and sets; required on the native host when `CI` is set).
//! Tables are made with `psql`.

use engage_tests::Api;
use serde_json::json;

fn psql(url: &str, sql: &str) {
    let out = std::process::Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .expect("psql runs");
    assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
}

fn url() -> Option<String> {
    match std::env::var("ENGAGE_TEST_POSTGRES_URL") {
        Ok(u) => Some(u),
        Err(_) => {
            // CI runs them against the native host (tests/run.sh starts the server);
            // hosts that run no syncs need no PostgreSQL.
            let native = std::env::var("ENGAGE_BASE_URL").is_err();
            assert!(
                !(native && std::env::var("CI").is_ok()),
                "CI must run the PostgreSQL tests: set ENGAGE_TEST_POSTGRES_URL"
            );
            eprintln!("skipped: ENGAGE_TEST_POSTGRES_URL is not set");
            None
        }
    }
}

#[tokio::test]
async fn a_postgres_table_syncs_incrementally() {
    let Some(url) = url() else { return };
    let api = Api::new().await;
    let table = format!("users_{}", api.workspace.replace(['-', '.'], "_").to_lowercase());
    psql(
        &url,
        &format!(
            "CREATE TABLE {table} (updated_at timestamptz NOT NULL, external_id varchar, alias_name varchar, \
         alias_label varchar, braze_id varchar, email varchar, phone varchar, payload varchar NOT NULL)"
        ),
    );
    psql(
        &url,
        &format!(
            "INSERT INTO {table} (updated_at, external_id, email, payload) VALUES \
         ('2024-01-01 00:00:00+00', 'p1', NULL, '{{\"color\": \"red\"}}'), \
         ('2024-01-01 00:00:01+00', NULL, 'p2@example.com', '{{\"color\": \"blue\"}}'), \
         ('2024-01-01 00:00:02+00', 'p3', NULL, '{{broken'), \
         ('2024-01-01 00:00:02.5+00', NULL, NULL, '{{}}')"
        ),
    );
    // Upper case, as the platform writes table names: matched regardless of case.
    let id = api.integration("pg", &url, &table.to_uppercase(), "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!(
        (&job["job_status"], &job["rows_synced"], &job["rows_failed_with_errors"]),
        (&json!("partial"), &json!(2), &json!(2)),
        "{job}"
    );
    assert_eq!(job["last_timestamp_synced"], "2024-01-01T00:00:02.500Z");
    assert_eq!(api.user("p1").await["custom_attributes"], json!({"color": "red"}));
    let by_email = api.users(json!({"email_address": "p2@example.com"})).await;
    assert_eq!(by_email[0]["custom_attributes"], json!({"color": "blue"}));
    psql(&url, &format!("INSERT INTO {table} (updated_at, external_id, payload) VALUES ('2024-01-02 00:00:00+00', 'p1', '{{\"color\": \"green\"}}')"));
    let second = api.sync(&id).await.expect("native");
    assert_eq!((&second["rows_synced"], &second["job_status"]), (&json!(1), &json!("success")));
    assert_eq!(api.user("p1").await["custom_attributes"], json!({"color": "green"}));
    let list = api.get("/cdi/integrations").await.body;
    assert_eq!(list["results"][0]["warehouse_type"], "postgres");
    // A missing table on a reachable server.
    let missing = api.integration("pg-missing", &url, "no_such_table", "users").await;
    assert_eq!(api.sync(&missing).await.expect("native")["job_status"], "config_error");
}

#[tokio::test]
async fn an_infinite_updated_at_does_not_stop_the_rows_around_it() {
    let Some(url) = url() else { return };
    let api = Api::new().await;
    let table = format!("inf_{}", api.workspace.replace(['-', '.'], "_").to_lowercase());
    psql(&url, &format!("CREATE TABLE {table} (updated_at timestamptz, external_id varchar, payload varchar)"));
    psql(
        &url,
        &format!(
            "INSERT INTO {table} VALUES ('2024-01-01 00:00:00+00', 'before', '{{\"n\": 1}}'), \
             ('infinity', 'forever', '{{\"n\": 2}}'), ('-infinity', 'never', '{{\"n\": 3}}'), \
             ('2024-01-01 00:00:01+00', 'after', '{{\"n\": 4}}')"
        ),
    );
    psql(&url, &format!("INSERT INTO {table} VALUES (NULL, 'nobody-knows', '{{\"n\": 6}}')"));
    let id = api.integration("inf", &url, &table, "users").await;
    let Some(job) = api.sync(&id).await else { return };
    // The rows around them sync; the three without a time fail, each job, with reasons.
    let counts = |j: &serde_json::Value| {
        (j["job_status"].clone(), j["rows_synced"].clone(), j["rows_failed_with_errors"].clone())
    };
    assert_eq!(counts(&job), (json!("partial"), json!(2), json!(3)), "{job}");
    assert_eq!(api.user("before").await["custom_attributes"], json!({"n": 1}));
    assert_eq!(api.user("after").await["custom_attributes"], json!({"n": 4}));
    let jobs = engage_tests::admin("GET", &format!("/_engage/cdi/integrations/{id}/jobs"), json!(null)).await;
    let reasons = jobs.body["jobs"][0]["row_errors"].to_string();
    assert!(
        reasons.contains("UPDATED_AT 'infinity' is not a time") && reasons.contains("UPDATED_AT is NULL"),
        "{reasons}"
    );
    psql(&url, &format!("INSERT INTO {table} VALUES ('2024-01-02 00:00:00+00', 'later', '{{\"n\": 5}}')"));
    let next = api.sync(&id).await.expect("native");
    assert_eq!(counts(&next), (json!("partial"), json!(1), json!(3)), "{next}");
}

#[tokio::test]
async fn postgresql_s_own_reason_is_kept_without_the_password() {
    let Some(url) = url() else { return };
    let api = Api::new().await;
    // The same server, a user that does not exist and a password.
    let (_, host_and_db) = url.split_once('@').expect("user@host in the URL");
    let wrong = format!("postgres://nobody_here:sekrit-pass@{host_and_db}");
    let id = api.integration("wrong", &wrong, "t", "users").await;
    let Some(job) = api.sync(&id).await else { return };
    assert_eq!(job["job_status"], "config_error", "{job}");
    let jobs = engage_tests::admin("GET", &format!("/_engage/cdi/integrations/{id}/jobs"), json!(null)).await;
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    let failure = jobs.body["jobs"][0]["failure"].as_str().unwrap_or_default().to_string();
    assert!(!jobs.body.to_string().contains("sekrit-pass"), "the password is never shown: {}", jobs.body);
    assert!(failure.contains("SQLSTATE 28"), "PostgreSQL's reason (an authorization SQLSTATE): {failure}");
}
