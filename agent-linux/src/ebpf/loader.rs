//! Loading the BPF program (`bpf/syscalls.bpf.o`, or before Linux 6.1
//! `bpf/syscalls-prealloc.bpf.o`; committed, rebuilt by
//! `scripts/build-bpf`) with aya, telling it the host's register layout,
//! giving it each syscall's id, fd and size arguments, attaching its five
//! raw tracepoints, and reading (and clearing) what it writes. Dropping the [`Probe`] closes its fds, which
//! detaches the programs: nothing is left in the kernel, even after
//! `kill -9` of the agent.

use std::os::fd::{AsFd, AsRawFd};

use agent_core::{Arch, SyscallId};
use anyhow::{anyhow, Context};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap, RingBuf};
use aya::programs::RawTracePoint;
use aya::{Ebpf, EbpfLoader};

use super::aggregate::{
    agg_generation, agg_slot, errno_generation, errno_slot, peer_generation, peer_slot,
    transition_generation, transition_slot, Generation, AGG_LEN, PEER_KEY_LEN, PEER_STATS_LEN,
    TRANS_LEN,
};
use super::btf::{self, RawBtf};
use super::events::{thread_slot, Pending, Record, THREAD_LEN};
use super::kernel_types::{
    DENSE_IDS, FD_KINDS, LOST_CALLS_FULL, LOST_CALLS_REFUSED, LOST_PARTS, LOST_RING,
    SYSINFO_CHANGES_FDS,
};
use super::MAX_SLOTS;
use crate::arch::{Abi, Native};
use crate::fd::FdRoles;
use crate::sys;

/// The compiled program, aligned as the ELF parser wants it.
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/syscalls.bpf.o");
/// The same with preallocated hash maps, for kernels before 6.1, where a
/// tracing program's run-time allocation warns in the kernel log and may
/// deadlock (`PREALLOC_MAPS` in the C source).
static OBJECT_PREALLOC: &[u8] = aya::include_bytes_aligned!("../../bpf/syscalls-prealloc.bpf.o");

/// The task-storage map of the threads' state (the object before 6.1 has
/// none).
const THREAD_STORE: &str = "THREAD_STORE";

/// The array of run slot 0's aggregates (the object before 6.1 has
/// none).
const AGG_DENSE: &str = "AGG_DENSE";

/// Whether the BPF object `object` defines the map `name` (a symbol of
/// its ELF). An object that does not parse has none: its load then says
/// what is wrong with it.
fn has_map(object: &[u8], name: &str) -> bool {
    use object::{Object, ObjectSymbol};
    object::File::parse(object)
        .map(|elf| elf.symbols().any(|s| s.name() == Ok(name)))
        .unwrap_or(false)
}

/// `EDGE_AGENT_EBPF_BTF=whole` has aya relocate the program against the
/// whole kernel BTF, as it does by itself, rather than against its cut
/// (`super::btf`): the cut's before and after, and a way around it.
pub const BTF_ENV: &str = "EDGE_AGENT_EBPF_BTF";

/// The kernel's BTF cut to the types `object`'s relocations can reach
/// (`super::btf`), parsed for aya; `None` when told so by [`BTF_ENV`] or
/// when it cannot be made, and aya then relocates against the whole BTF
/// it read itself.
fn relocation_btf(object: &[u8]) -> Option<aya::Btf> {
    if std::env::var_os(BTF_ENV).is_some_and(|v| v == "whole") {
        return None;
    }
    cut_kernel_btf(object).ok()
}

/// [`relocation_btf`]'s work, with what went wrong.
pub fn cut_kernel_btf(object: &[u8]) -> anyhow::Result<aya::Btf> {
    use object::{Object, ObjectSection};
    let elf = object::File::parse(object).context("the BPF object is not ELF")?;
    let local = elf
        .section_by_name(".BTF")
        .ok_or_else(|| anyhow!("the BPF object has no .BTF section"))?
        .data()
        .context("the BPF object's .BTF section")?;
    let local = RawBtf::parse(local).context("the BPF object's .BTF section")?;
    let names = btf::candidate_names(&local);
    // Mapped where the kernel maps it (6.16 and later), else read.
    let (mapped, read);
    let kernel: &[u8] = match sys::MappedFile::kernel_btf() {
        Ok(m) => {
            mapped = m;
            mapped.bytes()
        }
        Err(_) => {
            read = std::fs::read(sys::KERNEL_BTF).context(sys::KERNEL_BTF)?;
            &read
        }
    };
    let kernel = RawBtf::parse(kernel).context(sys::KERNEL_BTF)?;
    let cut = btf::cut(&kernel, &names).context(sys::KERNEL_BTF)?;
    aya::Btf::parse(&cut, aya::Endianness::default()).context("the kernel BTF's cut")
}

/// Syscall numbers below this have a SYSINFO entry.
const MAX_NR: u32 = super::kernel_types::MAX_NR;

/// `struct sysinfo` in the C program: the id's two bytes (native order),
/// then 1 + the fd argument's index and 1 + the size argument's (0: none),
/// the flags (`SYSINFO_CHANGES_FDS`) and a pad byte.
type SysInfo = [u8; core::mem::size_of::<super::kernel_types::sysinfo>()];

/// The raw tracepoints and the programs attached to them.
const ATTACH: [(&str, &str); 5] = [
    ("on_sys_enter", "sys_enter"),
    ("on_sys_exit", "sys_exit"),
    ("on_fork", "sched_process_fork"),
    ("on_exec", "sched_process_exec"),
    ("on_exit", "sched_process_exit"),
];

/// How the program tells a compat syscall, and the byte offsets of the six
/// argument registers in `struct pt_regs` (native ABI, then compat ABI).
#[cfg(target_arch = "x86_64")]
mod host {
    /// `thread_info.status & TS_COMPAT`.
    pub const COMPAT_PROBE: u32 = crate::ebpf::kernel_types::COMPAT_X86_TS_COMPAT;
    /// x86_64: rdi rsi rdx r10 r8 r9; i386: ebx ecx edx esi edi ebp.
    pub const ARG_OFF: [u32; 12] = [112, 104, 96, 56, 72, 64, 40, 88, 96, 104, 112, 32];
}

#[cfg(target_arch = "aarch64")]
mod host {
    /// `thread_info.flags` bit `TIF_32BIT`.
    pub const COMPAT_PROBE: u32 = crate::ebpf::kernel_types::COMPAT_ARM64_TIF_32BIT;
    /// `regs[0..6]` for both ABIs (AArch32 r0-r5 are x0-x5).
    pub const ARG_OFF: [u32; 12] = [0, 8, 16, 24, 32, 40, 0, 8, 16, 24, 32, 40];
}

/// Where the program keeps each thread's call in flight and previous
/// call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadStore {
    /// In the task's own storage (`THREAD_STORE`, `BPF_MAP_TYPE_TASK_STORAGE`):
    /// no hash of tids on the per-call path. The agent reads a thread's
    /// back through a pidfd of the thread (`PIDFD_THREAD`, Linux 6.9).
    TaskStorage,
    /// In `THREADS`, a hash keyed by tid: kernels before 6.1 (their object
    /// has no task storage), kernels without thread pidfds, or when
    /// `EDGE_AGENT_EBPF_THREADS=hash` says so.
    Hash,
}

/// The environment variable that forces [`ThreadStore::Hash`] (`hash`),
/// so the fallback path runs where task storage would be chosen (tests,
/// the benchmark's before/after).
pub const THREADS_ENV: &str = "EDGE_AGENT_EBPF_THREADS";

/// The environment variable that keeps every aggregate in the `AGG` hash
/// (`hash`): the path of kernels before 6.1 and of a failed array, forced
/// where the dense array would be used (tests, the benchmark's
/// before/after). Otherwise run slot 0's aggregates are in the dense array
/// where the object has it and its memory fits: about 20 ns less per call
/// at `sys_exit`, no start measurably added (docs/edge-agent.md).
pub const AGG_ENV: &str = "EDGE_AGENT_EBPF_AGG";

/// `struct dense_used` in the C program: a byte per (id, fd kind).
const USED_LEN: usize = (DENSE_IDS * FD_KINDS) as usize;

/// The most kernel memory the dense aggregates may take, over all CPUs.
const DENSE_BUDGET: u64 = 64 << 20;

