//! PUT /scim/v2/Users/{id}: a replacement of the writable attributes the body
//! gives; what it leaves out of `department`, `permissions`, `externalId` and
//! `active` stays, `null` unassigns; read-only values are ignored; `userName` may
//! change while it stays unique; a replacement that changes nothing is no new
//! version; `If-Match`.

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, by_name, user};

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("replace");
    let mut first = user(&email);
    first["permissions"] = json!({"companyPermissions": ["admin"]});
    first["externalId"] = json!("ext-1");
    let created = scim.create(first).await;
    let id = created["id"].as_str().expect("id").to_string();
    let path = format!("/scim/v2/Users/{id}");
    engage_tests::tick().await;

    // A new userName, name, department; permissions and externalId left out stay
    // (a provider that does not manage them must not wipe them).
    let renamed = unique_email("renamed");
    let mut next = user(&renamed);
    next["name"] = json!({"givenName": "Grace", "familyName": "Hopper"});
    next["department"] = json!("finance");
    let r = scim.call("PUT", &path, Some(next)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("etag"), Some("W/\"2\""));
    let u = &r.body;
    assert_eq!(
        (&u["id"], &u["createdAt"], &u["meta"]["created"]),
        (&created["id"], &created["createdAt"], &created["meta"]["created"])
    );
    assert_eq!(
        (&u["userName"], &u["department"], &u["name"]["givenName"]),
        (&json!(renamed), &json!("finance"), &json!("Grace"))
    );
    assert_eq!((&u["externalId"], &u["permissions"]), (&created["externalId"], &created["permissions"]));
    assert!(u["meta"]["lastModified"].as_str() > created["meta"]["lastModified"].as_str());
    assert_eq!(scim.get(&path).await.body, *u, "a later read sees the replacement");
    // `null` unassigns them.
    let mut cleared = user(&renamed);
    cleared["name"] = json!({"givenName": "Grace", "familyName": "Hopper"});
    cleared["department"] = json!("finance");
    cleared["permissions"] = Value::Null;
    cleared["externalId"] = Value::Null;
    let r = scim.call("PUT", &path, Some(cleared.clone())).await;
    assert_eq!((r.status, r.header("etag")), (200, Some("W/\"3\"")), "{}", r.body);
    assert!(r.body.get("externalId").is_none() && r.body.get("permissions").is_none(), "{}", r.body);
    // The same replacement again changes nothing: no new version, no new time.
    engage_tests::tick().await;
    let again = scim.call("PUT", &path, Some(cleared)).await;
    assert_eq!((again.status, again.header("etag")), (200, Some("W/\"3\"")));
    assert_eq!(again.body, r.body);
    // A department left out stays (Okta's PUT may not carry one).
    let mut no_department = user(&renamed);
    no_department["name"] = json!({"givenName": "Grace", "familyName": "Hopper"});
    no_department.as_object_mut().expect("object").remove("department");
    let kept = scim.call("PUT", &path, Some(no_department)).await;
    assert_eq!((kept.status, &kept.body["department"], kept.header("etag")), (200, &json!("finance"), Some("W/\"3\"")));
    // The old name is free, the new one found.
    assert_eq!(scim.get(&by_name(&email)).await.body["totalResults"], 0);
    assert_eq!(scim.get(&by_name(&renamed)).await.body["Resources"][0]["id"], id.as_str());
    let other = scim.create(user(&email)).await;

    // Another user's name (in another case) is taken; nothing changes.
    let clash = scim.call("PUT", &path, Some(user(&email.to_uppercase()))).await;
    assert_error(&clash, 409, Some("uniqueness"));
    assert_eq!(scim.get(&path).await.body["userName"], renamed.as_str());
    // Its own name in another case is fine.
    let recased = scim.call("PUT", &path, Some(user(&renamed.to_uppercase()))).await;
    assert_eq!((recased.status, &recased.body["userName"]), (200, &json!(renamed.to_uppercase())));
    assert_eq!(scim.get(&by_name(&renamed)).await.body["totalResults"], 1);

    // id, createdAt, meta and lastSignInAt are read-only: a PUT ignores them, whatever
    // they say (RFC 7644 §3.5.1), and the user keeps its own.
    let mut same = user(&renamed);
    same["id"] = json!(id);
    same["createdAt"] = created["createdAt"].clone();
    assert_eq!(scim.call("PUT", &path, Some(same)).await.status, 200);
    let mut moved = user(&renamed);
    moved["id"] = other["id"].clone();
    moved["createdAt"] = json!("Thursday, January 1, 1970 12:00:00 AM");
    moved["meta"] = json!({"resourceType": "User", "version": "W/\"99\""});
    moved["lastSignInAt"] = json!("Friday, January 2, 1970 12:00:00 AM");
    let ignored = scim.call("PUT", &path, Some(moved)).await;
    assert_eq!(ignored.status, 200, "{}", ignored.body);
    assert_eq!((&ignored.body["id"], &ignored.body["createdAt"]), (&json!(id), &created["createdAt"]));
    assert!(ignored.body.get("lastSignInAt").is_none());
    assert_eq!(
        scim.get(&format!("/scim/v2/Users/{}", other["id"].as_str().expect("id"))).await.body["userName"],
        json!(email)
    );

    // If-Match: the current version (weak or strong, or *) passes, a stale one is 412.
    let current = scim.get(&path).await.header("etag").expect("etag").to_string();
    let stale = created["meta"]["version"].as_str().expect("version").to_string();
    let put_if = |tag: String| {
        let scim = scim.clone();
        let path = path.clone();
        // Each body differs (its externalId is the tag), so each success is a change.
        let mut body = user(&renamed);
        body["externalId"] = json!(tag);
        let body = body.to_string().into_bytes();
        async move {
            let auth = format!("Bearer {}", scim.token);
            let headers = [
                ("Authorization", auth.as_str()),
                ("X-Request-Origin", scim.origin.as_str()),
                ("If-Match", tag.as_str()),
            ];
            engage_tests::send("PUT", &path, &headers, Some(body)).await
        }
    };
    assert_error(&put_if(stale).await, 412, None);
    let ok = put_if(current.clone()).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(put_if(current.trim_start_matches("W/").to_string()).await.status, 412, "the version moved on");
    assert_eq!(put_if("*".into()).await.status, 200);

    // Bad bodies change nothing; an unknown id is 404.
    let before = scim.get(&path).await.body;
    let mut bad = user(&renamed);
    bad["department"] = json!("sales");
    assert_error(&scim.call("PUT", &path, Some(bad)).await, 400, Some("invalidValue"));
    assert_eq!(scim.get(&path).await.body, before);
    assert_error(&scim.call("PUT", "/scim/v2/Users/nobody", Some(user(&unique_email("x")))).await, 404, None);
}
