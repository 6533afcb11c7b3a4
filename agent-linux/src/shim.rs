//! Shims: the exact way to trace chosen commands without privileges ("the
//! client is told which commands to log"). `edge-agent shim install
//! PROGRAM...` writes one small shell script per program into a folder
//! meant to come first in PATH; typing the program's name then runs the
//! script, which finds the real program (the next one on PATH after the
//! folder, never itself) and hands it to `edge-agent shim exec`. That
//! traces it from its first syscall, as `run` does, when its command line
//! contains the folder's directive text, and otherwise replaces itself with
//! the program (`exec`, no tracer).
//!
//! A shimmed command never fails because of the agent: when the agent's
//! binary is missing or not executable, the script runs the program
//! itself; when the agent cannot read its directive, open its spool or
//! start the tracer, it runs the program untraced (a line on stderr); the
//! program's exit status is always the command's.
//!
//! The folder holds the scripts and `directive.json` (the text to match,
//! `only`, facts, and where summaries go), written by `shim install` and,
//! only when the device opts in (`watch --server ... --shim-dir DIR`),
//! updated from the service's directive, whose `programs` list then also
//! installs shims ([`steer`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::shim_folder::ShimFolder;

/// The line every script carries: what `remove` and `list` recognise (a
/// file without it is never overwritten or removed).
pub const MARKER: &str = "# edge-agent shim v1";
/// The directive's file in the shim folder.
pub const DIRECTIVE_FILE: &str = "directive.json";
/// How much of `directive.json` is read (ours are a few hundred bytes).
const DIRECTIVE_BUDGET: usize = 64 << 10;
/// The environment variable naming the shim folder (as `--dir` does).
pub const ENV_DIR: &str = "EDGE_AGENT_SHIM_DIR";

/// The default shim folder: `$EDGE_AGENT_SHIM_DIR`, else the agent's
/// state folder (`$XDG_STATE_HOME/edge-agent/shims`, else
/// `~/.local/state/edge-agent/shims`, else
/// `/data/local/tmp/edge-agent/shims`).
pub fn default_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = env(ENV_DIR) {
        return dir.into();
    }
    if let Some(state) = env("XDG_STATE_HOME") {
        return PathBuf::from(state).join("edge-agent/shims");
    }
    if let Some(home) = env("HOME") {
        return PathBuf::from(home).join(".local/state/edge-agent/shims");
    }
    PathBuf::from("/data/local/tmp/edge-agent/shims")
}

/// What the shims of one folder trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShimDirective {
    /// Text the command line (the program's name and its arguments,
    /// joined by spaces) must contain; empty: every run.
    pub match_text: String,
    /// Trace only these syscalls (`run --only`); `None`: all.
    pub only: Option<Vec<String>>,
    /// Free facts for every summary.
    pub facts: Vec<(String, String)>,
    /// The spool the summaries go to (`None`: the default spool).
    pub spool: Option<PathBuf>,
    /// Write each summary to this folder instead of a spool.
    pub out_dir: Option<PathBuf>,
}

impl ShimDirective {
    /// Whether a run of `name` with `args` is to be traced.
    pub fn matches(&self, name: &OsStr, args: &[OsString]) -> bool {
        if self.match_text.is_empty() {
            return true;
        }
        let mut line = name.as_bytes().to_vec();
        for a in args {
            line.push(b' ');
            line.extend_from_slice(a.as_bytes());
        }
        let needle = self.match_text.as_bytes();
        line.windows(needle.len()).any(|w| w == needle)
    }

    /// Parses `directive.json` (untrusted: a wrong field is an error
    /// naming it).
    pub fn parse(text: &[u8]) -> anyhow::Result<ShimDirective> {
        // serde reads a struct from an array too (`[m, only, ...]`): the
        // file is an object or nothing.
        if text.trim_ascii_start().first() != Some(&b'{') {
            bail!("not a JSON object");
        }
        let file: DirectiveFile = serde_json::from_slice(text).context("not a shim directive")?;
        Ok(ShimDirective {
            match_text: file.match_text.unwrap_or_default(),
            only: file.only,
            facts: file.facts.unwrap_or_default(),
            spool: file.spool,
            out_dir: file.out_dir,
        })
    }

    /// Reads the folder's directive.
    pub fn load(dir: &Path) -> anyhow::Result<ShimDirective> {
        let path = dir.join(DIRECTIVE_FILE);
        // The folder may hold anything a FIFO included: a bounded read of
        // a regular file.
        let text = crate::tracee_file::read(&path, DIRECTIVE_BUDGET)?;
        ShimDirective::parse(&text).with_context(|| format!("{}", path.display()))
    }

