//! JNI exports for `dev.edgeagent.EdgeAgent` (java/dev/edgeagent/EdgeAgent.java).
//!
//! Each export converts Java values, calls [`crate::api`], and converts the
//! result back. Nothing crosses as a crash: invalid arguments throw
//! `IllegalArgumentException`, every other failure (and a caught panic)
//! throws `dev.edgeagent.EdgeAgentException` with the error's message, and
//! the export returns null/0, which Java never sees because of the pending
//! exception.

use std::ffi::OsString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use jni::objects::{JByteArray, JClass, JObjectArray, JString};
use jni::sys::{jbyteArray, jint, jlong, jstring};
use jni::JNIEnv;

use crate::api::{self, TraceRequest};
use crate::device::SystemProperties;
use crate::error::Error;

/// The checked exception of the Java wrapper.
const EDGE_AGENT_EXCEPTION: &str = "dev/edgeagent/EdgeAgentException";
const ILLEGAL_ARGUMENT: &str = "java/lang/IllegalArgumentException";
const ILLEGAL_STATE: &str = "java/lang/IllegalStateException";

/// Why an export failed.
enum Failure {
    /// The API refused or failed.
    Api(Error),
    /// A JNI call failed; if it left a Java exception pending, that one is
    /// what Java sees.
    Jni(jni::errors::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Api(e)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(e: jni::errors::Error) -> Failure {
        Failure::Jni(e)
    }
}

/// Runs `body`; on failure or panic throws the matching Java exception and
/// returns `none`.
fn export<'local, T>(
    env: &mut JNIEnv<'local>,
    none: T,
    body: impl FnOnce(&mut JNIEnv<'local>) -> Result<T, Failure>,
) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(value)) => return value,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::Api(Error::from_panic(payload)),
    };
    if env.exception_check().unwrap_or(true) {
        // A Java exception (e.g. OutOfMemoryError) is already on its way.
        return none;
    }
    let (class, message) = match failure {
        Failure::Api(Error::InvalidArgument(message)) => (ILLEGAL_ARGUMENT, message),
        Failure::Api(error @ Error::BufferTooSmall { .. }) => (ILLEGAL_ARGUMENT, error.to_string()),
        Failure::Api(Error::State(message)) => (ILLEGAL_STATE, message),
        Failure::Api(error) => (EDGE_AGENT_EXCEPTION, error.to_string()),
        Failure::Jni(error) => (EDGE_AGENT_EXCEPTION, format!("JNI: {error}")),
    };
    if env.throw_new(class, &message).is_err() && !env.exception_check().unwrap_or(true) {
        // The wrapper class is missing (library loaded by a foreign class):
        // still an exception, never a crash.
        let _ = env.throw_new("java/lang/RuntimeException", &message);
    }
    none
}

/// A Java `String[]`; a null array is `None`, a null element an error.
fn string_array(
    env: &mut JNIEnv<'_>,
    array: &JObjectArray<'_>,
    what: &str,
) -> Result<Option<Vec<String>>, Failure> {
    if array.is_null() {
        return Ok(None);
    }
    let len = env.get_array_length(array)?;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    for i in 0..len {
        let element = JString::from(env.get_object_array_element(array, i)?);
        if element.is_null() {
            return Err(Error::InvalidArgument(format!("{what}[{i}] is null")).into());
        }
        out.push(env.get_string(&element)?.into());
    }
    Ok(Some(out))
}

fn string(env: &mut JNIEnv<'_>, s: &JString<'_>, what: &str) -> Result<String, Failure> {
    if s.is_null() {
        return Err(Error::InvalidArgument(format!("{what} is null")).into());
    }
    Ok(env.get_string(s)?.into())
}

fn byte_array(env: &mut JNIEnv<'_>, a: &JByteArray<'_>, what: &str) -> Result<Vec<u8>, Failure> {
    if a.is_null() {
        return Err(Error::InvalidArgument(format!("{what} is null")).into());
    }
    Ok(env.convert_byte_array(a)?)
}

/// `static native byte[] nativeTrace(String[] argv, String[] only, String[] facts)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeTrace<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    argv: JObjectArray<'local>,
    only: JObjectArray<'local>,
    facts: JObjectArray<'local>,
) -> jbyteArray {
    export(&mut env, std::ptr::null_mut(), |env| {
        let argv = string_array(env, &argv, "argv")?
            .ok_or_else(|| Error::InvalidArgument("argv is null".into()))?;
        let only = string_array(env, &only, "only")?;
        let facts = string_array(env, &facts, "facts")?
            .unwrap_or_default()
            .into_iter()
            .map(|f| api::split_fact(f.as_ref()))
            .collect::<Result<_, _>>()?;
        let request = TraceRequest {
            argv: argv.into_iter().map(OsString::from).collect(),
            only,
            facts,
        };
        let summary = api::trace(&request, &SystemProperties)?;
        Ok(env.byte_array_from_slice(&summary)?.into_raw())
    })
}

