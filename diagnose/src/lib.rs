//! diagnose: skeleton, filled by its issue.
