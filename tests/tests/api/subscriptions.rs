//! Black-box tests: subscription groups and email state (issue 4).
