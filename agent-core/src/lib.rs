//! Edge Agent's on-device core: the syscall event model, canonical syscall
//! ids shared by every architecture, streaming per-syscall statistics in fixed
//! memory, and the summary format (postcard, at most 2048 bytes).
//!
//! `#![no_std]`, no allocator, and no panics on any input: everything the
//! device does that is not platform-specific lives here, in the manner of
//! defmt's tiny on-device encoder (the host-side tools only decode).
//!
//! The flow: a platform shim (the ptrace tracer) turns each completed syscall
//! into a [`SyscallEvent`]; [`Collector::record`] folds it into the
//! statistics; at the end of a run (or a time window) [`Collector::summarize`]
//! produces a [`Summary`], and [`Summary::encode`] writes it in at most
//! [`MAX_ENCODED_LEN`] bytes, folding the smallest entries into "other" when
//! it would not fit.
#![no_std]
#![forbid(unsafe_code)]

mod arch;
pub mod collector;
pub mod duration;
mod event;
pub mod facts;
pub mod framing;
pub mod histogram;
mod id;
mod program;
pub mod stats;
pub mod summary;
pub mod syscall;

pub use arch::Arch;
pub use collector::{Collector, PeerFigures};
pub use event::{FdKind, SyscallEvent};
pub use facts::{Fact, FactError, Facts};
pub use histogram::Histogram;
pub use id::{DeviceId, ParseIdError, RunId, StreamId};
pub use program::{valid_program_name, MAX_PROGRAM_NAME_LEN, PROGRAM_NAME_RULE};
pub use summary::{
    Coverage, CpuTime, DecodeError, EncodeError, Exit, InFlight, InFlightCall, IoBytes, Kind,
    LastCall, Origin, Overflow, Peer, PeerAddr, PeerIp, PeerRest, Peers, RunRecord, Source,
    Summary, SyscallSummary, Transition, FORMAT_VERSION, MAX_ENCODED_LEN, OLDEST_FORMAT_VERSION,
};
pub use syscall::{only_list_ids, validate_only_list, Key, OnlyListError, SyscallId};

/// The agent's version, recorded in every summary's facts.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");
