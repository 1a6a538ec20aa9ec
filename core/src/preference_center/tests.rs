//! The whole family through the engine: create, link, page, form, and the state a
//! later API read sees.

use serde_json::{json, Value};

use crate::http::{Method, Request, Response};
use crate::subscriptions::groups::Channel;
use crate::testkit::Kit;

fn page_html(group: &str) -> String {
    format!(
        "<html><head></head><body><p>Hi {{{{ ${{first_name}} | default: 'there' }}}}</p>\
         <form method=\"post\" action=\"{{{{preference_center_submit_url}}}}\">\
         <input type=\"checkbox\" name=\"{{% form_field_name :email_global_state %}}\" value=\"opted_in\" \
         {{% if subscribed_state.${{email_global}} != 'unsubscribed' %}}checked{{% endif %}}>\
         <input type=\"checkbox\" name=\"{{% form_field_name :subscription_group {group} %}}\" value=\"subscribed\" \
         {{% if subscribed_state.${{{group}}} == 'subscribed' %}}checked{{% endif %}}>\
         </form></body></html>"
    )
}

fn create(kit: &Kit, group: &str) -> String {
    let (status, body) = kit.post(
        "/preference_center/v1",
        json!({"name": "prefs", "preference_center_page_html": page_html(group),
               "confirmation_page_html": "<p>Saved, {{subscribed_state.${email_global}}}</p>"}),
    );
    assert_eq!(status, 201, "{body}");
    body["preference_center_api_id"].as_str().expect("id").to_string()
}

fn link(kit: &Kit, center: &str, user: &str) -> String {
    let (status, body) = kit.call(Method::Get, &format!("/preference_center/v1/{center}/url/{user}"), Value::Null);
    assert_eq!(status, 200, "{body}");
    let url = body["preference_center_url"].as_str().expect("url");
    url.split_once("/preferences/").map(|(_, t)| format!("/preferences/{t}")).expect("a page path")
}

fn open(kit: &Kit, path: &str) -> Response {
    pollster::block_on(kit.engine().handle(Request::new(Method::Get, path), kit.ctx()))
}

fn submit(kit: &Kit, path: &str, form: &str) -> Response {
    let req = Request::new(Method::Post, path)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form.as_bytes().to_vec());
    pollster::block_on(kit.engine().handle(req, kit.ctx()))
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn a_user_opens_the_link_unticks_a_group_and_the_api_reads_the_change() {
    let kit = Kit::new();
    let group = kit.group(Channel::Email);
    kit.track_attributes(json!([{"external_id": "u1", "email": "a@x.test", "first_name": "<Ann>",
        "subscription_groups": [{"subscription_group_id": group, "subscription_state": "subscribed"}]}]));
    kit.track_attributes(json!([{"external_id": "u2", "email": "a@x.test"}]));
    let center = create(&kit, &group);
    let path = link(&kit, &center, "u1");

    let page = open(&kit, &path);
    assert_eq!(page.status, 200);
    assert_eq!(page.header_value("Content-Type"), Some("text/html; charset=utf-8"));
    let html = text(&page);
    assert!(html.contains("Hi &lt;Ann&gt;"), "{html}");
    assert!(html.contains("<title>Email Preferences</title>"), "{html}");
    assert!(html.contains(&format!("name=\"subscription_group_{group}\" value=\"subscribed\" checked")), "{html}");

    // The group's checkbox is left unticked; the global one says opted_in.
    let done = submit(&kit, &path, "email_global_state=opted_in");
    assert_eq!(done.status, 303, "{}", text(&done));
    // Post/redirect/get: the confirmation is a page of its own, a reload shows it again.
    let location = done.header_value("Location").expect("a Location").to_string();
    let confirmation = location.split_once("/preferences/").map(|(_, t)| format!("/preferences/{t}")).expect("a page");
    assert_eq!(confirmation, format!("{path}?saved=1"));
    let shown = open(&kit, &confirmation);
    assert_eq!((shown.status, text(&shown).as_str()), (200, "<title>Email Preferences</title><p>Saved, opted_in</p>"));
    for user in ["u1", "u2"] {
        let u = kit.user(user);
        assert_eq!(u["email_subscribe"], "opted_in", "{user}: shared address follows");
    }
    let (_, status) = kit.call(
        Method::Get,
        &format!("/subscription/status/get?subscription_group_id={group}&external_id=u1"),
        Value::Null,
    );
    assert_eq!(status["status"]["u1"], "Unsubscribed");
}

