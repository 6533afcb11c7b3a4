//! The errors of the API, sorted by who is to blame: the caller's arguments
//! or the operation. The C ABI maps them to codes, JNI to exception classes.

// The C ABI's codes (`include/edge_agent.h`), kept here with the mapping
// below so that the error type depends on nothing of the C layer.
/// Success.
pub const EDGE_AGENT_OK: std::ffi::c_int = 0;
/// Invalid argument (NULL pointer, empty command, bad fact, small buffer...).
pub const EDGE_AGENT_EINVAL: std::ffi::c_int = -1;
/// Tracing failed.
pub const EDGE_AGENT_ETRACE: std::ffi::c_int = -2;
/// Not a valid summary.
pub const EDGE_AGENT_EDECODE: std::ffi::c_int = -3;
/// The spool refused the summary.
pub const EDGE_AGENT_ESPOOL: std::ffi::c_int = -4;
/// The uploader failed.
pub const EDGE_AGENT_EUPLOAD: std::ffi::c_int = -5;
/// A bug inside the library (a caught panic).
pub const EDGE_AGENT_EINTERNAL: std::ffi::c_int = -6;
/// Not in the state the call needs (observing this process already, or
/// not yet, or no more).
pub const EDGE_AGENT_ESTATE: std::ffi::c_int = -7;
/// Observing this process could not begin (the GOT patcher refused).
pub const EDGE_AGENT_EOBSERVE: std::ffi::c_int = -8;

/// Why a call failed. The message always says what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller passed something invalid (empty command, bad fact, unknown
    /// syscall name, a buffer too small...). Java: `IllegalArgumentException`.
    #[error("{0}")]
    InvalidArgument(String),
    /// Tracing failed (the command could not be started, ptrace was denied...).
    #[error("trace failed: {0}")]
    Trace(String),
    /// The bytes are not a valid summary.
    #[error("not a valid summary: {0}")]
    Decode(String),
    /// The spool refused the summary (unwritable directory, disk full...).
    #[error("spool: {0}")]
    Spool(String),
    /// The uploader failed before it could report an exit status.
    #[error("upload: {0}")]
    Upload(String),
    /// The caller's buffer cannot hold the result: `needed` bytes can
    /// (nothing was consumed).
    #[error("buffer too small: {needed} bytes needed (EDGE_AGENT_SUMMARY_MAX is enough); nothing was consumed")]
    BufferTooSmall { needed: usize },
    /// The call does not fit the process's observation state (a second
    /// start, a snapshot before any start...). Java:
    /// `IllegalStateException`.
    #[error("{0}")]
    State(String),
    /// Observing this process could not begin; nothing was installed.
    #[error("cannot observe this process: {0}")]
    Observe(String),
    /// A bug: a panic was caught at the boundary.
    #[error("internal error in the Edge Agent library: {0}")]
    Internal(String),
}

impl Error {
    /// The C ABI's code for this error (see `include/edge_agent.h`).
    pub fn code(&self) -> std::ffi::c_int {
        match self {
            Error::InvalidArgument(_) | Error::BufferTooSmall { .. } => EDGE_AGENT_EINVAL,
            Error::Trace(_) => EDGE_AGENT_ETRACE,
            Error::Decode(_) => EDGE_AGENT_EDECODE,
            Error::Spool(_) => EDGE_AGENT_ESPOOL,
            Error::Upload(_) => EDGE_AGENT_EUPLOAD,
            Error::State(_) => EDGE_AGENT_ESTATE,
            Error::Observe(_) => EDGE_AGENT_EOBSERVE,
            Error::Internal(_) => EDGE_AGENT_EINTERNAL,
        }
    }

    /// Turns a caught panic's payload into an [`Error::Internal`].
    pub fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Error {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        Error::Internal(text)
    }
}
