//! Edge Agent's uploader: summaries are spooled on the device, crash-safe,
//! and sent in an off-peak window over TLS, each exactly once.
//!
//! - [`spool`]: atomic, bounded, locked spool directory;
//! - [`window`]: the off-peak window and the fleet spread;
//! - [`conditions`]: platform conditions (AC power, ...);
//! - [`tls`], [`transport`]: the ingest protocol over ureq + rustls;
//! - [`cert_errors`]: a refused server certificate explained in one line;
//! - [`retry`]: backoff with jitter;
//! - [`upload`]: one pass over the spool;
//! - [`session`]: an upload session (`edge-agent upload`'s options as
//!   typed values, the `--once` run and the daemon loop).

mod cert_errors;
pub mod conditions;
mod retry;
pub mod session;
pub mod spool;
pub mod tls;
pub mod transport;
mod upload;
pub mod window;
