//! uploader: skeleton, filled by its issue.
