//! Faults a test injects to check its client's retries, as WireMock's `fault` and
//! `fixedDelayMilliseconds` and LocalStack's chaos API do: `POST /_engage/faults`
//! with `{"method", "path", "workspace", "status", "times" | "probability",
//! "delay_ms", "retry_after_secs"}`. A request that matches (method; the path sent or
//! the route's pattern; the workspace its key acts in) is answered with `status` as
//! the platform answers it (a 429 as real limiting does, with `X-Ratelimit-Retry-After`
//! and `Retry-After`; a 5xx in the error shape), after `delay_ms`; `delay_ms` alone
//! delays the normal answer. A faulted request reaches no endpoint and no rate limit:
//! it changes nothing. `times` counts the requests a fault answers (then it is gone);
//! `probability` (0 to 1) answers that share of them, drawn from the request's seed.
//! Faults live in the server's memory, only with `--faults` (or `--ephemeral`).

use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::http::{Method, Response};

/// Most faults a server holds at once.
pub const MAX_FAULTS: usize = 100;
/// Longest delay a fault may add (ms).
pub const MAX_DELAY_MS: u32 = 60_000;

const FIELDS: [&str; 8] =
    ["method", "path", "workspace", "status", "times", "probability", "delay_ms", "retry_after_secs"];

/// How often a fault answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Occurs {
    /// Every matching request.
    Always,
    /// The next this many.
    Times(u64),
    /// This share of them.
    Probability(f64),
}

/// One fault.
#[derive(Clone, Debug, PartialEq)]
struct Fault {
    id: String,
    method: Option<Method>,
    path: Option<String>,
    workspace: Option<String>,
    status: Option<u16>,
    occurs: Occurs,
    delay_ms: u32,
    retry_after_secs: u64,
}

impl Fault {
    fn shown(&self) -> Value {
        let mut v = json!({
            "id": self.id, "method": self.method.map(Method::as_str), "path": self.path,
            "workspace": self.workspace, "status": self.status, "delay_ms": self.delay_ms,
            "retry_after_secs": self.retry_after_secs,
        });
        match self.occurs {
            Occurs::Always => {}
            Occurs::Times(n) => v["times"] = json!(n),
            Occurs::Probability(p) => v["probability"] = json!(p),
        }
        v
    }
}

/// What a request met: the fault's id, and the answer to give in place of the
/// endpoint's (none: the normal answer, delayed).
#[derive(Debug)]
pub struct Met {
    /// The fault's id (journaled with the request).
    pub id: String,
    /// The answer in place of the endpoint's.
    pub answer: Option<Response>,
    /// How long the host waits before writing the answer (ms).
    pub delay_ms: u32,
}

/// The faults a server holds.
#[derive(Debug, Default)]
pub struct Faults {
    list: Mutex<Vec<Fault>>,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad(message)
}

