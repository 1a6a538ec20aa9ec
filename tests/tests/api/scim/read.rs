//! GET /scim/v2/Users/{id}, the `userName eq` filter (quoting, escapes, case, what
//! is refused), paging, attribute selection and POST `.search`.

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, by_name, encode, user, LIST_URN};

fn ids(list: &Value) -> Vec<String> {
    list["Resources"].as_array().expect("Resources").iter().map(|u| u["id"].as_str().expect("id").to_string()).collect()
}

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("Read.Me");
    let created = scim.create(user(&email)).await;
    let id = created["id"].as_str().expect("id");

    let one = scim.get(&format!("/scim/v2/Users/{id}")).await;
    assert_eq!((one.status, &one.body), (200, &created));
    assert_eq!(one.header("etag"), Some("W/\"1\""));
    assert_eq!(assert_error(&scim.get("/scim/v2/Users/no-such-id").await, 404, None), "User not found");

    filters(&scim, &email, id).await;
    paging(&scim).await;
    selection(&scim, id).await;
    search(&scim, &email, id).await;
}

async fn filters(scim: &Scim, email: &str, id: &str) {
    let hit = |r: &engage_tests::Reply| (r.status, r.body["totalResults"].clone(), ids(&r.body));
    let found = (200, json!(1), vec![id.to_string()]);
    assert_eq!(hit(&scim.get(&by_name(email)).await), found);
    let r = scim.get(&by_name(email)).await;
    assert_eq!(
        (&r.body["schemas"], &r.body["startIndex"], &r.body["itemsPerPage"]),
        (&json!([LIST_URN]), &json!(1), &json!(1))
    );
    // Case-insensitive value, attribute and operator; the schema-qualified attribute.
    assert_eq!(hit(&scim.get(&by_name(&email.to_uppercase())).await), found);
    let spelled = |f: String| format!("/scim/v2/Users?filter={}", encode(&f));
    assert_eq!(hit(&scim.get(&spelled(format!("USERNAME EQ \"{email}\""))).await), found);
    assert_eq!(
        hit(&scim.get(&spelled(format!("urn:ietf:params:scim:schemas:core:2.0:User:userName eq \"{email}\""))).await),
        found
    );
    // A JSON escape in the value (\u0040 is '@').
    let escaped = email.replace('@', "\\u0040");
    assert_eq!(hit(&scim.get(&spelled(format!("userName eq \"{escaped}\""))).await), found);
    // The spec's example: spaces as %20, quotes as %22.
    let raw = format!("/scim/v2/Users?filter=userName%20eq%20%22{}%22", email.replace('@', "%40"));
    assert_eq!(hit(&scim.get(&raw).await), found);
    let none = scim.get(&by_name("nobody@example.com")).await;
    assert_eq!((none.status, &none.body["totalResults"], &none.body["Resources"]), (200, &json!(0), &json!([])));

    let refused = [
        (format!("userName eq \"{email}\" and userName eq \"x\""), "'and', 'or'"),
        (format!("userName eq \"{email}\" or userName eq \"x\""), "'and', 'or'"),
        (format!("not (userName eq \"{email}\")"), "'and', 'or'"),
        ("emails[type eq \"work\"]".to_string(), "grouping"),
        ("userName co \"example\"".to_string(), "only 'eq'"),
        ("userName pr".to_string(), "only 'eq'"),
        ("displayName eq \"Ada\"".to_string(), "only userName"),
        (format!("userName eq {email}"), "quoted string"),
        ("userName eq 42".to_string(), "quoted string"),
        ("userName eq \"open".to_string(), "not closed"),
        ("userName eq \"bad\\x\"".to_string(), "escape"),
        ("userName like \"a\"".to_string(), "not a SCIM comparison operator"),
        ("%%% garbage".to_string(), "not a SCIM comparison operator"),
        ("userName eq \"a\" trailing".to_string(), "expected"),
        ("\u{1}".to_string(), "expected"),
        (String::new(), "empty"),
    ];
    for (filter, needle) in refused {
        let detail = assert_error(&scim.get(&spelled(filter.clone())).await, 400, Some("invalidFilter"));
        assert!(detail.contains(needle), "{filter}: '{detail}' lacks '{needle}'");
    }
}

