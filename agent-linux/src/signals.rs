//! The agent's own signals: SIGINT/SIGTERM ask the tracer to detach and
//! end; SIGALRM ticks drive `watch` scans and `attach --for` deadlines.
//!
//! The handlers only store to atomics and re-arm the interval timer (one
//! system call), both async-signal-safe. They are installed without
//! SA_RESTART so a blocking waitpid returns EINTR. A signal landing between
//! the loop's flag check and its waitpid would be missed, so the stop
//! handler also starts a short periodic timer whose SIGALRM interrupts that
//! waitpid: the loop then sees the flag.

use std::io;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::sys;

static STOP: AtomicI32 = AtomicI32::new(0);
static TICK: AtomicBool = AtomicBool::new(false);
/// Kick period after a stop request, µs.
const KICK_US: u64 = 20_000;

extern "C" fn on_stop(sig: c_int) {
    STOP.store(sig, Ordering::SeqCst);
    sys::set_timer(KICK_US, KICK_US);
}

extern "C" fn on_alarm(_: c_int) {
    TICK.store(true, Ordering::SeqCst);
}

/// Installs the handlers (the `edge-agent` binary does; a library user that
/// wants Ctrl-C to detach calls it too).
pub fn install() -> io::Result<()> {
    sys::set_handler(libc::SIGINT, on_stop)?;
    sys::set_handler(libc::SIGTERM, on_stop)?;
    sys::set_handler(libc::SIGALRM, on_alarm)?;
    Ok(())
}

/// The signal that asked us to stop (or -1 for a programmatic request).
pub fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Asks the tracer loop to detach and end, as SIGINT would.
pub fn request_stop() {
    let _ = STOP.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst);
    sys::set_timer(KICK_US, KICK_US);
}

/// Whether a tick came that the loop has not taken yet (left for
/// [`take_tick`]). The wait looks before it sleeps: a tick that landed
/// while the tracer was busy (the exec reader's kick, above all) would
/// otherwise wait for the next one, and a short program would run on
/// untraced meanwhile.
pub fn tick_pending() -> bool {
    TICK.load(Ordering::SeqCst)
}

/// Whether a SIGALRM tick arrived since the last call.
pub fn take_tick() -> bool {
    TICK.swap(false, Ordering::SeqCst)
}

/// Starts periodic ticks every `us` microseconds (0 stops them).
pub fn tick_every(us: u64) {
    sys::set_timer(us, us);
}

/// Stops the timer (after the loop has ended).
pub fn quiet() {
    sys::set_timer(0, 0);
}

/// Runs `f` in the calling thread with the agent's signals (SIGINT,
/// SIGTERM, SIGALRM) blocked, then restores the mask: one that came
/// meanwhile is delivered then, so a stop or a tick is late, never lost.
/// For work the kernel abandons when a signal is pending: the BPF verifier
/// gives up with EAGAIN, and `watch`'s exec reader sends SIGALRM at every
/// exec on the machine, so on a busy host the programs would never load.
pub fn held<T>(f: impl FnOnce() -> T) -> io::Result<T> {
    use nix::sys::signal::{pthread_sigmask, SigmaskHow};
    let mut old = nix::sys::signal::SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_BLOCK,
        Some(&agent_signals()),
        Some(&mut old),
    )?;
    let result = f();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
    Ok(result)
}

/// Spawns a helper thread that never takes the tracer loop's signals
/// (SIGINT, SIGTERM, SIGALRM): one it took would not interrupt the loop's
/// waitpid. The mask is set before the spawn (the thread inherits it) and
/// restored after, so the thread never runs with them unblocked.
pub fn spawn_quiet_thread<F, T>(name: &str, f: F) -> io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    held(|| std::thread::Builder::new().name(name.into()).spawn(f))?
}

/// The signals this module handles.
fn agent_signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGALRM] {
        set.add(sig);
    }
    set
}
