//! GOT/PLT patching (issue 32): routes the libc calls that loaded
//! libraries make through their GOT (PLT calls, `R_*_JUMP_SLOT`; function
//! addresses taken by `-fPIC` code, `R_*_GLOB_DAT`) to our wrappers, in
//! the objects already loaded ([`install`]) and in those loaded later
//! ([`patch_new_objects`], which the [`dlopen_hook`] runs after each
//! successful `dlopen`). How Android apps (and any process that loads the
//! agent itself) get observed without `LD_PRELOAD` or privilege.
//!
//! - [`elf`]: one object's relocations, read in memory.
//! - [`memory`]: page protection and the atomic writes.
//! - [`dlopen`]: the `dlopen`/`android_dlopen_ext` wrappers.
//!
//! What is patched and what is not: docs/android-arm.md, "GOT patching".
//!
//! Locking: the work runs inside one `dl_iterate_phdr` callback (the
//! loader's lock held, on glibc and bionic, so no object is unloaded
//! between the plan and the writes), and takes our own lock there: the
//! order is always the loader's lock, then ours, also when a library
//! constructor's `dlopen` comes back into [`patch_new_objects`].

mod dlopen;
mod elf;
mod memory;

use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use elf::{Kind, Object, Segment};
use memory::Write;

#[cfg(target_os = "android")]
pub use dlopen::android_dlopen_ext_hook;
pub use dlopen::dlopen_hook;

/// One libc function to route through a wrapper.
#[derive(Debug)]
pub struct Hook {
    /// Its name, e.g. `c"read"`.
    pub symbol: &'static CStr,
    /// The address of our `extern "C"` wrapper.
    pub wrapper: usize,
    /// Set by [`install`] before any entry is patched: the real function
    /// (`dlsym(RTLD_DEFAULT, symbol)`), which the wrapper calls.
    pub real: &'static AtomicUsize,
}

/// What an [`install`] or a [`patch_new_objects`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PatchCount {
    /// Objects whose relocations were read (not counting the skipped:
    /// ours, the dynamic linker, libc, the vDSO; nor, for
    /// `patch_new_objects`, those seen before and unchanged).
    pub objects_seen: usize,
    /// GOT entries now holding one of our wrappers.
    pub entries_patched: usize,
    /// Entries that held our wrapper already.
    pub entries_already_ours: usize,
    /// Entries holding neither the real function nor a lazy-binding stub:
    /// another hooker's, left to it (its hook keeps working).
    pub left_to_other_hooks: usize,
    /// Read-only (RELRO) pages that stayed writable because restoring
    /// their protection failed (the entries are patched and work).
    pub pages_left_writable: usize,
}

/// What [`install`] did.
pub type Installed = PatchCount;

/// Why nothing was patched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// `install` ran before in this process.
    AlreadyInstalled,
    /// `patch_new_objects` before `install`.
    NotInstalled,
    /// `dlsym` does not know a hooked symbol.
    NoSuchSymbol(String),
    /// A relocation against a hooked symbol has a type this patcher does
    /// not know, so it cannot tell whether the call would be routed.
    UnknownRelocation {
        object: String,
        symbol: String,
        r_type: u32,
    },
    /// A GOT entry of a hooked symbol lies neither in a writable segment
    /// nor in PT_GNU_RELRO.
    NotWritable { object: String, address: usize },
    /// An object's dynamic section or tables are malformed.
    BadObject { object: String, what: String },
    /// `/proc/self/maps` could not be read or does not hold an entry.
    Maps(String),
    /// `mprotect` refused to make a read-only GOT page writable.
    Mprotect {
        object: String,
        address: usize,
        errno: i32,
    },
    /// `sysconf(_SC_PAGESIZE)` returned this, not a power of two.
    PageSize(i64),
    /// `dl_iterate_phdr` listed no object.
    NoObjects,
}

