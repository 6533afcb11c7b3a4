//! The C ABI, declared in `include/edge_agent.h` (keep the two in step).
//!
//! Conventions: every function returns `EDGE_AGENT_OK` (0) or a negative
//! `EDGE_AGENT_E*` code, and on failure writes a NUL-terminated message into
//! the caller's `err` buffer (`err` may be NULL when `err_cap` is 0). Output
//! goes into caller-owned buffers, so no memory changes owner. Panics are
//! caught here and reported as `EDGE_AGENT_EINTERNAL`.

use std::ffi::{c_char, c_int, CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::api::{self, TraceRequest};
use crate::device::SystemProperties;
use crate::error::Error;

// The codes live beside the error type that maps to them; C callers find
// them here, where the header says.
pub use crate::error::{
    EDGE_AGENT_EDECODE, EDGE_AGENT_EINTERNAL, EDGE_AGENT_EINVAL, EDGE_AGENT_EOBSERVE,
    EDGE_AGENT_ESPOOL, EDGE_AGENT_ESTATE, EDGE_AGENT_ETRACE, EDGE_AGENT_EUPLOAD, EDGE_AGENT_OK,
};

/// `window_s` of [`edge_agent_start_self`] for no windows.
pub const EDGE_AGENT_NO_WINDOW: u32 = u32::MAX;

/// The library's version, NUL-terminated.
static VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the version has no NUL inside"),
    };

/// Returns the library's version (a static string; do not free it).
#[no_mangle]
pub extern "C" fn edge_agent_version() -> *const c_char {
    VERSION.as_ptr()
}

/// Traces a command to its end and writes its encoded summary.
///
/// # Safety
/// `argv` points to `argc` NUL-terminated strings; `only` to `n_only` (or is
/// NULL for all syscalls); `facts` to `n_facts` `key=value` strings (or is
/// NULL with 0). `summary` has `summary_cap` writable bytes;
/// `summary_len` is writable; `err` has `err_cap` writable bytes (or is NULL
/// with 0).
#[no_mangle]
pub unsafe extern "C" fn edge_agent_trace(
    argv: *const *const c_char,
    argc: usize,
    only: *const *const c_char,
    n_only: usize,
    facts: *const *const c_char,
    n_facts: usize,
    summary: *mut u8,
    summary_cap: usize,
    summary_len: *mut usize,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: the caller guarantees the arrays and their strings.
        let argv = unsafe { strings(argv, argc, "argv") }?;
        // SAFETY: as above.
        let only = unsafe { optional_strings(only, n_only, "only") }?;
        // SAFETY: as above.
        let facts = unsafe { optional_strings(facts, n_facts, "facts") }?.unwrap_or_default();
        if summary.is_null() || summary_len.is_null() {
            return Err(Error::InvalidArgument(
                "summary and summary_len must not be NULL".into(),
            ));
        }
        let request = TraceRequest {
            argv,
            only: only.map(|names| names.into_iter().map(lossy).collect()),
            facts: facts
                .iter()
                .map(|f| api::split_fact(f))
                .collect::<Result<_, _>>()?,
        };
        let bytes = api::trace(&request, &SystemProperties)?;
        // SAFETY: `summary` has `summary_cap` writable bytes.
        unsafe { copy_out(&bytes, summary, summary_cap, summary_len) }
    })
}

/// Puts an encoded summary into the spool directory `spool_dir` (created if
/// missing) and writes the new file's path into `path` (may be NULL with 0).
///
/// # Safety
/// `spool_dir` is NUL-terminated; `summary` has `summary_len` readable
/// bytes; `path` has `path_cap` writable bytes (or is NULL with 0); `err` as
/// for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_spool_put(
    spool_dir: *const c_char,
    summary: *const u8,
    summary_len: usize,
    path: *mut c_char,
    path_cap: usize,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: the caller guarantees a NUL-terminated string.
        let dir = unsafe { string(spool_dir, "spool_dir") }?;
        // SAFETY: the caller guarantees `summary_len` readable bytes.
        let bytes = unsafe { bytes(summary, summary_len, "summary") }?;
        let written = api::spool_put(Path::new(OsStr::from_bytes(dir)), bytes)?;
        // SAFETY: `path` has `path_cap` writable bytes.
        unsafe { write_c_string(written.as_os_str().as_bytes(), path, path_cap) };
        Ok(())
    })
}

