//! The wrappers against what the kernel shows elsewhere (`/proc`, std), so a
//! change of the call underneath (raw libc or nix) cannot change a result
//! unnoticed.

use std::ffi::CString;
use std::sync::atomic::Ordering;

use super::*;

// File type bits (u32 here: `mode_t` is 16 bits on some targets).
const S_IFIFO: u32 = 0o010000;
const S_IFCHR: u32 = 0o020000;

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The value of `key:` in `/proc/self/fdinfo/FD` or `/proc/self/status`.
fn proc_field(path: &str, key: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    line[key.len()..].trim().to_string()
}

#[test]
fn host_facts_match_proc() {
    assert_eq!(getpid() as u32, std::process::id());
    // Uid: real, effective, saved, filesystem.
    let uids = proc_field("/proc/self/status", "Uid:");
    let euid: u32 = uids.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(geteuid(), euid);
    let (release, machine) = uname();
    let osrelease = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(release, osrelease.trim());
    assert!(!machine.is_empty() && machine.is_ascii());
    assert!(max_rss_kib() > 0);
    // CPU time and the clock move while we spin (bounded: 10 s of clock).
    let start = self_cpu_us();
    let t0 = monotonic_ns();
    assert!(t0 > 0);
    let std_t0 = std::time::Instant::now();
    while self_cpu_us() == start && std_t0.elapsed().as_secs() < 10 {
        std::hint::black_box(0u64);
    }
    assert!(self_cpu_us() > start, "own CPU time never moved");
    // Instant reads CLOCK_MONOTONIC too, inside our span: ours is no shorter.
    let std_span = std_t0.elapsed().as_nanos() as u64;
    assert!(monotonic_ns() - t0 >= std_span);
}

#[test]
fn pipe_is_cloexec_and_reads_back() {
    let (r, w) = cloexec_pipe().unwrap();
    for fd in [r, w] {
        let flags = proc_field(&format!("/proc/self/fdinfo/{fd}"), "flags:");
        let flags = u32::from_str_radix(&flags, 8).unwrap();
        assert_ne!(flags & libc::O_CLOEXEC as u32, 0, "fd {fd} lacks O_CLOEXEC");
    }
    // The pipe's fd as a tracee's would be seen: a link to pipe:[INODE],
    // a FIFO when stat'ed; both count as /proc reads.
    let link = cstr(&format!("/proc/self/fd/{r}"));
    let before = COUNTERS.proc_reads.load(Ordering::Relaxed);
    let mut target = [0u8; 64];
    let n = readlink(&link, &mut target).unwrap();
    assert!(target[..n].starts_with(b"pipe:["), "{:?}", &target[..n]);
    assert_eq!(file_type(&link).unwrap(), S_IFIFO);
    assert!(COUNTERS.proc_reads.load(Ordering::Relaxed) >= before + 2);
    std::fs::write(format!("/proc/self/fd/{w}"), b"abc").unwrap();
    close(w);
    let mut buf = [0u8; 8];
    assert_eq!(read_fd(r, &mut buf).unwrap(), 3);
    assert_eq!(&buf[..3], b"abc");
    assert_eq!(read_fd(r, &mut buf).unwrap(), 0, "end of file once closed");
    close(r);
}

#[test]
fn readlink_truncates_to_the_buffer_and_errors_carry_errno() {
    let mut small = [0u8; 4];
    assert_eq!(readlink(&cstr("/proc/self/exe"), &mut small).unwrap(), 4);
    let missing = cstr("/proc/self/fd/999999");
    let err = readlink(&missing, &mut small).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    let err = file_type(&missing).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(file_type(&cstr("/dev/null")).unwrap(), S_IFCHR);
}

#[test]
fn read_memory_reads_whole_buffers_only() {
    let source = *b"tracee memory!!!";
    let mut buf = [0u8; 16];
    read_memory(getpid(), source.as_ptr() as u64, &mut buf).unwrap();
    assert_eq!(buf, source);
    // Page 0 is never mapped.
    let err = read_memory(getpid(), 0x10, &mut buf).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
}