    /// Writes the folder's directive (whole or not at all), into `folder`
    /// (checked: see [`ShimFolder`]).
    pub fn store(&self, folder: &ShimFolder) -> anyhow::Result<()> {
        folder.write(DIRECTIVE_FILE, &self.to_text()?, 0o644)
    }

    /// The directive as `directive.json` holds it.
    fn to_text(&self) -> anyhow::Result<Vec<u8>> {
        let file = DirectiveFile {
            match_text: Some(self.match_text.clone()),
            only: self.only.clone(),
            facts: Some(self.facts.clone()),
            spool: self.spool.clone(),
            out_dir: self.out_dir.clone(),
        };
        // A path that is not UTF-8 cannot be written as JSON text: an error
        // naming the field, not a lossy path.
        serde_json::to_vec_pretty(&file).context("the shim directive")
    }
}

/// `directive.json` as stored: [`ShimDirective`]'s fields, each optional
/// (null or absent: the default), facts as `[key, value]` pairs.
#[derive(Serialize, Deserialize)]
struct DirectiveFile {
    #[serde(rename = "match", default)]
    match_text: Option<String>,
    #[serde(default)]
    only: Option<Vec<String>>,
    #[serde(default)]
    facts: Option<Vec<(String, String)>>,
    #[serde(default)]
    spool: Option<PathBuf>,
    #[serde(default)]
    out_dir: Option<PathBuf>,
}

/// Checks a program name: a bare file name a shell would look up in PATH.
fn check_name(name: &str) -> anyhow::Result<()> {
    // The service checks a directive's `programs` by the same rule.
    if !agent_core::valid_program_name(name) {
        bail!(
            "{name:?} is not a program name ({})",
            agent_core::PROGRAM_NAME_RULE
        );
    }
    Ok(())
}

/// `s` quoted for the shell (single quotes; a quote inside as `'\''`).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script for `name` in `dir`, running `agent`.
pub fn script(dir: &Path, agent: &Path, name: &str) -> anyhow::Result<String> {
    check_name(name)?;
    let utf8 = |p: &Path| {
        p.to_str()
            .map(str::to_string)
            .with_context(|| format!("{} is not UTF-8", p.display()))
    };
    let (dir, agent) = (utf8(dir)?, utf8(agent)?);
    Ok(format!(
        r#"#!/bin/sh
{MARKER}
# Runs {name} under `edge-agent shim exec` (traced when its command line
# matches {dir}/{DIRECTIVE_FILE}); without a usable agent, runs it plainly.
# Made by `edge-agent shim install`; `edge-agent shim remove {name}` deletes it.
shim_dir={dir_q}
agent={agent_q}
name={name_q}
# The real program: the next {name} on PATH after the shim folder (all of
# PATH when the folder is not in it), never this script.
real=
after=
case ":$PATH:" in *":$shim_dir:"*) ;; *) after=1 ;; esac
set -f
IFS=:
for d in $PATH; do
  if [ -z "$after" ]; then
    [ "$d" = "$shim_dir" ] && after=1
    continue
  fi
  [ "$d" = "$shim_dir" ] && continue
  [ -n "$d" ] || d=.
  if [ -f "$d/$name" ] && [ -x "$d/$name" ] && ! [ "$d/$name" -ef "$0" ]; then
    real=$d/$name
    break
  fi
done
unset IFS
set +f
if [ -z "$real" ]; then
  echo "$name: not found on PATH after the shim folder $shim_dir" >&2
  exit 127
fi
if [ -f "$agent" ] && [ -x "$agent" ]; then
  exec "$agent" shim exec --dir "$shim_dir" --name "$name" -- "$real" "$@"
fi
exec "$real" "$@"
"#,
        dir_q = shell_quote(&dir),
        agent_q = shell_quote(&agent),
        name_q = shell_quote(name),
    ))
}

