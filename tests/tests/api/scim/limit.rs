//! The company's 5,000 SCIM user requests a day, shared by every token: the headers
//! count down, then 429 in SCIM's shape with `X-Ratelimit-Retry-After`. Runs last:
//! it uses up the rest of the day on the host under test.

use engage_tests::Scim;

use super::assert_error;

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let other = Scim::new().await;
    let first = scim.get("/scim/v2/Users/nobody").await;
    assert_eq!(first.status, 404);
    assert_eq!(first.header("x-ratelimit-limit"), Some("5000"));
    let mut remaining: u64 = first.header("x-ratelimit-remaining").expect("remaining").parse().expect("number");
    let reset: u64 = first.header("x-ratelimit-reset").expect("reset").parse().expect("number");
    assert!(reset > 0 && reset <= 86_400);
    // Another token of the same company draws on the same count.
    let r = other.get("/scim/v2/Users/nobody").await;
    assert_eq!(r.header("x-ratelimit-remaining"), Some((remaining - 1).to_string().as_str()));
    remaining -= 1;
    // Spend the rest (a day's window that turns over meanwhile starts again).
    let mut sent = 0;
    let limited = loop {
        let r = scim.get("/scim/v2/Users/nobody").await;
        if r.status == 429 {
            break r;
        }
        assert_eq!(r.status, 404);
        sent += 1;
        assert!(sent <= 10_001, "no 429 after {sent} requests");
    };
    assert!(sent >= remaining, "429 after {sent} of {remaining} remaining requests");
    assert_error(&limited, 429, None);
    let retry: u64 = limited.header("x-ratelimit-retry-after").expect("retry after").parse().expect("number");
    assert!(retry > 0 && retry <= 86_400);
    assert_eq!(limited.header("x-ratelimit-remaining"), None, "no rate headers on a 429");
    // Every user endpoint shares the count; discovery does not.
    assert_eq!(other.call("POST", "/scim/v2/Users", Some(super::user("late@example.com"))).await.status, 429);
    assert_eq!(scim.get("/scim/v2/ServiceProviderConfig").await.status, 200);
}
