//! The safe API behind the C ABI and JNI: trace, spool, upload, render.
//!
//! Every argument is validated here, once, so both foreign layers only
//! convert types.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use agent_core::{Facts, Summary, SyscallId, MAX_ENCODED_LEN};
use agent_linux::{device_id, PlatformFacts};

use crate::device::{self, Properties};
use crate::error::Error;
use crate::stack;

/// What to trace.
#[derive(Debug, Clone, Default)]
pub struct TraceRequest {
    /// The command and its arguments; `argv[0]` is looked up in `PATH`
    /// like a shell would. On Android (targetSdk >= 29) it must live in the
    /// APK's native-library folder or the system image: app data is not
    /// executable.
    pub argv: Vec<OsString>,
    /// Trace only these syscalls (names such as `read`); `None` for all.
    pub only: Option<Vec<String>>,
    /// Free facts (`key`, `value`) recorded in the summary.
    pub facts: Vec<(String, String)>,
}

/// Traces `request.argv` to its end and returns the encoded summary (at
/// most [`MAX_ENCODED_LEN`] bytes), with the device's facts from `props`.
///
/// Blocks until the traced program exits: call it off the UI thread.
pub fn trace(request: &TraceRequest, props: &dyn Properties) -> Result<Vec<u8>, Error> {
    let mut options = trace_options(request)?;
    options.platform = device::platform(props, PlatformFacts::detect);
    options.facts = device::free_facts(props, &options.facts);
    stack::run(|| {
        let mut outcome =
            agent_linux::trace_command(&options).map_err(|e| Error::Trace(format!("{e:#}")))?;
        encode(&mut outcome.summary)
    })
}

