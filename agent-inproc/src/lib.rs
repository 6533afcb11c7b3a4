//! The in-process backend's core (issue 32): what wrappers inside the
//! observed program (an app that observes itself, or a program under
//! `LD_PRELOAD`) do with each call they observed. The wrappers and their
//! installation come on top of this crate; it holds the one part every
//! way of installing them shares:
//!
//! - [`Recorder`]: the process's statistics, one agent-core `Collector`
//!   (the same implementation every backend feeds), recorded into from any
//!   thread, from a signal handler, and from a handler that interrupted
//!   another recording, with no lock that can deadlock, no allocation, and
//!   nothing lost uncounted.
//!
//! Nothing here calls the system: the caller gives each event's times and
//! thread id and a key of the calling thread, so the recording can be
//! tested as it is, on any host.

mod recorder;

pub use recorder::{Recorder, RecorderStats, LOST_FACT, RING, SLOTS};
