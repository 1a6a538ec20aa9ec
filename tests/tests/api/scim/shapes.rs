//! Snapshots of every SCIM success and error shape (values that differ between
//! runs redacted). They live here, not in `shapes.rs`, because SCIM requests must
//! run before the rate-limit step uses up the company's day.

use engage_tests::{send, unique_email, Reply, Scim};
use serde_json::{json, Value};

use super::user;

/// Status, SCIM-relevant headers and the body, with run-specific values replaced.
fn shape(r: &Reply, replace: &[(&str, &str)]) -> Value {
    let mut text = r.body.to_string();
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    let mut body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    redact(&mut body);
    let mut v = json!({"status": r.status, "body": body});
    for h in ["content-type", "etag", "allow", "www-authenticate"] {
        if let Some(x) = r.header(h) {
            v[h] = json!(x);
        }
    }
    if r.header("location").is_some() {
        v["location"] = json!("[location]");
    }
    v
}

fn redact(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match k.as_str() {
                    "id" | "createdAt" | "created" | "lastModified" | "location" if val.is_string() => {
                        *val = json!(format!("[{k}]"))
                    }
                    _ => redact(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("shape");
    let names = [(email.as_str(), "[userName]")];
    let mut body = user(&email);
    body["externalId"] = json!("idp-1");
    body["permissions"] = json!({
        "companyPermissions": ["admin"],
        "roles": [{"roleName": "Editor"}],
        "appGroup": [{"appGroupName": "W", "appGroupPermissions": ["basic_access"], "team": [{"teamName": "T", "teamPermissions": ["admin"]}]}],
    });
    let created = scim.call("POST", "/scim/v2/Users", Some(body)).await;
    let id = created.body["id"].as_str().expect("id").to_string();
    let got = scim.get(&format!("/scim/v2/Users/{id}")).await;
    let not_modified =
        scim.call_with("GET", &format!("/scim/v2/Users/{id}"), &[("If-None-Match", "W/\"1\"")], None).await;
    let me = scim.get("/scim/v2/Me").await;
    let bulk = scim
        .call(
            "POST",
            "/scim/v2/Bulk",
            Some(json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"], "Operations": []})),
        )
        .await;
    let listed = scim.get(&super::by_name(&email)).await;
    let taken = scim.call("POST", "/scim/v2/Users", Some(user(&email))).await;
    let invalid = scim.call("POST", "/scim/v2/Users", Some(json!({"schemas": [super::USER_URN]}))).await;
    let syntax = scim.call("POST", "/scim/v2/Users", Some(json!({"schemas": [super::USER_URN], "x": 1}))).await;
    let filter = scim.get("/scim/v2/Users?filter=title%20eq%20%22x%22").await;
    let auth = format!("Bearer {}", scim.token);
    let stale = send(
        "DELETE",
        &format!("/scim/v2/Users/{id}"),
        &[("Authorization", &auth), ("X-Request-Origin", &scim.origin), ("If-Match", "W/\"9\"")],
        None,
    )
    .await;
    let deleted = scim.call("DELETE", &format!("/scim/v2/Users/{id}"), None).await;
    let missing = scim.get(&format!("/scim/v2/Users/{id}")).await;
    let unauthorized = send("GET", "/scim/v2/Users", &[], None).await;
    let path_error = scim
        .call(
            "PATCH",
            "/scim/v2/Users/x",
            Some(
                json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": [{"op": "remove"}]}),
            ),
        )
        .await;
    let method = scim.call("PUT", "/scim/v2/Users", Some(json!({}))).await;
    let media = send(
        "POST",
        "/scim/v2/Users",
        &[("Authorization", &auth), ("X-Request-Origin", &scim.origin), ("Content-Type", "text/xml")],
        Some(b"<user/>".to_vec()),
    )
    .await;
    let too_large = send(
        "POST",
        "/scim/v2/Users",
        &[("Authorization", &auth), ("X-Request-Origin", &scim.origin)],
        Some(vec![b' '; 4 * 1024 * 1024 + 1]),
    )
    .await;
    insta::assert_json_snapshot!(
        "scim_users",
        json!({
            "create": shape(&created, &names),
            "get": shape(&got, &names),
            "get_not_modified": shape(&not_modified, &names),
            "filter": shape(&listed, &names),
            "delete": shape(&deleted, &names),
        })
    );
    insta::assert_json_snapshot!(
        "scim_errors",
        json!({
            "409_uniqueness": shape(&taken, &names),
            "400_invalid_value": shape(&invalid, &names),
            "400_invalid_syntax": shape(&syntax, &names),
            "400_invalid_filter": shape(&filter, &names),
            "412_if_match": shape(&stale, &names),
            "404_not_found": shape(&missing, &names),
            "401_unauthorized": shape(&unauthorized, &names),
            "400_no_target": shape(&path_error, &names),
            "405_method": shape(&method, &names),
            "415_media_type": shape(&media, &names),
            "413_too_large": shape(&too_large, &names),
            "501_me": shape(&me, &names),
            "501_bulk": shape(&bulk, &names),
        })
    );
    let base = engage_tests::host().base.clone();
    let host = [(base.as_str(), "[base]")];
    insta::assert_json_snapshot!(
        "scim_discovery",
        json!({
            "service_provider_config": shape(&scim.get("/scim/v2/ServiceProviderConfig").await, &host),
            "resource_types": shape(&scim.get("/scim/v2/ResourceTypes").await, &host),
            "schemas": shape(&scim.get("/scim/v2/Schemas").await, &host),
        })
    );
}
