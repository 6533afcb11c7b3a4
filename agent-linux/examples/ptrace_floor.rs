//! The floor any ptrace tracer can reach: runs a command, stops it at every
//! syscall entry and exit (following forks, clones and execs) and resumes it
//! at once, recording nothing. `scripts/bench-tracer` compares
//! `edge-agent run` against it.
//!
//! Usage: `ptrace_floor [--spin-us N] CMD [ARGS...]`; exits with the
//! command's status. By default it sleeps in `waitpid` for every stop, as
//! the floor and strace do; `--spin-us N` gives it the agent's
//! poll-then-sleep wait (`agent_linux::wait`), the floor for that strategy.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use agent_linux::engine::ptrace_options;
use agent_linux::sys;
use agent_linux::trace::resolve_command;
use agent_linux::WaitPolicy;

fn main() {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let mut wait = WaitPolicy::blocking();
    if args.first().is_some_and(|a| a == "--spin-us") {
        let us = args.get(1).and_then(|v| v.to_str()?.parse().ok());
        let Some(us) = us else {
            eprintln!("ptrace_floor: --spin-us needs a number of microseconds");
            std::process::exit(2);
        };
        wait = WaitPolicy::spin_us(us);
        args.drain(..2);
    }
    if args.is_empty() {
        eprintln!("usage: ptrace_floor [--spin-us N] CMD [ARGS...]");
        std::process::exit(2);
    }
    let path = resolve_command(&args[0]).unwrap_or_else(|e| {
        eprintln!("ptrace_floor: {e}");
        std::process::exit(127)
    });
    let cpath = CString::new(path.as_os_str().as_bytes()).expect("path without NUL");
    let cargs: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_bytes()).expect("argument without NUL"))
        .collect();
    let mut argv: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let (_read_fd, write_fd) = sys::cloexec_pipe().expect("pipe");
    let setup = sys::ChildSetup {
        path: &cpath,
        argv: &argv,
        filter: None,
        envp: None,
        error_fd: write_fd,
    };
    let pid = sys::fork_stopped_exec(&setup).expect("fork");
    sys::wait_pid(pid, libc::WUNTRACED, true).expect("wait");
    sys::seize(pid, ptrace_options(false)).expect("seize");
    sys::kill(pid, libc::SIGCONT).expect("continue");
    let mut code = 0;
    loop {
        let (tid, st) = match wait.wait() {
            Ok(Some(x)) => x,
            Ok(None) => continue,
            Err(_) => break, // ECHILD: everything ended
        };
        if let Some(c) = st.exited() {
            if tid == pid {
                code = c;
            }
            continue;
        }
        if let Some(s) = st.signaled() {
            if tid == pid {
                code = 128 + s;
            }
            continue;
        }
        let Some(sig) = st.stopped() else { continue };
        let event = st.event();
        if event == sys::PTRACE_EVENT_STOP && sig != libc::SIGTRAP {
            let _ = sys::listen(tid);
            continue;
        }
        let deliver = if event == 0 && sig != (libc::SIGTRAP | 0x80) {
            sig
        } else {
            0
        };
        let _ = sys::resume_syscall(tid, deliver);
    }
    std::process::exit(code);
}
