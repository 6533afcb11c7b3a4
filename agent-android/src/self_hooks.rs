//! The FFI half of an app observing itself ([`crate::self_observe`]):
//! agent-inproc's wrappers, made here under this library's own (mangled,
//! unexported) names, and the GOT patcher's hook table that routes the
//! app's libraries' libc calls to them. Not exported under libc's names
//! (`#[no_mangle]`, as agent-preload does): the dynamic linker would then
//! bind every object of the process to them, this library's own calls
//! included, from the moment the library is loaded, observed or not.
//!
//! May use `unsafe` (the wrappers are `extern "C"` functions over raw
//! pointers; `dlsym` and `pthread_atfork` are C calls): every block says
//! why it is sound.

use std::ffi::CStr;
use std::sync::OnceLock;

use agent_inproc::got::{self, Hook};

/// The wrappers (each with a `<name>::REAL` slot for the real function).
mod wrappers {
    agent_inproc::libc_wrappers!();
}

/// Whether the process's libc (or any loaded object) defines `symbol`.
fn defined(symbol: &CStr) -> bool {
    // SAFETY: `symbol` is NUL-terminated; dlsym only reads it.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) }.is_null()
}

/// The hook table for `got::install`: every wrapper whose libc function
/// this process has (glibc 2.33+ has no default `__xstat`, bionic none of
/// the `__*xstat*`: no object can call what the libc lacks, so leaving
/// those out loses nothing), plus the `dlopen` hooks that patch the
/// libraries loaded later. Made once, for the process's life (the
/// patcher keeps it).
pub fn hooks() -> &'static [Hook] {
    static HOOKS: OnceLock<Vec<Hook>> = OnceLock::new();
    HOOKS.get_or_init(|| {
        let mut hooks = Vec::new();
        // Every wrapper the set defines (`libc_wrappers!` lists them).
        for wrapped in wrappers::wrapped() {
            let Ok(symbol) = CStr::from_bytes_with_nul(wrapped.symbol.as_bytes()) else {
                continue;
            };
            if !defined(symbol) {
                continue;
            }
            hooks.push(Hook {
                symbol,
                wrapper: wrapped.wrapper,
                real: wrapped.real.slot(),
            });
        }
        hooks.push(got::dlopen_hook());
        #[cfg(target_os = "android")]
        hooks.push(got::android_dlopen_ext_hook());
        hooks
    })
}

/// Runs `child` in the child of every later `fork` (registered once per
/// call: call it once).
pub fn on_fork_child(child: extern "C" fn()) -> Result<(), i32> {
    // SAFETY: `child` is a plain function without arguments, as
    // pthread_atfork wants; the other handlers are none.
    match unsafe { libc::pthread_atfork(None, None, Some(child)) } {
        0 => Ok(()),
        errno => Err(errno),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hook table is the wrapper set's own list: every wrapper
    /// `libc_wrappers!` defines (one added there included, e.g. `fcntl`)
    /// is hooked where this libc has the function, once.
    #[test]
    fn every_wrapper_of_the_set_is_hooked_where_libc_has_it() {
        let hooks = hooks();
        let set = wrappers::wrapped();
        assert_eq!(set.len(), wrappers::WRAPPED_COUNT);
        for w in set {
            let symbol = CStr::from_bytes_with_nul(w.symbol.as_bytes()).unwrap();
            let hooked = hooks.iter().filter(|h| h.symbol == symbol).count();
            assert_eq!(hooked, usize::from(defined(symbol)), "{symbol:?}");
        }
        for name in [c"fcntl", c"posix_spawn", c"_exit", c"read"] {
            assert!(hooks.iter().any(|h| h.symbol == name), "{name:?}");
        }
    }
}
