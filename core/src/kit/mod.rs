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
pub mod inspect;
pub mod journal;
pub mod key;
pub mod page;
pub mod reset;
pub mod schema;
pub mod seed;
pub mod session;
