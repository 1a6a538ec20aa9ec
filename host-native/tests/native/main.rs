//! The native server's own tests, in one binary: each module starts `engage` as a
//! process (a server, or a command) and checks what a black-box HTTP suite cannot
//! (files on disk, signals, PostgreSQL outages, the command line). What they share is
//! in [`support`]: the server they own, the HTTP client, the `engage` runner and the
//! load client. The long reliability tests are a binary of their own
//! (`tests/reliability.rs`), run only when named.

mod support;

mod backup;
mod cdi_cli;
mod connections;
mod distribution;
mod groups_cli;
mod operations;
mod postgres_restart;
mod postgres_servers;
mod security;
mod state;
mod strict;
mod test_kit;
