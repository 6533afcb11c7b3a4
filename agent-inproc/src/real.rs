//! The real libc functions the wrappers call: set by whoever installed the
//! wrappers (GOT patching knows what each entry held), else looked up at
//! first use as the next definition after ours (`dlsym(RTLD_NEXT)`: under
//! `LD_PRELOAD` ours comes first).

use core::sync::atomic::{AtomicUsize, Ordering};

/// One libc function: its name and, once known, its address.
#[derive(Debug)]
pub struct Real {
    /// NUL-terminated.
    name: &'static str,
    addr: AtomicUsize,
}

impl Real {
    /// The function `name` (NUL-terminated), not looked up yet.
    pub const fn new(name: &'static str) -> Real {
        assert!(
            !name.is_empty() && name.as_bytes()[name.len() - 1] == 0,
            "a NUL-terminated name"
        );
        Real {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.name.trim_end_matches('\0')
    }

    /// Its address, looked up at the first call (`None`: this libc has no
    /// such function; no program linked against it calls our wrapper).
    #[inline]
    pub fn get(&self) -> Option<usize> {
        match self.addr.load(Ordering::Relaxed) {
            0 => self.look_up(),
            addr => Some(addr),
        }
    }

    /// Says where the real function is (an installer that knows).
    pub fn set(&self, addr: usize) {
        self.addr.store(addr, Ordering::Relaxed);
    }

    /// Where the address is kept: what `got::Hook::real` takes, so that
    /// the GOT patcher sets it (before it patches any entry) and the
    /// wrapper reads it, with no copy in between.
    pub fn slot(&self) -> &AtomicUsize {
        &self.addr
    }

    #[cold]
    fn look_up(&self) -> Option<usize> {
        // SAFETY: `name` is NUL-terminated (checked by `new`); RTLD_NEXT
        // asks the loader for the definition after the one of this object.
        let addr = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) } as usize;
        if addr != 0 {
            self.addr.store(addr, Ordering::Relaxed);
            Some(addr)
        } else {
            None
        }
    }
}

/// One wrapper of a set made by [`crate::libc_wrappers!`] (its
/// `wrapped()` lists them all): what an installer needs to route libc's
/// function of that name to it.
#[derive(Debug, Clone, Copy)]
pub struct Wrapped {
    /// libc's name, NUL-terminated.
    pub symbol: &'static str,
    /// The wrapper's address.
    pub wrapper: usize,
    /// Where the wrapper finds the real function.
    pub real: &'static Real,
}
