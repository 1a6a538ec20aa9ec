//! The invariants every answer is checked against ([`check`]: no 5xx, no
//! internal note, refusals in their family's shape) and the description of a
//! request that goes into a failure's message.

use serde_json::{json, Value};

use crate::http::{Method, Request, Response};
use crate::routes::{self, Auth, Endpoint, Scim};
use crate::scim::error::ERROR_URN;

pub(super) fn truncated(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}… ({} bytes)", s.chars().take(n).collect::<String>(), s.len())
    }
}

pub(super) fn describe(req: &Request) -> String {
    format!(
        "{} {}{}{} headers={:?} origin={:?} body={:?}",
        req.method.as_str(),
        req.path,
        if req.query.is_empty() { "" } else { "?" },
        req.query,
        req.headers,
        req.origin,
        truncated(&String::from_utf8_lossy(&req.body), 2000)
    )
}

/// The invariants of every answer.
pub(super) fn check(method: Method, path: &str, resp: &Response) -> Result<(), String> {
    // 501 is the answer of the SCIM endpoints this server does not offer (`/Me`,
    // `/Bulk`), and only of them: any other 5xx is a failure.
    let not_offered = matches!(routes::find(method, path), Ok((_, Endpoint::Scim(Scim::NotOffered(_)))));
    if resp.status >= 500 && !(resp.status == 501 && not_offered) {
        return Err(format!("a {} answer", resp.status));
    }
    // A note comes with a 5xx, or with the first answer after queued jobs were set
    // aside (undecodable, or over the bound on a profile's size: these inputs stay
    // far below it), so none is expected here.
    if let Some(note) = &resp.internal {
        return Err(format!("an internal note for the host's log: {note}"));
    }
    if (200..300).contains(&resp.status) {
        return Ok(());
    }
    // A HEAD is answered as its GET without the body.
    if method == Method::Head {
        return match resp.body.is_empty() {
            true => Ok(()),
            false => Err(format!("a HEAD answer with {} body bytes", resp.body.len())),
        };
    }
    // The public pages answer in HTML (the playground's 404 is for its host), and
    // so do the inspector's page and its login and logout.
    match routes::find(method, path) {
        Ok((route, _)) if matches!(route.auth, Auth::Public | Auth::SignIn) => return Ok(()),
        _ => {}
    }
    let body: Value = serde_json::from_slice(&resp.body)
        .map_err(|e| format!("a {} answer whose body is not JSON ({e})", resp.status))?;
    if crate::scim::protocol::owns(path) {
        let schemas = body["schemas"].as_array().is_some_and(|s| s.iter().any(|u| u == ERROR_URN));
        if !schemas || body["status"] != json!(resp.status) || !body["detail"].is_string() {
            return Err(format!("a {} answer not in SCIM's error shape: {body}", resp.status));
        }
    } else if !body["message"].is_string() {
        return Err(format!("a {} answer without a string 'message': {body}", resp.status));
    }
    Ok(())
}