impl Faults {
    /// Adds a fault from a request body; answers its id (`n`: a number unique in
    /// this server, from the caller's counter).
    pub fn add(&self, body: &[u8], n: u64) -> Result<String, ApiError> {
        let m: Map<String, Value> = serde_json::from_slice(body).map_err(|_| {
            bad("a fault is a JSON object: method, path, workspace, status, times or probability, delay_ms, retry_after_secs")
        })?;
        if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(bad(format!("unknown fault field '{k}' (allowed: {})", FIELDS.join(", "))));
        }
        let text = |name: &str| -> Result<Option<String>, ApiError> {
            match m.get(name) {
                None => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(bad(format!("'{name}' must be a non-empty string"))),
            }
        };
        let whole = |name: &str, max: u64| -> Result<Option<u64>, ApiError> {
            match m.get(name) {
                None | Some(Value::Null) => Ok(None),
                // JSON Schema's integers include 3.0.
                Some(v) => v
                    .as_f64()
                    .filter(|n| n.fract() == 0.0 && (0.0..=max as f64).contains(n))
                    .map(|n| Some(n as u64))
                    .ok_or_else(|| bad(format!("'{name}' must be a whole number from 0 to {max}"))),
            }
        };
        let method = text("method")?.as_deref().map(super::requests::method).transpose()?;
        let status = match whole("status", 599)? {
            None => None,
            Some(s) if (400..=599).contains(&s) => Some(s as u16),
            Some(_) => return Err(bad("'status' must be an error status, 400 to 599")),
        };
        let occurs = match (whole("times", u64::from(u32::MAX))?, m.get("probability").filter(|p| !p.is_null())) {
            (Some(_), Some(_)) => return Err(bad("give 'times' or 'probability', not both")),
            (Some(0), None) => return Err(bad("'times' must be at least 1")),
            (Some(n), None) => Occurs::Times(n),
            (None, Some(p)) => match p.as_f64().filter(|p| (0.0..=1.0).contains(p)) {
                Some(p) => Occurs::Probability(p),
                None => return Err(bad("'probability' must be a number from 0 to 1")),
            },
            (None, None) => Occurs::Always,
        };
        let delay_ms = whole("delay_ms", u64::from(MAX_DELAY_MS))?.unwrap_or(0) as u32;
        if status.is_none() && delay_ms == 0 {
            return Err(bad("a fault needs a 'status' to answer, or a 'delay_ms' to add"));
        }
        let fault = Fault {
            id: format!("fault-{n}"),
            method,
            path: text("path")?,
            workspace: text("workspace")?,
            status,
            occurs,
            delay_ms,
            retry_after_secs: whole("retry_after_secs", 86_400)?.unwrap_or(1),
        };
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= MAX_FAULTS {
            return Err(bad(format!("at most {MAX_FAULTS} faults at once: remove some first")));
        }
        let id = fault.id.clone();
        list.push(fault);
        Ok(id)
    }

    /// Every fault, oldest first.
    pub fn list(&self) -> Vec<Value> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).iter().map(Fault::shown).collect()
    }

    /// Removes the fault `id` (true) or nothing (false).
    pub fn remove(&self, id: &str) -> bool {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let before = list.len();
        list.retain(|f| f.id != id);
        list.len() < before
    }

    /// Removes every fault (of `workspace`); answers how many.
    pub fn clear(&self, workspace: Option<&str>) -> usize {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let before = list.len();
        list.retain(|f| workspace.is_some_and(|w| f.workspace.as_deref() != Some(w)));
        before - list.len()
    }

    /// The first fault a request meets, if any: counted (a fault whose `times` run
    /// out is gone) and drawn (`probability`, from `roll`, uniform in 0 to 1).
    pub fn meet(&self, method: Method, path: &str, route: &str, workspace: Option<&str>, roll: f64) -> Option<Met> {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let at = list.iter().position(|f| {
            f.method.is_none_or(|m| m == method)
                && f.path.as_deref().is_none_or(|p| p == path || p == route)
                && f.workspace.as_deref().is_none_or(|w| Some(w) == workspace)
        })?;
        let fault = list[at].clone();
        match fault.occurs {
            Occurs::Always => {}
            Occurs::Probability(p) if roll >= p => return None,
            Occurs::Probability(_) => {}
            Occurs::Times(1) => drop(list.remove(at)),
            Occurs::Times(n) => list[at].occurs = Occurs::Times(n - 1),
        }
        let answer = fault.status.map(|status| answer(status, fault.retry_after_secs));
        Some(Met { id: fault.id, answer, delay_ms: fault.delay_ms })
    }
}

/// A status answered as the platform answers it.
fn answer(status: u16, retry_after: u64) -> Response {
    match status {
        429 => ApiError::RateLimited { retry_after }.into_response(),
        _ => ApiError::Injected { status, retry_after }.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(f: &Faults, body: Value) -> Result<String, u16> {
        f.add(body.to_string().as_bytes(), 1).map_err(|e| e.status())
    }

    #[test]
    fn a_fault_answers_the_requests_it_matches_as_often_as_it_says() {
        let f = Faults::default();
        add(&f, json!({"method": "post", "path": "/users/track", "workspace": "w", "status": 429, "times": 2, "retry_after_secs": 7}))
            .unwrap();
        let meet = |path: &str, ws: Option<&str>| f.meet(Method::Post, path, "/users/track", ws, 0.5);
        assert!(meet("/users/track", Some("other")).is_none());
        let met = meet("/users/track", Some("w")).unwrap();
        let answer = met.answer.unwrap();
        assert_eq!(answer.status, 429);
        assert_eq!(answer.header_value("Retry-After"), Some("7"));
        assert_eq!(answer.header_value("X-Ratelimit-Retry-After"), Some("7"));
        assert!(meet("/users/track", Some("w")).is_some());
        assert!(meet("/users/track", Some("w")).is_none(), "two times, then gone");
        assert!(f.list().is_empty());

        add(&f, json!({"status": 503, "probability": 0.25})).unwrap();
        assert!(f.meet(Method::Get, "/x", "/x", None, 0.2).is_some());
        assert!(f.meet(Method::Get, "/x", "/x", None, 0.3).is_none());
        let answer = f.meet(Method::Get, "/x", "/x", None, 0.0).unwrap().answer.unwrap();
        assert_eq!((answer.status, answer.json_body()["message"].is_string()), (503, true));
        assert_eq!(f.clear(None), 1);

        add(&f, json!({"delay_ms": 250})).unwrap();
        let met = f.meet(Method::Get, "/x", "/x", None, 0.0).unwrap();
        assert_eq!((met.answer.is_none(), met.delay_ms), (true, 250));
    }

    #[test]
    fn faults_out_of_shape_are_refused() {
        let f = Faults::default();
        for bad in [
            json!({}),
            json!({"status": 200}),
            json!({"status": 429, "times": 1, "probability": 0.5}),
            json!({"status": 429, "times": 0}),
            json!({"status": 429, "probability": 2}),
            json!({"delay_ms": 60_001}),
            json!({"status": 500, "verb": "GET"}),
            json!({"status": 500, "method": "FLY"}),
            json!({"status": 500, "path": ""}),
        ] {
            assert_eq!(add(&f, bad.clone()), Err(400), "{bad}");
        }
        assert!(f.list().is_empty());
    }
}
