//! The facts a summary carries about where it was made: OS, kernel, device
//! model, agent version, program, and the caller's free `key=value` facts.

use std::path::Path;

use agent_core::facts::truncated;
use agent_core::Facts;
use anyhow::{bail, Context};

use crate::sys;

/// What the platform says about itself. On Android the caller (the Android
/// shim, which reads `ro.build.*` through getprop) passes its own in
/// [`crate::TraceOptions::platform`]; elsewhere [`PlatformFacts::detect`]
/// reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlatformFacts {
    /// OS name (`Debian GNU/Linux`).
    pub os_name: String,
    /// OS version (`12`).
    pub os_version: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Device model (DMI product name, or the device tree's model).
    pub device_model: String,
}

impl PlatformFacts {
    /// Reads `/etc/os-release`, `uname` and the DMI or device-tree model.
    pub fn detect() -> PlatformFacts {
        let (kernel, _) = sys::uname();
        let os_release = std::fs::read_to_string("/etc/os-release")
            .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
            .unwrap_or_default();
        let (mut os_name, os_version) = parse_os_release(&os_release);
        if os_name.is_empty() && cfg!(target_os = "android") {
            os_name = "Android".into();
        }
        let device_model = read_trimmed("/sys/class/dmi/id/product_name")
            .or_else(|| read_trimmed("/proc/device-tree/model"))
            .unwrap_or_default();
        PlatformFacts {
            os_name,
            os_version,
            kernel,
            device_model,
        }
    }
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let s = String::from_utf8_lossy(&bytes);
    let s = s.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    (!s.is_empty()).then(|| s.to_string())
}

/// NAME and VERSION_ID of an os-release file.
pub fn parse_os_release(text: &str) -> (String, String) {
    let mut name = String::new();
    let mut version = String::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
        match k.trim() {
            "NAME" => name = v,
            "VERSION_ID" => version = v,
            _ => {}
        }
    }
    (name, version)
}

/// The summary's facts: platform, agent version, program, then the free
/// facts in order (each validated; the first bad one is the error).
pub fn build(
    platform: &PlatformFacts,
    program: &str,
    extra: &[(String, String)],
) -> anyhow::Result<Facts> {
    let mut facts = Facts::new();
    facts.os_name = truncated(&platform.os_name);
    facts.os_version = truncated(&platform.os_version);
    facts.kernel = truncated(&platform.kernel);
    facts.device_model = truncated(&platform.device_model);
    facts.program = truncated(program);
    for (k, v) in extra {
        if let Err(e) = facts.add(k, v) {
            bail!("bad fact {}: {e}", echo(&format!("{k}={v}")));
        }
    }
    Ok(facts)
}

/// Parses `KEY=VALUE`.
pub fn parse_fact(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) => Ok((k.to_string(), v.to_string())),
        None => bail!("bad fact {}: expected KEY=VALUE", echo(s)),
    }
}

/// Most characters of a bad fact repeated in an error.
const ECHO_MAX: usize = 60;

/// A bad fact as an error repeats it: at most [`ECHO_MAX`] characters
/// (control characters escaped), then its full length, so a huge value
/// does not flood the terminal.
fn echo(s: &str) -> String {
    let shown: String = s.chars().take(ECHO_MAX).collect();
    let shown = shown.escape_debug().to_string();
    if s.chars().count() > ECHO_MAX {
        return format!("{shown}... ({} bytes)", s.len());
    }
    shown
}

/// Reads a facts file: `key=value` lines, blank lines and `#` comments
/// ignored.
pub fn read_facts_file(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read facts file {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fact = parse_fact(line).with_context(|| format!("{}:{}", path.display(), i + 1))?;
        out.push(fact);
    }
    Ok(out)
}

/// The base name of a command or executable path.
pub fn program_name(path: &std::ffi::OsStr) -> String {
    let p = Path::new(path);
    p.file_name().unwrap_or(path).to_string_lossy().into_owned()
}

/// Whether the running kernel's release is older than `major.minor`.
pub fn kernel_older_than(major: u32, minor: u32) -> bool {
    let (release, _) = sys::uname();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let maj = parts.next().and_then(|p| p.parse::<u32>().ok());
    let min = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (maj, min) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release() {
        let (n, v) = parse_os_release("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n");
        assert_eq!(n, "Debian GNU/Linux");
        assert_eq!(v, "12");
    }

    #[test]
    fn facts_are_validated() {
        let p = PlatformFacts::default();
        let f = build(&p, "dd", &[("net.adapter".into(), "bridged".into())]).unwrap();
        assert_eq!(f.get("net.adapter"), Some("bridged"));
        assert_eq!(f.program.as_str(), "dd");
        let err = build(&p, "dd", &[("bad key".into(), "x".into())]).unwrap_err();
        assert!(err.to_string().contains("bad fact bad key=x"), "{err}");
        assert!(parse_fact("novalue").is_err());
        // A huge value is not echoed whole.
        let long = format!("k={}", "v".repeat(10_000));
        let err = build(&p, "dd", &[parse_fact(&long).unwrap()])
            .unwrap_err()
            .to_string();
        assert!(err.len() < 300, "{err}");
        assert!(err.contains("(10002 bytes)"), "{err}");
        let err = parse_fact(&"x".repeat(10_000)).unwrap_err().to_string();
        assert!(err.len() < 300, "{err}");
        assert_eq!(parse_fact("a=b=c").unwrap(), ("a".into(), "b=c".into()));
    }
}