/// Validates `request` and turns it into the tracer's options.
fn trace_options(request: &TraceRequest) -> Result<agent_linux::TraceOptions, Error> {
    match request.argv.first() {
        None => return Err(Error::InvalidArgument("the command is empty".into())),
        Some(program) if program.is_empty() => {
            return Err(Error::InvalidArgument("the program name is empty".into()))
        }
        Some(_) => {}
    }
    let only = match &request.only {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|name| {
                    SyscallId::from_name(name).ok_or_else(|| {
                        Error::InvalidArgument(format!("unknown syscall name {name:?}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    // The summary's own rules, checked before the (possibly long) run.
    let mut scratch = Facts::new();
    for (key, value) in &request.facts {
        scratch
            .add(key, value)
            .map_err(|e| Error::InvalidArgument(format!("fact {key:?}: {e}")))?;
    }
    Ok(agent_linux::TraceOptions {
        command: request.argv.clone(),
        only,
        facts: request.facts.clone(),
        ..agent_linux::TraceOptions::default()
    })
}

fn encode(summary: &mut Summary) -> Result<Vec<u8>, Error> {
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = summary
        .encode(&mut buf)
        .map_err(|e| Error::Internal(format!("encoding the summary: {e}")))?;
    Ok(bytes.to_vec())
}

fn decode(bytes: &[u8]) -> Result<Summary, Error> {
    Summary::decode(bytes).map_err(|e| Error::Decode(e.to_string()))
}

/// Puts an encoded summary into the spool at `dir` (created if missing) and
/// returns the file's path. On Android, `dir` is app-private, e.g.
/// `getNoBackupFilesDir()/edge-agent/spool`.
///
/// A summary without a device id (every summary [`trace`] makes: it does
/// not know the app's folders) gets the app's, kept beside the spool
/// ([`device_id_file`]) and made on first use; one that has an id keeps it.
pub fn spool_put(dir: &Path, summary: &[u8]) -> Result<PathBuf, Error> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "the spool directory is empty".into(),
        ));
    }
    stack::run(|| {
        let mut summary = decode(summary)?;
        if summary.origin.device == [0u8; 16] {
            summary.origin.device = device_id::load_or_create(&device_id_file(dir))
                .map_err(|e| Error::Spool(format!("{e:#}")))?;
        }
        let spool = uploader::spool::Spool::open(dir).map_err(|e| Error::Spool(e.to_string()))?;
        spool
            .put(&mut summary)
            .map_err(|e| Error::Spool(e.to_string()))
    })
}

/// The app's device id file, beside its spool: `<spool>/../device-id`
/// (`getNoBackupFilesDir()/edge-agent/device-id` for the spool folder the
/// Java wrapper names), app-private like the spool.
pub fn device_id_file(spool_dir: &Path) -> PathBuf {
    let state = match spool_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    state.join(device_id::FILE_NAME)
}

/// The app's device id (see [`spool_put`]), made on first use; with
/// `reset`, replaced by a new random one.
pub fn device_id(spool_dir: &Path, reset: bool) -> Result<[u8; 16], Error> {
    let path = device_id_file(spool_dir);
    let id = if reset {
        device_id::reset(&path)
    } else {
        device_id::load_or_create(&path)
    };
    id.map(<[u8; 16]>::from)
        .map_err(|e| Error::Spool(format!("{e:#}")))
}

/// The documented JSON view of an encoded summary (`edge-agent show --json`).
pub fn summary_json(summary: &[u8]) -> Result<String, Error> {
    stack::run(|| Ok(summary_view::to_json(&decode(summary)?).to_string()))
}

/// Runs the uploader with `edge-agent upload`'s arguments (e.g. `--spool DIR
/// --server URL --token-file F --now --once`) and returns its exit status.
/// When to run it (unmetered, charging, idle) is the app's choice: see the
/// WorkManager worker in `android/`.
pub fn upload(args: &[String]) -> Result<i32, Error> {
    // The grammar of `edge-agent upload` itself (the device-args crate).
    let options = device_args::parse_upload(args)
        .map_err(|e| Error::InvalidArgument(e.render().to_string().trim_end().to_string()))?;
    stack::run(|| {
        let outcome = uploader::session::run(options)
            .map_err(|e| Error::Upload(format!("{:#}", anyhow::Error::from(e))))?;
        Ok(i32::from(outcome.exit_status()))
    })
}

/// Splits a fact given as `key=value` at the first `=` (the C ABI and JNI
/// take facts in this form).
pub fn split_fact(fact: &std::ffi::OsStr) -> Result<(String, String), Error> {
    let fact = fact.to_string_lossy();
    match fact.split_once('=') {
        Some((key, value)) => Ok((key.to_string(), value.to_string())),
        None => Err(Error::InvalidArgument(format!(
            "fact {fact:?} is not key=value"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(argv: &[&str]) -> TraceRequest {
        TraceRequest {
            argv: argv.iter().map(OsString::from).collect(),
            ..TraceRequest::default()
        }
    }

    fn invalid(result: Result<agent_linux::TraceOptions, Error>) -> String {
        match result {
            Err(Error::InvalidArgument(message)) => message,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn bad_requests_are_refused_before_tracing() {
        assert!(invalid(trace_options(&request(&[]))).contains("empty"));
        assert!(invalid(trace_options(&request(&[""]))).contains("empty"));
        let mut r = request(&["true"]);
        r.only = Some(vec!["read".into(), "no_such_call".into()]);
        assert!(invalid(trace_options(&r)).contains("no_such_call"));
        let mut r = request(&["true"]);
        r.facts = vec![("bad key".into(), "v".into())];
        assert!(invalid(trace_options(&r)).contains("bad key"));
        let mut r = request(&["true"]);
        r.facts = vec![("k".into(), "a".into()), ("k".into(), "b".into())];
        assert!(invalid(trace_options(&r)).contains("twice"));
    }

    #[test]
    fn good_requests_become_options() {
        let mut r = request(&["dd", "count=1"]);
        r.only = Some(vec!["read".into(), "write".into()]);
        r.facts = vec![("net".into(), "wifi".into())];
        let options = trace_options(&r).unwrap();
        assert_eq!(options.command, r.argv);
        assert_eq!(
            options.only,
            Some(vec![
                SyscallId::from_name("read").unwrap(),
                SyscallId::from_name("write").unwrap()
            ])
        );
        assert_eq!(options.facts, r.facts);
    }

    #[test]
    fn garbage_is_not_a_summary() {
        assert!(matches!(summary_json(b"garbage"), Err(Error::Decode(_))));
        assert!(matches!(summary_json(&[]), Err(Error::Decode(_))));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            spool_put(dir.path(), b"\x01\x02"),
            Err(Error::Decode(_))
        ));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn spooled_summaries_carry_the_apps_device_id() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("edge-agent/spool");
        let mut summary = fixtures::summaries::sample_summary([1; 16], "wget", None);
        let bytes = encode(&mut summary).unwrap();
        let first = spool_put(&spool, &bytes).unwrap();
        let id = device_id(&spool, false).unwrap();
        assert_ne!(id, [0; 16]);
        assert!(dir.path().join("edge-agent/device-id").is_file());
        let stored = Summary::decode(&std::fs::read(&first).unwrap()).unwrap();
        assert_eq!(stored.origin.device, id, "stamped with the app's id");
        // An id the summary already has is kept.
        let mut other = fixtures::summaries::sample_summary([2; 16], "wget", None);
        other.origin.device = [9; 16].into();
        let path = spool_put(&spool, &encode(&mut other).unwrap()).unwrap();
        assert_eq!(
            Summary::decode(&std::fs::read(path).unwrap())
                .unwrap()
                .origin
                .device,
            [9; 16]
        );
        let new = device_id(&spool, true).unwrap();
        assert_ne!(new, id, "reset");
        let path = spool_put(&spool, &bytes).unwrap();
        assert_eq!(
            Summary::decode(&std::fs::read(path).unwrap())
                .unwrap()
                .origin
                .device,
            new
        );
        // A corrupt id file is an error naming it; nothing is spooled.
        std::fs::write(dir.path().join("edge-agent/device-id"), "x").unwrap();
        let mut third = fixtures::summaries::sample_summary([3; 16], "wget", None);
        match spool_put(&spool, &encode(&mut third).unwrap()) {
            Err(Error::Spool(m)) => assert!(m.contains("device-id"), "{m}"),
            other => panic!("expected a spool error, got {other:?}"),
        }
    }

    #[test]
    fn upload_arguments_are_checked() {
        let err = upload(&["--no-such-flag".into()]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("--no-such-flag")));
        // The uploader's own rules, as the command line refuses them.
        let err = upload(&[
            "--server".into(),
            "https://x".into(),
            "--batch".into(),
            "0".into(),
        ])
        .unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(ref m) if m.contains("must be 1 to 256")),
            "{err:?}"
        );
    }
}