/// `struct dense_at` in the C program: the first entry's index in a
/// (CPU, generation) block, then how many entries (0: none), each two
/// bytes in native order.
type DenseAt = [u8; core::mem::size_of::<super::kernel_types::dense_at>()];
const _: () = assert!(core::mem::offset_of!(super::kernel_types::dense_at, kinds) == 2);

/// Where run slot 0's aggregates are in `AGG_DENSE`, and which ids it
/// covers.
pub struct DenseLayout {
    /// The canonical ids below this have entries (0: the array is off,
    /// every key in the `AGG` hash).
    pub ids: u32,
    /// Entries per (CPU, generation) block.
    pub block: u32,
    /// Per id below [`DenseLayout::ids`]: its first entry in a block and
    /// how many it has: [`FD_KINDS`] for the ids whose calls take an fd
    /// argument, whose calls are filed by its kind, 1 for the others,
    /// whose calls are all FD_NONE. Every id × [`FD_KINDS`] would be 3.8
    /// times as many entries (3 904 for 488 ids, not 1 020), allocated and
    /// zeroed at every start.
    at: Vec<(u32, u32)>,
}

impl DenseLayout {
    /// The layout for agent-core's ids and `roles` on a machine of `cpus`
    /// possible CPUs, or none (every key in the `AGG` hash) when it is
    /// not `wanted` ([`AGG_ENV`]) or its two generations would take more
    /// than [`DENSE_BUDGET`] over the CPUs. The array takes its memory at
    /// creation, a hash only for the keys in use.
    pub fn new(roles: &FdRoles, cpus: usize, wanted: bool) -> DenseLayout {
        let off = DenseLayout {
            ids: 0,
            block: 0,
            at: Vec::new(),
        };
        if !wanted {
            return off;
        }
        let ids = (SyscallId::COUNT as u32).min(DENSE_IDS);
        let mut at = Vec::with_capacity(ids as usize);
        let mut block = 0;
        for id in 0..ids {
            let kinds = if roles.get(SyscallId(id as u16)).fd_arg().is_some() {
                FD_KINDS
            } else {
                1
            };
            at.push((block, kinds));
            block += kinds;
        }
        let bytes = cpus as u64 * 2 * u64::from(block) * AGG_LEN as u64;
        if bytes > DENSE_BUDGET {
            return off;
        }
        DenseLayout { ids, block, at }
    }

    /// `dense_at` for the program.
    fn table(&self) -> Box<[DenseAt; DENSE_IDS as usize]> {
        let mut table = Box::new([[0u8; core::mem::size_of::<DenseAt>()]; DENSE_IDS as usize]);
        for (entry, &(base, kinds)) in table.iter_mut().zip(&self.at) {
            let [b0, b1] = (base as u16).to_ne_bytes();
            let [k0, k1] = (kinds as u16).to_ne_bytes();
            *entry = [b0, b1, k0, k1];
        }
        table
    }

    /// The entry of (`id`, fd `kind`) within a block, if it has one.
    fn entry(&self, id: u32, kind: u32) -> Option<u32> {
        let &(base, kinds) = self.at.get(id as usize)?;
        (kind < kinds).then_some(base + kind)
    }
}

impl ThreadStore {
    /// What this kernel and agent can use, unless [`THREADS_ENV`] is
    /// `hash`: task storage where the agent can open a pidfd of one
    /// thread (Linux 6.9; the object's task-storage map needs 5.11, and
    /// the object before 6.1 has none, which the load then says).
    pub fn probe() -> ThreadStore {
        if std::env::var_os(THREADS_ENV).is_some_and(|v| v == "hash") {
            return ThreadStore::Hash;
        }
        match sys::thread_pidfd(sys::getpid()) {
            Ok(_) => ThreadStore::TaskStorage,
            Err(_) => ThreadStore::Hash,
        }
    }
}

/// The environment variable that chooses how the program finds each
/// call's fd kind: `memo` (remembered per thread, the fd-kind memo in
/// `bpf/syscalls.bpf.c`) or `table` (read from the file table at every
/// call); anything else, or unset, is [`FD_MEMO_DEFAULT`].
pub const FD_MEMO_ENV: &str = "EDGE_AGENT_EBPF_FD_MEMO";

/// Whether the program remembers fd kinds when [`FD_MEMO_ENV`] does not
/// say.
pub const FD_MEMO_DEFAULT: bool = true;

/// Whether the program is to remember fd kinds ([`FD_MEMO_ENV`]).
pub fn fd_memo_wanted() -> bool {
    match std::env::var_os(FD_MEMO_ENV) {
        Some(v) if v == "memo" => true,
        Some(v) if v == "table" => false,
        _ => FD_MEMO_DEFAULT,
    }
}

/// The syscalls after whose return the program's remembered fd kinds are
/// not trusted (`SYSINFO_CHANGES_FDS`): those that can take a file out
/// of an fd table, in the caller's or (seccomp's ADDFD, through ioctl)
/// another process's: close, close_range, dup2/dup3 onto a number, exec
/// (O_CLOEXEC fds), io_uring_enter (IORING_OP_CLOSE), ioctl (binder's
/// deferred close, SECCOMP_IOCTL_NOTIF_ADDFD with SETFD). Numbers with no
/// name are taken to as well: they may be anything.
const CHANGES_FDS: &[&str] = &[
    "close",
    "close_range",
    "dup2",
    "dup3",
    "execve",
    "execveat",
    "io_uring_enter",
    "ioctl",
];

/// Whether a return of `id` may have changed which file an fd names.
fn changes_fds(id: SyscallId) -> bool {
    match id.name() {
        Some(name) => id == SyscallId::UNKNOWN || CHANGES_FDS.contains(&name),
        None => true,
    }
}

/// The loaded and attached program with its maps.
pub struct Probe {
    /// Owns the programs and their links: dropping it detaches them.
    _ebpf: Ebpf,
    /// Per traced tgid: its run's slot.
    traced: HashMap<MapData, u32, u8>,
    /// The traced set's epoch (`TRACED_EPOCH`, one entry), bumped after
    /// every change made here to `traced`: a thread in task storage
    /// trusts the slot it read from `traced` while the count is the one
    /// it read it at (`on_sys_enter`).
    traced_epoch: Array<MapData, u32>,
    /// What `traced_epoch` holds (only this agent writes it).
    epoch: u32,
    /// Per tid: the call in flight, the previous call (ThreadStore::Hash).
    threads: HashMap<MapData, u32, [u8; THREAD_LEN]>,
    /// The same per task (ThreadStore::TaskStorage), keyed by a thread
    /// pidfd from user space.
    thread_store: Option<MapData>,
    /// Whether the program remembers fd kinds per thread.
    fd_memo: bool,
    /// Whether aya relocated the program against the kernel BTF's cut
    /// (else against the whole of it).
    btf_cut: bool,
    /// Why the program did not load relocated against the kernel BTF's
    /// cut, when it loaded against the whole instead.
    btf_refused: Option<String>,
    events: RingBuf<MapData>,
    lost: PerCpuArray<MapData, u64>,
    agg: PerCpuHashMap<MapData, u32, [u8; AGG_LEN]>,
    /// Run slot 0's aggregates in `AGG_DENSE`, where they are.
    dense: Option<Dense>,
    /// Why the load with `AGG_DENSE` failed, when it was wanted and the
    /// program runs with every aggregate in the hash instead.
    dense_refused: Option<String>,
    errnos: PerCpuHashMap<MapData, u64, u64>,
    transitions: PerCpuHashMap<MapData, u64, [u8; TRANS_LEN]>,
    /// Socket peers: per (peer, syscall id, generation), per CPU.
    peers: PerCpuHashMap<MapData, [u8; PEER_KEY_LEN], [u8; PEER_STATS_LEN]>,
    control: Array<MapData, u64>,
    first: PerCpuArray<MapData, u64>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").finish_non_exhaustive()
    }
}

/// Why this agent cannot load BPF programs, before trying: no kernel BTF
/// (CO-RE needs it), or neither CAP_BPF with CAP_PERFMON nor
/// CAP_SYS_ADMIN.
pub fn precheck() -> Result<(), String> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err("the kernel has no BTF (/sys/kernel/btf/vmlinux)".into());
    }
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let caps = effective_caps().ok_or("cannot read the agent's capabilities")?;
    let has = |c: u32| caps & (1u64 << c) != 0;
    if !(has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))) {
        return Err("loading BPF programs needs root (CAP_BPF and CAP_PERFMON)".into());
    }
    Ok(())
}

fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Run slot 0's aggregates of the canonical ids [`DenseLayout`] covers.
struct Dense {
    /// Per (CPU, generation), a block laid out by `layout`: a plain array
    /// with a block per CPU, not a per-CPU array (why: `AGG_DENSE` in the
    /// C source).
    agg: Array<MapData, [u8; AGG_LEN]>,
    /// The CPUs `agg` has a block for.
    cpus: u32,
    /// Per generation: which (id, fd kind) have an entry in use.
    used: Array<MapData, [u8; USED_LEN]>,
    layout: DenseLayout,
}

impl Probe {
    /// Loads and attaches the program; `ring_bytes` sizes the ring buffer
    /// (a power of two of at least a page).
    pub fn load(ring_bytes: u32) -> anyhow::Result<Probe> {
        let (release, _) = sys::uname();
        let object = if allocates_safely(&release) {
            OBJECT
        } else {
            OBJECT_PREALLOC
        };
        Probe::load_object(object, ring_bytes)
    }

    /// Loads and attaches another build of `bpf/syscalls.bpf.c` (the
    /// cost breakdown's `-DSTAGE=N` builds, `examples/ebpf_stages.rs`):
    /// the same programs, maps and globals; threads kept where
    /// [`ThreadStore::probe`] says.
    pub fn load_object(object: &[u8], ring_bytes: u32) -> anyhow::Result<Probe> {
        Probe::load_with(object, ring_bytes, ThreadStore::probe())
    }

    /// [`Probe::load_object`] with the threads kept in `store` (an object
    /// with no task storage keeps them in the hash whatever is asked).
    pub fn load_with(object: &[u8], ring_bytes: u32, store: ThreadStore) -> anyhow::Result<Probe> {
        let dense = std::env::var_os(AGG_ENV).is_none_or(|v| v != "hash");
        Probe::load_dense(object, ring_bytes, store, dense)
    }

    /// [`Probe::load_with`] with the dense aggregates `wanted` or not
    /// (whatever [`AGG_ENV`] says).
    fn load_dense(
        object: &[u8],
        ring_bytes: u32,
        store: ThreadStore,
        wanted: bool,
    ) -> anyhow::Result<Probe> {
        precheck().map_err(|e| anyhow!(e))?;
        // The verifier gives up (EAGAIN) when a signal is pending, and
        // `watch` is woken by SIGALRM at every exec on the machine.
        crate::signals::held(|| Probe::load_held(object, ring_bytes, store, wanted))
            .context("cannot block signals while loading")?
    }

