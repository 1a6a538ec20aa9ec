//! PUT /scim/v2/Users/{id}: a replacement of every writable attribute; `id` and
//! `createdAt` stay; `userName` may change while it stays unique; `If-Match`.

use engage_tests::{unique_email, Scim};
use serde_json::json;

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

    // A new userName, name, department; permissions and externalId left out are gone.
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
    assert!(u.get("externalId").is_none());
    assert!(u.get("permissions").is_none(), "no permissions: no attribute");
    assert!(u["meta"]["lastModified"].as_str() > created["meta"]["lastModified"].as_str());
    assert_eq!(scim.get(&path).await.body, *u, "a later read sees the replacement");
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

    // id and createdAt are immutable: the same values pass, others are refused.
    let mut same = user(&renamed);
    same["id"] = json!(id);
    same["createdAt"] = created["createdAt"].clone();
    assert_eq!(scim.call("PUT", &path, Some(same)).await.status, 200);
    let mut moved = user(&renamed);
    moved["id"] = other["id"].clone();
    assert!(assert_error(&scim.call("PUT", &path, Some(moved)).await, 400, Some("mutability")).contains("'id'"));
    let mut older = user(&renamed);
    older["createdAt"] = json!("Thursday, January 1, 1970 12:00:00 AM");
    assert!(assert_error(&scim.call("PUT", &path, Some(older)).await, 400, Some("mutability")).contains("createdAt"));

    // If-Match: the current version (weak or strong, or *) passes, a stale one is 412.
    let current = scim.get(&path).await.header("etag").expect("etag").to_string();
    let stale = created["meta"]["version"].as_str().expect("version").to_string();
    let put_if = |tag: String| {
        let scim = scim.clone();
        let path = path.clone();
        let body = user(&renamed).to_string().into_bytes();
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
