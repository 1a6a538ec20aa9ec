//! The hosted page: `GET /preferences/{token}` shows a center's page for the user
//! the token names; `POST` (an ordinary urlencoded form) applies the choices through
//! the subscription state model and answers `303 See Other` to
//! `/preferences/{token}?saved=1`, the confirmation page (post/redirect/get: a
//! reload shows the confirmation again instead of sending the form again). Every
//! answer is an HTML page, failures included.

use serde_json::Value as Json;

use super::cache::Templates;
use super::center::{self, Center, CenterState, Options};
use super::link::{self, LinkConfig, TokenError};
use super::liquid::{escape_html, Attr, Data, FieldRef, Template, Value, Var};
use super::system::{self, Lang, Message};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{percent_decode, Request, Response};
use crate::ids::{Identifier, ServiceId};
use crate::profile::states::{GlobalState, GroupState};
use crate::profile::Profile;
use crate::ratelimit::{Bucket, Decision, RateLimiter};
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::Store;
use crate::subscriptions::groups;
use crate::subscriptions::state::{self, Status};
use crate::time::Timestamp;

/// Show the page, or submit its form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageOp {
    /// GET
    Show,
    /// POST
    Submit,
}

/// A failure, shown as a page.
struct Refusal {
    status: u16,
    message: Message,
    retry_after: Option<u64>,
    /// The center's language, once the center is known.
    lang: Option<Lang>,
}

fn refuse(status: u16, message: Message) -> Refusal {
    Refusal { status, message, retry_after: None, lang: None }
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        let status = e.status();
        // The reader did not make the request: say what to do, never what went wrong inside.
        let message = match status {
            400 => Message::BadForm,
            404 => Message::NotPublished,
            _ => Message::TryLater,
        };
        refuse(status, message)
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(e: crate::store::StoreError) -> Refusal {
        ApiError::Store(e).into()
    }
}

/// One visit of a page: the link's token, what to do, the request and its context.
pub struct Visit<'a> {
    /// The token from the path.
    pub token: &'a str,
    /// Show or submit.
    pub op: PageOp,
    /// The request (the form's body and type).
    pub req: &'a Request,
    /// Where links point.
    pub links: &'a LinkConfig,
    /// Templates parsed at earlier views.
    pub templates: &'a Templates,
    /// Time and randomness.
    pub ctx: Ctx,
}

/// What a page request is answered with when it succeeds.
enum Answer {
    /// A page.
    Page(String),
    /// A form saved: see its confirmation at this address.
    Saved(String, Lang),
}

/// The query that makes `GET /preferences/{token}` the confirmation page.
const SAVED_QUERY: &str = "saved=1";

/// Answers a page request; never anything but an HTML page.
pub async fn page<S: Store>(store: &S, limiter: &RateLimiter, visit: &Visit<'_>) -> Response {
    match serve(store, limiter, visit).await {
        Ok(Answer::Page(html)) => html_response(200, html),
        Ok(Answer::Saved(location, lang)) => {
            html_response(303, system::saved_page(lang, &location)).with_header("Location", location)
        }
        Err(r) => {
            let lang = r
                .lang
                .or_else(|| visit.req.header_value("Accept-Language").and_then(Lang::from_accept))
                .unwrap_or(Lang::En);
            // A way back to the form where the link still leads to one.
            let form = visit.links.url(visit.token);
            let back = matches!(r.status, 400 | 415 | 429).then_some(form.as_str());
            let mut resp = html_response(r.status, system::message_page(r.message, lang, back));
            if let Some(s) = r.retry_after {
                resp = resp.with_header("X-Ratelimit-Retry-After", s.to_string());
            }
            resp
        }
    }
}

/// The page's policy. Its HTML is written by API key holders and shows user data,
/// and it is served from the same origin as the operator's `/_engage/` routes, so
/// it runs sandboxed without `allow-same-origin`: the browser gives it an opaque
/// origin, sends none of Engage's cookies from it and lets it read nothing of
/// this server's. Its form still submits (`allow-forms`), and the marketer's own
/// scripts, styles and links still work, in that opaque origin.
pub const PAGE_POLICY: &str =
    "sandbox allow-forms allow-scripts allow-popups allow-popups-to-escape-sandbox; frame-ancestors 'none'";

fn html_response(status: u16, body: String) -> Response {
    Response::empty(status)
        .with_header("Content-Type", "text/html; charset=utf-8")
        .with_header("Cache-Control", "no-store")
        // The URL is the user's credential: never send it on to linked sites.
        .with_header("Referrer-Policy", "no-referrer")
        .with_header("X-Content-Type-Options", "nosniff")
        // Not to be framed by another site (clickjacking a subscription choice).
        .with_header("X-Frame-Options", "DENY")
        .with_header("Content-Security-Policy", PAGE_POLICY)
        .with_body(body.into_bytes())
}

