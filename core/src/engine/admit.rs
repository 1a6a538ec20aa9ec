//! The one credential step every request goes through before any family's code:
//! the route table's credential column ([`Auth`]) decides what a request must show,
//! so that no route can forget to ask. An API key must hold the route's permission
//! and be within its rate limit; a SCIM token must be for the request's origin and
//! within the company's daily count; an operator or test-kit route needs the admin
//! token or the inspector's session.

use super::Engine;
use crate::auth::KeyRecord;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::input;
use crate::kit::faults::Met;
use crate::ratelimit::Decision;
use crate::routes::{Api, Auth, Endpoint, Route};
use crate::scim;
use crate::scim::token::ScimToken;
use crate::store::Store;

/// What the credential step let through, and with what.
pub(super) enum Admitted {
    /// Nothing to carry: a public route, or an admin token or session shown.
    Open,
    /// An API key, its rate limit's count, and an injected delay it met (the
    /// fault's id and the wait, ms), and the request's context on its
    /// workspace's clock.
    Key(KeyRecord, Decision, Option<(String, u32)>, Ctx),
    /// A SCIM token, and the company's count.
    Scim(ScimToken, Decision),
    /// Answered already: a SCIM credential refused (in SCIM's shape), an injected
    /// fault, or the queue not ready for a track request.
    Answered(Response),
}

impl<S: Store> Engine<S> {
    /// The one credential step, before any family's code: the route table's
    /// credential column decides what a request must show (a key with the route's
    /// permission, within its rate limit; a SCIM token; the admin token or the
    /// inspector's session), so that no route can forget to ask.
    pub(super) async fn admit(
        &self,
        route: &Route,
        endpoint: &Endpoint,
        req: &Request,
        ctx: Ctx,
        caught_up: bool,
    ) -> Result<Admitted, ApiError> {
        match route.auth {
            // The preference pages' link token is their credential, checked where it
            // is decoded (it names the user); the inspector's page and sign-in check
            // the session or the token themselves.
            Auth::Public | Auth::SignIn => Ok(Admitted::Open),
            Auth::Admin => {
                let admin = self.kit.admin_token_hash.as_deref();
                crate::kit::session::authorize(&self.store, &self.kit.guard, req, admin, ctx.wall).await?;
                Ok(Admitted::Open)
            }
            Auth::Scim => {
                let Endpoint::Scim(scim) = endpoint else { return Err(ApiError::RouteNotFound) };
                match scim::admit(&self.store, &self.limiter, scim, req, ctx).await {
                    Ok((token, decision)) => Ok(Admitted::Scim(token, decision)),
                    Err(e) => Ok(Admitted::Answered(e.into_response())),
                }
            }
            Auth::Key(permission, bucket) => {
                if self.config.strict {
                    input::check_json_media_type(req)?;
                }
                let key = self.authenticate(req, ctx.now).await?;
                // From here on the request runs on its workspace's clock (a test may
                // have moved it: rate-limit windows, default times, link expiry).
                let ctx = self.kit.clocks.at(key.workspace.as_str(), ctx);
                if !key.allows(permission) {
                    return Err(ApiError::MissingPermission(permission));
                }
                // A fault a test injected answers before the endpoint and the rate
                // limit: the request changes nothing. A request handed back met its
                // fault the first time.
                let met = match self.config.faults && !caught_up {
                    true => self.kit.faults.meet(
                        req.method,
                        &req.path,
                        route.pattern,
                        Some(key.workspace.as_str()),
                        roll(ctx),
                    ),
                    false => None,
                };
                let delayed = match met {
                    Some(Met { id, answer: Some(mut answer), delay_ms }) => {
                        let aside = answer.aside_mut();
                        (aside.workspace, aside.fault, aside.delay_ms) =
                            (Some(key.workspace.as_str().into()), Some(id), delay_ms);
                        return Ok(Admitted::Answered(answer));
                    }
                    Some(Met { id, answer: None, delay_ms }) => Some((id, delay_ms)),
                    None => None,
                };
                if matches!(endpoint, Endpoint::Api(Api::Track)) && !caught_up {
                    if let Some(not_yet) = self.ledger_not_ready(ctx).await? {
                        return Ok(Admitted::Answered(not_yet));
                    }
                }
                // A request handed back was counted the first time (its headers are
                // carried over by `handle_caught_up`).
                let decision = match caught_up {
                    false => self.limiter.check(&self.store, key.workspace.as_str(), bucket, ctx.now).await,
                    true => Decision::Unlimited,
                };
                if let Decision::Limited { retry_after } = decision {
                    return Err(ApiError::RateLimited { retry_after });
                }
                Ok(Admitted::Key(key, decision, delayed, ctx))
            }
        }
    }
}

/// A draw uniform in 0 to 1 from the request's seed (a fault's `probability`).
fn roll(ctx: Ctx) -> f64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&ctx.seed[..8]);
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use crate::http::{Method, Request};
    use crate::routes::{Auth, ROUTES};
    use crate::testkit::Kit;

    /// Every row of the route table whose credential column asks for one refuses a
    /// request without it, and one with a wrong one, with a 401 and before any
    /// family's code: a new route cannot be open by forgetting to ask.
    #[test]
    fn every_route_refuses_a_missing_or_wrong_credential() {
        let kit = Kit::new();
        let mut checked = 0;
        for route in ROUTES {
            if matches!(route.auth, Auth::Public | Auth::SignIn) {
                continue;
            }
            let path = route.pattern.replace("{..}", "x").replace("{}", "x");
            let body = match route.method {
                Method::Get | Method::Head | Method::Delete => String::new(),
                _ => "{}".to_string(),
            };
            let mut bare = Request::new(route.method, &path).header("Content-Type", "application/json").body(body);
            // Each route from its own address: wrong admin tokens are throttled per client.
            bare.client = Some(format!("client-{checked}"));
            for (what, req) in [
                ("no credential", bare.clone()),
                ("a wrong one", bare.clone().header("Authorization", "Bearer wrong-credential")),
                (
                    "a wrong one",
                    bare.clone().header("X-Request-Origin", "example.com").header("Authorization", "Bearer x"),
                ),
            ] {
                let resp = kit.handle(req);
                assert_eq!(resp.status, 401, "{:?} {} with {what}: {}", route.method, route.pattern, resp.json_body());
            }
            checked += 1;
        }
        assert!(checked > 60, "{checked} routes");
    }
}
