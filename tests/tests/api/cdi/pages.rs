//! The status endpoints' pages: ten newest first, the `Link` header walked to the
//! end and back, `Invalid cursor`, `Invalid integration ID`, permissions, and no
//! crossing of workspaces. Integrations are made on every host; jobs where the
//! host runs syncs.

use engage_tests::Api;
use serde_json::{json, Value};

use super::Warehouse;

/// The `Link` header's URLs by `rel`.
fn links(header: Option<&str>) -> (Option<String>, Option<String>) {
    let mut prev = None;
    let mut next = None;
    for part in header.unwrap_or("").split(',').filter(|p| !p.is_empty()) {
        let url = part.split('<').nth(1).and_then(|s| s.split('>').next()).expect("<url>").to_string();
        if part.ends_with("rel=\"prev\"") {
            prev = Some(url);
        } else if part.ends_with("rel=\"next\"") {
            next = Some(url);
        } else {
            panic!("unexpected Link entry {part}");
        }
    }
    (prev, next)
}

/// Walks a list to its end and back; returns every item in order.
async fn walk(api: &Api, first: &str, key: &str) -> Vec<Value> {
    let mut seen: Vec<Value> = Vec::new();
    let mut pages = Vec::new();
    let mut url = first.to_string();
    loop {
        let r = api.get(&url).await;
        assert_eq!(r.status, 200, "{url}: {}", r.body);
        let items = r.body["results"].as_array().expect("results").clone();
        assert!(items.len() <= 10);
        let (prev, next) = links(r.header("link"));
        assert_eq!(prev.is_some(), !pages.is_empty(), "prev only with a cursor, before the first page none: {url}");
        pages.push(items.iter().map(|i| i[key].clone()).collect::<Vec<_>>());
        seen.extend(items);
        match next {
            Some(n) => {
                assert!(n.starts_with(first) && n.contains("?cursor="), "{n}");
                url = n;
            }
            None => break,
        }
    }
    // And back, page by page, through the prev links.
    let mut back = pages.len() - 1;
    loop {
        let (prev, _) = links(api.get(&url).await.header("link"));
        let Some(p) = prev else { break };
        back -= 1;
        let r = api.get(&p).await;
        let items: Vec<Value> = r.body["results"].as_array().unwrap().iter().map(|i| i[key].clone()).collect();
        assert_eq!(items, pages[back], "going back reaches the same pages");
        url = p;
    }
    assert_eq!(back, 0, "walked back to the first page");
    seen
}

#[tokio::test]
async fn twenty_five_integrations_in_pages_of_ten() {
    let api = Api::new().await;
    let mut ids = Vec::new();
    for n in 0..25 {
        ids.push(api.integration(&format!("i{n}"), "sqlite:/tmp/none.db", "T", "users").await);
        engage_tests::tick().await;
    }
    let first = api.get("/cdi/integrations").await;
    assert_eq!(first.body["results"].as_array().map(Vec::len), Some(10));
    assert_eq!(first.body["message"], "success");
    let all = walk(&api, "/cdi/integrations", "integration_id").await;
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(all.iter().map(|i| i["integration_id"].as_str().unwrap().to_string()).collect::<Vec<_>>(), newest_first);
    // One integration by id; an unknown id.
    let one = api.get(&format!("/cdi/integrations?integration_id={}", ids[3])).await;
    assert_eq!(one.body["results"].as_array().map(Vec::len), Some(1));
    assert!(one.header("link").is_none());
    assert_eq!(
        api.get("/cdi/integrations?integration_id=nope").await.body,
        json!({"message": "Invalid integration ID"})
    );
    // Tampered and foreign cursors.
    let (_, next) = links(first.header("link"));
    let next = next.expect("next");
    let cursor = next.split("cursor=").nth(1).unwrap();
    for bad in ["nope", "", &format!("{cursor}x"), &cursor[1..]] {
        let r = api.get(&format!("/cdi/integrations?cursor={bad}")).await;
        assert_eq!((r.status, &r.body), (400, &json!({"message": "Invalid cursor"})), "{bad}");
    }
    let other = Api::new().await;
    other.integration("mine", "sqlite:/tmp/none.db", "T", "users").await;
    let r = other.get(&format!("/cdi/integrations?cursor={cursor}")).await;
    assert_eq!(r.status, 400, "another workspace's cursor");
    assert_eq!(other.get("/cdi/integrations").await.body["results"].as_array().map(Vec::len), Some(1), "only its own");
    let foreign = other.get(&format!("/cdi/integrations/{}/job_sync_status", ids[0])).await;
    assert_eq!((foreign.status, foreign.body), (400, json!({"message": "Invalid integration ID"})));
    // Ten or fewer: no Link header at all.
    let few = Api::new().await;
    for n in 0..10 {
        few.integration(&format!("f{n}"), "sqlite:/tmp/none.db", "T", "users").await;
    }
    let r = few.get("/cdi/integrations").await;
    assert_eq!((r.body["results"].as_array().map(Vec::len), r.header("link")), (Some(10), None));
}

#[tokio::test]
async fn twenty_five_jobs_in_pages_of_ten() {
    let api = Api::new().await;
    let wh = Warehouse::new(&[("USERS_SYNC", true)]);
    let id = api.integration("jobs", &wh.source(), "USERS_SYNC", "users").await;
    let path = format!("/cdi/integrations/{id}/job_sync_status");
    let empty = api.get(&path).await;
    assert_eq!((empty.status, &empty.body), (200, &json!({"results": [], "message": "success"})));
    for n in 0..25 {
        wh.add("USERS_SYNC", &[(&format!("2024-06-01T00:00:{n:02}Z"), Some(&format!("j{n}")), r#"{"n": 1}"#)]);
        if api.sync(&id).await.is_none() {
            return;
        }
    }
    let jobs = walk(&api, &path, "last_timestamp_synced").await;
    assert_eq!(jobs.len(), 25);
    let expected: Vec<Value> = (0..25).rev().map(|n| json!(format!("2024-06-01T00:00:{n:02}.000Z"))).collect();
    assert_eq!(jobs.iter().map(|j| j["last_timestamp_synced"].clone()).collect::<Vec<_>>(), expected, "newest first");
    assert!(jobs.iter().all(|j| j["job_status"] == "success" && j["rows_synced"] == 1));
    assert_eq!(api.get(&format!("{path}?cursor=abc")).await.body, json!({"message": "Invalid cursor"}));
    // A cursor of the integrations list is not one of this list.
    let ints = api.get("/cdi/integrations").await;
    assert!(ints.header("link").is_none());
}

#[tokio::test]
async fn each_endpoint_needs_its_permission() {
    let list_only = Api::with_permissions(json!(["cdi.integration_list"])).await;
    assert_eq!(list_only.get("/cdi/integrations").await.status, 200);
    let r = list_only.get("/cdi/integrations/x/job_sync_status").await;
    assert_eq!(r.status, 403);
    let jobs_only = Api::with_permissions(json!(["cdi.integration_job_status"])).await;
    assert_eq!(jobs_only.get("/cdi/integrations").await.status, 403);
    assert_eq!(jobs_only.get("/cdi/integrations/x/job_sync_status").await.status, 400);
    let r = jobs_only.get("/cdi/integrations/x/job_sync_status").await;
    assert_eq!(r.header("x-ratelimit-limit"), Some("100"));
    assert_eq!(list_only.get("/cdi/integrations").await.header("x-ratelimit-limit"), Some("50"));
}