/// Applies a service directive (`GET /v1/directives` body) to the shim
/// folder `dir`, which the device opted into (`watch --server ...
/// --shim-dir DIR`): a `match` text replaces the folder's (null keeps it),
/// `only` replaces its list, and each program named in `programs` gets a
/// shim running `agent` (a program not on PATH is reported, not fatal).
/// A body beyond the caps of `wire::directive` changes nothing (an error).
/// Returns what changed, for one line on stderr; `None`: nothing did.
pub fn steer(dir: &Path, agent: &Path, body: &[u8]) -> anyhow::Result<Option<String>> {
    // Read by the contract (`wire::directive::read`): refused whole beyond
    // the caps or with a field of the wrong type, and the folder stays as
    // the last directive left it.
    let received = wire::directive::read(body)
        .map_err(|why| anyhow::anyhow!("the directive is refused: {why}"))?;
    let mut directive = ShimDirective::load(dir).unwrap_or_default();
    let before = directive.clone();
    if let Some(m) = received.match_text {
        directive.match_text = m;
    }
    // `only` null clears the folder's list; absent leaves it (the reader
    // cannot tell them apart, and a service always sends the field).
    if let Some(names) = &received.only {
        agent_core::validate_only_list(&names.join(","))
            .map_err(|e| anyhow::anyhow!("the directive's `only`: {e}"))?;
    }
    directive.only = received.only;
    let wanted: Vec<String> = received.programs.unwrap_or_default();
    let have = list(dir).unwrap_or_default();
    let mut said = Vec::new();
    if directive != before {
        directive.store(&ShimFolder::create(&absolute(dir)?)?)?;
        said.push(format!(
            "match {:?}, only {}",
            directive.match_text,
            directive
                .only
                .as_ref()
                .map_or("all".into(), |o| o.join(","))
        ));
    }
    for name in wanted.iter().filter(|n| !have.contains(n)) {
        match install(dir, agent, std::slice::from_ref(name), &directive) {
            Ok(_) => said.push(format!("shim for {name} installed")),
            Err(e) => said.push(format!("no shim for {name}: {e:#}")),
        }
    }
    Ok((!said.is_empty()).then(|| said.join("; ")))
}

/// Whether `path` is one of our scripts: a regular file (not a link to
/// one) with the marker on its first lines.
pub fn is_shim(path: &Path) -> bool {
    // The marker is on the script's first lines: a bounded read of a
    // regular file only, as the path may be anything a process names
    // (`watch` asks of a process's first argument: a FIFO there must not
    // block it), and a symbolic link is not followed.
    crate::tracee_file::read(path, HEAD_BYTES).is_ok_and(|head| {
        head.split(|c| *c == b'\n')
            .take(3)
            .any(|l| l == MARKER.as_bytes())
    })
}

/// How much of a file [`is_shim`] reads.
const HEAD_BYTES: usize = 512;

/// The first executable `name` on `path_var` outside `dir`: what a shim
/// in `dir` would run.
pub fn real_program(dir: &Path, name: &str, path_var: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|d| d != dir)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                // `is_shim` follows no link: a link to a shim is one too.
                && !is_shim(&p.canonicalize().unwrap_or_else(|_| p.clone()))
        })
}

/// Installs shims for `programs` in `dir` (made if missing) running
/// `agent`, and writes the folder's directive. A program with no real
/// executable on PATH besides the folder, or a file of that name that is
/// not a shim, is an error naming it; nothing is written then.
pub fn install(
    dir: &Path,
    agent: &Path,
    programs: &[String],
    directive: &ShimDirective,
) -> anyhow::Result<Vec<PathBuf>> {
    if programs.is_empty() {
        bail!("name at least one program to shim");
    }
    let dir = absolute(dir)?;
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let mut scripts = Vec::new();
    for name in programs {
        let text = script(&dir, agent, name)?;
        if real_program(&dir, name, &path_var).is_none() {
            bail!("{name}: no such program on PATH (besides the shim folder)");
        }
        let target = dir.join(name);
        if target.exists() && !is_shim(&target) {
            bail!(
                "{} exists and is not an edge-agent shim: not replaced",
                target.display()
            );
        }
        scripts.push((target, text));
    }
    // Made (0755) and checked: it must be writable by no one but root and
    // the agent's user, nor any folder above it (see `shim_folder`).
    let folder = ShimFolder::create(&dir)?;
    directive.store(&folder)?;
    let mut written = Vec::new();
    for (name, (target, text)) in programs.iter().zip(scripts) {
        folder.write(name, text.as_bytes(), 0o755)?;
        written.push(target);
    }
    Ok(written)
}