#[test]
fn a_bad_form_changes_nothing() {
    let kit = Kit::new();
    let group = kit.group(Channel::Email);
    kit.track_attributes(json!([{"external_id": "u1", "email": "a@x.test", "email_subscribe": "subscribed"}]));
    let center = create(&kit, &group);
    let path = link(&kit, &center, "u1");
    for (form, status) in [
        ("email_global_state=unsubscribed&extra=1", 400),
        ("email_global_state=maybe", 400),
        (&format!("subscription_group_{group}=opted_in") as &str, 400),
        ("email_global_state=unsubscribed&subscription_group_../x=subscribed", 400),
    ] {
        let r = submit(&kit, &path, form);
        assert_eq!(r.status, status, "{form}: {}", text(&r));
        let page = text(&r);
        assert!(page.contains("The form could not be saved") && page.contains("Back to your preferences"), "{page}");
        assert!(!page.contains("subscription_group") && !page.contains("email_global_state"), "no field names: {page}");
    }
    let req = Request::new(Method::Post, &path).header("Content-Type", "application/json").body(b"{}".to_vec());
    assert_eq!(pollster::block_on(kit.engine().handle(req, kit.ctx())).status, 415);
    assert_eq!(kit.user("u1")["email_subscribe"], "subscribed");
}

#[test]
fn tampered_expired_and_draft_links_are_refused() {
    let kit = Kit::new();
    let group = kit.group(Channel::Email);
    kit.track_attributes(json!([{"external_id": "u1"}]));
    let center = create(&kit, &group);
    let path = link(&kit, &center, "u1");
    let mut tampered = path.clone().into_bytes();
    let i = tampered.len() - 3;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    for bad in [tampered.as_str(), "/preferences/nonsense", "/preferences/a.b"] {
        assert_eq!(open(&kit, bad).status, 403, "{bad}");
        assert_eq!(submit(&kit, bad, "").status, 403, "{bad}");
    }
    // The kit's clock moves one second a request.
    let (_, body) = kit.call(Method::Get, &format!("/preference_center/v1/{center}/url/u1?expires_in=2"), Value::Null);
    let short = body["preference_center_url"].as_str().expect("url").split_once("/preferences/").expect("path").1;
    let short = format!("/preferences/{short}");
    assert_eq!(open(&kit, &short).status, 200);
    assert_eq!(open(&kit, &short).status, 403);
    assert!(text(&open(&kit, &short)).contains("expired"));

    let update = json!({"state": "draft", "preference_center_page_html": "x", "confirmation_page_html": "y"});
    let (status, _) = kit.call(Method::Put, &format!("/preference_center/v1/{center}"), update);
    assert_eq!(status, 200);
    assert_eq!(open(&kit, &path).status, 404);
}

#[test]
fn a_form_from_before_the_page_changed_still_saves_what_it_can() {
    let kit = Kit::new();
    let group = kit.group(Channel::Email);
    kit.track_attributes(json!([{"external_id": "u1", "email": "a@x.test", "email_subscribe": "subscribed",
        "subscription_groups": [{"subscription_group_id": group, "subscription_state": "subscribed"}]}]));
    let center = create(&kit, &group);
    let path = link(&kit, &center, "u1");
    // The page no longer shows the group; a form rendered before still names it.
    let update = json!({"preference_center_page_html": "<form>{% form_field_name :email_global_state %}</form>",
        "confirmation_page_html": "<p>Saved</p>"});
    let (status, _) = kit.call(Method::Put, &format!("/preference_center/v1/{center}"), update);
    assert_eq!(status, 200);
    let form = format!(
        "email_global_state=unsubscribed&subscription_group_{group}=subscribed&subscription_group_gone-1=unsubscribed"
    );
    let r = submit(&kit, &path, &form);
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(kit.user("u1")["email_subscribe"], "unsubscribed", "the opt-out is not lost");
    let (_, status) = kit.call(
        Method::Get,
        &format!("/subscription/status/get?subscription_group_id={group}&external_id=u1"),
        Value::Null,
    );
    assert_eq!(status["status"]["u1"], "Subscribed", "an opt-in the page no longer offers is passed over");
    // An opt-out for a group the page no longer shows is saved.
    let r = submit(&kit, &path, &format!("email_global_state=subscribed&subscription_group_{group}=unsubscribed"));
    assert_eq!(r.status, 303, "{}", text(&r));
    let (_, status) = kit.call(
        Method::Get,
        &format!("/subscription/status/get?subscription_group_id={group}&external_id=u1"),
        Value::Null,
    );
    assert_eq!(status["status"]["u1"], "Unsubscribed", "the stale opt-out is saved");
}

#[test]
fn pages_refuse_framing_and_answer_head() {
    let kit = Kit::new();
    let group = kit.group(Channel::Email);
    kit.track_attributes(json!([{"external_id": "u1"}]));
    let center = create(&kit, &group);
    let path = link(&kit, &center, "u1");
    let get = open(&kit, &path);
    for bad in [path.as_str(), "/preferences/nonsense"] {
        let r = open(&kit, bad);
        assert_eq!(r.header_value("X-Frame-Options"), Some("DENY"), "{bad}");
        assert_eq!(r.header_value("Content-Security-Policy"), Some(super::page::PAGE_POLICY), "{bad}");
    }
    let head = pollster::block_on(kit.engine().handle(Request::new(Method::Head, &path), kit.ctx()));
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header_value("Content-Length"), Some(get.body.len().to_string().as_str()));
    assert_eq!(head.header_value("Content-Type"), get.header_value("Content-Type"));
}