impl core::fmt::Display for PatchError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::AlreadyInstalled => write!(f, "GOT hooks are installed already in this process"),
            Self::NotInstalled => write!(f, "GOT hooks are not installed: call install first"),
            Self::NoSuchSymbol(symbol) => {
                write!(f, "dlsym finds no {symbol:?} to route through a wrapper")
            }
            Self::UnknownRelocation {
                object,
                symbol,
                r_type,
            } => write!(
                f,
                "{object}: relocation type {r_type} against {symbol:?} is not one the GOT patcher knows; nothing patched"
            ),
            Self::NotWritable { object, address } => write!(
                f,
                "{object}: the GOT entry at {address:#x} is in a read-only segment outside PT_GNU_RELRO; nothing patched"
            ),
            Self::BadObject { object, what } => write!(f, "{object}: {what}; nothing patched"),
            Self::Maps(what) => write!(f, "/proc/self/maps: {what}; nothing patched"),
            Self::Mprotect {
                object,
                address,
                errno,
            } => write!(
                f,
                "{object}: mprotect of the GOT page at {address:#x} failed: {}; nothing patched",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Self::PageSize(size) => write!(f, "sysconf(_SC_PAGESIZE) returned {size}"),
            Self::NoObjects => write!(f, "dl_iterate_phdr lists no loaded object"),
        }
    }
}

impl std::error::Error for PatchError {}

/// What an installed patcher remembers.
struct State {
    hooks: &'static [Hook],
    /// The objects walked so far, with the GOT entries of hooked symbols
    /// and the values they held after the walk: an object reloaded at the
    /// same address (after a `dlclose`) shows other values and is walked
    /// again.
    seen: Vec<Seen>,
}

struct Seen {
    bias: usize,
    name: String,
    entries: Vec<(usize, usize)>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Patches every loaded object's GOT entries of `hooks`' symbols (after
/// setting each hook's `real`). All of them or none: an error leaves
/// every entry as it was.
pub fn install(hooks: &'static [Hook]) -> Result<Installed, PatchError> {
    let mut reals = Vec::with_capacity(hooks.len());
    for hook in hooks {
        // SAFETY: the symbol is a NUL-terminated C string; dlsym with
        // RTLD_DEFAULT only reads it.
        let real = unsafe { libc::dlsym(libc::RTLD_DEFAULT, hook.symbol.as_ptr()) };
        if real.is_null() {
            return Err(PatchError::NoSuchSymbol(
                hook.symbol.to_string_lossy().into_owned(),
            ));
        }
        reals.push(real as usize);
    }
    in_loader_lock(|| run(Job::Install { hooks, reals }))
}

/// After a `dlopen`: patches the objects not seen yet (a second call
/// with nothing new loaded patches nothing).
pub fn patch_new_objects() -> Result<PatchCount, PatchError> {
    in_loader_lock(|| run(Job::NewObjects))
}

/// A GOT entry of a symbol, as [`entries_of`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The object's path (as the loader names it).
    pub object: String,
    pub address: usize,
    /// What it holds now.
    pub value: usize,
    /// Whether it lies in PT_GNU_RELRO (read-only after relocation).
    pub in_relro: bool,
}

/// The GOT entries (JUMP_SLOT, GLOB_DAT) of `symbol` in every loaded
/// object but the skipped ones, without changing anything: to see what
/// `install` would find (diagnostics, tests).
pub fn entries_of(symbol: &'static CStr) -> Result<Vec<Entry>, PatchError> {
    static UNUSED: AtomicUsize = AtomicUsize::new(0);
    let hook = [Hook {
        symbol,
        wrapper: 0,
        real: &UNUSED,
    }];
    in_loader_lock(|| {
        let skip = Skip::of_this_process();
        let mut entries = Vec::new();
        for object in loaded_objects().iter().filter(|o| !skip.skips(o)) {
            for slot in object.slots(&hook)?.unwrap_or_default() {
                entries.push(Entry {
                    object: object.name.clone(),
                    address: slot.address,
                    value: memory::load(slot.address),
                    in_relro: slot.in_relro,
                });
            }
        }
        Ok(entries)
    })
}

enum Job {
    Install {
        hooks: &'static [Hook],
        reals: Vec<usize>,
    },
    NewObjects,
}

struct Walk<F, T> {
    job: Option<F>,
    result: Option<Result<T, PatchError>>,
}

/// Runs `job` inside the first callback of a `dl_iterate_phdr`.
fn in_loader_lock<F, T>(job: F) -> Result<T, PatchError>
where
    F: FnOnce() -> Result<T, PatchError>,
{
    let mut walk = Walk {
        job: Some(job),
        result: None,
    };
    // SAFETY: `first_object::<F, T>` matches dl_iterate_phdr's callback
    // type and `walk` outlives the call (the callback gets it as `data`).
    unsafe { libc::dl_iterate_phdr(Some(first_object::<F, T>), (&raw mut walk).cast()) };
    walk.result.unwrap_or(Err(PatchError::NoObjects))
}

unsafe extern "C" fn first_object<F, T>(
    _info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int
where
    F: FnOnce() -> Result<T, PatchError>,
{
    // SAFETY: `data` is the `Walk<F, T>` in_loader_lock passed, alive and
    // not otherwise borrowed during dl_iterate_phdr.
    let walk = unsafe { &mut *data.cast::<Walk<F, T>>() };
    if let Some(job) = walk.job.take() {
        // A panic must not unwind through the C caller.
        walk.result = Some(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
                Err(PatchError::BadObject {
                    object: "?".to_owned(),
                    what: "the GOT patcher panicked".to_owned(),
                })
            }),
        );
    }
    1 // stop: the whole job ran in this first call
}

