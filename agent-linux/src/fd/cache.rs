//! One fd table's cache of fd kinds, shared by the tasks that share the
//! table (CLONE_FILES). A miss is resolved through [`super::resolve`].

use std::cell::RefCell;
use std::rc::Rc;

use agent_core::FdKind;

use super::resolve::{resolve, resolve_opened_by_path};
use crate::sys::Tid;

/// Fds above this are resolved every time rather than cached (keeps the
/// cache's memory bounded by a hostile fd number).
const MAX_CACHED_FD: usize = 1 << 16;

/// A cache slot for an fd opened by path whose file type is not yet known
/// (a file, or a FIFO).
pub(super) const OPENED_BY_PATH: u8 = 0xff;

/// One fd table's cache: `kinds[fd]` is 0 (unknown), 1 + `FdKind`, or
/// [`OPENED_BY_PATH`].
#[derive(Debug, Default)]
pub struct FdTable {
    pub(super) kinds: Vec<u8>,
}

/// A cache shared by the tasks that share the fd table.
pub type SharedFds = Rc<RefCell<FdTable>>;

/// A fresh, empty cache.
pub fn new_table() -> SharedFds {
    Rc::new(RefCell::new(FdTable { kinds: vec![0; 64] }))
}

impl FdTable {
    /// The kind of `fd` in task `tid`'s table, from the cache or `/proc`.
    /// `FdKind::None` when it is not an open fd.
    pub fn kind(&mut self, tid: Tid, fd: i64) -> FdKind {
        if !(0..=i32::MAX as i64).contains(&fd) {
            return FdKind::None;
        }
        let slot = fd as usize;
        let cached = self.kinds.get(slot).copied().unwrap_or(0);
        let kind = match cached {
            0 => resolve(tid, fd as i32),
            OPENED_BY_PATH => resolve_opened_by_path(tid, fd as i32),
            k => return FdKind::from_u8(k - 1).unwrap_or(FdKind::None),
        };
        if kind != FdKind::None {
            self.set(fd, kind);
        }
        kind
    }

    /// Records that `fd` is of `kind` (learnt from the call that made it).
    pub fn set(&mut self, fd: i64, kind: FdKind) {
        self.store(fd, kind as u8 + 1);
    }

    /// Records that `fd` was just opened by path.
    pub fn set_opened_by_path(&mut self, fd: i64) {
        self.store(fd, OPENED_BY_PATH);
    }

    fn store(&mut self, fd: i64, value: u8) {
        let Ok(slot) = usize::try_from(fd) else {
            return;
        };
        if slot >= MAX_CACHED_FD {
            return;
        }
        if slot >= self.kinds.len() {
            self.kinds.resize((slot + 1).next_power_of_two(), 0);
        }
        self.kinds[slot] = value;
    }

    /// Forgets `fd`.
    pub fn invalidate(&mut self, fd: i64) {
        if let Ok(slot) = usize::try_from(fd) {
            if let Some(k) = self.kinds.get_mut(slot) {
                *k = 0;
            }
        }
    }

    /// Forgets fds `first..=last`.
    pub fn invalidate_range(&mut self, first: u64, last: u64) {
        let len = self.kinds.len() as u64;
        if first >= len {
            return;
        }
        let end = last.min(len - 1);
        for k in &mut self.kinds[first as usize..=end as usize] {
            *k = 0;
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.kinds.iter_mut().for_each(|k| *k = 0);
    }
}
