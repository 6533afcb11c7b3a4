//! The errors of the API, sorted by who is to blame: the caller's arguments
//! or the operation. The C ABI maps them to codes, JNI to exception classes.

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
    /// A bug: a panic was caught at the boundary.
    #[error("internal error in the Edge Agent library: {0}")]
    Internal(String),
}

impl Error {
    /// The C ABI's code for this error (see `include/edge_agent.h`).
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidArgument(_) => crate::ffi::EDGE_AGENT_EINVAL,
            Error::Trace(_) => crate::ffi::EDGE_AGENT_ETRACE,
            Error::Decode(_) => crate::ffi::EDGE_AGENT_EDECODE,
            Error::Spool(_) => crate::ffi::EDGE_AGENT_ESPOOL,
            Error::Upload(_) => crate::ffi::EDGE_AGENT_EUPLOAD,
            Error::Internal(_) => crate::ffi::EDGE_AGENT_EINTERNAL,
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
