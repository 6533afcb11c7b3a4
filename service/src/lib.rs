//! service: skeleton, filled by its issue.
