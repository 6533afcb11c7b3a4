//! The lab: testbeds made of real programs on this machine, for the demo and
//! the end-to-end tests. Nothing here is diagnosis; it drives the agent, the
//! service and the diagnosis from outside, as a user would.
//!
//! - [`DemoOptions`]: what `edge-demo` runs (its command line is the
//!   binary's, `src/bin/edge-demo/`);
//! - [`demo`]: `edge-demo`, the research's first case study (TCP
//!   memory misconfiguration) end to end;
//! - [`proactive`]: `edge-demo --proactive`, the same clients
//!   light-monitored and diagnosed by the service's detector by itself;
//! - [`netns`]: network namespaces joined by veth pairs on a bridge;
//! - [`http`]: a tiny HTTP server serving one file, inside a namespace;
//! - [`procs`]: child processes (commands run to completion, the local
//!   service killed on drop, finding the `edge-agent` binary).

pub mod demo;
mod http;
mod netns;
mod options;
mod proactive;
pub mod procs;

pub use demo::demo;
pub use options::DemoOptions;
