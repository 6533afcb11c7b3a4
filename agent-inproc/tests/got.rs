//! GOT/PLT patching, end to end: C libraries (tests/got/*.c, compiled by
//! the test with the C compiler of the target) loaded into this test
//! program, whose calls of `write`/`read`/`close` must reach the test's
//! counting wrappers after `got::install`, with the same results and
//! errno. Installation is once per process, so each test runs in a fresh
//! process: the test re-runs this binary with only itself selected.
//!
//! The compiler: `GOT_TEST_CC`, or by target (`cc` on x86_64,
//! `i686-linux-gnu-gcc` on i686).

// The test plays the app (and other hookers): it calls the C libraries
// through dlsym'd pointers and writes GOT entries itself.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use agent_inproc::got::{self, Hook, PatchError};

// ------------------------------------------------------------ the hooks

static REAL_WRITE: AtomicUsize = AtomicUsize::new(0);
static REAL_READ: AtomicUsize = AtomicUsize::new(0);
static REAL_CLOSE: AtomicUsize = AtomicUsize::new(0);
static WRITES: AtomicUsize = AtomicUsize::new(0);
static READS: AtomicUsize = AtomicUsize::new(0);
static CLOSES: AtomicUsize = AtomicUsize::new(0);

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
type ReadFn = unsafe extern "C" fn(c_int, *mut c_void, usize) -> isize;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;

unsafe extern "C" fn counting_write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    WRITES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: install set REAL_WRITE to libc's write before patching.
    unsafe {
        let real: WriteFn = std::mem::transmute(REAL_WRITE.load(Ordering::Acquire));
        real(fd, buf, len)
    }
}

unsafe extern "C" fn counting_read(fd: c_int, buf: *mut c_void, len: usize) -> isize {
    READS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as in counting_write.
    unsafe {
        let real: ReadFn = std::mem::transmute(REAL_READ.load(Ordering::Acquire));
        real(fd, buf, len)
    }
}

unsafe extern "C" fn counting_close(fd: c_int) -> c_int {
    CLOSES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as in counting_write.
    unsafe {
        let real: CloseFn = std::mem::transmute(REAL_CLOSE.load(Ordering::Acquire));
        real(fd)
    }
}

static HOOKS: LazyLock<[Hook; 4]> = LazyLock::new(|| {
    [
        Hook {
            symbol: c"write",
            wrapper: counting_write as *const () as usize,
            real: &REAL_WRITE,
        },
        Hook {
            symbol: c"read",
            wrapper: counting_read as *const () as usize,
            real: &REAL_READ,
        },
        Hook {
            symbol: c"close",
            wrapper: counting_close as *const () as usize,
            real: &REAL_CLOSE,
        },
        got::dlopen_hook(),
    ]
});

fn counts() -> (usize, usize, usize) {
    (
        WRITES.load(Ordering::Relaxed),
        READS.load(Ordering::Relaxed),
        CLOSES.load(Ordering::Relaxed),
    )
}

// ---------------------------------------------- another hooker's wrapper

static OTHER_NEXT: AtomicUsize = AtomicUsize::new(0);
static OTHER_WRITES: AtomicUsize = AtomicUsize::new(0);

/// Another hooker's `write` wrapper: counts, then calls what it found in
/// the entry when it patched it.
unsafe extern "C" fn other_write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    OTHER_WRITES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: OTHER_NEXT is what the entry held (a write-like function).
    unsafe {
        let next: WriteFn = std::mem::transmute(OTHER_NEXT.load(Ordering::Acquire));
        next(fd, buf, len)
    }
}

