//! The API description of the preference-center endpoints and of the pages
//! themselves (`/preferences/{token}`).

use serde_json::{json, Value};

use super::center::{CenterState, IconType, Rel, DEFAULT_TITLE, MAX_NAME_CHARS};
use super::link::DEFAULT_LINK_TTL_SECS;
use super::write::{MAX_CENTERS, NOT_FOUND};
use crate::describe::op::Op;
use crate::describe::schema::{array, integer, nullable, object, refer, string, success_body, time, values, with};
use crate::ratelimit::Bucket;
use crate::routes::PreferenceCenter;

const HTML: &str = "text/html";

/// The wire names of serialisable values (the enums' own spelling).
fn names<T: serde::Serialize>(list: &[T]) -> Vec<String> {
    list.iter().filter_map(|v| serde_json::to_value(v).ok()?.as_str().map(str::to_string)).collect()
}

fn state() -> Value {
    let states = [CenterState::Active, CenterState::Draft].map(CenterState::as_str);
    values(&states, "`active` (served at its links) or `draft` (stored, not served).")
}

/// `#/components/schemas` of preference centers.
pub fn components() -> Vec<(&'static str, Value)> {
    let rels = names(&[Rel::Icon, Rel::ShortcutIcon, Rel::AppleTouchIcon]);
    let types =
        names(&[IconType::Png, IconType::Svg, IconType::Gif, IconType::XIcon, IconType::SvgXml, IconType::MaskIcon]);
    let rels: Vec<&str> = rels.iter().map(String::as_str).collect();
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    let tag = crate::describe::schema::closed(object(
        "A link tag added to the page's head (a favicon); unknown fields are refused.",
        &[
            ("rel", values(&rels, "")),
            ("href", string("")),
            ("type", values(&types, "")),
            ("sizes", string("")),
            ("color", string("For `mask-icon`.")),
        ],
        &["rel", "href"],
    ));
    let options = crate::describe::schema::closed(object(
        "Page options (`options` on write, `preference_center_options` on read).",
        &[
            (
                "meta-viewport-content",
                string("The `content` of a viewport meta tag; when present the tag is added to the page."),
            ),
            ("links-tags", array(tag, "Link tags.")),
        ],
        &[],
    ));
    vec![("PreferenceCenterOptions", options)]
}

fn write_body(create: bool) -> Value {
    let name = format!(
        "1 to {MAX_NAME_CHARS} letters, digits, hyphens and underscores; cannot be changed after creation{}.",
        if create { "" } else { " (on update it must be the center's own)" }
    );
    let mut required = vec!["preference_center_page_html", "confirmation_page_html"];
    if create {
        required.insert(0, "name");
    }
    crate::describe::schema::closed(object("Unknown fields are refused. The templates are Liquid: `{{subscribed_state.${email_global}}}`, `{{subscribed_state.${<group id>}}}`, `{% form_field_name :email_global_state %}`, `{% form_field_name :subscription_group <group id> %}`, `{{preference_center_submit_url}}`, `{{${email_address}}}` and the user's attributes; they are checked when stored (an unknown tag, variable or subscription group is a 400 with its line and column).", &[
        ("name", with(string(&name), "pattern", json!(format!("^[A-Za-z0-9_-]{{1,{MAX_NAME_CHARS}}}{}", crate::describe::schema::END)))),
        ("preference_center_title", string(&format!("The pages' title (default `{DEFAULT_TITLE}`)."))),
        ("preference_center_page_html", string("The preference page's HTML template.")),
        ("confirmation_page_html", string("The confirmation page's HTML template, shown after the form is sent.")),
        ("state", state()),
        ("options", refer("PreferenceCenterOptions")),
    ], &required))
}

fn template_errors() -> Value {
    let entry = object(
        "",
        &[("field", string("The template.")), ("line", integer("")), ("column", integer("")), ("message", string(""))],
        &["message"],
    );
    object(
        "A request error: `message`, and for a template error `errors` with its place.",
        &[("message", string("What went wrong.")), ("errors", array(entry, "The template error."))],
        &["message"],
    )
}

