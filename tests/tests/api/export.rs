//! Black-box tests: export.
use engage_tests::Api;
