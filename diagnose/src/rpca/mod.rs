//! Diagnosis without labels, after CloudDiag (the research's
//! `clouddiag-rpca.txt`, §V): runs are grouped into categories that should
//! behave alike ([`categories`]: one program, one syscall signature); a
//! category whose run durations are over-dispersed (coefficient of
//! variation above α) is anomalous; its matrix (runs × syscalls, entries =
//! seconds in the syscall) is split by robust PCA ([`pcp`]) into a low-rank
//! part `L` and a sparse part `E`; the syscalls whose columns of `M` are
//! farthest from `L` (smallest cos θ) are the anomalous ones, and the large
//! entries of their columns of `E` name the runs, and so the devices, where
//! they were slow ([`analysis`]). Across categories, each (syscall, device)
//! is counted as often as it is found anomalous, and ranked by that count.
//! [`report`] prints the result as text, JSON or HTML; `edge-service
//! diagnose --method rpca` runs it (a [`crate::request::DiagnoseRequest`] with
//! [`crate::request::Method::Rpca`]).

pub mod analysis;
pub mod categories;
pub mod pcp;
pub mod report;

pub use analysis::{analyse, RpcaDiagnosis, RpcaOptions};
