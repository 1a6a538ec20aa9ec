//! The JavaScript API of the playground (wasm only). The page renders; everything it
//! shows (responses, examples, curl commands, the key) comes from here.
//!
//! ```js
//! import init, { Playground, routes } from "./pkg/engage_www.js";
//! await init();
//! const pg = new Playground(localStorage.getItem("engage-playground"));
//! const res = pg.send("POST", "/users/track", "", "Authorization: Bearer " + pg.key, "{...}");
//! localStorage.setItem("engage-playground", pg.save());
//! ```

use engage_core::{Ctx, Response, Timestamp};
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::examples::{self, RouteInfo};
use crate::request::Draft;
use crate::session::Session;

/// The host's context: the browser's clock and `crypto.getRandomValues`.
fn ctx() -> Result<Ctx, JsError> {
    let mut seed = [0u8; 16];
    // Without real randomness no key may be minted.
    getrandom::fill(&mut seed).map_err(|e| JsError::new(&format!("no random source: {e}")))?;
    Ok(Ctx::new(Timestamp(js_sys::Date::now() as i64), seed))
}

fn set(obj: &Object, name: &str, value: impl Into<JsValue>) {
    // Setting a property on a plain object we just created cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(name), &value.into());
}

fn pairs(list: &[(String, String)]) -> Array {
    list.iter().map(|(k, v)| Array::of2(&JsValue::from_str(k), &JsValue::from_str(v))).collect()
}

fn route_object(r: &RouteInfo) -> Object {
    let o = Object::new();
    set(&o, "method", r.method);
    set(&o, "pattern", r.pattern);
    set(&o, "permission", r.permission);
    o
}

fn response_object(resp: Response) -> Object {
    let o = Object::new();
    set(&o, "status", resp.status);
    set(&o, "headers", pairs(&resp.headers));
    set(&o, "body", String::from_utf8_lossy(&resp.body).into_owned());
    o
}

/// Every public route: `[{method, pattern, permission}]`.
#[wasm_bindgen]
pub fn routes() -> Array {
    examples::public_routes().iter().map(route_object).collect()
}

/// The `curl` command for a request, sent to `base_url`.
#[wasm_bindgen]
pub fn curl(
    base_url: &str,
    method: &str,
    path: &str,
    query: &str,
    headers: &str,
    body: &str,
) -> Result<String, JsError> {
    let draft = Draft::new(method, path, query, headers, body).map_err(|e| JsError::new(&e))?;
    Ok(draft.to_curl(base_url))
}

/// A playground session: the core on an in-memory store.
#[wasm_bindgen]
pub struct Playground {
    session: Session,
    restore_error: Option<String>,
}

#[wasm_bindgen]
impl Playground {
    /// Restores the session saved by [`Playground::save`], or provisions a new one
    /// (workspace, all-permissions key, example group) when there is none or it is
    /// unreadable; `restoreError` then says why.
    #[wasm_bindgen(constructor)]
    pub fn new(saved: Option<String>) -> Result<Playground, JsError> {
        let restored = saved.filter(|s| !s.trim().is_empty()).map(|s| Session::restore(&s));
        match restored {
            Some(Ok(session)) => Ok(Playground { session, restore_error: None }),
            Some(Err(e)) => Ok(Playground { session: Self::fresh()?, restore_error: Some(e) }),
            None => Ok(Playground { session: Self::fresh()?, restore_error: None }),
        }
    }

    fn fresh() -> Result<Session, JsError> {
        Session::provision(ctx()?, ctx()?, ctx()?).map_err(|e| JsError::new(&e))
    }

    /// Starts over: an empty store with a new workspace key.
    pub fn reset(&mut self) -> Result<(), JsError> {
        self.session = Self::fresh()?;
        self.restore_error = None;
        Ok(())
    }

    /// The session's API key (every permission).
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.session.key().to_string()
    }

    /// The session's workspace.
    #[wasm_bindgen(getter)]
    pub fn workspace(&self) -> String {
        self.session.workspace().to_string()
    }

    /// Why a saved session could not be restored, if it could not.
    #[wasm_bindgen(getter, js_name = restoreError)]
    pub fn restore_error(&self) -> Option<String> {
        self.restore_error.clone()
    }

    /// Sends a request to the in-page engine: headers are `Name: value` lines.
    /// Returns `{status, headers: [[name, value]], body}`.
    pub fn send(&self, method: &str, path: &str, query: &str, headers: &str, body: &str) -> Result<Object, JsError> {
        let draft = Draft::new(method, path, query, headers, body).map_err(|e| JsError::new(&e))?;
        Ok(response_object(self.session.handle(draft.to_request(), ctx()?)))
    }

    /// A ready request per public route:
    /// `[{method, pattern, permission, path, query, headers: "Name: value" lines, body}]`.
    pub fn examples(&self) -> Array {
        let group = self.session.groups().into_iter().next().map(|g| g.id).unwrap_or_else(|| "GROUP_ID".into());
        examples::examples(self.session.key(), self.session.scim_token(), &group)
            .into_iter()
            .map(|e| {
                let o = route_object(&e.route);
                set(&o, "path", e.path);
                set(&o, "query", e.query);
                let headers: Vec<String> = e.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                set(&o, "headers", headers.join("\n"));
                set(&o, "body", e.body);
                o
            })
            .collect()
    }

    /// The whole session as text for the browser's storage (queued work applied first).
    pub fn save(&self) -> Result<String, JsError> {
        self.session.save(ctx()?).map_err(|e| JsError::new(&e))
    }
}