/// What another hooker does: replaces the value of `write`'s GOT entry
/// in the object named `object_part` by `other_write`, remembering the
/// old value to call it.
fn other_hooker_patches(object_part: &str) {
    let entries = got::entries_of(c"write").expect("entries of write");
    let entry = entries
        .iter()
        .find(|e| e.object.contains(object_part))
        .unwrap_or_else(|| panic!("no write entry in {object_part}: {entries:?}"));
    OTHER_NEXT.store(entry.value, Ordering::Release);
    // SAFETY: sysconf takes no pointers.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let start = entry.address & !(page - 1);
    // SAFETY: the page holds a GOT entry of a loaded library; making it
    // writable and back read-only (RELRO) keeps the mapping valid; the
    // entry is an aligned word.
    unsafe {
        if entry.in_relro {
            assert_eq!(
                libc::mprotect(
                    start as *mut c_void,
                    page,
                    libc::PROT_READ | libc::PROT_WRITE
                ),
                0
            );
        }
        AtomicUsize::from_ptr(entry.address as *mut usize)
            .store(other_write as *const () as usize, Ordering::Release);
        if entry.in_relro {
            assert_eq!(
                libc::mprotect(start as *mut c_void, page, libc::PROT_READ),
                0
            );
        }
    }
}

// ------------------------------------------------------- the C libraries

fn compiler() -> String {
    if let Ok(cc) = std::env::var("GOT_TEST_CC") {
        return cc;
    }
    if cfg!(target_arch = "x86") {
        "i686-linux-gnu-gcc".into()
    } else {
        "cc".into()
    }
}

/// How a library is linked: lazily bound with a writable GOT, or bound
/// at load with the GOT read-only after it (full RELRO).
#[derive(Clone, Copy)]
enum Binding {
    Lazy,
    NowRelro,
}

/// `tests/got/<source>.c` as a shared library, `lib<source>-<binding>.so`:
/// compiled into `dir`, or taken from `$GOT_TEST_LIBS` (built beforehand,
/// for a guest without a compiler: scripts/cross-test).
fn build(dir: &Path, source: &str, binding: Binding) -> PathBuf {
    let (suffix, flags): (&str, &[&str]) = match binding {
        Binding::Lazy => ("lazy", &["-Wl,-z,lazy", "-Wl,-z,norelro"]),
        Binding::NowRelro => ("now", &["-Wl,-z,now", "-Wl,-z,relro"]),
    };
    let file = format!("lib{source}-{suffix}.so");
    if let Some(prebuilt) = std::env::var_os("GOT_TEST_LIBS") {
        return Path::new(&prebuilt).join(file);
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/got/{source}.c"));
    let out = dir.join(file);
    let status = Command::new(compiler())
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .status()
        .expect("run the C compiler (GOT_TEST_CC)");
    assert!(status.success(), "compiling {}", src.display());
    out
}

struct Library {
    handle: *mut c_void,
}

impl Library {
    fn open(path: &Path, flags: c_int) -> Self {
        let name = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; the library's constructors are
        // the test's own C code (none).
        let handle = unsafe { libc::dlopen(name.as_ptr(), flags) };
        assert!(
            !handle.is_null(),
            "dlopen {}: {}",
            path.display(),
            dlerror()
        );
        Self { handle }
    }

    fn symbol(&self, name: &CStr) -> usize {
        // SAFETY: a live handle and a NUL-terminated name.
        let address = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        assert!(!address.is_null(), "dlsym {name:?}");
        address as usize
    }

    fn write(&self, fd: c_int, bytes: &[u8]) -> isize {
        self.write_through(c"victim_write", fd, bytes)
    }

    fn write_through(&self, function: &CStr, fd: c_int, bytes: &[u8]) -> isize {
        // SAFETY: the C library's function of this signature.
        unsafe {
            let f: WriteFn = std::mem::transmute(self.symbol(function));
            f(fd, bytes.as_ptr().cast(), bytes.len())
        }
    }

    fn read(&self, fd: c_int, buf: &mut [u8]) -> isize {
        // SAFETY: victim_read has this signature; `buf` is writable.
        unsafe {
            let f: ReadFn = std::mem::transmute(self.symbol(c"victim_read"));
            f(fd, buf.as_mut_ptr().cast(), buf.len())
        }
    }

    fn close(&self, fd: c_int) -> c_int {
        // SAFETY: victim_close has this signature.
        unsafe {
            let f: CloseFn = std::mem::transmute(self.symbol(c"victim_close"));
            f(fd)
        }
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        String::new()
    } else {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn pipe() -> (c_int, c_int) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

/// The victim's calls, with their results: 3 writes, 2 reads, 1 failing
/// read (EBADF), 2 closes.
fn exercise(victim: &Library) {
    let before = counts();
    let (r, w) = pipe();
    assert_eq!(victim.write(w, b"abc"), 3);
    assert_eq!(victim.write(w, b"de"), 2);
    assert_eq!(victim.write(w, b""), 0);
    let mut buf = [0u8; 8];
    assert_eq!(victim.read(r, &mut buf[..2]), 2);
    assert_eq!(victim.read(r, &mut buf[2..]), 3);
    assert_eq!(&buf[..5], b"abcde");
    assert_eq!(victim.read(-1, &mut buf), -1);
    assert_eq!(errno(), libc::EBADF, "a failing read keeps its errno");
    assert_eq!(victim.close(w), 0);
    assert_eq!(victim.close(r), 0);
    let after = counts();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        (3, 3, 2),
        "wrapper calls (write, read, close)"
    );
}

/// The permissions of `library`'s mappings, from /proc/self/maps.
fn mappings_of(library: &Path) -> Vec<String> {
    let name = library.to_string_lossy();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with(&*name))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
        .collect()
}

/// Runs `body` in a fresh process (this test binary, with only `name`
/// selected): installation is once per process.
fn isolated(name: &str, body: fn(&Path)) {
    if std::env::var_os("GOT_TEST_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        body(dir.path());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("GOT_TEST_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} in a fresh process: {}\n{stdout}\n{stderr}",
        out.status
    );
}