/// The job, with the loader's lock held.
fn run(job: Job) -> Result<PatchCount, PatchError> {
    let mut state = STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let objects = loaded_objects();
    let skip = Skip::of_this_process();
    let (hooks, reals, installing) = match job {
        Job::Install { hooks, reals } => {
            if state.is_some() {
                return Err(PatchError::AlreadyInstalled);
            }
            (hooks, reals, true)
        }
        Job::NewObjects => {
            let Some(state) = state.as_ref() else {
                return Err(PatchError::NotInstalled);
            };
            let reals = state
                .hooks
                .iter()
                .map(|h| h.real.load(Ordering::Acquire))
                .collect();
            (state.hooks, reals, false)
        }
    };
    let previously: &[Seen] = state.as_ref().map_or(&[], |s| &s.seen);

    // Plan: every object, every entry, before any write.
    let mut count = PatchCount::default();
    let mut writes: Vec<Write> = Vec::new();
    let mut walked: Vec<(usize, Vec<usize>)> = Vec::new(); // object, its entries
    let mut kept: Vec<usize> = Vec::new(); // indices into `previously` still valid
    for (index, object) in objects.iter().enumerate() {
        if skip.skips(object) {
            continue;
        }
        if let Some(at) = previously.iter().position(|s| s.same(object)) {
            kept.push(at);
            continue;
        }
        let Some(slots) = object.slots(hooks)? else {
            continue;
        };
        count.objects_seen += 1;
        let mut entries: Vec<usize> = Vec::new();
        for slot in slots {
            if entries.contains(&slot.address) {
                continue; // DT_RELA may include DT_JMPREL's range
            }
            entries.push(slot.address);
            let hook = &hooks[slot.hook];
            let current = memory::load(slot.address);
            if current == hook.wrapper {
                count.entries_already_ours += 1;
                continue;
            }
            let lazy_stub =
                slot.kind == Kind::JumpSlot && !slot.defined_here && object.holds(current, 1);
            if current != reals[slot.hook] && !lazy_stub {
                count.left_to_other_hooks += 1;
                continue;
            }
            if !slot.in_relro && !object.holds_writable(slot.address, size_of::<usize>()) {
                return Err(PatchError::NotWritable {
                    object: object.name.clone(),
                    address: slot.address,
                });
            }
            writes.push(Write {
                address: slot.address,
                expected: current,
                real: reals[slot.hook],
                value: hook.wrapper,
                object: index,
            });
        }
        walked.push((index, entries));
    }

    // Apply: the wrappers may run as soon as an entry is written.
    if installing {
        for (hook, real) in hooks.iter().zip(&reals) {
            hook.real.store(*real, Ordering::Release);
        }
    }
    let applied = memory::apply(&writes, &|i| objects[i].name.clone());
    let applied = match applied {
        Ok(applied) => applied,
        Err(error) => {
            if installing {
                for hook in hooks {
                    hook.real.store(0, Ordering::Release);
                }
            }
            return Err(error);
        }
    };
    count.entries_patched = applied.written;
    count.left_to_other_hooks += applied.changed_meanwhile;
    count.pages_left_writable = applied.pages_left_writable;

    // Remember: the objects still loaded that were seen before, and those
    // walked now, with their entries' values.
    let mut seen: Vec<Seen> = Vec::new();
    if let Some(old) = state.take() {
        let mut old = old.seen;
        kept.sort_unstable();
        for at in kept.into_iter().rev() {
            seen.push(old.swap_remove(at));
        }
    }
    for (index, entries) in walked {
        let object = &objects[index];
        seen.push(Seen {
            bias: object.bias,
            name: object.name.clone(),
            entries: entries.into_iter().map(|a| (a, memory::load(a))).collect(),
        });
    }
    *state = Some(State { hooks, seen });
    Ok(count)
}

