//! The unsupervised diagnosis as a readable report ([`text`]), as JSON
//! ([`json`]) and as one self-contained HTML page ([`html`]), like
//! `edge-service diagnose`'s reports.

mod html;
mod json;
mod text;

pub use html::html;
pub use json::json;
pub use text::text;