// ---------------------------------------------------------------- tests

#[test]
fn lazy_binding_calls_are_routed() {
    isolated("lazy_binding_calls_are_routed", |dir| {
        let victim = Library::open(&build(dir, "victim", Binding::Lazy), libc::RTLD_LAZY);
        let installed = got::install(&*HOOKS).expect("install");
        assert!(installed.entries_patched >= 3, "{installed:?}");
        assert_eq!(installed.left_to_other_hooks, 0, "{installed:?}");
        exercise(&victim);
    });
}

#[test]
fn read_only_got_of_bind_now_relro_is_patched() {
    isolated("read_only_got_of_bind_now_relro_is_patched", |dir| {
        let path = build(dir, "victim", Binding::NowRelro);
        let victim = Library::open(&path, libc::RTLD_NOW);
        let entries = got::entries_of(c"write").unwrap();
        let entry = entries
            .iter()
            .find(|e| e.object.contains("libvictim"))
            .unwrap();
        assert!(entry.in_relro, "{entry:?}");
        let before = mappings_of(&path);
        assert!(before.iter().any(|p| p == "r--p"), "{before:?}");
        got::install(&*HOOKS).expect("install");
        assert_eq!(mappings_of(&path), before, "read-only again");
        exercise(&victim);
    });
}

#[test]
fn function_pointer_taken_by_pic_code_is_routed() {
    isolated("function_pointer_taken_by_pic_code_is_routed", |dir| {
        let pointer = Library::open(&build(dir, "pointer", Binding::NowRelro), libc::RTLD_NOW);
        got::install(&*HOOKS).expect("install");
        let (r, w) = pipe();
        assert_eq!(pointer.write_through(c"pointer_write", w, b"xyz"), 3);
        assert_eq!(pointer.write_through(c"pointer_write", -1, b"xyz"), -1);
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(counts().0, 2);
        // SAFETY: the test's own pipe.
        unsafe { (libc::close(r), libc::close(w)) };
    });
}

