//! The Linux shim (ptrace tracer); filled by the tracer issue.