async fn serve<S: Store>(store: &S, limiter: &RateLimiter, visit: &Visit<'_>) -> Result<Answer, Refusal> {
    let Visit { token, ctx, .. } = *visit;
    let claims = match link::verify(store, token, ctx.now).await? {
        Ok(c) => c,
        Err(TokenError::Invalid) => return Err(refuse(403, Message::InvalidLink)),
        Err(TokenError::Expired) => return Err(refuse(403, Message::ExpiredLink)),
    };
    let Some(center) = center::get(store, &claims.ws, &claims.center).await? else {
        return Err(refuse(404, Message::NotPublished));
    };
    // From here on, pages are in the center's language.
    let lang = Lang::of_html(&center.page_html);
    if center.state != CenterState::Active {
        return Err(Refusal { lang, ..refuse(404, Message::NotPublished) });
    }
    serve_center(store, limiter, visit, &claims, &center, lang.unwrap_or(Lang::En)).await.map_err(|mut r| {
        r.lang = r.lang.or(lang);
        r
    })
}

/// [`serve`] once the link and its center are known good; `lang` is the center's.
async fn serve_center<S: Store>(
    store: &S,
    limiter: &RateLimiter,
    visit: &Visit<'_>,
    claims: &link::Claims,
    center: &Center,
    lang: Lang,
) -> Result<Answer, Refusal> {
    let Visit { token, op, req, links, templates, ctx } = *visit;
    let page = parse_stored(templates, &center.page_html)?;
    let submit_url = links.url(token);
    let user = Identifier::External(claims.external_id.clone());
    let no_user = || refuse(404, Message::UserGone);
    match op {
        PageOp::Show => {
            let mut tx = Tx::new(store, claims.ws.clone());
            let id = tx.resolve_one(&user).await?.ok_or_else(no_user)?;
            let profile = tx.profile(&id).await?.ok_or_else(no_user)?.clone();
            let saved = req.query.split('&').any(|pair| pair == SAVED_QUERY);
            let shown = if saved { parse_stored(templates, &center.confirmation_html)? } else { page };
            Ok(Answer::Page(finish(center, &shown, &profile, &submit_url, ctx.now)))
        }
        PageOp::Submit => {
            let form_type = req.header_value("Content-Type").unwrap_or("");
            if !form_type.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded") {
                return Err(refuse(415, Message::NotAForm));
            }
            // Per user and center, whichever link of theirs is used (a new link does
            // not start a new count), after the token is known good: forged tokens
            // cannot fill the table.
            let limit_key = format!(
                "\u{1f}prefs\u{1f}{}\u{1f}{}\u{1f}{}",
                claims.ws.as_str(),
                claims.center,
                claims.external_id.as_str()
            );
            if let Decision::Limited { retry_after } =
                limiter.check(store, &limit_key, Bucket::PreferenceSubmit, ctx.now).await
            {
                let mut r = refuse(429, Message::TooMany);
                r.retry_after = Some(retry_after);
                return Err(r);
            }
            transact(store, &claims.ws, ctx.seed, async |tx, _| {
                let id = tx
                    .resolve_one(&user)
                    .await?
                    .ok_or_else(|| ApiError::NotFound("This user no longer exists.".into()))?;
                let profile =
                    tx.profile(&id).await?.ok_or_else(|| ApiError::NotFound("This user no longer exists.".into()))?;
                // The fields the page shows this user now: one it showed and the form
                // lacks is an unticked checkbox.
                let shown = page.render(&PageData { profile, submit_url: &submit_url, now: ctx.now }).fields;
                let choices = read_form(&req.body, &shown).map_err(ApiError::BadRequest)?;
                apply(tx, &id, choices, ctx).await
            })
            .await
            .map_err(|e| match e {
                // The reader of this page did not write the form: say what to do,
                // not which field name was wrong.
                ApiError::BadRequest(_) => refuse(400, Message::BadForm),
                ApiError::NotFound(_) => refuse(404, Message::UserGone),
                other => other.into(),
            })?;
            Ok(Answer::Saved(format!("{submit_url}?{SAVED_QUERY}"), lang))
        }
    }
}

fn parse_stored(templates: &Templates, src: &str) -> Result<std::sync::Arc<Template>, Refusal> {
    // Stored templates were checked when written; one that no longer parses (a
    // template stored by another version) is not served half-rendered.
    templates.get(src).map_err(|_| refuse(404, Message::CannotShow))
}

