//! The proactive loop's service side (issue 18): per-device directives
//! ([`directives`]), the anomaly detector that watches light runs and
//! issues them ([`detector`]: what it decides; [`investigation`]: one
//! trigger from directives to a stored report; [`task`]: the background
//! thread of `serve --auto`), and the stored reports ([`reports`]).
//! `docs/proactive.md` describes the loop.

pub mod detector;
pub mod directives;
pub mod investigation;
pub mod reports;
pub mod task;