    /// [`Probe::load_dense`] once signals are held: with the dense array
    /// where it is `wanted` and the object has it (the object before 6.1
    /// has not), else, or when the load with it fails (the kernel could
    /// not allocate the array, or refused the program with it), with
    /// every aggregate in the hash.
    fn load_held(
        object: &[u8],
        ring_bytes: u32,
        store: ThreadStore,
        wanted: bool,
    ) -> anyhow::Result<Probe> {
        let roles = FdRoles::new();
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| anyhow!("cannot count the CPUs: {e}"))?;
        let wanted = wanted && has_map(object, AGG_DENSE);
        let layout = DenseLayout::new(&roles, cpus, wanted);
        // Made once for every load below.
        let cut = relocation_btf(object);
        let load = Load {
            object,
            ring_bytes,
            store,
            roles: &roles,
            cpus,
            cut: cut.as_ref(),
        };
        if layout.ids == 0 {
            return load.layout(layout);
        }
        load.falling_back(layout)
    }

    /// Tells the program the next window cut of run `slot` (`u64::MAX`:
    /// none): its calls ending before it go to generation `generation`,
    /// later ones to the other.
    pub fn set_cut(&mut self, slot: u8, cut_ns: u64, generation: u8) -> anyhow::Result<()> {
        let value = (cut_ns & !1) | (generation & 1) as u64;
        self.control
            .set(slot as u32, value, 0)
            .context("cannot set the program's next cut")
    }

    /// Takes run `slot`'s generation `generation` out of the kernel's
    /// aggregates (every generation when `None`): reads its entries and
    /// deletes them, ready for reuse. The kernel must not write that
    /// generation meanwhile (the cut it ends at has passed), else what it
    /// adds between the read and the delete is lost.
    pub fn take_generation(&mut self, slot: u8, generation: Option<u8>) -> Generation {
        let mut wanted = [None; MAX_SLOTS as usize];
        wanted[slot as usize] = Some(generation);
        self.take_slots(&wanted).swap_remove(slot as usize)
    }

    /// [`Probe::take_generation`] for several slots in one read of each
    /// map (a read costs two system calls per entry of every slot, so runs
    /// that end together are taken together): `wanted[slot]` is
    /// `Some(generation)` for a slot to take (`Some(None)`: every
    /// generation). Returns one generation per slot, empty for the others.
    pub fn take_slots(
        &mut self,
        wanted: &[Option<Option<u8>>; MAX_SLOTS as usize],
    ) -> Vec<Generation> {
        let want = |s: u8, g: u8| {
            wanted
                .get(s as usize)
                .copied()
                .flatten()
                .is_some_and(|w| w.is_none_or(|w| w == g))
        };
        let mut taken: Vec<Generation> = (0..MAX_SLOTS).map(|_| Generation::default()).collect();
        let mut agg_keys = Vec::new();
        for (key, values) in self.agg.iter().flatten() {
            let slot = agg_slot(key);
            if want(slot, agg_generation(key)) {
                taken[slot as usize].keys.push((key, values.to_vec()));
                agg_keys.push(key);
            }
        }
        let dense_taken = self.take_dense(&mut taken[0], |g| want(0, g));
        let mut errno_keys = Vec::new();
        for (key, values) in self.errnos.iter().flatten() {
            let slot = errno_slot(key);
            if want(slot, errno_generation(key)) {
                taken[slot as usize].errnos.push((key, values.to_vec()));
                errno_keys.push(key);
            }
        }
        let mut transition_keys = Vec::new();
        for (key, values) in self.transitions.iter().flatten() {
            let slot = transition_slot(key);
            if want(slot, transition_generation(key)) {
                taken[slot as usize]
                    .transitions
                    .push((key, values.to_vec()));
                transition_keys.push(key);
            }
        }
        let mut peer_keys = Vec::new();
        for (key, values) in self.peers.iter().flatten() {
            let slot = peer_slot(&key);
            if want(slot, peer_generation(&key)) {
                taken[slot as usize].peers.push((key, values.to_vec()));
                peer_keys.push(key);
            }
        }
        for key in &agg_keys {
            let _ = self.agg.remove(key);
        }
        self.clear_dense(&dense_taken);
        for key in &errno_keys {
            let _ = self.errnos.remove(key);
        }
        for key in &transition_keys {
            let _ = self.transitions.remove(key);
        }
        for key in &peer_keys {
            let _ = self.peers.remove(key);
        }
        taken
    }

    /// Reads run slot 0's dense aggregates of the generations `want`
    /// says into `into` (as AGG keys, so the rest reads them as it reads
    /// the hash's); returns the generations read and their entries, for
    /// [`Probe::clear_dense`] once every map is read.
    fn take_dense(&self, into: &mut Generation, want: impl Fn(u8) -> bool) -> Vec<(u8, Vec<u32>)> {
        let mut taken = Vec::new();
        let Some(dense) = &self.dense else {
            return taken;
        };
        for g in (0..2u8).filter(|&g| want(g)) {
            let Ok(used) = dense.used.get(&u32::from(g), 0) else {
                continue;
            };
            let mut indices = Vec::new();
            for (u, _) in used.iter().enumerate().filter(|(_, &b)| b != 0) {
                let (id, kind) = (u as u32 / FD_KINDS, u as u32 % FD_KINDS);
                let Some(entry) = dense.layout.entry(id, kind) else {
                    continue;
                };
                // One value per CPU, as a per-CPU map's lookup gives them.
                let mut per_cpu = Vec::with_capacity(dense.cpus as usize);
                let mut at = Vec::with_capacity(dense.cpus as usize);
                for cpu in 0..dense.cpus {
                    let index = (cpu * 2 + u32::from(g)) * dense.layout.block + entry;
                    if let Ok(value) = dense.agg.get(&index, 0) {
                        per_cpu.push(value);
                        at.push(index);
                    }
                }
                into.keys
                    .push((id << 16 | kind << 8 | u32::from(g), per_cpu));
                indices.extend(at);
            }
            taken.push((g, indices));
        }
        taken
    }

    /// Zeroes what [`Probe::take_dense`] read: the entries, then the
    /// generations' in-use bytes.
    fn clear_dense(&mut self, taken: &[(u8, Vec<u32>)]) {
        let Some(dense) = &mut self.dense else {
            return;
        };
        for (g, indices) in taken {
            for index in indices {
                let _ = dense.agg.set(*index, [0u8; AGG_LEN], 0);
            }
            let _ = dense.used.set(u32::from(*g), [0u8; USED_LEN], 0);
        }
    }

    /// Per syscall program (`on_sys_enter`, `on_sys_exit`): how many
    /// times it ran and its total run time, as the kernel counts them
    /// while its BPF statistics are on (`aya::sys::enable_stats`; zero
    /// otherwise), and how many instructions the verifier checked (5.16+;
    /// 0 before). The bench's in-kernel cost per call, and a share of its
    /// start.
    pub fn run_stats(&self) -> Vec<(&'static str, u64, std::time::Duration, u32)> {
        ATTACH[..2]
            .iter()
            .filter_map(|(name, _)| {
                let info = self._ebpf.program(name)?.info().ok()?;
                let verified = info.verified_instruction_count().unwrap_or(0);
                Some((*name, info.run_count(), info.run_time(), verified))
            })
            .collect()
    }

    /// When run `slot`'s first traced call came (monotonic ns), if one
    /// did.
    pub fn first_call_ns(&self, slot: u8) -> Option<u64> {
        self.first
            .get(&(slot as u32), 0)
            .ok()?
            .iter()
            .copied()
            .filter(|&t| t != 0)
            .min()
    }

    /// Traces the process `tgid` (all its threads) and, through the fork
    /// tracepoint, its future children, as run `slot`.
    pub fn trace(&mut self, tgid: u32, slot: u8) -> anyhow::Result<()> {
        if slot >= MAX_SLOTS {
            anyhow::bail!("run slot {slot} is not below {MAX_SLOTS}");
        }
        // The slot's first-call time starts afresh for the new run.
        let none = aya::maps::PerCpuValues::try_from(vec![0u64; self.first_cpus()])
            .context("cannot size the first-call map")?;
        self.first
            .set(slot as u32, none, 0)
            .context("cannot reset the run's first-call time")?;
        let added = self
            .traced
            .insert(tgid, slot, 0)
            .with_context(|| format!("cannot add process {tgid} to the traced set"));
        // Whether or not it was added (an entry of another slot may have
        // been replaced before a failure): the threads read TRACED again.
        self.traced_changed();
        added
    }

    /// Tells the program that `traced` changed (after the change): its
    /// threads in task storage read their slot from TRACED again at their
    /// next call. Without it a process taken out of the set would go on
    /// being counted, and one traced again in another slot counted in
    /// the old one. The program's own changes (a process added at fork,
    /// removed at its last thread's end) need none: see TRACED_EPOCH in
    /// `bpf/syscalls.bpf.c`.
    fn traced_changed(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        // An array's set fails only for an index out of range: entry 0
        // of a one-entry array is in range.
        let _ = self.traced_epoch.set(0, self.epoch, 0);
    }

    /// Adds process `tgid` to run `slot` unless it is in the traced set
    /// already (the fork tracepoint put it there); true when this call
    /// added it. For a child forked before its parent was traced.
    pub fn join(&mut self, tgid: u32, slot: u8) -> bool {
        /// `bpf_map_update_elem`'s flag: fail if the key is there.
        const BPF_NOEXIST: u64 = 1;
        let added = self.traced.insert(tgid, slot, BPF_NOEXIST).is_ok();
        if added {
            self.traced_changed();
        }
        added
    }

    /// Takes process `tgid` out of the traced set (one that ended before
    /// it was put in).
    pub fn untrace(&mut self, tgid: u32) {
        if self.traced.remove(&tgid).is_ok() {
            self.traced_changed();
        }
    }

    /// The processes (tgids) the traced set holds for run `slot`.
    fn processes_of(&self, slot: u8) -> Vec<u32> {
        self.traced
            .iter()
            .flatten()
            .filter(|&(_, s)| s == slot)
            .map(|(tgid, _)| tgid)
            .collect()
    }

    /// Takes every process of run `slot` out of the traced set (a run
    /// given up: a process that took the pid of the one matched, and the
    /// children it forked meanwhile). The set is read again until no
    /// entry of the slot is left (a child forked while it was read).
    /// Returns how many entries it removed.
    pub fn untrace_slot(&mut self, slot: u8) -> usize {
        let mut removed = 0;
        for _ in 0..8 {
            let of_slot = self.processes_of(slot);
            if of_slot.is_empty() {
                break;
            }
            for tgid in of_slot {
                removed += usize::from(self.traced.remove(&tgid).is_ok());
            }
            // Each pass: the slot may go to another run once this returns.
            self.traced_changed();
        }
        removed
    }

    fn first_cpus(&self) -> usize {
        self.first.get(&0, 0).map_or(1, |v| v.len())
    }

    /// Whether any traced process is still alive (the kernel removes a
    /// process from the set when its last thread ends).
    pub fn any_traced(&self) -> bool {
        self.traced.keys().next().is_some()
    }

    /// Per slot, whether a process of that run is still traced.
    pub fn live_slots(&self) -> [bool; MAX_SLOTS as usize] {
        let mut live = [false; MAX_SLOTS as usize];
        for (_, slot) in self.traced.iter().flatten() {
            if let Some(l) = live.get_mut(slot as usize) {
                *l = true;
            }
        }
        live
    }

    /// Whether process `tgid` is traced (in any run).
    pub fn is_traced(&self, tgid: u32) -> bool {
        self.traced.get(&tgid, 0).is_ok()
    }

    /// Waits up to `timeout_ms` for records (the program wakes the reader
    /// only when a quarter of the ring is full; the timeout bounds the
    /// delay otherwise).
    pub fn wait(&self, timeout_ms: i32) -> std::io::Result<()> {
        sys::poll_readable(self.events.as_raw_fd(), timeout_ms).map(|_| ())
    }

    /// Hands every record in the ring to `each`; returns how many records
    /// could not be parsed (none unless the object and this reader
    /// disagree).
    pub fn drain(&mut self, mut each: impl FnMut(Record)) -> u64 {
        let mut bad = 0;
        while let Some(item) = self.events.next() {
            match Record::parse(&item) {
                Some(r) => each(r),
                None => bad += 1,
            }
        }
        bad
    }

    /// Whether run slot 0's aggregates are in the dense array
    /// (`AGG_DENSE`; else every key is in the `AGG` hash).
    pub fn dense(&self) -> bool {
        self.dense.is_some()
    }

    /// Why the dense aggregates were wanted and could not be loaded (the
    /// kernel's error), when the program fell back to the hash.
    pub fn dense_refused(&self) -> Option<&str> {
        self.dense_refused.as_deref()
    }

    /// Where the program keeps each thread's state.
    pub fn thread_store(&self) -> ThreadStore {
        if self.thread_store.is_some() {
            ThreadStore::TaskStorage
        } else {
            ThreadStore::Hash
        }
    }

    /// Whether the program remembers fd kinds per thread ([`FD_MEMO_ENV`]).
    pub fn fd_memo(&self) -> bool {
        self.fd_memo
    }

    /// Whether aya relocated the program against the kernel BTF's cut
    /// (`EDGE_AGENT_EBPF_BTF`).
    pub fn btf_cut(&self) -> bool {
        self.btf_cut
    }

    /// Why the program did not load relocated against the kernel BTF's
    /// cut, when it then loaded against the whole of it (a slower start).
    pub fn btf_refused(&self) -> Option<&str> {
        self.btf_refused.as_deref()
    }

    /// Hands every call of run `slot` in flight now to `each` (tid,
    /// call). The kernel changes the state while it is read: a call that
    /// ends meanwhile may be left out.
    pub fn in_flight(&self, slot: u8, mut each: impl FnMut(u32, Pending)) {
        if let Some(store) = &self.thread_store {
            // Task storage cannot be listed: each thread of the run's
            // processes is looked up by a pidfd of its own.
            let mut value = [0u8; THREAD_LEN];
            for tid in self.processes_of(slot).into_iter().flat_map(threads_of) {
                let Ok(pidfd) = sys::thread_pidfd(tid as sys::Tid) else {
                    continue; // ended meanwhile
                };
                let key = pidfd.as_raw_fd().to_ne_bytes();
                if !matches!(
                    sys::bpf_map_lookup(store.fd().as_fd(), &key, &mut value),
                    Ok(true)
                ) {
                    continue;
                }
                if thread_slot(&value) != Some(slot) {
                    continue;
                }
                if let Some(p) = Pending::parse(&value) {
                    each(tid, p);
                }
            }
            return;
        }
        for (tid, value) in self.threads.iter().flatten() {
            if thread_slot(&value) != Some(slot) {
                continue;
            }
            if let Some(p) = Pending::parse(&value) {
                each(tid, p);
            }
        }
    }

    /// What the kernel lost so far, summed over CPUs and runs.
    pub fn losses(&self) -> Losses {
        (0..MAX_SLOTS).fold(Losses::default(), |sum, slot| {
            let l = self.losses_in(slot);
            Losses {
                lost: sum.lost.saturating_add(l.lost),
                uncounted: sum.uncounted.saturating_add(l.uncounted),
                refused: sum.refused.saturating_add(l.refused),
                partial: sum.partial.saturating_add(l.partial),
            }
        })
    }

    /// What the kernel lost of the runs in slot `slot` so far (every run
    /// the slot held: a run's own is the change over its time there),
    /// summed over CPUs.
    pub fn losses_in(&self, slot: u8) -> Losses {
        let counter = |what: u32| {
            self.lost
                .get(&(what * MAX_SLOTS as u32 + slot as u32), 0)
                .map(|per_cpu| per_cpu.iter().fold(0u64, |a, n| a.saturating_add(*n)))
                .unwrap_or(0)
        };
        let refused = counter(LOST_CALLS_REFUSED);
        Losses {
            lost: counter(LOST_RING),
            uncounted: counter(LOST_CALLS_FULL).saturating_add(refused),
            refused,
            partial: counter(LOST_PARTS),
        }
    }
}