/// Writes the JSON view of an encoded summary into `json` (NUL-terminated)
/// and its length (without the NUL) into `json_len`. If `json_cap` is too
/// small, returns `EDGE_AGENT_EINVAL` with the needed length in `json_len`.
///
/// # Safety
/// `summary` has `summary_len` readable bytes; `json` has `json_cap`
/// writable bytes (or is NULL with 0); `json_len` is writable; `err` as for
/// [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_summary_json(
    summary: *const u8,
    summary_len: usize,
    json: *mut c_char,
    json_cap: usize,
    json_len: *mut usize,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: the caller guarantees `summary_len` readable bytes.
        let bytes = unsafe { bytes(summary, summary_len, "summary") }?;
        if json_len.is_null() {
            return Err(Error::InvalidArgument("json_len must not be NULL".into()));
        }
        let text = api::summary_json(bytes)?;
        // SAFETY: `json_len` is writable.
        unsafe { *json_len = text.len() };
        if json.is_null() || json_cap <= text.len() {
            return Err(Error::InvalidArgument(format!(
                "json buffer too small: {} bytes needed",
                text.len() + 1
            )));
        }
        // SAFETY: `json` has `json_cap` > `text.len()` writable bytes.
        unsafe { write_c_string(text.as_bytes(), json, json_cap) };
        Ok(())
    })
}

/// Runs the uploader with `edge-agent upload`'s arguments (without the
/// program name, e.g. `--spool DIR --server URL --now --once`) and writes its
/// exit status into `status`.
///
/// # Safety
/// `argv` points to `argc` NUL-terminated strings; `status` is writable;
/// `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_upload(
    argv: *const *const c_char,
    argc: usize,
    status: *mut c_int,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: the caller guarantees the array and its strings.
        let args = unsafe { strings(argv, argc, "argv") }?;
        if status.is_null() {
            return Err(Error::InvalidArgument("status must not be NULL".into()));
        }
        let args: Vec<String> = args.into_iter().map(lossy).collect();
        let code = api::upload(&args)?;
        // SAFETY: `status` is writable.
        unsafe { *status = code };
        Ok(())
    })
}

/// Begins observing this process (see `crate::self_observe`): `only` is
/// NULL for every syscall or a comma-separated list of names; `window_s`
/// the window length in seconds (1 to 86400) or `EDGE_AGENT_NO_WINDOW`.
///
/// # Safety
/// `only` is NULL or NUL-terminated; `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_start_self(
    only: *const c_char,
    window_s: u32,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        let only = if only.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated, per the caller.
            Some(lossy(
                OsStr::from_bytes(unsafe { string(only, "only") }?).to_os_string(),
            ))
        };
        let window = (window_s != EDGE_AGENT_NO_WINDOW)
            .then(|| std::time::Duration::from_secs(u64::from(window_s)));
        crate::self_observe::start_self(only.as_deref(), window, &SystemProperties)
    })
}

/// Writes the encoded summary of what this process did since the last
/// snapshot into `summary` and its length into `summary_len`. If
/// `summary_cap` is too small, returns `EDGE_AGENT_EINVAL` with the needed
/// length in `summary_len`, and the summary waits for the next call.
///
/// # Safety
/// `summary` has `summary_cap` writable bytes (or is NULL with 0);
/// `summary_len` is writable; `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_snapshot_self(
    summary: *mut u8,
    summary_cap: usize,
    summary_len: *mut usize,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        if summary_len.is_null() || (summary.is_null() && summary_cap > 0) {
            return Err(Error::InvalidArgument(
                "summary_len must not be NULL, nor summary with a capacity".into(),
            ));
        }
        let out: &mut [u8] = if summary_cap == 0 {
            &mut []
        } else {
            // SAFETY: `summary` has `summary_cap` writable bytes.
            unsafe { std::slice::from_raw_parts_mut(summary, summary_cap) }
        };
        let result = crate::self_observe::snapshot_self(out);
        let len = match &result {
            Ok(len) => *len,
            Err(Error::BufferTooSmall { needed }) => *needed,
            Err(_) => 0,
        };
        // SAFETY: `summary_len` is writable.
        unsafe { *summary_len = len };
        result.map(|_| ())
    })
}