/// Removes the shims named (all of them when `programs` is empty); a name
/// that is not a shim of the folder is an error naming it.
pub fn remove(dir: &Path, programs: &[String]) -> anyhow::Result<Vec<String>> {
    let names = if programs.is_empty() {
        list(dir)?
    } else {
        programs.to_vec()
    };
    for name in &names {
        check_name(name)?;
        let path = dir.join(name);
        if !is_shim(&path) {
            bail!("{} is not an edge-agent shim", path.display());
        }
    }
    for name in &names {
        let path = dir.join(name);
        std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    Ok(names)
}

/// The programs shimmed in `dir`, sorted (none when the folder does not
/// exist).
pub fn list(dir: &Path) -> anyhow::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            is_shim(&e.path()).then_some(name)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// `dir` made absolute (the scripts compare it with PATH's entries).
fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.is_absolute() {
        return Ok(dir.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("cannot read the current folder")?
        .join(dir))
}

/// Replaces the agent with `command` (no tracer), its `argv[0]` being
/// `name` (what the user typed); returns only when the exec failed: the
/// shell's status for it (127 not found, 126 otherwise), after a line on
/// stderr.
pub fn exec_plainly(command: &[OsString], name: &OsStr) -> std::process::ExitCode {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = command.split_first() else {
        eprintln!("edge-agent shim: no command");
        return std::process::ExitCode::from(127);
    };
    let err = std::process::Command::new(program)
        .arg0(name)
        .args(args)
        .exec();
    eprintln!("{}: {err}", program.to_string_lossy());
    std::process::ExitCode::from(if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bare_program_names() {
        for good in ["md5sum", "python3.11", "g++", "x-y_z"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "/bin/ls",
            ".hidden",
            "a b",
            "directive.json",
            "x;y",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn directive_round_trips_and_rejects_wrong_fields() {
        let d = ShimDirective {
            match_text: "rnd.bin".into(),
            only: Some(vec!["read".into(), "openat".into()]),
            facts: vec![("site".into(), "lab".into())],
            spool: Some("/var/spool/x".into()),
            out_dir: None,
        };
        let text = d.to_text().unwrap();
        assert_eq!(ShimDirective::parse(&text).unwrap(), d);
        for bad in [
            &br#"[]"#[..],
            br#"{"match": 3}"#,
            br#"{"only": "read"}"#,
            br#"{"only": [1]}"#,
            br#"{"facts": [["k"]]}"#,
            br#"not json"#,
        ] {
            assert!(
                ShimDirective::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn matching_looks_at_name_and_arguments() {
        let d = ShimDirective {
            match_text: "rnd.bin".into(),
            ..Default::default()
        };
        assert!(d.matches(OsStr::new("md5sum"), &["rnd.bin".into()]));
        assert!(!d.matches(OsStr::new("md5sum"), &["other".into()]));
        assert!(ShimDirective::default().matches(OsStr::new("x"), &[]));
    }

    #[test]
    fn a_directive_steers_an_opted_in_folder() {
        let dir = tempfile::tempdir().unwrap();
        let shims = dir.path().join("shims");
        let agent = Path::new("/nonexistent/edge-agent");
        let body = br#"{"group":"g","match":"rnd.bin","only":["read","openat"],"programs":["sh","no-such-program-x"]}"#;
        let said = steer(&shims, agent, body).unwrap().unwrap();
        assert!(said.contains("shim for sh installed"), "{said}");
        assert!(said.contains("no shim for no-such-program-x"), "{said}");
        assert_eq!(list(&shims).unwrap(), vec!["sh".to_string()]);
        let d = ShimDirective::load(&shims).unwrap();
        assert_eq!(d.match_text, "rnd.bin");
        assert_eq!(d.only, Some(vec!["read".into(), "openat".into()]));
        // The same settings again change nothing;
        // a null match keeps the folder's.
        let again = steer(&shims, agent, br#"{"match":null,"only":["read","openat"]}"#).unwrap();
        assert_eq!(again, None);
        assert_eq!(ShimDirective::load(&shims).unwrap().match_text, "rnd.bin");
        for bad in [
            &br#"{"only":["nosuchcall"]}"#[..],
            br#"{"programs":"sh"}"#,
            br#"[1]"#,
        ] {
            assert!(
                steer(&shims, agent, bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(remove(&shims, &["directive.json".into()]).is_err());
        assert_eq!(remove(&shims, &[]).unwrap(), vec!["sh".to_string()]);
        assert!(list(&shims).unwrap().is_empty());
    }

    #[test]
    fn the_marker_is_looked_for_in_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("sh");
        std::fs::write(&shim, script(dir.path(), Path::new("/x"), "sh").unwrap()).unwrap();
        assert!(is_shim(&shim));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&shim, &link).unwrap();
        assert!(!is_shim(&link), "a link is not followed");
        // A FIFO with no writer: refused, not waited on.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(!is_shim(&fifo));
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}
