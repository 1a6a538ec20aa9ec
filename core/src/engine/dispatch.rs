//! One API request's way through once its key, permission and rate limit are
//! checked: the queued work it must see applied first (the route's
//! [`CatchUp`]), the platform's lenient forms read as the reference's, then its
//! family's endpoint.

use super::Engine;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::routes::{Api, CatchUp, Endpoint};
use crate::store::Store;
use crate::subscriptions::lists::{List, Removal};
use crate::track::queue::QueueRun;
use crate::{cdi, export, identity, preference_center, subscriptions, track};

impl<S: Store> Engine<S> {
    pub(super) async fn api(
        &self,
        api: Api,
        req: &Request,
        ws: &WorkspaceName,
        ctx: Ctx,
        caught_up: bool,
    ) -> Result<Response, ApiError> {
        let mut applied = QueueRun::default();
        match Endpoint::Api(api.clone()).catch_up() {
            CatchUp::All => self.apply_all(ctx).await?,
            // Read-your-writes: everything acknowledged before this request is applied first.
            CatchUp::Named => applied = self.catch_up(ws, track::backlog::seeds(req), ctx).await?,
            CatchUp::Nothing => {}
        }
        let mut resp = self.dispatch(api, req, ws, ctx, caught_up).await?;
        if resp.internal.is_none() {
            resp.internal = applied.set_aside_note();
        }
        Ok(resp)
    }

