//! What each fd of the process is, remembered: a wrapper asks once per fd
//! (one `fstat`, and for a socket `getsockopt`, in [`crate::sys`]), then
//! reads a byte. The wrappers keep it true: a call that makes an fd
//! (`socket`, `accept`, `pipe`, `open`) sets or forgets its entry, `close`
//! and `dup2`/`dup3` onto it forget it. Lock-free, allocation-free: one
//! atomic byte per fd, so any thread or signal handler may use it.

use core::sync::atomic::{AtomicU8, Ordering};

use agent_core::FdKind;

/// Fds below this are remembered; higher ones are asked each time (rare:
/// a process with more than a thousand files open).
pub const CACHED_FDS: usize = 1024;

/// Each fd's kind: 0 not known, else 1 + the kind's number.
#[derive(Debug)]
pub struct FdKinds {
    kinds: [AtomicU8; CACHED_FDS],
}

impl Default for FdKinds {
    fn default() -> Self {
        FdKinds::new()
    }
}

impl FdKinds {
    /// Nothing known.
    pub const fn new() -> FdKinds {
        FdKinds {
            kinds: [const { AtomicU8::new(0) }; CACHED_FDS],
        }
    }

    /// The kind of `fd`: remembered, else `resolve(fd)`'s answer, which is
    /// remembered unless it is `None` (not an open fd: nothing to keep).
    pub fn kind(&self, fd: i64, resolve: impl FnOnce(i32) -> FdKind) -> FdKind {
        let Ok(fd) = i32::try_from(fd) else {
            return FdKind::None;
        };
        if fd < 0 {
            return FdKind::None;
        }
        let Some(slot) = self.kinds.get(fd as usize) else {
            return resolve(fd);
        };
        match slot.load(Ordering::Relaxed) {
            0 => {
                let kind = resolve(fd);
                if kind != FdKind::None {
                    slot.store(kind as u8 + 1, Ordering::Relaxed);
                }
                kind
            }
            known => FdKind::from_u8(known - 1).unwrap_or(FdKind::None),
        }
    }

    /// `fd` was just made, and is known to be `kind`.
    pub fn set(&self, fd: i64, kind: FdKind) {
        if let Some(slot) = self.slot(fd) {
            slot.store(kind as u8 + 1, Ordering::Relaxed);
        }
    }

    /// `fd` was closed or replaced: ask again at its next use.
    pub fn forget(&self, fd: i64) {
        if let Some(slot) = self.slot(fd) {
            slot.store(0, Ordering::Relaxed);
        }
    }

    fn slot(&self, fd: i64) -> Option<&AtomicU8> {
        usize::try_from(fd).ok().and_then(|i| self.kinds.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn an_fd_is_asked_once_until_it_is_forgotten() {
        let kinds = FdKinds::new();
        let asked = Cell::new(0);
        let ask = |_| {
            asked.set(asked.get() + 1);
            FdKind::Tcp
        };
        assert_eq!(kinds.kind(5, ask), FdKind::Tcp);
        assert_eq!(kinds.kind(5, ask), FdKind::Tcp);
        assert_eq!(asked.get(), 1);
        kinds.forget(5);
        assert_eq!(kinds.kind(5, |_| FdKind::File), FdKind::File);
        kinds.set(5, FdKind::Pipe);
        assert_eq!(kinds.kind(5, |_| unreachable!()), FdKind::Pipe);
    }

    #[test]
    fn closed_negative_and_high_fds_are_not_remembered() {
        let kinds = FdKinds::new();
        assert_eq!(kinds.kind(7, |_| FdKind::None), FdKind::None);
        assert_eq!(
            kinds.kind(7, |_| FdKind::File),
            FdKind::File,
            "None not kept"
        );
        assert_eq!(kinds.kind(-1, |_| unreachable!()), FdKind::None);
        assert_eq!(kinds.kind(i64::MAX, |_| unreachable!()), FdKind::None);
        let high = CACHED_FDS as i64 + 3;
        assert_eq!(kinds.kind(high, |_| FdKind::Udp), FdKind::Udp);
        assert_eq!(
            kinds.kind(high, |_| FdKind::Unix),
            FdKind::Unix,
            "asked each time"
        );
        kinds.set(high, FdKind::Tcp);
        kinds.forget(-3);
    }
}
