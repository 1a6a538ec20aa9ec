//! Black-box tests: identify, merge, delete, aliases (issue 3).