async fn paging(scim: &Scim) {
    // Three more users, created last: they are the last three in creation order.
    let mut mine = Vec::new();
    for i in 0..3 {
        engage_tests::tick().await;
        mine.push(scim.create(user(&unique_email(&format!("page{i}")))).await["id"].as_str().unwrap().to_string());
    }
    // Every user, a page of the most (100) at a time.
    let first = scim.get("/scim/v2/Users").await;
    let total = first.body["totalResults"].as_u64().expect("total") as usize;
    assert!(total >= 4, "{total}");
    let mut every = ids(&first.body);
    assert_eq!(every.len(), total.min(100));
    while every.len() < total {
        let next = scim.get(&format!("/scim/v2/Users?startIndex={}", every.len() + 1)).await;
        every.extend(ids(&next.body));
    }
    assert_eq!(every.len(), total);
    assert_eq!(&every[total - 3..], &mine[..]);

    // Pages of two walk the last users once each, in order.
    let from = total.saturating_sub(6).max(1);
    let mut walked = Vec::new();
    let mut start = from;
    while start <= total {
        let page = scim.get(&format!("/scim/v2/Users?startIndex={start}&count=2")).await;
        assert_eq!((&page.body["startIndex"], &page.body["totalResults"]), (&json!(start), &json!(total)));
        let got = ids(&page.body);
        assert_eq!(page.body["itemsPerPage"], json!(got.len()));
        assert!(!got.is_empty() && got.len() <= 2);
        walked.extend(got);
        start += 2;
    }
    assert_eq!(walked, every[from - 1..]);

    let page = |q: &str| {
        let q = q.to_string();
        async move {
            let r = scim.get(&format!("/scim/v2/Users?{q}")).await;
            assert_eq!(r.status, 200, "{q}: {}", r.body);
            (
                r.body["startIndex"].as_u64().unwrap(),
                ids(&r.body).len(),
                r.body["totalResults"].as_u64().unwrap() as usize,
            )
        }
    };
    assert_eq!(page("count=0").await, (1, 0, total));
    assert_eq!(page(&format!("startIndex={total}")).await, (total as u64, 1, total));
    assert_eq!(page(&format!("startIndex={}", total + 1)).await, (total as u64 + 1, 0, total));
    // Below the minimums reads as the minimums (RFC 7644 §3.4.2.4).
    assert_eq!(page("startIndex=0&count=1").await, (1, 1, total));
    assert_eq!(page("startIndex=-5&count=1").await, (1, 1, total));
    assert_eq!(page("count=-1").await, (1, 0, total));
    assert_eq!(page("count=100000").await.1, total.min(100));
    for bad in ["startIndex=abc", "count=1.5", "count=", "startIndex=99999999999999999999"] {
        let detail = assert_error(&scim.get(&format!("/scim/v2/Users?{bad}")).await, 400, Some("invalidValue"));
        assert!(detail.contains("integer"), "{bad}: {detail}");
    }
    assert!(
        assert_error(&scim.get("/scim/v2/Users?sortBy=userName").await, 400, Some("invalidValue")).contains("sorting")
    );
}

async fn selection(scim: &Scim, id: &str) {
    let only = scim.get(&format!("/scim/v2/Users/{id}?attributes=userName,name.givenName")).await;
    let mut keys: Vec<&String> = only.body.as_object().expect("object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["id", "name", "schemas", "userName"]);
    assert_eq!(only.body["name"], json!({"givenName": "Ada"}), "a sub-attribute selects only itself");
    let no_given = scim.get(&format!("/scim/v2/Users/{id}?excludedAttributes=name.givenName")).await;
    assert_eq!(no_given.body["name"], json!({"familyName": "Lovelace"}));
    let except = scim.get(&format!("/scim/v2/Users/{id}?excludedAttributes=permissions,meta")).await;
    assert!(except.body.get("permissions").is_none() && except.body.get("meta").is_none());
    assert!(except.body.get("userName").is_some() && except.body.get("id").is_some());
    let listed = scim.get("/scim/v2/Users?attributes=urn:ietf:params:scim:schemas:core:2.0:User:department").await;
    for u in listed.body["Resources"].as_array().expect("Resources") {
        let mut keys: Vec<&String> = u.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["department", "id", "schemas"]);
    }
    let both = scim.get(&format!("/scim/v2/Users/{id}?attributes=userName&excludedAttributes=name")).await;
    assert_error(&both, 400, Some("invalidValue"));
}

async fn search(scim: &Scim, email: &str, id: &str) {
    let request = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
        "filter": format!("userName eq \"{}\"", email.to_uppercase()),
        "attributes": ["userName"],
    });
    for path in ["/scim/v2/.search", "/scim/v2/Users/.search"] {
        let r = scim.call("POST", path, Some(request.clone())).await;
        assert_eq!((r.status, &r.body["totalResults"]), (200, &json!(1)), "{path}: {}", r.body);
        assert_eq!(r.body["Resources"][0], json!({"schemas": [super::USER_URN], "id": id, "userName": email}));
    }
    let paged =
        json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "startIndex": 2, "count": 1});
    let r = scim.call("POST", "/scim/v2/.search", Some(paged)).await;
    assert_eq!((&r.body["startIndex"], r.body["Resources"].as_array().map(Vec::len)), (&json!(2), Some(1)));
    let bad = [
        (json!({"filter": "userName eq \"x\""}), "invalidValue"),
        (
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": "userName sw \"x\""}),
            "invalidFilter",
        ),
        (
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "sortBy": "userName"}),
            "invalidValue",
        ),
        (json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "count": "ten"}), "invalidValue"),
        (json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "where": "x"}), "invalidSyntax"),
    ];
    for (body, scim_type) in bad {
        assert_error(&scim.call("POST", "/scim/v2/.search", Some(body)).await, 400, Some(scim_type));
    }
}