/// What every load of the program at one start shares.
#[derive(Clone, Copy)]
struct Load<'a> {
    object: &'a [u8],
    ring_bytes: u32,
    store: ThreadStore,
    roles: &'a FdRoles,
    cpus: usize,
    /// The kernel's BTF cut for `object` ([`relocation_btf`]).
    cut: Option<&'a aya::Btf>,
}

impl Load<'_> {
    /// [`Load::layout`] with the dense array laid out by `dense`,
    /// and, when that load fails, again with every aggregate in the hash;
    /// the first failure is kept ([`Probe::dense_refused`]) so that the
    /// agent can say why it runs the slower path, and named in the error
    /// when the second load fails too.
    fn falling_back(&self, dense: DenseLayout) -> anyhow::Result<Probe> {
        let refused = match self.layout(dense) {
            Ok(probe) => return Ok(probe),
            Err(e) => format!("{e:#}"),
        };
        let hash = DenseLayout::new(self.roles, self.cpus, false);
        let mut probe = self.layout(hash).with_context(|| {
            format!("with every aggregate in the hash, after the dense array failed ({refused})")
        })?;
        probe.dense_refused = Some(refused);
        Ok(probe)
    }

    /// The program loaded and attached with the dense array laid out by
    /// `layout`: relocated against the kernel BTF's cut where there is
    /// one, and, should it not load so (a kernel whose BTF the cut
    /// misreads), again against the whole BTF, the cut's failure kept
    /// ([`Probe::btf_refused`]) for the agent to say.
    fn layout(&self, layout: DenseLayout) -> anyhow::Result<Probe> {
        let Load {
            object,
            ring_bytes,
            store,
            roles,
            cpus,
            cut,
        } = *self;
        // The kernel reads connect's peer from the address it names.
        let connect_id = SyscallId::from_name("connect").map_or(u16::MAX, |id| id.0);
        let sysinfo = sysinfo_table(roles);
        let task_storage = u8::from(store == ThreadStore::TaskStorage);
        let dense_cpus = cpus as u32;
        let dense_at = layout.table();
        // THREADS is preallocated (every entry at creation: 4.5 MB of
        // kernel memory, and time at each start); where the threads live
        // in task storage it stays empty, so one entry does.
        let threads_unused = store == ThreadStore::TaskStorage && has_map(object, THREAD_STORE);
        let fd_memo = fd_memo_wanted();
        let fd_memo_global = u8::from(fd_memo);
        let load_attach = |btf: Option<&aya::Btf>| -> anyhow::Result<Ebpf> {
            let mut loader = EbpfLoader::new();
            if let Some(btf) = btf {
                loader.btf(Some(btf));
            }
            loader
                // THREAD_STORE: task storage, which aya reads through no type
                // of its own (the raw lookup in sys::bpf_map_lookup).
                .allow_unsupported_maps()
                .set_global("task_storage", &task_storage, true)
                .set_global("fd_memo", &fd_memo_global, true)
                .set_global("compat_probe", &host::COMPAT_PROBE, true)
                .set_global("arg_off", &host::ARG_OFF, true)
                .set_global("connect_id", &connect_id, true)
                .set_global("dense_ids", &layout.ids, true)
                .set_global("dense_cpus", &dense_cpus, true)
                .set_global("dense_block", &layout.block, true)
                .set_global("dense_at", &*dense_at, true)
                .set_max_entries(AGG_DENSE, (dense_cpus * 2 * layout.block).max(1))
                .set_global("SYSINFO", &*sysinfo, true)
                .set_max_entries("EVENTS", ring_bytes);
            if threads_unused {
                loader.set_max_entries("THREADS", 1);
            }
            let mut ebpf = loader
                .load(object)
                .context("the kernel refused the BPF program")?;
            fill_sysinfo_high(&mut ebpf, roles)?;
            for (prog, tracepoint) in ATTACH {
                let p: &mut RawTracePoint = ebpf
                    .program_mut(prog)
                    .ok_or_else(|| anyhow!("the BPF object has no program {prog}"))?
                    .try_into()
                    .with_context(|| format!("{prog} is not a raw tracepoint program"))?;
                p.load()
                    .with_context(|| format!("the kernel refused the program {prog}"))?;
                p.attach(tracepoint)
                    .with_context(|| format!("cannot attach to the tracepoint {tracepoint}"))?;
            }
            Ok(ebpf)
        };
        let (mut ebpf, btf_refused) = match cut.map(|cut| load_attach(Some(cut))) {
            Some(Ok(ebpf)) => (ebpf, None),
            Some(Err(e)) => {
                let refused = format!("{e:#}");
                let ebpf = load_attach(None).with_context(|| {
                    format!("against the whole kernel BTF, after its cut failed ({refused})")
                })?;
                (ebpf, Some(refused))
            }
            None => (load_attach(None)?, None),
        };
        let traced = HashMap::try_from(take_map(&mut ebpf, "TRACED")?)?;
        let traced_epoch = Array::try_from(take_map(&mut ebpf, "TRACED_EPOCH")?)?;
        let threads = HashMap::try_from(take_map(&mut ebpf, "THREADS")?)?;
        let thread_store = match (store, ebpf.take_map(THREAD_STORE)) {
            (ThreadStore::TaskStorage, Some(aya::maps::Map::Unsupported(map))) => Some(map),
            _ => None,
        };
        let events = RingBuf::try_from(take_map(&mut ebpf, "EVENTS")?)?;
        let lost = PerCpuArray::try_from(take_map(&mut ebpf, "LOST")?)?;
        let agg = PerCpuHashMap::try_from(take_map(&mut ebpf, "AGG")?)?;
        let dense = if layout.ids > 0 {
            Some(Dense {
                agg: Array::try_from(take_map(&mut ebpf, AGG_DENSE)?)?,
                cpus: dense_cpus,
                used: Array::try_from(take_map(&mut ebpf, "USED")?)?,
                layout,
            })
        } else {
            None
        };
        let errnos = PerCpuHashMap::try_from(take_map(&mut ebpf, "ERRNOS")?)?;
        let transitions = PerCpuHashMap::try_from(take_map(&mut ebpf, "TRANS")?)?;
        let peers = PerCpuHashMap::try_from(take_map(&mut ebpf, "PEERS")?)?;
        let control = Array::try_from(take_map(&mut ebpf, "CONTROL")?)?;
        let first = PerCpuArray::try_from(take_map(&mut ebpf, "FIRST")?)?;
        let mut probe = Probe {
            _ebpf: ebpf,
            traced,
            traced_epoch,
            epoch: 0,
            threads,
            thread_store,
            fd_memo,
            btf_cut: cut.is_some() && btf_refused.is_none(),
            btf_refused,
            events,
            lost,
            agg,
            dense,
            dense_refused: None,
            errnos,
            transitions,
            peers,
            control,
            first,
        };
        // No cut until the caller sets one.
        for slot in 0..MAX_SLOTS {
            probe.set_cut(slot, u64::MAX, 0)?;
        }
        Ok(probe)
    }
}

