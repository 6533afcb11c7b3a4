//! The peer diagnosis as a reader's summary ([`text`]), as JSON in the
//! shape of issue 15 ([`json`]), and as one HTML page with a time series
//! per metric ([`html`]).

mod html;
mod json;
mod text;

pub use html::{html, series_plot, series_svg};
pub use json::json;
pub use text::text;

use agent_core::Facts;

/// A device's facts as (key, value) pairs: the fixed ones that are set,
/// then the free ones.
pub(crate) fn fact_pairs(f: &Facts) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = [
        ("program", f.program.as_str()),
        ("os_name", f.os_name.as_str()),
        ("os_version", f.os_version.as_str()),
        ("kernel", f.kernel.as_str()),
        ("device_model", f.device_model.as_str()),
        ("agent_version", f.agent_version.as_str()),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect();
    out.extend(f.extra.iter().map(|e| (e.key.as_str(), e.value.as_str())));
    out
}