impl Seen {
    /// Whether `object` is this one, still as it was left.
    fn same(&self, object: &Object) -> bool {
        self.bias == object.bias
            && self.name == object.name
            && self.entries.iter().all(|&(address, value)| {
                object.holds(address, size_of::<usize>()) && memory::load(address) == value
            })
    }
}

/// The objects never patched: ours (its calls are the wrappers' own),
/// the dynamic linker, libc (its internal calls do not go through its
/// GOT), the vDSO.
struct Skip {
    addresses: [usize; 4],
}

impl Skip {
    fn of_this_process() -> Self {
        // SAFETY: getauxval takes no pointers; 0 when the entry is absent.
        let (loader, vdso) = unsafe {
            (
                libc::getauxval(libc::AT_BASE) as usize,
                libc::getauxval(libc::AT_SYSINFO_EHDR) as usize,
            )
        };
        Self {
            addresses: [
                install as *const () as usize,
                libc::abort as *const () as usize,
                loader,
                vdso,
            ],
        }
    }

    fn skips(&self, object: &Object) -> bool {
        let file = object.name.rsplit('/').next().unwrap_or("");
        let loader_name = file.starts_with("ld-linux")
            || file.starts_with("ld.so")
            || file.starts_with("ld-musl")
            || file == "linker"
            || file == "linker64";
        loader_name
            || file.starts_with("linux-vdso")
            || file.starts_with("linux-gate")
            || self.addresses.iter().any(|&a| a != 0 && object.holds(a, 1))
    }
}

/// Every object `dl_iterate_phdr` lists now (called with the loader's
/// lock held already: it is recursive on glibc and bionic).
fn loaded_objects() -> Vec<Object> {
    let mut objects: Vec<Object> = Vec::new();
    // SAFETY: `each_object` matches the callback type; `objects` outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(each_object), (&raw mut objects).cast()) };
    objects
}

unsafe extern "C" fn each_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid `info` for this call, and
    // `data` is loaded_objects' vector, not otherwise borrowed meanwhile.
    let (info, objects) = unsafe { (&*info, &mut *data.cast::<Vec<Object>>()) };
    let bias = info.dlpi_addr as usize;
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null dlpi_name is a NUL-terminated string the
        // loader keeps for the object's life.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let name = if name.is_empty() {
        "the main program".to_owned()
    } else {
        name
    };
    let phdrs: &[_] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: the loader's array of dlpi_phnum program headers.
        unsafe { core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    let segments = phdrs
        .iter()
        .map(|p| {
            let start = bias.wrapping_add(p.p_vaddr as usize);
            Segment {
                kind: p.p_type,
                flags: p.p_flags,
                start,
                end: start.saturating_add(p.p_memsz as usize),
            }
        })
        .collect();
    objects.push(Object {
        name,
        bias,
        segments,
    });
    0
}