#[test]
fn library_loaded_after_install_is_patched() {
    isolated("library_loaded_after_install_is_patched", |dir| {
        let loader = Library::open(&build(dir, "loader", Binding::Lazy), libc::RTLD_NOW);
        let victim_path = build(dir, "victim", Binding::NowRelro);
        got::install(&*HOOKS).expect("install");
        type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
        // SAFETY: loader_dlopen has this signature.
        let load: DlopenFn = unsafe { std::mem::transmute(loader.symbol(c"loader_dlopen")) };

        // A failed dlopen patches nothing and keeps dlerror's message.
        // SAFETY: a NUL-terminated path.
        let failed = unsafe { load(c"/nonexistent/libnothing.so".as_ptr(), libc::RTLD_NOW) };
        assert!(failed.is_null());
        assert!(dlerror().contains("libnothing.so"), "dlerror kept");

        let name = CString::new(victim_path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        let handle = unsafe { load(name.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null(), "{}", dlerror());
        exercise(&Library { handle });
        // Nothing new since: patching again changes nothing.
        let again = got::patch_new_objects().unwrap();
        assert_eq!(
            (again.objects_seen, again.entries_patched),
            (0, 0),
            "{again:?}"
        );
    });
}

#[test]
fn hook_installed_before_ours_keeps_working() {
    isolated("hook_installed_before_ours_keeps_working", |dir| {
        let victim = Library::open(&build(dir, "victim", Binding::NowRelro), libc::RTLD_NOW);
        other_hooker_patches("libvictim");
        let installed = got::install(&*HOOKS).expect("install");
        assert_eq!(installed.left_to_other_hooks, 1, "{installed:?}");
        let (r, w) = pipe();
        assert_eq!(victim.write(w, b"abc"), 3);
        assert_eq!(victim.write(w, b"de"), 2);
        assert_eq!(OTHER_WRITES.load(Ordering::Relaxed), 2, "their hook runs");
        assert_eq!(counts().0, 0, "their entry is theirs");
        assert_eq!(victim.close(r) + victim.close(w), 0);
        assert_eq!(counts().2, 2, "the other entries are ours");
    });
}

#[test]
fn hook_installed_after_ours_chains_to_ours() {
    isolated("hook_installed_after_ours_chains_to_ours", |dir| {
        let victim = Library::open(&build(dir, "victim", Binding::NowRelro), libc::RTLD_NOW);
        got::install(&*HOOKS).expect("install");
        other_hooker_patches("libvictim");
        let (r, w) = pipe();
        assert_eq!(victim.write(w, b"abc"), 3);
        assert_eq!(OTHER_WRITES.load(Ordering::Relaxed), 1, "their hook runs");
        assert_eq!(counts().0, 1, "and calls ours");
        // Walking again (as after a dlopen) leaves their entry to them.
        let again = got::patch_new_objects().unwrap();
        assert_eq!(again.entries_patched, 0, "{again:?}");
        assert_eq!(victim.write(w, b"de"), 2);
        assert_eq!((OTHER_WRITES.load(Ordering::Relaxed), counts().0), (2, 2));
        assert_eq!(victim.close(r) + victim.close(w), 0);
    });
}

#[test]
fn install_is_once_and_first() {
    isolated("install_is_once_and_first", |_| {
        let error = got::patch_new_objects().unwrap_err();
        assert_eq!(error, PatchError::NotInstalled);
        assert!(error.to_string().contains("install first"), "{error}");
        got::install(&*HOOKS).expect("install");
        let error = got::install(&*HOOKS).unwrap_err();
        assert_eq!(error, PatchError::AlreadyInstalled);
        assert!(error.to_string().contains("installed already"), "{error}");
    });
}

#[test]
fn unknown_symbol_installs_nothing() {
    isolated("unknown_symbol_installs_nothing", |dir| {
        static NOWHERE: AtomicUsize = AtomicUsize::new(0);
        static HOOKS_WITH_UNKNOWN: LazyLock<[Hook; 2]> = LazyLock::new(|| {
            [
                Hook {
                    symbol: c"write",
                    wrapper: counting_write as *const () as usize,
                    real: &REAL_WRITE,
                },
                Hook {
                    symbol: c"no_such_function_in_libc",
                    wrapper: counting_write as *const () as usize,
                    real: &NOWHERE,
                },
            ]
        });
        let victim = Library::open(&build(dir, "victim", Binding::Lazy), libc::RTLD_NOW);
        let error = got::install(&*HOOKS_WITH_UNKNOWN).unwrap_err();
        assert!(
            error.to_string().contains("no_such_function_in_libc"),
            "{error}"
        );
        let (r, w) = pipe();
        assert_eq!(victim.write(w, b"abc"), 3);
        assert_eq!(counts().0, 0, "nothing patched");
        // And a correct install after it works.
        got::install(&*HOOKS).expect("install");
        assert_eq!(victim.write(w, b"abc"), 3);
        assert_eq!(counts().0, 1);
        assert_eq!(victim.close(r) + victim.close(w), 0);
    });
}
