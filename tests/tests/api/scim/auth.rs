//! SCIM tokens: separate from API keys, each valid only with the origin it was made for.

use engage_tests::{admin, send, Api, Scim};
use serde_json::json;

use super::assert_error;

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let bearer = format!("Bearer {}", scim.token);
    let path = "/scim/v2/Users";

    let ok = scim.get(path).await;
    assert_eq!(ok.status, 200, "{}", ok.body);

    // The origin is compared without case or a trailing slash.
    let loose = format!("{}/", scim.origin.to_ascii_uppercase());
    assert_eq!(send("GET", path, &[("Authorization", &bearer), ("X-Request-Origin", &loose)], None).await.status, 200);

    let missing = send("GET", path, &[], None).await;
    assert!(assert_error(&missing, 401, None).contains("X-Request-Origin"));
    assert_eq!(missing.header("www-authenticate"), Some("Bearer realm=\"scim\""));
    let no_origin = send("GET", path, &[("Authorization", &bearer)], None).await;
    assert_error(&no_origin, 401, None);
    let other_origin =
        send("GET", path, &[("Authorization", &bearer), ("X-Request-Origin", "https://elsewhere.test")], None).await;
    let unknown = send(
        "GET",
        path,
        &[("Authorization", "Bearer scim_00000000000000000000000000000000"), ("X-Request-Origin", &scim.origin)],
        None,
    )
    .await;
    // A wrong origin answers exactly as an unknown token does.
    assert_eq!(assert_error(&other_origin, 401, None), assert_error(&unknown, 401, None));
    let basic = send("GET", path, &[("Authorization", "Basic abc"), ("X-Request-Origin", &scim.origin)], None).await;
    assert_error(&basic, 401, None);

    // API keys are not SCIM tokens, nor the other way round.
    let api = Api::new().await;
    let key = format!("Bearer {}", api.key);
    assert_error(
        &send("GET", path, &[("Authorization", &key), ("X-Request-Origin", &scim.origin)], None).await,
        401,
        None,
    );
    let as_key = send("POST", "/users/track", &[("Authorization", &bearer)], Some(b"{}".to_vec())).await;
    assert_eq!(
        (as_key.status, as_key.body["message"].clone()),
        (401, json!(format!("Invalid API key: {}", scim.token)))
    );

    // Tokens are made for an origin.
    for bad in [json!({}), json!({"origin": ""}), json!({"origin": "has space"}), json!({"origin": 5})] {
        let r = admin("POST", "/_engage/scim-tokens", bad.clone()).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}
