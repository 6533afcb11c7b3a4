//! edge-service: takes a fleet's summary uploads over HTTP(S), stores them
//! durably (SQLite, or PostgreSQL for many instances: [`store`]), answers
//! queries, serves directives, and explains: the web UI ([`webui`]), the
//! proactive loop ([`proactive`]) and the `edge-service` binary
//! (`src/bin/edge-service/`, the only command line: this library takes
//! typed options such as [`serve::ServeOptions`]) run the `diagnose`
//! crate's methods on what is stored.
//!
//! Request path: [`server`] authenticates the device and splits the body
//! (`agent_core::framing`), [`quota`] holds each address and device to its
//! rate, [`ingest`] decodes each item with agent-core's strict decoder, and
//! the [`writer`] thread commits every waiting request in one transaction
//! of the [`store`] before anyone is acknowledged. Every JSON body a device
//! reads or the service answers is a type of the `wire` crate.

pub mod alerts;
pub mod conn;
pub mod directive;
pub mod ingest;
pub mod login_limit;
pub mod metrics;
pub mod online;
pub mod operators;
pub mod proactive;
pub mod quota;
pub mod retention;
pub mod serve;
mod server;
pub mod source;
pub mod store;
mod tls;
pub mod tls_admin;
mod tokens;
pub mod webui;
mod writer;