/// `static native String nativeSpoolPut(String spoolDir, byte[] summary)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeSpoolPut<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    spool_dir: JString<'local>,
    summary: JByteArray<'local>,
) -> jstring {
    export(&mut env, std::ptr::null_mut(), |env| {
        let dir = string(env, &spool_dir, "spoolDir")?;
        let summary = byte_array(env, &summary, "summary")?;
        let path = api::spool_put(Path::new(&dir), &summary)?;
        Ok(env.new_string(path.to_string_lossy())?.into_raw())
    })
}

/// `static native String nativeSummaryJson(byte[] summary)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeSummaryJson<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    summary: JByteArray<'local>,
) -> jstring {
    export(&mut env, std::ptr::null_mut(), |env| {
        let summary = byte_array(env, &summary, "summary")?;
        let json = api::summary_json(&summary)?;
        Ok(env.new_string(json)?.into_raw())
    })
}

/// `static native int nativeUpload(String[] args)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeUpload<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    args: JObjectArray<'local>,
) -> jint {
    export(&mut env, 0, |env| {
        let args = string_array(env, &args, "args")?
            .ok_or_else(|| Error::InvalidArgument("args is null".into()))?;
        Ok(api::upload(&args)?)
    })
}

/// `static native void nativeStartSelf(String only, int windowSeconds)`
/// (`only` null: every syscall; `windowSeconds` -1: no windows).
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeStartSelf<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    only: JString<'local>,
    window_seconds: jint,
) {
    export(&mut env, (), |env| {
        let only = if only.is_null() {
            None
        } else {
            Some(string(env, &only, "only")?)
        };
        let window = match window_seconds {
            -1 => None,
            s => Some(std::time::Duration::from_secs(u64::try_from(s).map_err(
                |_| {
                    Error::InvalidArgument(format!(
                        "windowSeconds {s}: must be 1 to 86400, or -1 for none"
                    ))
                },
            )?)),
        };
        Ok(crate::self_observe::start_self(
            only.as_deref(),
            window,
            &SystemProperties,
        )?)
    })
}

/// `static native byte[] nativeSnapshotSelf()`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeSnapshotSelf<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
) -> jbyteArray {
    export(&mut env, std::ptr::null_mut(), |env| {
        let summary = crate::self_observe::snapshot_self_vec()?;
        Ok(env.byte_array_from_slice(&summary)?.into_raw())
    })
}

/// `static native void nativeStopSelf()`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeStopSelf<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
) {
    export(&mut env, (), |_| Ok(crate::self_observe::stop_self()?))
}

/// `static native String nativeVersion()`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeVersion<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
) -> jstring {
    export(&mut env, std::ptr::null_mut(), |env| {
        Ok(env.new_string(env!("CARGO_PKG_VERSION"))?.into_raw())
    })
}

/// `static native long nativeRunBegin(String name)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeRunBegin<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
) -> jlong {
    export(&mut env, 0, |env| {
        let name = string(env, &name, "name")?;
        let handle = crate::app_runs::run_begin(&name, &SystemProperties)?;
        // Handles count up from 1: far below jlong's range.
        Ok(jlong::try_from(handle).unwrap_or(jlong::MAX))
    })
}

/// `static native byte[] nativeRunEnd(long run, int status)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeRunEnd<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    run: jlong,
    status: jint,
) -> jbyteArray {
    export(&mut env, std::ptr::null_mut(), |env| {
        let handle = u64::try_from(run)
            .map_err(|_| Error::InvalidArgument(format!("run handle {run}: not a handle")))?;
        let summary = crate::app_runs::run_end(handle, status, &SystemProperties)?;
        Ok(env.byte_array_from_slice(&summary)?.into_raw())
    })
}

/// `static native int nativeSetDirectives(byte[] body)`
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeSetDirectives<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    body: JByteArray<'local>,
) -> jint {
    export(&mut env, 0, |env| {
        let body = byte_array(env, &body, "body")?;
        let count = crate::app_runs::set_directives(&body)?;
        Ok(jint::try_from(count).unwrap_or(jint::MAX))
    })
}

/// `static native int nativeFetchDirectives(String spoolDir, String server,
/// String tokenFile, String caFile)` (`tokenFile`, `caFile` may be null).
#[no_mangle]
pub extern "system" fn Java_dev_edgeagent_EdgeAgent_nativeFetchDirectives<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    spool_dir: JString<'local>,
    server: JString<'local>,
    token_file: JString<'local>,
    ca_file: JString<'local>,
) -> jint {
    export(&mut env, 0, |env| {
        let optional = |env: &mut JNIEnv<'local>, s: &JString<'local>, what: &str| {
            if s.is_null() {
                Ok(None)
            } else {
                string(env, s, what).map(|s| Some(std::path::PathBuf::from(s)))
            }
        };
        let source = crate::app_runs::DirectiveSource {
            spool_dir: string(env, &spool_dir, "spoolDir")?.into(),
            server: string(env, &server, "server")?,
            token_file: optional(env, &token_file, "tokenFile")?,
            ca: optional(env, &ca_file, "caFile")?,
        };
        let count = crate::app_runs::fetch_directives(&source)?;
        Ok(jint::try_from(count).unwrap_or(jint::MAX))
    })
}