/// Stops observing this process: its libc calls pass straight through.
///
/// # Safety
/// `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_stop_self(err: *mut c_char, err_cap: usize) -> c_int {
    guard(err, err_cap, crate::self_observe::stop_self)
}

/// Begins a run named `name` (the app's operation) and writes its handle
/// into `run` (see `app_runs`).
///
/// # Safety
/// `name` is NUL-terminated; `run` is writable; `err` as for
/// [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_run_begin(
    name: *const c_char,
    run: *mut u64,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: NULL or NUL-terminated, per the caller.
        let name = lossy(OsStr::from_bytes(unsafe { string(name, "name") }?).to_os_string());
        if run.is_null() {
            return Err(Error::InvalidArgument("run must not be NULL".into()));
        }
        let handle = crate::app_runs::run_begin(&name, &SystemProperties)?;
        // SAFETY: `run` is writable, per the caller.
        unsafe { *run = handle };
        Ok(())
    })
}

/// Ends run `run` with the app's outcome `status` (0: succeeded) and
/// writes its encoded summary (a light record, or a directed run's full
/// summary). A buffer too small gets `EDGE_AGENT_EINVAL` with the needed
/// length in `summary_len`, and the run stays open for another call.
///
/// # Safety
/// `summary` has `summary_cap` writable bytes; `summary_len` is writable;
/// `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_run_end(
    run: u64,
    status: i32,
    summary: *mut u8,
    summary_cap: usize,
    summary_len: *mut usize,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        if summary.is_null() || summary_len.is_null() {
            return Err(Error::InvalidArgument(
                "summary and summary_len must not be NULL".into(),
            ));
        }
        if summary_cap < agent_core::MAX_ENCODED_LEN {
            // SAFETY: `summary_len` is writable.
            unsafe { *summary_len = agent_core::MAX_ENCODED_LEN };
            return Err(Error::BufferTooSmall {
                needed: agent_core::MAX_ENCODED_LEN,
            });
        }
        let bytes = crate::app_runs::run_end(run, status, &SystemProperties)?;
        // SAFETY: the caller's buffer and length, as documented.
        unsafe { copy_out(&bytes, summary, summary_cap, summary_len) }
    })
}

/// Takes a body of `GET /v1/directives?device=<id>` fetched by the app;
/// writes how many per-device directives are in force into `count`.
///
/// # Safety
/// `body` has `len` readable bytes; `count` is writable; `err` as for
/// [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_set_directives(
    body: *const u8,
    len: usize,
    count: *mut u32,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        // SAFETY: `len` readable bytes, per the caller.
        let body = unsafe { bytes(body, len, "body") }?;
        if count.is_null() {
            return Err(Error::InvalidArgument("count must not be NULL".into()));
        }
        let n = crate::app_runs::set_directives(body)?;
        // SAFETY: `count` is writable, per the caller.
        unsafe { *count = u32::try_from(n).unwrap_or(u32::MAX) };
        Ok(())
    })
}

/// Fetches this device's directives from `server` (the device id kept
/// beside `spool_dir`; `token_file`, `ca_file` may be NULL) and takes them;
/// writes how many are in force into `count`. Blocks for the request.
///
/// # Safety
/// The strings are NUL-terminated (or NULL where allowed); `count` is
/// writable; `err` as for [`edge_agent_trace`].
#[no_mangle]
pub unsafe extern "C" fn edge_agent_fetch_directives(
    spool_dir: *const c_char,
    server: *const c_char,
    token_file: *const c_char,
    ca_file: *const c_char,
    count: *mut u32,
    err: *mut c_char,
    err_cap: usize,
) -> c_int {
    guard(err, err_cap, || {
        let path = |bytes: &[u8]| Path::new(OsStr::from_bytes(bytes)).to_path_buf();
        // SAFETY: NULL or NUL-terminated, per the caller.
        let spool_dir = path(unsafe { string(spool_dir, "spool_dir") }?);
        // SAFETY: as above.
        let server = unsafe { string(server, "server") }?;
        let server = lossy(OsStr::from_bytes(server).to_os_string());
        let token_file = if token_file.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated, per the caller.
            Some(path(unsafe { string(token_file, "token_file") }?))
        };
        let ca = if ca_file.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated, per the caller.
            Some(path(unsafe { string(ca_file, "ca_file") }?))
        };
        if count.is_null() {
            return Err(Error::InvalidArgument("count must not be NULL".into()));
        }
        let n = crate::app_runs::fetch_directives(&crate::app_runs::DirectiveSource {
            spool_dir,
            server,
            token_file,
            ca,
        })?;
        // SAFETY: `count` is writable, per the caller.
        unsafe { *count = u32::try_from(n).unwrap_or(u32::MAX) };
        Ok(())
    })
}

