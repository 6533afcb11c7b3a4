//! edge-service: takes a fleet's summary uploads over HTTP(S), stores them
//! durably in SQLite (one row per run, one per (run, syscall, fd kind), the
//! raw summary kept), answers queries and serves directives.
//!
//! Request path: [`server`] authenticates and splits the body
//! ([`framing`]), [`ingest`] decodes each item with agent-core's strict
//! decoder, and the [`writer`] thread commits every waiting request in one
//! transaction of the [`store`] before anyone is acknowledged.

pub mod cli;
pub mod conn;
pub mod directive;
pub mod ingest;
pub mod login_limit;
pub mod metrics;
pub mod operators;
pub mod proactive;
pub mod quota;
pub mod retention;
pub mod serve;
pub mod server;
pub mod source;
pub mod store;
pub mod tls;
pub mod tls_admin;
pub mod tokens;
pub mod webui;
pub mod writer;
