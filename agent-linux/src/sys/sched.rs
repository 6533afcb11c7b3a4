//! The scheduling of the agent's own threads. The exec connector's reader
//! and the tracer race each new program to its first calls: on a loaded
//! machine an ordinary thread that wakes can wait milliseconds for a CPU
//! (the scheduler lets the running thread finish its slice, whatever the
//! nice values), longer than a short program lives. Raw `libc`: `nix`
//! does not wrap `sched_setscheduler`.

use std::io;

/// Puts the calling thread alone (Linux applies the call to the thread
/// whose id is given, 0 being the caller) in the lowest real-time class,
/// SCHED_FIFO priority 1: it runs as soon as it wakes, ahead of every
/// ordinary thread. With SCHED_RESET_ON_FORK, so threads and processes it
/// creates are ordinary again. Only for a thread that sleeps between short
/// pieces of work. Needs CAP_SYS_NICE (or an RLIMIT_RTPRIO).
pub fn become_realtime() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0
    // names the calling thread.
    let ret = unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param)
    };
    if ret == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
