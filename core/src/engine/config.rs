//! The engine's settings, chosen by the host at start-up.

use crate::service::{Build, Playground};
use crate::{input, preference_center, track};

/// Engine settings.
#[derive(Clone)]
pub struct Config {
    /// Largest request body accepted; larger bodies get 413. The platform documents 4 MB.
    pub max_body_bytes: usize,
    /// Enforce the spec's rate limits.
    pub rate_limits: bool,
    /// Queued jobs applied per commit.
    pub apply_batch: usize,
    /// Operator token enabling the `/_engage/` routes; `None` hides them.
    pub admin_token: Option<String>,
    /// Wrong admin tokens one client address may present in a minute before every
    /// attempt from it waits out the minute (429).
    pub admin_failures_per_minute: u32,
    /// The server's public address, the base of preference-center links; `None`:
    /// the origin the request arrived at.
    pub public_url: Option<String>,
    /// How long a preference-center link stays valid, in seconds.
    pub link_ttl_secs: u64,
    /// Whether this host runs warehouse syncs (the native server does; the edge and
    /// the playground only answer the status endpoints).
    pub runs_syncs: bool,
    /// Most seconds of applying the queue may hold (jobs waiting over the rate they
    /// were applied at): past it `/users/track` answers 503 with `Retry-After`
    /// before acknowledging anything. `None`: unbounded.
    pub max_backlog_secs: Option<u64>,
    /// Whether the host applies the queue in the background all the time (the native
    /// server). Then a request applies ahead of the queue only the queued jobs that
    /// concern the users it names; otherwise it applies everything queued before it.
    pub applies_in_background: bool,
    /// Whether other processes write the same store (several servers on one
    /// PostgreSQL database). Then nothing is applied ahead of the queue: another
    /// server's applier may take the same job at once, and what makes an applier
    /// skip a job applied early is known to the process that applied it only. A
    /// request that needs read-your-writes applies everything queued before it, in
    /// order, as appliers do (two of them racing simply retry).
    pub shared_store: bool,
    /// Read requests as the reference writes them: a body whose `Content-Type` is
    /// not JSON is a 415, and every form the hosted platform accepts beyond the
    /// reference a 400 (`crate::dialect`).
    pub strict: bool,
    /// Offer `POST /_engage/clock` (the host keeps a settable clock).
    pub test_clock: bool,
    /// Keep request and response bodies in the request journal.
    pub journal_bodies: bool,
    /// Offer the test kit's faults (`/_engage/faults`): a test makes matching
    /// requests fail or wait.
    pub faults: bool,
    /// `--id-seed N`: every id and the clock come from N (see [`crate::kit::fixed`]).
    pub id_seed: Option<u64>,
    /// What the host has of the built playground at start-up (the landing page
    /// links it, says it is being built, or says how to build it); a host moves it
    /// on with [`crate::Engine::set_playground`].
    pub playground: Playground,
    /// Which build answers (`/healthz` and the landing page show it).
    pub build: Build,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The admin token is a secret: never print it.
        f.debug_struct("Config")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("rate_limits", &self.rate_limits)
            .field("apply_batch", &self.apply_batch)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<set>"))
            .field("admin_failures_per_minute", &self.admin_failures_per_minute)
            .field("public_url", &self.public_url)
            .field("link_ttl_secs", &self.link_ttl_secs)
            .field("runs_syncs", &self.runs_syncs)
            .field("max_backlog_secs", &self.max_backlog_secs)
            .field("applies_in_background", &self.applies_in_background)
            .field("shared_store", &self.shared_store)
            .field("strict", &self.strict)
            .field("test_clock", &self.test_clock)
            .field("journal_bodies", &self.journal_bodies)
            .field("faults", &self.faults)
            .field("id_seed", &self.id_seed)
            .field("playground", &self.playground)
            .field("build", &self.build)
            .finish()
    }
}

impl Config {
    /// How requests are read: as the platform reads them, or (`--strict`) as the
    /// reference writes them.
    pub(crate) fn dialect(&self) -> crate::dialect::Dialect {
        match self.strict {
            true => crate::dialect::Dialect::Strict,
            false => crate::dialect::Dialect::Platform,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_body_bytes: input::DEFAULT_MAX_BODY_BYTES,
            rate_limits: true,
            apply_batch: track::queue::DEFAULT_BATCH,
            admin_token: None,
            admin_failures_per_minute: crate::kit::session::MAX_FAILURES,
            public_url: None,
            link_ttl_secs: preference_center::link::DEFAULT_LINK_TTL_SECS,
            runs_syncs: false,
            max_backlog_secs: None,
            applies_in_background: false,
            shared_store: false,
            strict: false,
            test_clock: false,
            journal_bodies: false,
            faults: false,
            id_seed: None,
            playground: Playground::Served,
            build: Build::default(),
        }
    }
}