fn finish(center: &Center, t: &Template, profile: &Profile, submit_url: &str, now: Timestamp) -> String {
    let html = t.render(&PageData { profile, submit_url, now }).html;
    with_head(&html, center.title(), &center.options)
}

/// One choice of the form.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    Global(GlobalState),
    Group(String, GroupState),
}

/// Reads the submitted form against the fields the page showed: each known, each
/// value allowed; a shown field left out (an unticked checkbox) is `unsubscribed`;
/// a field sent twice (a hidden input before its checkbox) takes the last value.
fn read_form(body: &[u8], shown: &[FieldRef]) -> Result<Vec<Choice>, String> {
    let text = std::str::from_utf8(body).map_err(|_| "The form is not valid UTF-8.".to_string())?;
    let mut values: Vec<Option<String>> = vec![None; shown.len()];
    let mut stale_opt_outs = Vec::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k), percent_decode(v));
        if let Some(i) = shown.iter().position(|f| f.name() == k) {
            values[i] = Some(v);
            continue;
        }
        // A form shown before its page changed (a field taken out of the template):
        // an opt-out in it is still saved, any other choice is passed over (the page
        // no longer offers it), and the rest of the form applies. A name no page
        // could have shown, or a bad value, is refused.
        let field = stale_field(&k).ok_or_else(|| format!("Unknown form field '{k}'."))?;
        let c = choice(&field, &v)?;
        if c.is_opt_out() {
            stale_opt_outs.push(c);
        }
    }
    let mut out: Vec<Choice> = shown
        .iter()
        .zip(values)
        .map(|(f, v)| choice(f, &v.unwrap_or_else(|| "unsubscribed".into())))
        .collect::<Result<_, _>>()?;
    out.extend(stale_opt_outs);
    Ok(out)
}

/// A field's value as a choice.
fn choice(f: &FieldRef, v: &str) -> Result<Choice, String> {
    match f {
        FieldRef::EmailGlobal => GlobalState::parse(v)
            .map(Choice::Global)
            .ok_or_else(|| format!("'{v}' is not an email subscription state (opted_in, subscribed or unsubscribed).")),
        FieldRef::Group(id) => GroupState::parse(v)
            .map(|s| Choice::Group(id.clone(), s))
            .ok_or_else(|| format!("'{v}' is not a subscription group state (subscribed or unsubscribed).")),
    }
}

impl Choice {
    fn is_opt_out(&self) -> bool {
        matches!(self, Choice::Global(GlobalState::Unsubscribed) | Choice::Group(_, GroupState::Unsubscribed))
    }
}

/// The field `name` stands for when a page may have shown it and no longer does:
/// the global state's, or a subscription group's with an id of the shape ids have.
fn stale_field(name: &str) -> Option<FieldRef> {
    if name == "email_global_state" {
        return Some(FieldRef::EmailGlobal);
    }
    let id = name.strip_prefix("subscription_group_")?;
    let shaped = !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    shaped.then(|| FieldRef::Group(id.to_string()))
}

/// Applies the choices as the API would: to every user sharing the address, the
/// hard-bounce flag kept. A group deleted since the page was shown is passed over:
/// the rest of the form still applies.
async fn apply<S: Store>(tx: &mut Tx<'_, S>, id: &ServiceId, choices: Vec<Choice>, ctx: Ctx) -> Result<(), ApiError> {
    for c in choices {
        match c {
            Choice::Global(s) => state::set_global_for(tx, id, s, ctx.now).await?,
            Choice::Group(g, s) => {
                if let Some(group) = groups::get(tx.store(), tx.workspace(), &g).await? {
                    state::set_group_for(tx, id, &g, group.channel, s, ctx.now).await?;
                }
            }
        }
    }
    Ok(())
}

/// What a page shows of one user.
struct PageData<'a> {
    profile: &'a Profile,
    submit_url: &'a str,
    /// Now (`'now' | date: ...`), in UTC.
    now: Timestamp,
}

fn json_value(v: Option<&Json>) -> Value {
    match v {
        Some(Json::String(s)) => Value::Text(s.clone()),
        Some(Json::Number(n)) => n.as_f64().map_or(Value::Nil, Value::Num),
        Some(Json::Bool(b)) => Value::Bool(*b),
        _ => Value::Nil,
    }
}