/// What the kernel could not keep of a run: records (the ring buffer was
/// full), whole calls (AGG had no room) and parts of counted calls
/// (TRANS, ERRNOS or PEERS had none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Task records the full ring buffer could not take.
    pub lost: u64,
    /// Calls not counted at all: AGG was full, or the kernel refused it
    /// a new key (`refused`).
    pub uncounted: u64,
    /// Of `uncounted`, the calls whose new key the kernel refused with
    /// room left (its per-CPU memory allocator had nothing ready, or the
    /// map's bucket was busy): a passing shortage, not a sign the maps
    /// are too small.
    pub refused: u64,
    /// Calls counted without their transition, errno or peer figures.
    pub partial: u64,
}

impl Losses {
    /// What was lost since `earlier` (counters only grow).
    pub fn since(self, earlier: Losses) -> Losses {
        Losses {
            lost: self.lost.saturating_sub(earlier.lost),
            uncounted: self.uncounted.saturating_sub(earlier.uncounted),
            refused: self.refused.saturating_sub(earlier.refused),
            partial: self.partial.saturating_sub(earlier.partial),
        }
    }
}

/// The threads of process `tgid` now (none once it ended).
fn threads_of(tgid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| anyhow!("the BPF object has no map {name}"))
}

/// The ABIs the program tells apart: native, then compat.
pub fn abis() -> &'static [Arch] {
    Native::ABIS
}

/// Whether a kernel of this release (`uname -r`) lets tracing programs
/// use hash maps that allocate as keys arrive: 6.1 and later. A release
/// that does not parse is taken as older (preallocation is safe anywhere).
fn allocates_safely(release: &str) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= (6, 1),
        _ => false,
    }
}

/// What the program is told per ABI and syscall number (index
/// `abi * MAX_NR + nr`, its read-only `SYSINFO`): the syscall's id (so the
/// kernel keys its statistics as the collector does), which argument is an
/// fd (from the same roles the ptrace backend uses) and which the size
/// (`SyscallId::size_arg`). Set as the object's data before load. A number
/// with no name gets the id carrying it (`SyscallId::carrying_raw`), so the
/// kernel keeps distinct unknown numbers apart as the ptrace backend does
/// and the collector applies the same limit when merging (numbers at or
/// above `MAX_NR` with no name stay `<unknown>`).
fn sysinfo_table(roles: &FdRoles) -> Box<[SysInfo; 2 * MAX_NR as usize]> {
    let mut table = Box::new([[0u8; core::mem::size_of::<SysInfo>()]; 2 * MAX_NR as usize]);
    for (abi, arch) in abis().iter().take(2).enumerate() {
        for nr in 0..MAX_NR {
            table[(abi as u32 * MAX_NR + nr) as usize] =
                sysinfo(roles, SyscallId::from_raw_carrying(*arch, nr));
        }
    }
    table
}

/// One syscall's `struct sysinfo`.
fn sysinfo(roles: &FdRoles, id: SyscallId) -> SysInfo {
    let plus_one = |i: Option<usize>| i.map_or(0, |i| i as u8 + 1);
    let [lo, hi] = id.0.to_ne_bytes();
    let flags = if changes_fds(id) {
        SYSINFO_CHANGES_FDS as u8
    } else {
        0
    };
    [
        lo,
        hi,
        plus_one(roles.get(id).fd_arg()),
        plus_one(id.size_arg()),
        flags,
        0,
    ]
}