    pub(super) async fn dispatch(
        &self,
        api: Api,
        req: &Request,
        ws: &WorkspaceName,
        ctx: Ctx,
        caught_up: bool,
    ) -> Result<Response, ApiError> {
        let store = &self.store;
        // The platform's lenient forms read as the reference's (refused under --strict).
        let normalized = crate::dialect::normalize(&api, &req.body, self.config.dialect())?;
        let body = normalized.as_deref().unwrap_or(&req.body);
        match api {
            Api::Track => self.track(ws, body, ctx, caught_up).await,
            Api::TrackSync => track::track_sync(store, ws, body, ctx, self.config.dialect()).await,
            Api::ExportIds => export::export_ids(store, ws, body).await,
            Api::Identify => identity::identify::identify(store, ws, body, ctx).await,
            Api::Merge => identity::merge::merge(store, ws, body, ctx).await,
            Api::Delete => identity::delete::delete(store, ws, body, ctx).await,
            Api::AliasNew => identity::alias::alias_new(store, ws, body, ctx).await,
            Api::AliasUpdate => identity::alias::alias_update(store, ws, body, ctx).await,
            Api::ExternalIdsRename => identity::external_ids::rename_ids(store, ws, body, ctx).await,
            Api::ExternalIdsRemove => identity::external_ids::remove_ids(store, ws, body, ctx).await,
            Api::SubscriptionSetV1 => subscriptions::set::set_v1(store, ws, body, ctx).await,
            Api::SubscriptionSetV2 => subscriptions::set::set_v2(store, ws, body, ctx).await,
            Api::SubscriptionUserStatus => subscriptions::read::user_status(store, ws, req).await,
            Api::SubscriptionStatusGet => subscriptions::read::status_get(store, ws, req).await,
            Api::EmailStatus => subscriptions::email::status(store, ws, body, ctx).await,
            Api::EmailBlocklist => subscriptions::email::blocklist(store, ws, body, ctx).await,
            Api::EmailHardBounces => subscriptions::lists::read(store, ws, req, List::HardBounces).await,
            Api::EmailUnsubscribes => subscriptions::lists::read(store, ws, req, List::Unsubscribes).await,
            Api::EmailBounceRemove => subscriptions::lists::remove(store, ws, body, Removal::Bounce, ctx).await,
            Api::EmailSpamRemove => subscriptions::lists::remove(store, ws, body, Removal::Spam, ctx).await,
            Api::SmsInvalidPhones => subscriptions::lists::read(store, ws, req, List::InvalidPhones).await,
            Api::SmsInvalidPhonesRemove => {
                subscriptions::lists::remove(store, ws, body, Removal::InvalidPhones, ctx).await
            }
            Api::PreferenceCenter(endpoint) => {
                preference_center::handle(store, endpoint, ws, req, &self.links(req), ctx).await
            }
            Api::Cdi(endpoint) => cdi::handle(store, endpoint, ws, req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use serde_json::json;

    use crate::http::{Method, Notice, Request};
    use crate::store::memory::MemoryStore;
    use crate::testkit::Kit;

    /// With nothing queued a read takes no turn at the queue: it is answered while
    /// another holds the turn, so reads do not go one at a time.
    #[test]
    fn reads_with_nothing_queued_wait_for_no_turn() {
        let kit = Kit::over(MemoryStore::new(), true);
        let (status, _) = kit.post("/users/track/sync", json!({"attributes": [{"external_id": "a", "plan": "gold"}]}));
        assert_eq!(status, 201);
        let engine = kit.engine();
        let _held = pollster::block_on(engine.gate.backlog.lock());
        let req = kit.request(Method::Post, "/users/export/ids", json!({"external_ids": ["a"]}));
        let mut read = Box::pin(engine.handle(req, kit.ctx()));
        let Poll::Ready(resp) = read.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("a read with nothing queued waited for the queue's turn")
        };
        assert_eq!(resp.json_body()["users"][0]["custom_attributes"]["plan"], "gold");
    }

    /// Reads that wait for the queue's turn get it in the order they asked: one that
    /// asks while others wait goes after them, and each sees the write queued before
    /// it. (A mutex that let a newcomer in ahead of the waiter it had just woken kept
    /// some exports waiting for as long as a closed load of them lasted.)
    #[test]
    fn reads_waiting_for_the_queue_get_their_turns_in_the_order_they_asked() {
        let kit = Kit::over(MemoryStore::new(), true);
        kit.track_attributes(json!([{"external_id": "a", "plan": "gold"}]));
        let engine = kit.engine();
        let export =
            || engine.handle(kit.request(Method::Post, "/users/export/ids", json!({"external_ids": ["a"]})), kit.ctx());
        let mut cx = Context::from_waker(Waker::noop());
        // The applier's turn, held while two reads ask for theirs.
        let held = pollster::block_on(engine.gate.backlog.lock());
        let (mut first, mut second) = (Box::pin(export()), Box::pin(export()));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(held);
        let mut third = Box::pin(export());
        assert!(third.as_mut().poll(&mut cx).is_pending(), "a newcomer waits behind the reads already waiting");
        // Each in turn: the first, then the second, and only then the newcomer.
        let Poll::Ready(first) = first.as_mut().poll(&mut cx) else { panic!("the first to ask goes first") };
        assert!(third.as_mut().poll(&mut cx).is_pending(), "the newcomer waits for the second");
        let Poll::Ready(second) = second.as_mut().poll(&mut cx) else { panic!("the second goes next") };
        let Poll::Ready(third) = third.as_mut().poll(&mut cx) else { panic!("the newcomer goes last") };
        for resp in [first, second, third] {
            assert_eq!(resp.status, 201);
            assert_eq!(resp.json_body()["users"][0]["custom_attributes"]["plan"], "gold");
        }
    }

    /// A refused API key or SCIM token asks the host to say which database it serves;
    /// a refused admin token, or a request that was let in, does not.
    #[test]
    fn a_refused_credential_is_a_notice_for_the_host() {
        let kit = Kit::new();
        let notice = |req: Request| kit.handle(req).notice;
        let wrong = |path: &str| Request::new(Method::Get, path).header("Authorization", "Bearer wrong");
        assert_eq!(notice(wrong("/cdi/integrations")), Some(Notice::CredentialRefused));
        assert_eq!(notice(Request::new(Method::Get, "/cdi/integrations")), Some(Notice::CredentialRefused));
        assert_eq!(notice(wrong("/scim/v2/Users")), Some(Notice::CredentialRefused));
        assert_eq!(notice(wrong("/_engage/keys")), None);
        assert_eq!(kit.send(Method::Get, "/cdi/integrations", serde_json::Value::Null).notice, None);
    }
}
