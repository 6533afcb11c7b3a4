//! Root-cause rules from Edge Agent summaries (the research's Algorithm 1).
//!
//! Window summaries (one per time window of a traced run) are left out, or
//! merged into one run per stream with `--merge-windows` ([`windows`]).
//!
//! The flow: summaries (from files or the service's store, [`input`]) are
//! labelled good or bad ([`label`]: given, or by clustering durations),
//! syscall names with the same meaning are merged ([`mapping`]), each run
//! becomes a row of named attributes ([`attributes`]) over the syscalls every
//! run made ([`intersection`]), and decision trees ([`tree`]) are built and
//! read as rules ([`rules`]) again and again, each time without the previous
//! root attribute. [`analysis`] runs these steps; [`report`] prints the
//! result as text, JSON or HTML; [`request`] is one diagnosis asked for
//! (what `edge-service diagnose` runs: no command line here, the binary
//! turns its arguments into a request). (The demo that drives it end to end
//! lives in the `lab` crate.)

pub mod analysis;
pub mod attributes;
pub mod dataset;
pub mod fmt;
pub mod input;
mod intersection;
pub mod label;
pub mod mapping;
pub mod peers;
pub mod report;
pub mod request;
pub mod rpca;
pub mod rules;
pub mod selection;
pub mod time;
mod time_gap;
pub mod tree;
pub mod windows;
