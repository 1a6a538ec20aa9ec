//! The test kit: what people who run Engage to test their own application get from
//! the tools they use for other APIs (LocalStack's reset, WireMock's request
//! journal, stripe-mock's fixtures, a clock a test can move), and a page to see
//! the data. None of it is the platform's API: the routes live under `/_engage/`
//! beside the operator's, need the admin token (or the inspector's session), and
//! do not exist without one.
//!
//! Pure parts live here ([`clock`] parses a clock change, [`key`] makes a known
//! key exist, [`reset`] removes data, [`seed`] loads a fixtures file through the
//! engine, [`journal`] keeps the recent requests, [`session`] the inspector's
//! cookie, [`inspect`] what the inspector reads, [`page`] its HTML); the engine
//! runs the routes in `engine::kit`, where the queue and the journal are.

pub mod clock;
pub mod documents;
pub mod faults;
pub mod fixed;
pub mod inspect;
pub mod journal;
pub mod key;
pub mod page;
pub mod requests;
pub mod reset;
pub mod schema;
pub mod seed;
pub mod session;
pub mod snapshots;

/// The test kit's state in a running engine: the operator's credential and what
/// guards it, the request journal, and the lock that loads one fixtures file at a
/// time. Kept apart from the engine's own (the queue's gate, the rate limits).
pub struct State {
    /// SHA-256 of the admin token; none: the operator's and the kit's routes do not
    /// exist.
    pub admin_token_hash: Option<String>,
    /// The latest requests answered.
    pub journal: journal::Journal,
    /// Held while a fixtures file loads: one at a time in this process.
    pub seeding: tokio::sync::Mutex<()>,
    /// Failed admin-token attempts per client.
    pub guard: session::Guard,
    /// The faults injected (none unless faults are on).
    pub faults: faults::Faults,
    /// The number of the next fault.
    pub next_fault: std::sync::atomic::AtomicU64,
    /// The snapshots kept.
    pub snapshots: snapshots::Shelf,
    /// The workspaces whose clock a test moved.
    pub clocks: clock::Offsets,
    /// With `--id-seed`: the randomness and the clock every request gets.
    pub fixed: Option<fixed::Fixed>,
}

impl State {
    /// The state of an engine configured with `admin_token` (ignored when too short
    /// to guard anything: hosts refuse to start with one, see
    /// [`session::check_admin_token`]) and `id_seed` (`--id-seed`).
    pub fn new(
        admin_token: Option<&str>,
        journal_bodies: bool,
        admin_failures_per_minute: u32,
        id_seed: Option<u64>,
    ) -> State {
        State {
            admin_token_hash: admin_token.filter(|t| session::check_admin_token(t).is_ok()).map(crate::auth::key_hash),
            journal: journal::Journal::new(journal_bodies),
            seeding: tokio::sync::Mutex::new(()),
            guard: session::Guard::new(admin_failures_per_minute),
            faults: faults::Faults::default(),
            next_fault: std::sync::atomic::AtomicU64::new(1),
            snapshots: snapshots::Shelf::default(),
            clocks: clock::Offsets::default(),
            fixed: id_seed.map(fixed::Fixed::new),
        }
    }
}
