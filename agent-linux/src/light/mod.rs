//! Light monitoring (`watch --light`): every matching run is noticed and
//! recorded from `/proc` alone, with no ptrace and no stop, as a light
//! record (start, duration, exit, CPU time, I/O bytes, facts); per-device
//! directives pick the runs to trace fully instead.
//!
//! - [`procfs`]: what is read of a process (`/proc/PID/stat`, `/proc/PID/io`).
//! - [`runs`]: processes grouped into runs, sampled, turned into records.
//! - [`directed`]: which new runs the per-device directives take, counted.

pub mod directed;
pub mod procfs;
pub mod runs;

pub use directed::{DeviceDirective, DirectedRuns};
pub use runs::LightRuns;
