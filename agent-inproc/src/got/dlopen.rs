//! The `dlopen` (and, on Android, `android_dlopen_ext`) wrappers: call
//! the real one, then patch what it loaded.
//!
//! Bionic's `dlopen` picks the linker namespace (which libraries the new
//! one may see) from its caller's return address; a wrapper in our
//! library would make every app library load as if the agent had asked.
//! So the wrapper's entry is a few instructions of assembly that take the
//! return address (what `__builtin_return_address(0)` gives C, which
//! stable Rust lacks) as an extra argument and jump to the Rust part,
//! which calls bionic's `__loader_dlopen(name, flags, caller)` /
//! `__loader_android_dlopen_ext(name, flags, info, caller)` (exported by
//! the linker since API 26; before, or when not found, the plain real
//! function is called and the namespace is the agent's). glibc and musl
//! have no such entry: there the real `dlopen` sees our library as its
//! caller, which only matters for a `$ORIGIN` in the name (resolved from
//! our library's folder).

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use super::Hook;

static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

/// The hook for `dlopen`, to put in the table given to `install`.
pub fn dlopen_hook() -> Hook {
    #[cfg(target_os = "android")]
    find_loader_entries();
    Hook {
        symbol: c"dlopen",
        wrapper: edge_agent_got_dlopen_entry as *const () as usize,
        real: &REAL_DLOPEN,
    }
}

unsafe extern "C" {
    /// The assembly entries below (their signature is the wrapped
    /// function's; `fn()` is enough to take their address).
    fn edge_agent_got_dlopen_entry();
    #[cfg(target_os = "android")]
    fn edge_agent_got_android_dlopen_ext_entry();
}

// Each entry moves the return address into the next argument and jumps
// (a tail call: the Rust function returns straight to the caller).
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .text.edge_agent_got_dlopen_entry,\"ax\",@progbits",
    ".globl edge_agent_got_dlopen_entry",
    ".hidden edge_agent_got_dlopen_entry",
    ".type edge_agent_got_dlopen_entry,@function",
    "edge_agent_got_dlopen_entry:",
    "mov rdx, [rsp]",
    "jmp {with_caller}",
    ".size edge_agent_got_dlopen_entry, . - edge_agent_got_dlopen_entry",
    ".popsection",
    with_caller = sym dlopen_with_caller,
);

// cdecl: the arguments are on the stack; call with a third one (the
// stack stays 16-byte aligned at the call: 4 + 3 * 4 bytes pushed).
#[cfg(target_arch = "x86")]
core::arch::global_asm!(
    ".pushsection .text.edge_agent_got_dlopen_entry,\"ax\",@progbits",
    ".globl edge_agent_got_dlopen_entry",
    ".hidden edge_agent_got_dlopen_entry",
    ".type edge_agent_got_dlopen_entry,@function",
    "edge_agent_got_dlopen_entry:",
    "push dword ptr [esp]",
    "push dword ptr [esp + 12]",
    "push dword ptr [esp + 12]",
    "call {with_caller}",
    "add esp, 12",
    "ret",
    ".size edge_agent_got_dlopen_entry, . - edge_agent_got_dlopen_entry",
    ".popsection",
    with_caller = sym dlopen_with_caller,
);

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".pushsection .text.edge_agent_got_dlopen_entry,\"ax\",%progbits",
    ".globl edge_agent_got_dlopen_entry",
    ".hidden edge_agent_got_dlopen_entry",
    ".type edge_agent_got_dlopen_entry,%function",
    "edge_agent_got_dlopen_entry:",
    "mov x2, x30",
    "b {with_caller}",
    ".size edge_agent_got_dlopen_entry, . - edge_agent_got_dlopen_entry",
    ".popsection",
    with_caller = sym dlopen_with_caller,
);

// ARM mode; `bx` to an address computed PC-relatively, so a Thumb Rust
// function (bit 0 set in the difference by the linker) is entered in
// Thumb state.
#[cfg(target_arch = "arm")]
core::arch::global_asm!(
    ".pushsection .text.edge_agent_got_dlopen_entry,\"ax\",%progbits",
    ".arm",
    ".globl edge_agent_got_dlopen_entry",
    ".hidden edge_agent_got_dlopen_entry",
    ".type edge_agent_got_dlopen_entry,%function",
    "edge_agent_got_dlopen_entry:",
    "mov r2, lr",
    "ldr r12, 1f",
    "2: add r12, pc, r12",
    "bx r12",
    "1: .word {with_caller} - (2b + 8)",
    ".size edge_agent_got_dlopen_entry, . - edge_agent_got_dlopen_entry",
    ".popsection",
    with_caller = sym dlopen_with_caller,
);

