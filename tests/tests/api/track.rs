//! Black-box tests: track.
use engage_tests::Api;