/// A center as its examples write it (Liquid over the example group).
fn example_center(create: bool) -> Value {
    let group = crate::subscriptions::schema::EXAMPLE_GROUP;
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><title>Email preferences</title></head><body>\n\
         <h1>Hi {{{{ ${{first_name}} | default: 'there' }}}}</h1>\n\
         <form method=\"post\" action=\"{{{{preference_center_submit_url}}}}\">\n\
         <label><input type=\"checkbox\" name=\"{{% form_field_name :subscription_group {group} %}}\" value=\"subscribed\" \
         {{% if subscribed_state.${{{group}}} == 'subscribed' %}}checked{{% endif %}}> Weekly newsletter</label>\n\
         <label><input type=\"checkbox\" name=\"{{% form_field_name :email_global_state %}}\" value=\"unsubscribed\"> No email at all</label>\n\
         <button>Save</button></form></body></html>"
    );
    let mut body = json!({
        "preference_center_title": "Email preferences",
        "preference_center_page_html": page,
        "confirmation_page_html": "<p>Saved. Email: {{subscribed_state.${email_global}}}</p>",
        "state": "active",
        "options": {"meta-viewport-content": "width=device-width, initial-scale=1"},
    });
    if create {
        body["name"] = json!("newsletter_preferences");
    }
    body
}

/// The id the examples give a center.
const EXAMPLE_CENTER: &str = "0a7c3e2b-9f41-4d6e-8b15-2c9d4e7f1a30";

fn center_id() -> &'static str {
    "The center's `preference_center_api_id`."
}

/// A preference-center API endpoint.
pub fn describe(endpoint: &PreferenceCenter) -> Op {
    let not_found =
        |op: Op| op.reply(404, NOT_FOUND, refer("Error")).with_example("not_found", json!({"message": NOT_FOUND}));
    match endpoint {
        PreferenceCenter::Create => Op::new(format!("Creates a preference center (at most {MAX_CENTERS} per workspace). `state` defaults to `active`."))
            .body(write_body(true))
            .example(example_center(true))
            .reply(201, "Created.", success_body("", &[
                ("preference_center_api_id", string("Its id.")),
                ("liquid_tag", string("The Liquid tag that renders a user's link to it in a message.")),
                ("created_at", time("")),
            ], &["preference_center_api_id", "liquid_tag", "created_at"]))
            .with_example("created", json!({"message": "success", "preference_center_api_id": EXAMPLE_CENTER,
                "liquid_tag": "{{preference_center.${newsletter_preferences}}}", "created_at": "2026-11-26T10:00:00Z"}))
            .errors(template_errors()),
        PreferenceCenter::Update(_) => not_found(Op::new("Updates a preference center: the templates are replaced; title, state and options keep their values when left out.")
            .path("preferenceCenterExternalID", center_id())
            .body(write_body(false))
            .example(example_center(false))
            .reply(200, "Updated.", success_body("", &[
                ("preference_center_api_id", string("Its id.")),
                ("created_at", time("")),
                ("updated_at", time("")),
            ], &["preference_center_api_id", "created_at", "updated_at"]))
            .with_example("updated", json!({"message": "success", "preference_center_api_id": EXAMPLE_CENTER,
                "created_at": "2026-11-26T10:00:00Z", "updated_at": "2026-11-26T11:00:00Z"}))
            .errors(template_errors())),
        PreferenceCenter::List => {
            let entry = object("", &[("name", string("")), ("preference_center_api_id", string("")), ("created_at", time("")), ("updated_at", time(""))], &["name", "preference_center_api_id", "created_at", "updated_at"]);
            Op::new("Lists the workspace's preference centers, oldest first.")
                .reply(200, "The centers.", object("", &[("preference_centers", array(entry, ""))], &["preference_centers"]))
                .with_example("centers", json!({"preference_centers": [{"name": "newsletter_preferences", "preference_center_api_id": EXAMPLE_CENTER,
                    "created_at": "2026-11-26T10:00:00Z", "updated_at": "2026-11-26T11:00:00Z"}]}))
        }
        PreferenceCenter::Get(_) => not_found(Op::new("Reads one preference center, every field.")
            .path("preferenceCenterExternalID", center_id())
            .reply(200, "The center.", object("", &[
                ("name", string("")),
                ("preference_center_api_id", string("")),
                ("created_at", time("")),
                ("updated_at", time("")),
                ("preference_center_title", string("")),
                ("preference_center_page_html", string("")),
                ("confirmation_page_html", string("")),
                ("redirect_page_html", nullable(string("Always null: a submission renders the confirmation page."))),
                ("preference_center_options", refer("PreferenceCenterOptions")),
                ("state", state()),
            ], &["name", "preference_center_api_id", "state"]))
            .with_example("center", {
                let mut c = example_center(true);
                let fields = c.as_object_mut().map(std::mem::take).unwrap_or_default();
                let mut out = json!({"preference_center_api_id": EXAMPLE_CENTER, "created_at": "2026-11-26T10:00:00Z",
                    "updated_at": "2026-11-26T11:00:00Z", "redirect_page_html": null});
                for (k, v) in fields {
                    out[if k == "options" { "preference_center_options" } else { k.as_str() }] = v;
                }
                out
            })),
        PreferenceCenter::UserUrl(_, _) => {
            let days = DEFAULT_LINK_TTL_SECS / 86_400;
            not_found(Op::new(format!("A user's link to a preference center's page (an Engage extension to the platform's API): it carries a token signed under the workspace's secret, valid {days} days by default (the server's `--link-ttl-secs`). The page needs no other credentials."))
                .path("preferenceCenterExternalID", center_id())
                .path("external_id", "The user's external ID.")
                .query("expires_in", false, &format!("A shorter lifetime for this link, in seconds: 1 to the configured lifetime ({} by default, `--link-ttl-secs`).", DEFAULT_LINK_TTL_SECS), with(with(integer(""), "minimum", json!(1)), "maximum", json!(DEFAULT_LINK_TTL_SECS)))
                .reply(200, "The link.", object("", &[("preference_center_url", string("`<public URL>/preferences/<token>`."))], &["preference_center_url"]))
                .with_example("link", json!({"preference_center_url": "https://engage.example.com/preferences/AnV4b2tKcW5lRlNVd0c2bU5Ga2xqR2V0"})))
        }
    }
}

