//! The pages' templates (minijinja, HTML autoescaping: every value is
//! escaped unless a template marks it `|safe`, which only the SVG plots,
//! escaped when drawn, are). The templates are compiled into the binary.

use minijinja::Environment;
use serde::Serialize;

/// Every template, by name.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("login.html", include_str!("templates/login.html")),
    ("devices.html", include_str!("templates/devices.html")),
    ("runs.html", include_str!("templates/runs.html")),
    ("run.html", include_str!("templates/run.html")),
    ("diagnosis.html", include_str!("templates/diagnosis.html")),
    ("directives.html", include_str!("templates/directives.html")),
    ("confirm.html", include_str!("templates/confirm.html")),
    ("peers.html", include_str!("templates/peers.html")),
    ("reports.html", include_str!("templates/reports.html")),
    ("report.html", include_str!("templates/report.html")),
    ("incidents.html", include_str!("templates/incidents.html")),
    ("incident.html", include_str!("templates/incident.html")),
];

/// The stylesheet, served at `/style.css`.
pub const STYLE: &str = include_str!("templates/style.css");

/// The loaded templates.
pub struct Templates {
    env: Environment<'static>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates").finish_non_exhaustive()
    }
}

impl Templates {
    /// Parses every template (a syntax error is a build mistake, reported
    /// when the server starts).
    pub fn new() -> anyhow::Result<Templates> {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .map_err(|e| anyhow::anyhow!("web UI template {name}: {e:#}"))?;
        }
        Ok(Templates { env })
    }

    /// Renders template `name` with `context`.
    pub fn render(&self, name: &str, context: impl Serialize) -> Result<String, String> {
        self.env
            .get_template(name)
            .and_then(|t| t.render(context))
            .map_err(|e| format!("template {name}: {e:#}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses_and_escapes() {
        let t = Templates::new().unwrap();
        let html = t
            .render(
                "login.html",
                minijinja::context! { error => "<script>x</script>" },
            )
            .unwrap();
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>x"));
    }
}
