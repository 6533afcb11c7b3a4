//! Host-side views of a summary (being written).
