//! Black-box tests: track_sync.
use engage_tests::Api;
