//! GET /scim/v2/Users/{id} (and `If-None-Match`), filters (quoting, escapes, case,
//! RFC 7644's grammar, what is refused and where), paging, attribute selection and
//! POST `.search`.

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
    // A client whose copy is current gets 304 and no body (RFC 7644 §3.14).
    for tag in ["W/\"1\"", "\"1\"", "W/\"7\", W/\"1\"", "*"] {
        let r = scim.call_with("GET", &format!("/scim/v2/Users/{id}"), &[("If-None-Match", tag)], None).await;
        assert_eq!((r.status, r.header("etag"), r.raw.is_empty()), (304, Some("W/\"1\""), true), "{tag}");
    }
    let stale = scim.call_with("GET", &format!("/scim/v2/Users/{id}"), &[("If-None-Match", "W/\"2\"")], None).await;
    assert_eq!((stale.status, &stale.body), (200, &created));
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

    // Every part of RFC 7644's grammar; each is answered by evaluating it.
    let ext = format!("ext-{email}");
    let mut other = user(&unique_email("filter.other"));
    other["externalId"] = json!(ext);
    other["active"] = json!(false);
    other["department"] = json!("finance");
    other["permissions"] = json!({"companyPermissions": ["admin"], "roles": [{"roleName": "Marketer", "roleId": "r-7"}],
        "appGroup": [{"appGroupName": "Shop", "appGroupPermissions": ["view_pii"]}]});
    let other = scim.create(other).await;
    let other_id = other["id"].as_str().expect("id").to_string();
    let mut both = vec![id.to_string(), other_id.clone()];
    both.sort();
    let sorted = |r: &engage_tests::Reply| {
        let mut v = ids(&r.body);
        v.sort();
        (r.status, v)
    };
    let one = |x: &str| (200, vec![x.to_string()]);
    let none = (200, Vec::new());
    let local = email.split('@').next().expect("local part");
    let cases: Vec<(String, (u16, Vec<String>))> = vec![
        (format!("externalId eq \"{ext}\""), one(&other_id)),
        (format!("externalId eq \"{}\"", ext.to_uppercase()), none.clone()),
        (format!("userName eq \"{email}\" or externalId eq \"{ext}\""), (200, both.clone())),
        (format!("(userName eq \"{email}\" or externalId eq \"{ext}\") and active eq false"), one(&other_id)),
        (format!("(userName eq \"{email}\" or externalId eq \"{ext}\") and not (active eq false)"), one(id)),
        (format!("externalId sw \"ext-\" and externalId ew \"{email}\""), one(&other_id)),
        (format!("externalId co \"{local}\" and active ne true"), one(&other_id)),
        (format!("id eq \"{other_id}\" and permissions.roles[roleName eq \"marketer\" and roleId pr]"), one(&other_id)),
        (
            format!("id eq \"{other_id}\" and permissions.appGroup[appGroupName eq \"Shop\" and appGroupPermissions eq \"view_pii\"]"),
            one(&other_id),
        ),
        (format!("id eq \"{other_id}\" and permissions.companyPermissions eq \"admin\""), one(&other_id)),
        (format!("id eq \"{id}\" and permissions pr"), none.clone()),
        (
            format!("externalId eq \"{ext}\" and urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq \"finance\""),
            one(&other_id),
        ),
        (
            format!("id eq \"{id}\" and meta.created gt \"2000-01-01T00:00:00Z\" and meta.lastModified le \"2999-01-01T00:00:00+01:00\""),
            one(id),
        ),
        (format!("id eq \"{id}\" and lastSignInAt pr"), none.clone()),
    ];
    for (filter, want) in cases {
        let r = scim.get(&spelled(filter.clone())).await;
        assert_eq!(sorted(&r), want, "{filter}: {}", r.body);
        assert_eq!(r.body["totalResults"], json!(want.1.len()), "{filter}");
    }

    let refused = [
        ("emails[type eq \"work\"]".to_string(), "character 1: 'emails' is not an attribute"),
        ("nickName eq \"Ada\"".to_string(), "character 1: 'nickName' is not an attribute"),
        (format!("userName eq {email}"), "character 13: 'userName' is compared with a quoted string"),
        ("userName eq 42".to_string(), "quoted string"),
        ("userName eq \"open".to_string(), "character 13: this string is not closed"),
        ("userName eq \"bad\\x\"".to_string(), "escape"),
        ("userName like \"a\"".to_string(), "character 10: 'like' is not a SCIM operator"),
        ("%%% garbage".to_string(), "not an attribute"),
        ("userName eq \"a\" trailing".to_string(), "character 17: unexpected 'trailing'"),
        ("active gt false".to_string(), "boolean"),
        ("active eq \"false\"".to_string(), "true or false"),
        ("name eq \"Ada\"".to_string(), "sub-attributes"),
        ("meta.created gt \"last week\"".to_string(), "RFC 3339"),
        ("(userName pr".to_string(), "expected ')'"),
        ("\u{1}".to_string(), "not an attribute"),
        // Okta's case-sensitivity check: a bare value is no filter.
        (email.to_uppercase(), "not an attribute"),
        ("userName".to_string(), "character 9: expected an operator"),
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
    assert_eq!(keys, ["active", "id", "name", "schemas", "userName"], "active is returned always");
    assert_eq!(only.body["name"], json!({"givenName": "Ada"}), "a sub-attribute selects only itself");
    let no_given = scim.get(&format!("/scim/v2/Users/{id}?excludedAttributes=name.givenName")).await;
    assert_eq!(no_given.body["name"], json!({"familyName": "Lovelace"}));
    let except = scim.get(&format!("/scim/v2/Users/{id}?excludedAttributes=permissions,meta,active")).await;
    assert_eq!(except.body["active"], true, "active cannot be excluded");
    assert!(except.body.get("permissions").is_none() && except.body.get("meta").is_none());
    assert!(except.body.get("userName").is_some() && except.body.get("id").is_some());
    let listed = scim.get("/scim/v2/Users?attributes=urn:ietf:params:scim:schemas:core:2.0:User:department").await;
    for u in listed.body["Resources"].as_array().expect("Resources") {
        let mut keys: Vec<&String> = u.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["active", "department", "id", "schemas"]);
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
        let schemas = json!([super::USER_URN, super::ENTERPRISE_URN]);
        assert_eq!(r.body["Resources"][0], json!({"schemas": schemas, "id": id, "userName": email, "active": true}));
    }
    let paged =
        json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "startIndex": 2, "count": 1});
    let r = scim.call("POST", "/scim/v2/.search", Some(paged)).await;
    assert_eq!((&r.body["startIndex"], r.body["Resources"].as_array().map(Vec::len)), (&json!(2), Some(1)));
    let bad = [
        (json!({"filter": "userName eq \"x\""}), "invalidValue"),
        (
            json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": "userName sw x"}),
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