/// `SYSINFO_HIGH`: the syscalls whose number in an ABI is at or above
/// [`MAX_NR`] (AArch32's private `0x0f00xx` calls, made by 32-bit ARM
/// processes under an aarch64 kernel), keyed `abi << 32 | nr`, so the
/// kernel names them as the ptrace backend does.
fn fill_sysinfo_high(ebpf: &mut Ebpf, roles: &FdRoles) -> anyhow::Result<()> {
    let mut high: HashMap<&mut MapData, u64, SysInfo> = HashMap::try_from(
        ebpf.map_mut("SYSINFO_HIGH")
            .ok_or_else(|| anyhow!("the BPF object has no map SYSINFO_HIGH"))?,
    )?;
    for (abi, arch) in abis().iter().take(2).enumerate() {
        for raw_id in 0..SyscallId::COUNT {
            let id = SyscallId(raw_id as u16);
            let Some(nr) = id.to_raw(*arch).filter(|&nr| nr >= MAX_NR) else {
                continue;
            };
            high.insert((abi as u64) << 32 | nr as u64, sysinfo(roles, id), 0)
                .with_context(|| format!("cannot add syscall {nr:#x} to SYSINFO_HIGH"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use aya::maps::IterableMap;

    use std::collections::HashSet;

    use super::{
        allocates_safely, btf, cut_kernel_btf, DenseLayout, FdRoles, Load, Probe, RawBtf,
        ThreadStore, DENSE_BUDGET, DENSE_IDS, FD_KINDS, OBJECT, OBJECT_PREALLOC,
    };
    use crate::ebpf::kernel_types::{FD_FILE, FD_NONE, FD_PIPE};

    /// Both objects' instructions come out of aya's CO-RE relocation the
    /// same against the kernel BTF's cut as against the whole of it (the
    /// cut keeps what the relocations read: the candidates, what they
    /// hold by value). Where the kernel has no BTF there is nothing to
    /// compare.
    #[test]
    fn the_kernel_btfs_cut_relocates_as_the_whole() {
        let Ok(whole) = aya::Btf::from_sys_fs() else {
            eprintln!("no kernel BTF here: nothing to compare");
            return;
        };
        let relocated = |object: &[u8], btf: &aya::Btf| -> Vec<String> {
            let mut parsed = aya_obj::Object::parse(object).expect("the object parses");
            parsed.relocate_btf(btf).expect("the object relocates");
            parsed
                .functions
                .values()
                .map(|f| format!("{} {:?}", f.name, f.instructions))
                .collect()
        };
        for object in [OBJECT, OBJECT_PREALLOC] {
            let cut = cut_kernel_btf(object).expect("the cut is made");
            let (against_cut, against_whole) = (relocated(object, &cut), relocated(object, &whole));
            assert!(
                against_whole.len() >= 5,
                "{} functions",
                against_whole.len()
            );
            assert_eq!(against_cut, against_whole);
        }
    }

    /// SYSINFO names a number as the ptrace backend does: Linux 6.18's
    /// listns by its id, an unassigned number by the id carrying it (so
    /// the kernel keeps distinct unknown numbers apart).
    #[test]
    fn sysinfo_keeps_unknown_numbers_apart() {
        use agent_core::SyscallId;
        let table = super::sysinfo_table(&crate::fd::FdRoles::new());
        let id = |nr: usize| SyscallId(u16::from_ne_bytes([table[nr][0], table[nr][1]]));
        let native = super::abis()[0];
        for nr in [0usize, 470, 471, 0x1f0, 0x3ff] {
            assert_eq!(
                id(nr),
                SyscallId::from_raw_carrying(native, nr as u32),
                "{nr}"
            );
        }
        assert_eq!(id(470).name(), Some("listns"));
        assert_eq!(id(0x1f0).to_string(), "syscall_0x1f0");
    }

    /// SYSINFO marks the calls after whose return the kernel's
    /// remembered fd kinds are not trusted (the fd-kind memo): those that
    /// can take a file out of a table, and numbers with no name; not
    /// calls that only use fds or install them at a free number.
    #[test]
    fn sysinfo_marks_the_calls_that_change_fd_tables() {
        use agent_core::SyscallId;
        let table = super::sysinfo_table(&crate::fd::FdRoles::new());
        let native = super::abis()[0];
        let marked = |nr: u32| table[nr as usize][4] & super::SYSINFO_CHANGES_FDS as u8 != 0;
        let nr = |name: &str| SyscallId::from_name(name).and_then(|id| id.to_raw(native));
        for name in super::CHANGES_FDS {
            // dup2 is not an aarch64 syscall.
            if let Some(nr) = nr(name) {
                assert!(marked(nr), "{name}");
            }
        }
        assert!(nr("close").is_some_and(marked));
        for name in [
            "read", "write", "openat", "socket", "dup", "fcntl", "connect",
        ] {
            assert!(!marked(nr(name).unwrap()), "{name}");
        }
        assert!(marked(0x3ff), "a number with no name");
    }

    /// The dense array gives an entry per fd kind only to the ids whose
    /// calls take an fd (the others' calls are all FD_NONE), one after
    /// another in each block, so it is well under every id × FD_KINDS.
    #[test]
    fn dense_layout_gives_fd_kinds_only_to_the_ids_that_take_an_fd() {
        let roles = FdRoles::new();
        let layout = DenseLayout::new(&roles, 1, true);
        let ids = (agent_core::SyscallId::COUNT as u32).min(DENSE_IDS);
        assert_eq!(layout.ids, ids);
        let id = |name| u32::from(agent_core::SyscallId::from_name(name).unwrap().0);
        let (read, getppid) = (id("read"), id("getppid"));
        for kind in 0..FD_KINDS {
            assert!(layout.entry(read, kind).is_some(), "read, kind {kind}");
            assert_eq!(layout.entry(getppid, kind).is_some(), kind == FD_NONE);
        }
        assert_eq!(layout.entry(read, FD_KINDS), None);
        assert_eq!(layout.entry(ids, FD_NONE), None);
        // Every (id, kind) it has, once, in 0..block.
        let mut seen = vec![false; layout.block as usize];
        for id in 0..ids {
            for kind in 0..FD_KINDS {
                if let Some(e) = layout.entry(id, kind) {
                    assert!(
                        !std::mem::replace(&mut seen[e as usize], true),
                        "{id} {kind}"
                    );
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert!(
            layout.block * 2 < ids * FD_KINDS,
            "{} entries of {}",
            layout.block,
            ids * FD_KINDS
        );
        // The table the program reads says the same.
        let table = layout.table();
        let at = |id: u32| {
            let e = table[id as usize];
            (
                u16::from_ne_bytes([e[0], e[1]]),
                u16::from_ne_bytes([e[2], e[3]]),
            )
        };
        assert_eq!(at(read).1 as u32, FD_KINDS);
        assert_eq!(at(getppid).1, 1);
        assert_eq!(at(read + 1).0, at(read).0 + FD_KINDS as u16);
        assert_eq!(at(DENSE_IDS - 1), (0, 0));
    }

    /// The dense aggregates cover agent-core's ids where their memory
    /// fits the budget, and none where it would not or when not wanted.
    #[test]
    fn dense_aggregates_cover_the_ids_within_the_memory_budget() {
        let roles = FdRoles::new();
        let ids = (agent_core::SyscallId::COUNT as u32).min(DENSE_IDS);
        assert_eq!(DenseLayout::new(&roles, 1, true).ids, ids);
        assert_eq!(DenseLayout::new(&roles, 1, false).ids, 0);
        let block = DenseLayout::new(&roles, 1, true).block;
        let per_cpu = 2 * u64::from(block) * super::AGG_LEN as u64;
        let most = (DENSE_BUDGET / per_cpu) as usize;
        assert_eq!(DenseLayout::new(&roles, most, true).ids, ids);
        assert_eq!(DenseLayout::new(&roles, most + 1, true).ids, 0);
        assert_eq!(DenseLayout::new(&roles, most + 1, true).block, 0);
    }

    /// The dense aggregates count every call of run slot 0, summed over
    /// CPUs as the hash's are, each under its own fd kind, and take their
    /// memory outside the kernel's per-CPU allocator: a plain array, not
    /// a per-CPU one, whose 2.4 MB per CPU left the atomic per-CPU
    /// allocations that new keys of the per-CPU hashes live on failing
    /// (ENOMEM: whole calls lost when a `watch` filled AGG,
    /// tests/tests/ebpf_full_maps.rs). The object before 6.1 has no array.
    #[test]
    fn dense_aggregates_count_every_call_outside_the_per_cpu_allocator() {
        use std::io::{Read, Write};
        use std::os::unix::fs::FileExt;
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let prealloc =
            Probe::load_dense(OBJECT_PREALLOC, 1 << 16, ThreadStore::Hash, true).unwrap();
        assert!(!prealloc.dense());
        drop(prealloc);
        let mut probe = Probe::load_dense(OBJECT, 1 << 16, ThreadStore::probe(), true).unwrap();
        assert!(probe.dense());
        assert_eq!(
            probe
                .dense
                .as_ref()
                .unwrap()
                .agg
                .map()
                .info()
                .unwrap()
                .map_type()
                .unwrap(),
            aya::maps::MapType::Array
        );
        let (mut rx, mut tx) = std::io::pipe().unwrap();
        let file = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        let me = std::process::id();
        probe.trace(me, 0).unwrap();
        const CALLS: u64 = 1000;
        const READS: u64 = 50;
        let mut byte = [0u8; 1];
        for i in 0..CALLS {
            // Both CPUs' blocks, where the scheduler moves this thread.
            if i % 100 == 0 {
                std::thread::yield_now();
            }
            let _ = std::os::unix::process::parent_id();
            if i < READS {
                tx.write_all(b"x").unwrap();
                rx.read_exact(&mut byte).unwrap();
                // pread64: a call no other test of this binary makes.
                file.read_exact_at(&mut byte, i).unwrap();
            }
        }
        probe.untrace(me);
        let taken = probe.take_generation(0, None);
        let count = |name, kind: u32| -> u64 {
            let id = u32::from(agent_core::SyscallId::from_name(name).unwrap().0);
            taken
                .keys
                .iter()
                .filter(|(key, _)| key >> 16 == id && (key >> 8) & 0xff == kind)
                .flat_map(|(_, per_cpu)| per_cpu.iter())
                .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
                .sum()
        };
        assert_eq!(count("getppid", FD_NONE), CALLS);
        assert_eq!(count("read", FD_PIPE), READS);
        assert_eq!(count("pread64", FD_FILE), READS);
        assert_eq!(count("write", FD_PIPE), READS);
        // Taken: read and zeroed.
        assert!(probe.take_generation(0, None).keys.is_empty());
    }

    /// A process taken out of the traced set is not counted any more,
    /// and traced again as another run it is counted there: with the
    /// threads in task storage, a thread takes its slot from its storage
    /// without looking TRACED up only while the traced set's epoch is the
    /// one it read the slot at, and `untrace` and `trace` bump it (without
    /// the bump, the calls after `untrace` and the second run's go on
    /// being counted in slot 0). The hash keeps the lookup at every call:
    /// the same counts.
    #[test]
    fn untraced_and_retraced_processes_count_where_the_traced_set_says() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let mut stores = vec![ThreadStore::Hash];
        if crate::sys::thread_pidfd(crate::sys::getpid()).is_ok() {
            stores.push(ThreadStore::TaskStorage);
        } else {
            eprintln!("task storage not tried: no thread pidfds (Linux 6.9)");
        }
        // A call no other test makes: the whole test process is traced,
        // its other tests' threads too.
        let getsid = u32::from(agent_core::SyscallId::from_name("getsid").unwrap().0);
        let calls = |n: u64| {
            for _ in 0..n {
                let _ = nix::unistd::getsid(None);
            }
        };
        for store in stores {
            let mut probe = Probe::load_with(OBJECT, 1 << 16, store).unwrap();
            assert_eq!(probe.thread_store(), store);
            let me = std::process::id();
            const CALLS: u64 = 200;
            probe.trace(me, 0).unwrap();
            calls(CALLS);
            probe.untrace(me);
            calls(3 * CALLS);
            probe.trace(me, 1).unwrap();
            calls(2 * CALLS);
            probe.untrace(me);
            calls(CALLS);
            // join adds a process the set does not hold: traced again.
            assert!(probe.join(me, 2));
            assert!(!probe.join(me, 3));
            calls(CALLS / 2);
            assert_eq!(probe.untrace_slot(2), 1);
            calls(CALLS);
            let counted: Vec<u64> = (0..4)
                .map(|slot| probe_count(&mut probe, slot, getsid))
                .collect();
            assert_eq!(counted, [CALLS, 2 * CALLS, CALLS / 2, 0], "{store:?}");
        }
    }

    /// The calls of syscall `id` counted for run `slot` (taken: read and
    /// cleared).
    fn probe_count(probe: &mut Probe, slot: u8, id: u32) -> u64 {
        probe
            .take_generation(slot, None)
            .keys
            .iter()
            .filter(|(key, _)| key >> 16 == id)
            .flat_map(|(_, per_cpu)| per_cpu.iter())
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
            .sum()
    }

    /// The main object's loads with a small ring and the threads where
    /// this kernel keeps them, relocated against `cut`.
    fn test_load<'a>(roles: &'a FdRoles, cpus: usize, cut: Option<&'a aya::Btf>) -> Load<'a> {
        Load {
            object: OBJECT,
            ring_bytes: 1 << 16,
            store: ThreadStore::probe(),
            roles,
            cpus,
            cut,
        }
    }

    /// Traces this process in run slot 0 while it makes `calls` getppid
    /// calls, and checks the probe counted each.
    fn counts_own_getppids(probe: &mut Probe, calls: u64) {
        let me = std::process::id();
        probe.trace(me, 0).unwrap();
        for _ in 0..calls {
            let _ = std::os::unix::process::parent_id();
        }
        probe.untrace(me);
        let getppid = u32::from(agent_core::SyscallId::from_name("getppid").unwrap().0);
        assert_eq!(probe_count(probe, 0, getppid), calls);
    }

    /// When the kernel will not make the dense array (here one of more
    /// than 2^31 entries, far over this machine's memory: ENOMEM), the
    /// program loads again with every aggregate in the hash, counts
    /// there, and keeps the kernel's refusal for the agent to say.
    #[test]
    fn a_refused_dense_array_falls_back_to_the_hash_and_keeps_why() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let roles = FdRoles::new();
        let cpus = aya::util::nr_cpus().unwrap();
        let mut layout = DenseLayout::new(&roles, cpus, true);
        assert!(layout.ids > 0);
        layout.block = (1u32 << 31) / (2 * cpus as u32) + 1;
        let cut = super::relocation_btf(OBJECT);
        let load = test_load(&roles, cpus, cut.as_ref());
        let mut probe = load.falling_back(layout).unwrap();
        assert!(!probe.dense());
        let why = probe.dense_refused().unwrap();
        assert!(why.contains(super::AGG_DENSE), "{why}");
        counts_own_getppids(&mut probe, 300);
        // A load that needs no fallback keeps no refusal.
        let fine = Probe::load_dense(OBJECT, 1 << 16, ThreadStore::probe(), true).unwrap();
        assert!(fine.dense() && fine.dense_refused().is_none());
    }

    /// Should the program not load relocated against the kernel BTF's
    /// cut (here a cut of nothing: no CO-RE relocation finds its type, so
    /// aya poisons the instructions and the verifier refuses them), it
    /// loads against the whole BTF, counts, and keeps why; the real cut
    /// needs no such fallback.
    #[test]
    fn a_cut_the_program_cannot_load_against_falls_back_to_the_whole_btf() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let whole = std::fs::read(crate::sys::KERNEL_BTF).unwrap();
        let nothing = btf::cut(&RawBtf::parse(&whole).unwrap(), &HashSet::new()).unwrap();
        let nothing = aya::Btf::parse(&nothing, aya::Endianness::default()).unwrap();
        let roles = FdRoles::new();
        let cpus = aya::util::nr_cpus().unwrap();
        let load = test_load(&roles, cpus, Some(&nothing));
        let mut probe = load.layout(DenseLayout::new(&roles, cpus, true)).unwrap();
        assert!(!probe.btf_cut());
        let why = probe.btf_refused().unwrap();
        assert!(why.contains("refused"), "{why}");
        counts_own_getppids(&mut probe, 200);
        drop(probe);
        let cut = super::relocation_btf(OBJECT).unwrap();
        let fine = Load {
            cut: Some(&cut),
            ..load
        }
        .layout(DenseLayout::new(&roles, cpus, true))
        .unwrap();
        assert!(fine.btf_cut() && fine.btf_refused().is_none());
    }

    /// Both objects load here (where the test may load BPF programs), and
    /// their per-CPU hashes carry the flag each was built with
    /// (BPF_F_NO_PREALLOC, 1, or none).
    #[test]
    fn both_objects_load_with_their_hash_flags() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        for (object, flag) in [(OBJECT, 1), (OBJECT_PREALLOC, 0)] {
            let probe = Probe::load_object(object, 1 << 16).unwrap();
            let hashes = [
                probe.agg.map(),
                probe.errnos.map(),
                probe.transitions.map(),
                probe.peers.map(),
            ];
            for map in hashes {
                assert_eq!(map.info().unwrap().map_flags() & 1, flag);
            }
        }
    }

    /// Only the object for 6.1 and later has the task-storage map.
    #[test]
    fn the_task_storage_map_is_found_in_the_object_that_has_it() {
        assert!(super::has_map(OBJECT, super::THREAD_STORE));
        assert!(super::has_map(OBJECT, "THREADS"));
        assert!(!super::has_map(OBJECT_PREALLOC, super::THREAD_STORE));
        assert!(!super::has_map(b"not an ELF", "THREADS"));
    }

    /// Either store hands back the calls in flight, a thread's other than
    /// the leader's included (task storage: looked up by a pidfd of the
    /// thread), and the object before 6.1 keeps the hash whatever is
    /// asked; the hash has room only where it is used.
    #[test]
    fn calls_in_flight_read_back_from_either_thread_store() {
        let Some(_turn) = crate::ebpf::probe_test_turn() else {
            return;
        };
        let mut stores = vec![(OBJECT, ThreadStore::Hash, ThreadStore::Hash)];
        stores.push((OBJECT_PREALLOC, ThreadStore::TaskStorage, ThreadStore::Hash));
        if crate::sys::thread_pidfd(crate::sys::getpid()).is_ok() {
            stores.push((OBJECT, ThreadStore::TaskStorage, ThreadStore::TaskStorage));
        } else {
            eprintln!("task storage not tried: no thread pidfds (Linux 6.9)");
        }
        for (object, asked, kept) in stores {
            let mut probe = Probe::load_with(object, 1 << 16, asked).unwrap();
            assert_eq!(probe.thread_store(), kept);
            // The unused hash holds one entry, the used one its size.
            let threads = probe.threads.map().info().unwrap().max_entries();
            assert_eq!(threads == 1, kept == ThreadStore::TaskStorage, "{threads}");
            let me = std::process::id();
            probe.trace(me, 0).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let sleeper = std::thread::spawn(move || {
                let link = std::fs::read_link("/proc/thread-self").unwrap();
                let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
                tx.send(tid).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(500));
            });
            let tid = rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(150));
            let mut seen = Vec::new();
            probe.in_flight(0, |t, p| seen.push((t, p.id.to_string())));
            sleeper.join().unwrap();
            probe.untrace(me);
            assert!(
                seen.iter()
                    .any(|(t, id)| *t == tid && id == "clock_nanosleep"),
                "{kept:?}: thread {tid} not in flight in {seen:?}"
            );
            // A hash entry goes with its thread (task storage by itself).
            assert!(
                probe.threads.get(&tid, 0).is_err(),
                "{kept:?}: thread {tid} left in THREADS"
            );
        }
    }

    #[test]
    fn hashes_allocate_as_keys_arrive_from_6_1() {
        for release in ["6.1.0-28-amd64", "6.18.44-fc-v669", "7.0", "6.1"] {
            assert!(allocates_safely(release), "{release}");
        }
        for release in [
            "6.0.19",
            "5.15.0-91-generic",
            "5.10.0-26-arm64",
            "4.19",
            "",
            "x",
        ] {
            assert!(!allocates_safely(release), "{release}");
        }
    }
}