extern "C" fn dlopen_with_caller(
    name: *const c_char,
    flags: c_int,
    caller: *const c_void,
) -> *mut c_void {
    #[cfg(target_os = "android")]
    let loader = LOADER_DLOPEN.load(Ordering::Acquire);
    #[cfg(not(target_os = "android"))]
    let (loader, _) = (0usize, caller);
    #[cfg(all(test, not(target_os = "android")))]
    tests::LAST_CALLER.store(caller as usize, Ordering::Relaxed);
    let handle = if loader != 0 {
        // SAFETY: LOADER_DLOPEN is bionic's __loader_dlopen (dlsym), of
        // this signature; the arguments are the caller's, passed on.
        unsafe {
            let loader: unsafe extern "C" fn(*const c_char, c_int, *const c_void) -> *mut c_void =
                core::mem::transmute(loader);
            loader(name, flags, caller)
        }
    } else {
        let real = REAL_DLOPEN.load(Ordering::Acquire);
        // SAFETY: install set REAL_DLOPEN (dlsym's `dlopen`) before any
        // GOT entry leads here.
        unsafe {
            let real: unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void =
                core::mem::transmute(real);
            real(name, flags)
        }
    };
    after_load(handle);
    handle
}

/// After a successful load, patches what was loaded; errno (and
/// `dlerror`, which the walk does not touch) as the real call left them.
fn after_load(handle: *mut c_void) {
    if handle.is_null() {
        return;
    }
    let errno = errno::get();
    // An error leaves the new objects unpatched (their calls are then
    // not observed) and is not the app's: its dlopen succeeded.
    let _ = super::patch_new_objects();
    errno::set(errno);
}

#[cfg(target_os = "android")]
pub use android::*;

#[cfg(target_os = "android")]
mod android {
    use super::*;

    pub(super) static LOADER_DLOPEN: AtomicUsize = AtomicUsize::new(0);
    static LOADER_DLOPEN_EXT: AtomicUsize = AtomicUsize::new(0);
    static REAL_DLOPEN_EXT: AtomicUsize = AtomicUsize::new(0);

    pub(super) fn find_loader_entries() {
        for (symbol, place) in [
            (c"__loader_dlopen", &LOADER_DLOPEN),
            (c"__loader_android_dlopen_ext", &LOADER_DLOPEN_EXT),
        ] {
            // SAFETY: a NUL-terminated name; dlsym only reads it.
            let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) };
            place.store(found as usize, Ordering::Release);
        }
    }

    /// The hook for `android_dlopen_ext`.
    pub fn android_dlopen_ext_hook() -> Hook {
        find_loader_entries();
        Hook {
            symbol: c"android_dlopen_ext",
            wrapper: edge_agent_got_android_dlopen_ext_entry as *const () as usize,
            real: &REAL_DLOPEN_EXT,
        }
    }

    #[cfg(target_arch = "x86_64")]
    core::arch::global_asm!(
        ".pushsection .text.edge_agent_got_android_dlopen_ext_entry,\"ax\",@progbits",
        ".globl edge_agent_got_android_dlopen_ext_entry",
        ".hidden edge_agent_got_android_dlopen_ext_entry",
        ".type edge_agent_got_android_dlopen_ext_entry,@function",
        "edge_agent_got_android_dlopen_ext_entry:",
        "mov rcx, [rsp]",
        "jmp {with_caller}",
        ".popsection",
        with_caller = sym dlopen_ext_with_caller,
    );

    #[cfg(target_arch = "x86")]
    core::arch::global_asm!(
        ".pushsection .text.edge_agent_got_android_dlopen_ext_entry,\"ax\",@progbits",
        ".globl edge_agent_got_android_dlopen_ext_entry",
        ".hidden edge_agent_got_android_dlopen_ext_entry",
        ".type edge_agent_got_android_dlopen_ext_entry,@function",
        "edge_agent_got_android_dlopen_ext_entry:",
        "sub esp, 12",
        "push dword ptr [esp + 12]",
        "push dword ptr [esp + 28]",
        "push dword ptr [esp + 28]",
        "push dword ptr [esp + 28]",
        "call {with_caller}",
        "add esp, 28",
        "ret",
        ".popsection",
        with_caller = sym dlopen_ext_with_caller,
    );

    #[cfg(target_arch = "aarch64")]
    core::arch::global_asm!(
        ".pushsection .text.edge_agent_got_android_dlopen_ext_entry,\"ax\",%progbits",
        ".globl edge_agent_got_android_dlopen_ext_entry",
        ".hidden edge_agent_got_android_dlopen_ext_entry",
        ".type edge_agent_got_android_dlopen_ext_entry,%function",
        "edge_agent_got_android_dlopen_ext_entry:",
        "mov x3, x30",
        "b {with_caller}",
        ".popsection",
        with_caller = sym dlopen_ext_with_caller,
    );

    #[cfg(target_arch = "arm")]
    core::arch::global_asm!(
        ".pushsection .text.edge_agent_got_android_dlopen_ext_entry,\"ax\",%progbits",
        ".arm",
        ".globl edge_agent_got_android_dlopen_ext_entry",
        ".hidden edge_agent_got_android_dlopen_ext_entry",
        ".type edge_agent_got_android_dlopen_ext_entry,%function",
        "edge_agent_got_android_dlopen_ext_entry:",
        "mov r3, lr",
        "ldr r12, 1f",
        "2: add r12, pc, r12",
        "bx r12",
        "1: .word {with_caller} - (2b + 8)",
        ".popsection",
        with_caller = sym dlopen_ext_with_caller,
    );

    extern "C" fn dlopen_ext_with_caller(
        name: *const c_char,
        flags: c_int,
        info: *const c_void,
        caller: *const c_void,
    ) -> *mut c_void {
        let loader = LOADER_DLOPEN_EXT.load(Ordering::Acquire);
        let handle = if loader != 0 {
            // SAFETY: bionic's __loader_android_dlopen_ext, of this
            // signature; the caller's arguments passed on.
            unsafe {
                let loader: unsafe extern "C" fn(
                    *const c_char,
                    c_int,
                    *const c_void,
                    *const c_void,
                ) -> *mut c_void = core::mem::transmute(loader);
                loader(name, flags, info, caller)
            }
        } else {
            let real = REAL_DLOPEN_EXT.load(Ordering::Acquire);
            // SAFETY: install set it (dlsym's android_dlopen_ext).
            unsafe {
                let real: unsafe extern "C" fn(*const c_char, c_int, *const c_void) -> *mut c_void =
                    core::mem::transmute(real);
                real(name, flags, info)
            }
        };
        after_load(handle);
        handle
    }
}

