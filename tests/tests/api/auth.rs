//! Black-box tests: auth.
use engage_tests::Api;