fn page_errors(op: Op) -> Op {
    op.reply_in(403, "The link is not valid or has expired.", HTML, string("An HTML page saying so.")).reply_in(
        404,
        "The center is not active, or the user no longer exists.",
        HTML,
        string("An HTML page saying so."),
    )
}

/// GET /preferences/{token}.
pub fn page() -> Op {
    page_errors(Op::new("The preference page of the user the token names: the center's template rendered with the user's states. The token (from the user's link) is the only credential. Always HTML, errors included; not cached, no referrer sent on, not to be framed (`X-Frame-Options: DENY`, `frame-ancestors 'none'`), and sandboxed (`Content-Security-Policy: sandbox allow-forms allow-scripts ...`, no `allow-same-origin`): the page's scripts run in an opaque origin that reaches none of this server's cookies or data. With `?saved=1`: the confirmation page, where a saved form leads.")
        .path("token", "The signed token of the user's link.")
        .query("saved", false, "`1`: show the confirmation page (where a saved form redirects).", values(&["1"], ""))
        .reply_in(200, "The page.", HTML, string("HTML."))
        .with_example("page", json!("<!doctype html><html lang=\"en\"><head><title>Email preferences</title></head><body><h1>Hi Ada</h1><form method=\"post\" action=\"https://engage.example.com/preferences/AnV4...\">...</form></body></html>")))
}

/// POST /preferences/{token}.
pub fn submit() -> Op {
    let (n, _) = Bucket::PreferenceSubmit.limit();
    let form = with(object("The page's form fields: `email_global_state` (`opted_in`, `subscribed` or `unsubscribed`) and `subscription_group_<id>` (`subscribed` or `unsubscribed`); a field the page showed that is left out (an unticked checkbox) is `unsubscribed`.", &[], &[]), "additionalProperties", json!({"type": "string"}));
    page_errors(Op::new(format!("Applies the page's form as the API would (to every user sharing the address), then redirects to the confirmation page (post/redirect/get: a reload does not send the form again). A field for a group the page no longer shows is passed over. At most {n} submissions a minute per user and center, whichever of their links is used."))
        .path("token", "The signed token of the user's link.")
        .body_in(&["application/x-www-form-urlencoded"], form, true)
        .example(json!({format!("subscription_group_{}", crate::subscriptions::schema::EXAMPLE_GROUP): "subscribed", "email_global_state": "subscribed"}))
        .reply_in(303, "Saved: the confirmation page is at `Location`.", HTML, string("A short HTML page linking it."))
        .with_example("saved", json!("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Saved</title></head><body><p><a href=\"/preferences/AnV4...?saved=1\">Your choices were saved.</a></p></body></html>"))
        .with_header("Location", "`<public URL>/preferences/<token>?saved=1`.")
        .reply_in(400, "A malformed field name or a value the page did not offer: nothing saved.", HTML, string("An HTML page saying so."))
        .reply_in(415, "The form is not `application/x-www-form-urlencoded`.", HTML, string("An HTML page saying so."))
        .reply_in(429, "Too many submissions for this user and center.", HTML, string("An HTML page saying so."))
        .with_header("X-Ratelimit-Retry-After", "Seconds until the form may be sent again.")
        .limited(Bucket::PreferenceSubmit, "per user and center"))
}
