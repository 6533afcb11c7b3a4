//! The diagnosis as a readable report ([`text`]), as JSON ([`json`]), and as
//! one self-contained HTML page with a plot (SVG) of every rule attribute's
//! good and bad values, in the manner of the research's figures ([`html`]).

mod html;
mod json;
mod text;

pub(crate) use html::esc;
pub use html::{class_values_svg, html, rule_plots, RulePlot};
pub use json::json;
pub use text::text;
