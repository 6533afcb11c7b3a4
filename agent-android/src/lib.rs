//! agent-android: skeleton, filled by its issue.