impl Data for PageData<'_> {
    fn now(&self) -> i64 {
        self.now.seconds()
    }

    fn get(&self, var: &Var) -> Value {
        let p = self.profile;
        let text = |s: Option<&str>| s.map_or(Value::Nil, |s| Value::Text(s.to_string()));
        match var {
            // A user whose state was never set is subscribed (the platform's default).
            Var::EmailGlobal => Value::Text(p.email_subscribe.unwrap_or(GlobalState::Subscribed).as_str().into()),
            Var::GroupState(g) => Value::Text(
                match state::stored(p, g) {
                    Status::Subscribed => "subscribed",
                    Status::Unsubscribed | Status::Unknown => "unsubscribed",
                }
                .into(),
            ),
            Var::SubmitUrl => Value::Text(self.submit_url.to_string()),
            Var::Custom(name) => json_value(p.custom.get(name)),
            Var::Local(_) => Value::Nil,
            Var::Attr(a) => match a {
                Attr::EmailAddress => text(p.email.as_ref().map(|e| e.as_str())),
                Attr::UserId => text(p.external_id.as_ref().map(|x| x.as_str())),
                Attr::PhoneNumber => text(p.phone.as_ref().map(|x| x.as_str())),
                Attr::FirstName => json_value(p.standard.get("first_name")),
                Attr::LastName => json_value(p.standard.get("last_name")),
                Attr::City => json_value(p.standard.get("home_city")),
                Attr::Country => json_value(p.standard.get("country")),
                Attr::Language => json_value(p.standard.get("language")),
                Attr::Gender => json_value(p.standard.get("gender")),
                Attr::DateOfBirth => json_value(p.standard.get("dob")),
                Attr::TimeZone => json_value(p.standard.get("time_zone")),
            },
        }
    }
}

/// Adds the title (unless the page has its own) and the options' tags to the head:
/// before `</head>`, else after `<head>`, else in a head made after `<html>`, else
/// after the doctype.
pub fn with_head(html: &str, title: &str, options: &Options) -> String {
    let lower = html.to_ascii_lowercase();
    let mut tags = String::new();
    if !lower.contains("<title") {
        tags.push_str(&format!("<title>{}</title>", escape_html(title)));
    }
    tags.push_str(&options.head_tags());
    let tag_end = |name: &str| {
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let at = from + i + name.len();
            if lower[at..].starts_with(|c: char| c == '>' || c.is_ascii_whitespace()) {
                return lower[at..].find('>').map(|j| at + j + 1);
            }
            from = at;
        }
        None
    };
    // At the end of the head, after the author's own `<meta charset>`.
    let (at, insert) = if let Some(at) = lower.find("</head") {
        (at, tags)
    } else if let Some(at) = tag_end("<head") {
        (at, tags)
    } else if let Some(at) = tag_end("<html") {
        (at, format!("<head>{tags}</head>"))
    } else {
        (tag_end("<!doctype").unwrap_or(0), tags)
    };
    format!("{}{insert}{}", &html[..at], &html[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_gets_the_title_and_tags_wherever_the_page_starts_it() {
        let o = Options { viewport: Some("width=device-width".into()), links: vec![] };
        let meta = "<meta name=\"viewport\" content=\"width=device-width\">";
        assert_eq!(
            with_head("<html><HEAD class=x><b>", "T<", &o),
            format!("<html><HEAD class=x><title>T&lt;</title>{meta}<b>")
        );
        assert_eq!(
            with_head("<head><meta charset=utf-8></HEAD><body>", "T", &o),
            format!("<head><meta charset=utf-8><title>T</title>{meta}</HEAD><body>")
        );
        assert_eq!(
            with_head("<html lang=en><body>", "T", &o),
            format!("<html lang=en><head><title>T</title>{meta}</head><body>")
        );
        assert_eq!(with_head("<!DOCTYPE html><p>", "T", &Options::default()), "<!DOCTYPE html><title>T</title><p>");
        assert_eq!(with_head("<header>x", "T", &Options::default()), "<title>T</title><header>x");
        assert_eq!(
            with_head("<head><title>Mine</title></head>", "T", &Options::default()),
            "<head><title>Mine</title></head>"
        );
    }

    #[test]
    fn a_form_is_read_against_the_fields_shown() {
        let shown = vec![FieldRef::EmailGlobal, FieldRef::Group("g1".into()), FieldRef::Group("g2".into())];
        assert_eq!(
            read_form(
                b"subscription_group_g1=unsubscribed&subscription_group_g1=subscribed&email_global_state=opted_in",
                &shown
            ),
            Ok(vec![
                Choice::Global(GlobalState::OptedIn),
                Choice::Group("g1".into(), GroupState::Subscribed),
                Choice::Group("g2".into(), GroupState::Unsubscribed),
            ])
        );
        assert!(read_form(b"other=1", &shown).unwrap_err().contains("Unknown form field 'other'"));
        assert!(read_form(b"email_global_state=maybe", &shown).is_err());
        assert!(read_form(b"subscription_group_g2=opted_in", &shown).is_err());
        assert!(read_form(&[0xff], &shown).is_err());
    }
}