/// This thread's errno (the wrappers keep it as the real call left it).
mod errno {
    fn place() -> *mut libc::c_int {
        #[cfg(target_os = "android")]
        // SAFETY: bionic's __errno returns this thread's errno.
        return unsafe { libc::__errno() };
        #[cfg(not(target_os = "android"))]
        // SAFETY: __errno_location returns this thread's errno.
        return unsafe { libc::__errno_location() };
    }

    pub fn get() -> libc::c_int {
        // SAFETY: `place` is this thread's errno, valid for its life.
        unsafe { *place() }
    }

    pub fn set(value: libc::c_int) {
        // SAFETY: as in `get`.
        unsafe { *place() = value };
    }
}

#[cfg(all(test, not(target_os = "android")))]
mod tests {
    use super::*;

    pub(super) static LAST_CALLER: AtomicUsize = AtomicUsize::new(0);
    static SEEN_NAME: AtomicUsize = AtomicUsize::new(0);
    static SEEN_FLAGS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn failing_dlopen(name: *const c_char, flags: c_int) -> *mut c_void {
        SEEN_NAME.store(name as usize, Ordering::Relaxed);
        SEEN_FLAGS.store(flags as usize, Ordering::Relaxed);
        core::ptr::null_mut()
    }

    /// The assembly entry passes the arguments on unchanged, adds its
    /// return address (a place in this test function), and returns the
    /// real function's result (a failed load: nothing patched).
    #[test]
    fn the_entry_passes_arguments_and_its_return_address() {
        REAL_DLOPEN.store(failing_dlopen as *const () as usize, Ordering::Release);
        let name = c"libnothing.so";
        // SAFETY: the entry has dlopen's signature; it calls
        // failing_dlopen, which only records its arguments.
        let handle = unsafe {
            let entry: unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void =
                core::mem::transmute(edge_agent_got_dlopen_entry as *const ());
            entry(name.as_ptr(), 0x1234)
        };
        assert!(handle.is_null());
        assert_eq!(SEEN_NAME.load(Ordering::Relaxed), name.as_ptr() as usize);
        assert_eq!(SEEN_FLAGS.load(Ordering::Relaxed), 0x1234);
        let me = the_entry_passes_arguments_and_its_return_address as *const () as usize;
        let caller = LAST_CALLER.load(Ordering::Relaxed);
        assert!(
            me < caller && caller < me + 64 * 1024,
            "return address {caller:#x}, this test at {me:#x}"
        );
    }
}