/// Runs `body`, turning its error or panic into a code and a message.
fn guard(err: *mut c_char, err_cap: usize, body: impl FnOnce() -> Result<(), Error>) -> c_int {
    let error = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return EDGE_AGENT_OK,
        Ok(Err(error)) => error,
        Err(payload) => Error::from_panic(payload),
    };
    // SAFETY: the caller of the entry point guarantees `err_cap` bytes.
    unsafe { write_c_string(error.to_string().as_bytes(), err, err_cap) };
    error.code()
}

/// Copies `text` into `out` as a NUL-terminated string, cut to fit (at a
/// UTF-8 boundary when `text` is UTF-8). Does nothing when `out` is NULL or
/// `cap` is 0.
///
/// # Safety
/// `out` has `cap` writable bytes or is NULL.
unsafe fn write_c_string(text: &[u8], out: *mut c_char, cap: usize) {
    if out.is_null() || cap == 0 {
        return;
    }
    let mut len = text.len().min(cap - 1);
    if let Ok(s) = std::str::from_utf8(text) {
        while !s.is_char_boundary(len) {
            len -= 1;
        }
    }
    // SAFETY: `len + 1 <= cap` bytes are written into `out`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), len);
        *out.add(len) = 0;
    }
}

/// Copies `bytes` into the caller's buffer.
///
/// # Safety
/// `out` has `cap` writable bytes; `len` is writable.
unsafe fn copy_out(bytes: &[u8], out: *mut u8, cap: usize, len: *mut usize) -> Result<(), Error> {
    // SAFETY: `len` is writable.
    unsafe { *len = bytes.len() };
    if cap < bytes.len() {
        return Err(Error::InvalidArgument(format!(
            "summary buffer too small: {} bytes needed (EDGE_AGENT_SUMMARY_MAX is enough)",
            bytes.len()
        )));
    }
    // SAFETY: `bytes.len() <= cap`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) };
    Ok(())
}

/// Borrows a NUL-terminated string's bytes.
///
/// # Safety
/// `ptr` is NULL or NUL-terminated and valid for the call.
unsafe fn string<'a>(ptr: *const c_char, what: &str) -> Result<&'a [u8], Error> {
    if ptr.is_null() {
        return Err(Error::InvalidArgument(format!("{what} must not be NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated, per the caller.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_bytes())
}

/// Borrows `len` bytes.
///
/// # Safety
/// `ptr` is NULL or has `len` readable bytes valid for the call.
unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if ptr.is_null() {
        return Err(Error::InvalidArgument(format!("{what} must not be NULL")));
    }
    // SAFETY: non-NULL with `len` readable bytes, per the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Copies an array of `n` NUL-terminated strings.
///
/// # Safety
/// `array` is NULL or has `n` pointers, each NULL or NUL-terminated.
unsafe fn strings(
    array: *const *const c_char,
    n: usize,
    what: &str,
) -> Result<Vec<OsString>, Error> {
    if array.is_null() {
        return Err(Error::InvalidArgument(format!("{what} must not be NULL")));
    }
    (0..n)
        .map(|i| {
            // SAFETY: `i < n` pointers are readable, per the caller.
            let element = unsafe { *array.add(i) };
            // SAFETY: each element is NULL or NUL-terminated.
            unsafe { string(element, &format!("{what}[{i}]")) }
                .map(|b| OsStr::from_bytes(b).to_os_string())
        })
        .collect()
}

/// Like [`strings`], but a NULL array means "not given" (`None`).
///
/// # Safety
/// As for [`strings`].
unsafe fn optional_strings(
    array: *const *const c_char,
    n: usize,
    what: &str,
) -> Result<Option<Vec<OsString>>, Error> {
    if array.is_null() {
        return Ok(None);
    }
    // SAFETY: as per the caller.
    unsafe { strings(array, n, what) }.map(Some)
}

fn lossy(s: OsString) -> String {
    s.to_string_lossy().into_owned()
}
