// SPDX-License-Identifier: GPL-2.0
/* agent-linux's eBPF backend, in the kernel: the statistics of the traced
 * processes' syscalls, aggregated here per CPU, merged by the agent into
 * the same agent_core::Collector the ptrace backend feeds (src/ebpf/).
 *
 * - TRACED holds the traced processes' tgids: the agent puts the root in,
 *   sched_process_fork adds the children of traced processes (threads need
 *   nothing: the filter is on the tgid), sched_process_exit removes a
 *   process when its last thread ends. Where the threads are in task
 *   storage, a thread keeps the slot it read from TRACED and the traced
 *   set's epoch (TRACED_EPOCH, bumped by the agent after each change it
 *   makes) it read it at, and sys_enter skips the lookup while the epoch
 *   holds: on `dd bs=64` (ebpf_stages --cost, 8 interleaved rounds,
 *   2026-11-29, load ~5) a traced sys_enter's mean went from 470 to 415
 *   ns (median; lower in each round, by 20-113; its unchanged sys_exit
 *   266 to 285), but an untraced task's from 146 to 208 ns (the storage
 *   probe; its sys_exit 139 to 110), 160 once the probe is skipped for a
 *   task with no storage. docs/edge-agent.md has the runs.
 * - Per-run slots (`watch`: several runs at once, one program): TRACED's
 *   value is the run's slot (0 to MAX_SLOTS - 1; `run` and `attach` use
 *   0), a child inherits its parent's. Every aggregate key, CONTROL, FIRST,
 *   the thread entries and the ring's records carry the slot, so each run
 *   is read, cut into windows and cleared apart from the others.
 * - Per thread, the call in flight (its id, entry time, the fd argument's
 *   kind resolved at entry as ptrace does: after close the fd is gone, the
 *   size argument) and the previous completed call (for consecutive calls
 *   and transitions): in the task's own storage (THREAD_STORE, a pointer
 *   away from the task) where the loader says so (`task_storage`), else in
 *   THREADS, a hash keyed by tid. Only the thread itself writes its
 *   state, so neither needs a lock.
 * - sys_exit folds the completed call into per-CPU maps (no other
 *   writer, no atomics): per (syscall id, fd kind) what
 *   agent_core::KeyStats holds, in AGG_DENSE, an array with a block per
 *   CPU indexed by the two, for run slot 0's canonical ids, else in AGG,
 *   a hash; ERRNOS per (id, fd kind, errno) the failures, TRANS per (previous id, id) count and gap sum. Each key
 *   carries a generation bit: calls ending before CONTROL's cut go to
 *   its generation, later ones to the other, so the agent reads and
 *   clears one window while the kernel fills the next.
 * - The ring buffer carries what is rare: a new task, a task's end, and a
 *   call in flight across a cut (for the window's in-flight list).
 *   Records lost to a full ring, and calls (or their parts) the maps
 *   could not hold, are counted per CPU and per run slot in LOST.
 * - PEERS (socket peers, see the block below) does for TCP and UDP sockets
 *   what agent_core::Collector's per-peer table does: per (remote end,
 *   syscall id) calls, errors, time, bytes and the last call.
 * - Raw tracepoints: attached by name (no tracefs needed) and cheaper than
 *   the classic ones. Their `regs` is the user register set; the loader
 *   gives the offsets of the six argument registers of the host's native
 *   and compat ABIs (ARG_OFF), so one object serves x86_64 and aarch64.
 *
 * The layouts and values shared with the agent are in syscalls.h. Rebuild
 * with scripts/build-bpf (the objects, their hash and the Rust side of
 * syscalls.h are committed).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "syscalls.h"

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFIFO 0010000
#define S_IFREG 0100000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFBLK 0060000
#define S_IFLNK 0120000

#define SIGKILL 9
#define E2BIG 7

#define ANON_INODE_FS_MAGIC 0x09041934
#define PIDFS_MAGIC 0x50494446
#define NSFS_MAGIC 0x6e736673

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17

/* The cost breakdown (scripts/bench-tracer builds each; the backend is the
 * default): STAGE 0 empty sys_enter/sys_exit programs; 1 + the traced-set
 * filter; 2 + the per-thread call state (id, entry time); 3 + the fd kind
 * and the size argument; 4 + the aggregation (everything). */
#ifndef STAGE
#define STAGE 4
#endif

/* uapi's map flag: entries are allocated when a key is first added, not
 * all at creation. Preallocated, the per-CPU hashes below take every key
 * times every CPU (AGG alone 4 096 x 312 bytes x 64 = 82 MB on 64 CPUs)
 * and their creation slows the agent's start; a window adds each key
 * once, so the allocation is off the per-call path. Only from 6.1 may a
 * tracing program use such a map safely (the BPF memory allocator):
 * older kernels warn with a backtrace in the kernel log, may deadlock,
 * and refuse it under PREEMPT_RT. So scripts/build-bpf also builds the
 * object with -DPREALLOC_MAPS, which the loader takes on those. */
#define BPF_F_NO_PREALLOC 1
#ifdef PREALLOC_MAPS
#define HASH_FLAGS 0
#else
#define HASH_FLAGS BPF_F_NO_PREALLOC
#endif

/* Per-CPU map entries: two generations of the keys a window uses. */
#define AGG_KEYS 4096
#define ERRNO_KEYS 4096
#define TRANS_KEYS 8192

/* ---- Socket peers (issue 21, parity with ptrace's per-peer statistics).
 * The remote end of the fd argument's socket when it is TCP or UDP, read
 * at entry as ptrace reads it (after a close the socket is gone): from
 * the socket itself (sk->__sk_common: daddr, dport; v6_daddr for IPv6),
 * or, for connect, from the address the call names (its errors are that
 * address's, as under ptrace). A socket with no remote end (unconnected
 * UDP, listening TCP: port 0) has none. Unix sockets have none under
 * ptrace either. The agent maps an IPv4-mapped IPv6 address to IPv4 and
 * drops the unspecified address (fd/sockaddr.rs remote_end), as ptrace
 * does. Its types are in syscalls.h. */
#define PEER_KEYS 4096

/* Set by the loader before load. */
const volatile __u32 compat_probe = COMPAT_NONE;
/* Byte offsets in struct pt_regs of the six argument registers: native
 * ABI, then compat ABI. */
const volatile __u32 arg_off[2][6] = {};
/* agent_core::SyscallId of connect (its peer is the address it names). */
const volatile __u16 connect_id = ID_NONE;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8); /* the run's slot */
} TRACED SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread);
} THREADS SEC(".maps");

/* Per-thread state in task-local storage (issue 37): found from the task
 * itself, no hash of tids, freed with the task (a reused tid finds
 * nothing). The loader sets `task_storage` when the kernel has it and the
 * agent can read it back (its in-flight reads at a window cut look a
 * thread up by a thread pidfd, PIDFD_THREAD, Linux 6.9); else, or when
 * told to (EDGE_AGENT_EBPF_THREADS=hash), the program keeps THREADS. The
 * object for kernels before 6.1 has no such map (task storage came in
 * 5.11) and always keeps THREADS. */
#ifndef PREALLOC_MAPS
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread);
} THREAD_STORE SEC(".maps");
#endif
const volatile __u8 task_storage = 0;
/* Whether this program keeps the threads in THREAD_STORE (never in the
 * object without it, whatever the loader set). */
#ifdef PREALLOC_MAPS
#define IN_TASK_STORAGE 0
#else
#define IN_TASK_STORAGE task_storage
#endif

/* The traced set's epoch (issue 37 item 1, the traced-set test on the
 * task): a count the agent bumps after each change it makes to TRACED
 * (Probe::trace, join, untrace, untrace_slot in src/ebpf/loader.rs: the
 * entry changed first, the count after). A thread in task storage keeps
 * the count at which it last read its process's slot from TRACED
 * (`struct thread`'s traced_epoch); while the count is unchanged, the
 * process is still traced as that slot, and sys_enter takes it from the
 * thread's storage without the TRACED lookup.
 *
 * The program's own changes to TRACED need no bump:
 * - on_fork adds a new process: its threads are new tasks, and a new
 *   task's storage starts empty (copy_process clears bpf_storage), so
 *   their first call looks TRACED up. (A thread added to a traced process
 *   needs no entry at all.)
 * - on_exit removes a process at its last thread's end (signal->live is
 *   0: every thread is in do_exit), so no thread of it makes another
 *   call; a later process with the same pid is made of new tasks.
 * An exec keeps the task (by a thread other than the leader: it takes the
 * leader's tid, its storage stays with it) and the tgid, so its entry in
 * TRACED and its slot hold.
 *
 * A count of 2^32 changes would bring a stale entry's count back: not
 * within a run of the agent. On the hash (THREADS, keyed by tid: an
 * entry may be an earlier life's of the tid) and in the object before
 * 6.1 every call looks TRACED up as before, and the count is unused. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} TRACED_EPOCH SEC(".maps");

/* Per ABI and number (abi * MAX_NR + nr): read-only data the loader
 * fills before load, one write with the object rather than 2 048 map
 * updates at every start. */
const volatile struct sysinfo SYSINFO[2 * MAX_NR] = {};

/* Syscall numbers at or above MAX_NR.
 * The few ABIs with numbers outside SYSINFO's range: AArch32's private
 * calls (0x0f0001..0x0f0006: breakpoint, cacheflush, usr26, usr32,
 * set_tls, get_tls) made by 32-bit ARM processes under an aarch64
 * kernel; every static 32-bit ARM binary calls set_tls at start. Key:
 * abi << 32 | nr; filled by the loader from agent-core's tables (every id
 * whose raw number in that ABI is at or above MAX_NR). Looked up only for
 * such numbers, so the common path is unchanged. */
#define HIGH_NRS 64
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HIGH_NRS);
	__type(key, __u64);
	__type(value, struct sysinfo);
} SYSINFO_HIGH SEC(".maps");

/* The aggregates of run slot 0 (`run`, `attach`, the first run of a
 * `watch`) for the canonical ids below `dense_ids`, indexed densely: a
 * block of `dense_block` entries per (CPU, generation), in which an id's
 * entries start at `dense_at[id].base`, one per fd kind for the ids that
 * take an fd and one for the others (their kind is always FD_NONE):
 * (cpu * 2 + generation) * dense_block + base + fd kind. A block of
 * every id × FD_KINDS would be 3.8 times larger (3 904 entries, not
 * 1 020), and the array is allocated and zeroed whole at every start.
 * An array lookup is an
 * indexed load (the verifier inlines it), where a hash lookup hashes the
 * key and walks a bucket. The loader sets `dense_ids` (agent_core's ids,
 * or 0: the hash alone, when asked or when the array would take too much
 * memory for the machine's CPUs), `dense_at`, `dense_block` and
 * `dense_cpus` (the possible CPUs) and sizes the array to match; every
 * other key (other slots, ids carrying an unassigned number, a kind the
 * id has no entry for, a CPU numbered beyond the count) goes to AGG.
 *
 * A plain ARRAY with a block per CPU, not a PERCPU_ARRAY: a per-CPU array
 * takes its memory from the kernel's per-CPU allocator, whose
 * populated free pages are what every atomic per-CPU allocation lives on,
 * among them the values of new keys in the per-CPU hashes below (the BPF
 * memory allocator refills them in irq work with GFP_NOWAIT); when those
 * run dry new keys fail with ENOMEM and their calls are lost whole
 * (docs/edge-agent.md). An ARRAY is vmalloc'ed and leaves that pool
 * alone. Only this CPU's block is written, by one program at a time (raw
 * tracepoints run with migration disabled), so
 * no atomics; the blocks are far apart, so no false sharing. */
const volatile __u32 dense_ids = 0;
const volatile __u32 dense_cpus = 0;
const volatile __u32 dense_block = 0;
const volatile struct dense_at dense_at[DENSE_IDS] = {};
/* The object for kernels before 6.1 keeps every key in AGG and has no
 * array (the loader sees the map missing): it inlines fold_call (below),
 * so the dense path would double what the verifier walks at every
 * start. */
#ifndef PREALLOC_MAPS
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, __u32);
	__type(value, struct agg);
} AGG_DENSE SEC(".maps");

/* Per generation: a byte per (id, fd kind) of AGG_DENSE set on the
 * entry's first call on any CPU, so the agent reads only the entries in
 * use (and clears the generation it takes, both maps). */
struct dense_used {
	__u8 used[DENSE_IDS * FD_KINDS];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct dense_used);
} USED SEC(".maps");
#endif

/* Key: id << 16 | fd_kind << 8 | slot << 1 | generation. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, HASH_FLAGS);
	__uint(max_entries, AGG_KEYS);
	__type(key, __u32);
	__type(value, struct agg);
} AGG SEC(".maps");

/* Key: id << 32 | fd_kind << 24 | slot << 17 | generation << 16 | errno. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, HASH_FLAGS);
	__uint(max_entries, ERRNO_KEYS);
	__type(key, __u64);
	__type(value, __u64);
} ERRNOS SEC(".maps");

/* Key: previous id << 32 | id << 16 | slot << 1 | generation. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, HASH_FLAGS);
	__uint(max_entries, TRANS_KEYS);
	__type(key, __u64);
	__type(value, struct trans);
} TRANS SEC(".maps");

/* Socket peers: per (peer, id, slot << 1 | generation), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, HASH_FLAGS);
	__uint(max_entries, PEER_KEYS);
	__type(key, struct peer_key);
	__type(value, struct peer_stats);
} PEERS SEC(".maps");

/* Per slot: the next cut (monotonic ns, even) | the generation before
 * it; set by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} CONTROL SEC(".maps");

/* Per slot: when this CPU first saw a traced thread's first call
 * (monotonic ns; 0: never): the earliest over CPUs is the run's first
 * call. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} FIRST SEC(".maps");

/* An all-zero struct agg, the initial value of a new AGG key (too big
 * for the stack beside the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg);
} ZERO SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} EVENTS SEC(".maps");

/* Per run slot (one of LOST_* times MAX_SLOTS + slot): what the kernel
 * could not keep (syscalls.h says each; each run's summary says its
 * own). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_KINDS * MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} LOST SEC(".maps");

/* The traced process's slot, or 0 (null) when it is not traced. */
static __always_inline __u8 *traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&TRACED, &tgid);
}

/* The current thread's state (`task`: bpf_get_current_task_btf(), `tid`
 * its id), created from `fresh` when `fresh` is given and it has none. */
static __always_inline struct thread *thread_state(struct task_struct *task, __u32 tid,
						    struct thread *fresh)
{
#ifndef PREALLOC_MAPS
	if (IN_TASK_STORAGE)
		return bpf_task_storage_get(&THREAD_STORE, task, fresh,
					    fresh ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
#endif
	struct thread *t = bpf_map_lookup_elem(&THREADS, &tid);
	if (t || !fresh)
		return t;
	bpf_map_update_elem(&THREADS, &tid, fresh, BPF_ANY);
	return bpf_map_lookup_elem(&THREADS, &tid);
}

/* `what`: one of LOST_*; `run_slot`: the run it happened to. */
static __always_inline void count_lost(__u32 what, __u32 run_slot)
{
	__u32 index = what * MAX_SLOTS + (run_slot & (MAX_SLOTS - 1));
	__u64 *lost = bpf_map_lookup_elem(&LOST, &index);
	if (lost)
		*lost += 1; /* per CPU: no other writer */
}

/* `task`: from bpf_get_current_task_btf() (plain loads, see fd_kind). */
static __always_inline int is_compat(struct task_struct *task)
{
	if (compat_probe == COMPAT_X86_TS_COMPAT) {
		if (!bpf_core_field_exists(task->thread_info.status))
			return 0;
		return (task->thread_info.status & 0x2) != 0;
	}
	if (compat_probe == COMPAT_ARM64_TIF_32BIT)
		return (task->thread_info.flags >> 22) & 1;
	return 0;
}

/* The remote end of a TCP or UDP socket `sk` of `family` into `p`;
 * nothing when it has none (port 0). */
static __always_inline void socket_peer(struct sock *sk, __u16 family, __u8 transport,
					struct peer *p)
{
	__u16 port = BPF_CORE_READ(sk, __sk_common.skc_dport);
	if (!port)
		return;
	if (family == AF_INET) {
		__u32 daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(p->addr, &daddr, 4);
	} else {
		/* Kernels without IPv6 have no v6_daddr (and no AF_INET6 sockets). */
		if (!bpf_core_field_exists(sk->__sk_common.skc_v6_daddr))
			return;
		BPF_CORE_READ_INTO(&p->addr, sk, __sk_common.skc_v6_daddr);
	}
	p->port = __builtin_bswap16(port);
	p->family = family;
	p->transport = transport;
}

/* `peer`: filled with a TCP or UDP socket's remote end (see socket_peer)
 * when `want_peer`. */
static __always_inline __u8 socket_kind(struct file *file, struct peer *peer, int want_peer)
{
	struct socket *sock = BPF_CORE_READ(file, private_data);
	if (!sock)
		return FD_SOCKET;
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return FD_SOCKET;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_UNIX)
		return FD_UNIX;
	if (family != AF_INET && family != AF_INET6)
		return FD_SOCKET;
	short type = BPF_CORE_READ(sock, type);
	__u16 protocol = BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	__u8 kind = FD_SOCKET;
	if (type == SOCK_STREAM && protocol == IPPROTO_TCP)
		kind = FD_TCP;
	else if (type == SOCK_DGRAM && protocol == IPPROTO_UDP)
		kind = FD_UDP;
	if (want_peer && kind != FD_SOCKET)
		socket_peer(sk, family, kind, peer);
	return kind;
}

/* The file behind the current task's fd `fd` in its file table `files`
 * (task->files of bpf_get_current_task_btf()): the verifier knows its
 * type, so the chain is read with plain loads (checked, fault-safe)
 * rather than a helper call per field. Only the variable index into the
 * fd array needs one. 0: no file. */
static __always_inline struct file *fd_file(struct files_struct *files, __s64 fd)
{
	if (fd < 0)
		return 0;
	if (!files)
		return 0;
	struct fdtable *fdt = files->fdt;
	if (!fdt)
		return 0;
	if ((__u64)fd >= fdt->max_fds)
		return 0;
	struct file **fds = fdt->fd;
	struct file *file = 0;
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	return file;
}

/* The kind of `file` (not 0), and the peer of a TCP or UDP socket when
 * `want_peer`. */
static __always_inline __u8 file_kind(struct file *file, struct peer *peer, int want_peer)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (!inode)
		return FD_NONE;
	umode_t mode = BPF_CORE_READ(inode, i_mode);
	switch (mode & S_IFMT) {
	case S_IFSOCK:
		return socket_kind(file, peer, want_peer);
	case S_IFIFO:
		return FD_PIPE;
	case 0:
		return FD_OTHER;
	}
	/* Anonymous inodes (eventfd, epoll, timerfd, ...), pidfds and
	 * namespace files: what /proc shows as `anon_inode:[...]`, not a
	 * path. */
	unsigned long magic = BPF_CORE_READ(inode, i_sb, s_magic);
	if (magic == ANON_INODE_FS_MAGIC || magic == PIDFS_MAGIC || magic == NSFS_MAGIC)
		return FD_OTHER;
	return FD_FILE;
}

/* ---- The fd-kind memo (issue 37 item 1): each thread remembers the kind
 * of the files it met lately, so a call on the same fd skips the inode,
 * mode, superblock and socket reads. Switched at load (`fd_memo`, set by
 * the loader: EDGE_AGENT_EBPF_FD_MEMO).
 *
 * What is remembered is the kind of a struct file, which never changes
 * over the file's life (its inode's S_IFMT, the superblock, a socket's
 * type and protocol are fixed when it is made). What can go wrong is
 * which file an fd number names, and a struct file freed and its memory
 * reused for another file (files come from a slab: the next file opened
 * often lands at the address of the last one closed). So an entry holds
 * the file's address and is used only when
 * - the file the fd names now, read from the table as before (three
 *   plain loads and one helper read), is at that address: an fd changed
 *   by any means, seen or not, names another file, unless the new file
 *   sits at the old one's address; and
 * - no call that can take a file out of a table (close, close_range,
 *   dup2/dup3 onto a number, exec closing O_CLOEXEC fds, io_uring_enter's
 *   IORING_OP_CLOSE, ioctl: binder's deferred close, a seccomp
 *   supervisor's SECCOMP_IOCTL_NOTIF_ADDFD onto a number; syscall
 *   numbers with no name) has returned in any traced process since the
 *   entry was made: each such return bumps FD_EPOCH's count, and an
 *   entry of an older count is not used. This catches the reuse of an
 *   address: for the old file to be freed it must first leave the table
 *   the entry was read from. The count is bumped at the call's exit,
 *   after the change, whatever the result (a failed close has removed
 *   the fd already; a failed dup2 changed nothing: one miss): an entry
 *   made meanwhile by another thread from the file being removed carries
 *   the older count. A count shared by all traced processes covers
 *   threads and CLONE_FILES processes sharing one table, and a seccomp
 *   supervisor changing another process's table, without knowing who
 *   shares what; the price is a miss in every thread after each such
 *   call anywhere.
 * Calls that install files (open, socket, accept, dup, fcntl F_DUPFD,
 * pidfd_getfd, recvmsg's SCM_RIGHTS, io_uring's installs) take a free
 * number: a number whose file left the table, which bumped the count, or
 * one never remembered. Entries are per thread (in its state: no lookup
 * of their own): a new thread or process starts with none, and a
 * THREADS entry left by an earlier life of a tid (its process untraced
 * before the thread ended) is cleared, told by the task's start_time. A
 * traced thread that gets no state cannot bump the count at its call's
 * exit, so it turns the memo off for good (FD_EPOCH's `off`).
 * Not caught: a file taken out of a table by something no traced thread's
 * call returns from (an SQPOLL io_uring thread's IORING_OP_CLOSE, an
 * untraced process sharing the table, a close already under way when
 * tracing began) and a new file at the same address on the same fd
 * after it.
 * Sockets: a TCP or UDP socket's peer changes (connect, a UDP connect
 * or AF_UNSPEC disconnect, io_uring's connect, the kernel resetting a
 * connection), so only its kind is remembered and the peer read each
 * call; plain FD_SOCKET sockets are not remembered. */
const volatile __u8 fd_memo = 0;

struct fd_epoch {
	__u64 count; /* returns of calls that change fd tables */
	__u64 off;   /* not 0: the memo is not used any more */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fd_epoch);
} FD_EPOCH SEC(".maps");

static __always_inline struct fd_epoch *fd_epoch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&FD_EPOCH, &zero);
}

/* A TCP or UDP socket's peer, for a file whose kind came from the memo. */
static __always_inline void socket_file_peer(struct file *file, __u8 kind, struct peer *peer)
{
	struct socket *sock = BPF_CORE_READ(file, private_data);
	if (!sock)
		return;
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET || family == AF_INET6)
		socket_peer(sk, family, kind, peer);
}

/* FD_EPOCH's count now, ~0 when the memo is off (every call misses and
 * nothing is stored). Read BEFORE the file is read from the table: an
 * entry must carry a count from before the read, or a close of that fd
 * (and its bump) between the read and a later count read would leave an
 * entry of the new count for a file already gone, whose address the next
 * file opened on that number may take. The helper call of the table read
 * that follows keeps the compiler from moving this load after it. */
static __always_inline __u64 memo_count(void)
{
	struct fd_epoch *ep = fd_epoch();
	if (!ep)
		return ~0ULL; /* never: an array's one entry */
	return ep->off ? ~0ULL : *(volatile __u64 *)&ep->count;
}

/* The kind of `file` (not 0), from thread `t`'s memo when it holds it
 * (`fd`: the number it was found at; `owner`: the task's start_time;
 * `count`: memo_count() from before `file` was read). The peer is read
 * in one place for both ways: the verifier walks the socket reads once,
 * not once per way (half the instructions it checks for this program). */
static __always_inline __u8 memo_kind(struct thread *t, __u64 owner, __s64 fd, struct file *file,
				      __u64 count, struct peer *peer)
{
	if (t->memo_owner != owner) {
		for (int i = 0; i < FD_MEMOS; i++)
			t->memo[i].file_kind = 0;
		t->memo_owner = owner;
	}
	struct fd_memo *m = &t->memo[fd & (FD_MEMOS - 1)];
	__u64 at = (__u64)file;
	__u8 kind;
	if ((m->file_kind & ~7ULL) == at && m->epoch == count) {
		kind = m->file_kind & 7;
	} else {
		kind = file_kind(file, peer, 0);
		if (kind != FD_NONE && kind != FD_SOCKET && !(at & 7) && count != ~0ULL) {
			m->file_kind = at | kind;
			m->epoch = count;
		}
	}
	if (kind == FD_TCP || kind == FD_UDP)
		socket_file_peer(file, kind, peer);
	return kind;
}

/* After a call with SYSINFO_CHANGES_FDS: every entry made before is old. */
static __always_inline void fds_changed(void)
{
	struct fd_epoch *ep = fd_epoch();
	if (ep)
		__sync_fetch_and_add(&ep->count, 1);
}

/* A traced thread with no state: see the memo's comment. */
static __always_inline void memo_off(void)
{
	struct fd_epoch *ep = fd_epoch();
	if (ep)
		ep->off = 1;
}
/* ---- end of the fd-kind memo */

static __always_inline __u64 read_arg(void *regs, __u32 abi, __u32 i)
{
	__u64 v = 0;
	__u32 off = arg_off[abi][i];
	if (off > 512)
		return 0;
	bpf_probe_read_kernel(&v, sizeof(v), (char *)regs + off);
	return v;
}

/* The peer connect's address names (`ptr`, `len` bytes, in the program's
 * memory) for a socket of `transport`, as fd/sockaddr.rs read_peer reads
 * it: family and port, then the IPv4 address or (with room for it) the
 * IPv6 one; nothing for another family or an unreadable address. */
static __always_inline void named_peer(__u64 ptr, __u64 len, __u8 transport, struct peer *p)
{
	struct peer none = {};
	*p = none;
	__u8 head[8];
	if (!ptr || len < 8 || bpf_probe_read_user(head, sizeof(head), (void *)ptr))
		return;
	__u16 family; /* sa_family: host order */
	__builtin_memcpy(&family, head, 2);
	if (family == AF_INET) {
		__builtin_memcpy(p->addr, &head[4], 4);
	} else if (family == AF_INET6 && len >= 24) {
		if (bpf_probe_read_user(p->addr, 16, (void *)(ptr + 8)))
			return;
	} else {
		return;
	}
	p->port = head[2] << 8 | head[3];
	if (!p->port)
		return;
	p->family = family;
	p->transport = transport;
}
/* ---- end of socket peers' readers */

/* TRACED_EPOCH's count now. */
static __always_inline __u32 traced_epoch(void)
{
	__u32 zero = 0;
	__u32 *epoch = bpf_map_lookup_elem(&TRACED_EPOCH, &zero);
	return epoch ? *(volatile __u32 *)epoch : 0;
}

/* sys_enter(struct pt_regs *regs, long id) */
SEC("raw_tracepoint/sys_enter")
int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	if (STAGE < 1)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread *t = 0;
	__u32 epoch = 0;
	/* The traced-set test on the task (TRACED_EPOCH): a thread whose
	 * storage holds the current count is traced as its slot. The count is
	 * read before the storage and before TRACED: the agent changes TRACED
	 * first and the count after, so a slot read from TRACED after the
	 * count was read is at least as new as that count, and a change the
	 * lookup missed has a bump still to come, which the next call sees.
	 * A task with no local storage at all (task->bpf_storage: every
	 * task never traced, unless another BPF tool keeps storage on it)
	 * skips the helper: the call's ~50 ns cost an untraced task more
	 * than the lookup it saved a traced one (docs/edge-agent.md). */
	if (IN_TASK_STORAGE && STAGE >= 2 && task->bpf_storage) {
		epoch = traced_epoch();
		t = thread_state(task, tid, 0);
	}
	/* Else (no storage, or storage of an older count): the lookup. */
	if (!t || t->traced_epoch != epoch) {
		__u8 *run = traced(pid_tgid >> 32);
		if (!run)
			return 0;
		if (STAGE < 2)
			return 0;
		/* The hash's lookup, as before the count (task storage: probed
		 * above). */
		if (!IN_TASK_STORAGE)
			t = thread_state(task, tid, 0);
		if (!t) {
			struct thread fresh = {};
			fresh.last_id = ID_NONE;
			fresh.slot = *run;
			fresh.traced_epoch = epoch;
			t = thread_state(task, tid, &fresh);
			if (!t) {
				if (STAGE >= 3 && fd_memo)
					memo_off();
				return 0;
			}
			__u32 run_slot = *run;
			__u64 *first = bpf_map_lookup_elem(&FIRST, &run_slot);
			if (first && !*first)
				*first = bpf_ktime_get_ns();
		}
		/* The process's slot now: an entry left by an earlier life of
		 * this tid (a thread killed mid-call; the hash), or by an
		 * earlier run of this process (untraced, traced again), must
		 * not count for an older run. */
		t->slot = *run;
		t->traced_epoch = epoch;
	}
	/* Loaded here, once, on the one path every call takes: each load of
	 * a pointer field through the trusted task makes the verifier search
	 * the kernel's BTF by name for the field's trust (linear on this
	 * kernel), once per path it walks. In fd_kind, after the branches
	 * below, that was most of the start's verifier time. */
	struct files_struct *files = task->files;
	barrier_var(files);
	__u32 nr = (__u32)ctx->args[1];
	__u32 abi = is_compat(task) ? 1 : 0;
	struct sysinfo *info = 0;
	if (nr < MAX_NR) {
		__u32 key = abi * MAX_NR + nr;
		if (key < 2 * MAX_NR)
			info = (struct sysinfo *)&SYSINFO[key];
	} else {
		/* AArch32's private calls (SYSINFO_HIGH). */
		__u64 key = (__u64)abi << 32 | nr;
		info = bpf_map_lookup_elem(&SYSINFO_HIGH, &key);
	}
	t->id = info ? info->id : ID_UNKNOWN;
	t->compat = abi;
	t->fd_kind = FD_NONE;
	t->size = 0;
	t->peer.family = 0;
	/* A number with no entry at all may be anything (the memo's comment). */
	t->changes_fds = info ? info->flags & SYSINFO_CHANGES_FDS : 1;
	if (STAGE >= 3 && info) {
		void *regs = (void *)ctx->args[0];
		__u32 fd_idx = (__u32)info->fd_arg - 1;
		if (fd_idx < 6) {
			__u64 raw = read_arg(regs, abi, fd_idx);
			__s64 fd = abi ? (__s64)(__s32)raw : (__s64)raw;
			struct peer peer = {};
			__u64 count = fd_memo ? memo_count() : ~0ULL;
			struct file *file = fd_file(files, fd);
			if (!file)
				t->fd_kind = FD_NONE;
			else if (fd_memo)
				t->fd_kind = memo_kind(t, task->start_time, fd, file, count, &peer);
			else
				t->fd_kind = file_kind(file, &peer, 1);
			/* Socket peers: connect's is the address it names. */
			if (t->id == connect_id && (t->fd_kind == FD_TCP || t->fd_kind == FD_UDP)) {
				__u64 ptr = read_arg(regs, abi, 1);
				if (abi)
					ptr = (__u32)ptr;
				__u64 len = (__u32)read_arg(regs, abi, 2);
				named_peer(ptr, len, t->fd_kind, &peer);
			}
			if (peer.family)
				t->peer = peer;
		}
		__u32 size_idx = (__u32)info->size_arg - 1;
		if (size_idx < 6)
			t->size = read_arg(regs, abi, size_idx);
	}
	t->entry_ns = bpf_ktime_get_ns();
	return 0;
}

/* The statistics below are computed without a branch: the verifier walks
 * each side of every branch as a path of its own, and the branches of
 * the bucket and the carries multiplied into some 7 500 of the 11 000
 * instructions it checked for sys_exit (about 10 ms of every start). */

/* The carry out of the 64-bit sum `s` = `x` + `y`: 0 or 1 (the top bit
 * of the majority of x, y and not s). The barrier keeps clang from seeing
 * a comparison in it and branching again. */
static __always_inline __u64 carry_of(__u64 x, __u64 y, __u64 s)
{
	__u64 top = (x & y) | ((x | y) & ~s);
	barrier_var(top);
	return top >> 63;
}

/* 1 when `x` is not 0, else 0 (the top bit of x | -x; the barrier as in
 * carry_of). */
static __always_inline __u64 nonzero(__u64 x)
{
	__u64 top = x | -x;
	barrier_var(top);
	return top >> 63;
}

/* 64 x 64 -> 128-bit square, added to (lo, hi). */
static __always_inline void add_square(struct agg *a, __u64 d)
{
	__u64 lo32 = d & 0xffffffff, hi32 = d >> 32;
	__u64 ll = lo32 * lo32, lh = lo32 * hi32, hh = hi32 * hi32;
	/* d^2 = hh << 64 + 2 lh << 32 + ll */
	__u64 mid_lo = lh << 33;
	__u64 mid_hi = lh >> 31;
	__u64 lo = ll + mid_lo;
	__u64 hi = hh + mid_hi + carry_of(ll, mid_lo, lo);
	__u64 old_lo = a->sum_sq_lo;
	__u64 sum_lo = old_lo + lo;
	a->sum_sq_hi += hi + carry_of(old_lo, lo, sum_lo);
	a->sum_sq_lo = sum_lo;
}

/* agent_core::histogram::bucket_of: the bit length of the duration in
 * microseconds, capped at BUCKETS - 1 (by the caller's check). A binary
 * search of the highest set bit, each step a shift by 0 or 2^k. */
static __always_inline __u64 bucket_of(__u64 ns)
{
	__u64 us = ns / 1000;
	__u64 b = 0, s;
	s = nonzero(us >> 32) << 5;
	us >>= s;
	b += s;
	s = nonzero(us >> 16) << 4;
	us >>= s;
	b += s;
	s = nonzero(us >> 8) << 3;
	us >>= s;
	b += s;
	s = nonzero(us >> 4) << 2;
	us >>= s;
	b += s;
	s = nonzero(us >> 2) << 1;
	us >>= s;
	b += s;
	s = nonzero(us >> 1);
	us >>= s;
	b += s;
	return b + us; /* us is 0 or 1 now */
}

/* The per-CPU value of `key` in `map`, created from `init` when new
 * (BPF_NOEXIST: another CPU creating it at the same moment must not wipe
 * what this one adds); no room is counted for run `run_slot`: as a whole
 * call lost when `whole` (AGG), by why, else as a part of one. A hash
 * refuses a new key when full (E2BIG) but also when the kernel's
 * per-CPU memory allocator has nothing ready (ENOMEM: its refill is
 * asynchronous, so a burst of new keys in any map can outrun it). */
static __always_inline void *slot(void *map, void *key, void *init, __u32 run_slot, int whole)
{
	void *v = bpf_map_lookup_elem(map, key);
	if (v)
		return v;
	long err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v) {
		__u32 what = LOST_PARTS;
		if (whole)
			what = err == -E2BIG ? LOST_CALLS_FULL : LOST_CALLS_REFUSED;
		count_lost(what, run_slot);
	}
	return v;
}

static __always_inline void send_crossed(__u32 tid, __u32 tgid, struct thread *t, __u64 cut)
{
	struct event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING, t->slot);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = KIND_CROSSED;
	e->tid = tid;
	e->tgid = tgid;
	e->nr = t->id;
	e->at_ns = t->entry_ns;
	e->cut_ns = cut;
	e->fd_kind = t->fd_kind;
	e->slot = t->slot;
	if (t->peer.family)
		e->peer = t->peer;
	bpf_ringbuf_submit(e, 0);
}

/* Socket peers: folds the completed call into PEERS. */
static __always_inline void count_peer(struct thread *t, __u32 id, __u32 gen, __u64 now, __u64 d,
				       __s64 ret)
{
	struct peer_key k;
	__builtin_memset(&k, 0, sizeof(k));
	k.peer = t->peer;
	k.id = id;
	k.gen = gen;
	struct peer_stats zero = {};
	struct peer_stats *p = slot(&PEERS, &k, &zero, gen >> 1, 0);
	if (!p)
		return;
	p->calls += 1;
	p->total_ns += d;
	if (ret < 0 && ret >= -4095)
		p->errors += 1;
	else if (ret > 0)
		p->ok_result_sum += ret;
	if (now >= p->last_exit_ns) {
		p->last_exit_ns = now;
		p->last_ret = ret;
	}
}

#define SIGNAL_GROUP_EXIT 0x00000004
#define ERESTARTSYS 512
#define ERESTART_RESTARTBLOCK 516
#define EINTR 4

/* Whether a call that returned `ret` while SIGKILL is pending completed as
 * ptrace would have seen it. A fatal signal other than SIGKILL sent to an
 * untraced process is queued as SIGKILL to every thread at once
 * (complete_signal's shortcut, group_exit_code = the signal); a traced one
 * does not take the shortcut: its thread ends the call, ptrace sees the
 * exit stop, then the signal kills it. So `strace -f -c` and the ptrace
 * backend count:
 * - a call that was not interrupted by it: the kill or tgkill a process
 *   sends itself (abort, raise, `kill -USR1 $$`), in any thread;
 * - in a process with one live thread, also the call the signal
 *   interrupted (a read ended with -ERESTARTSYS by SIGTERM): that thread
 *   is the one ptrace sees take the signal.
 * With more live threads, the interrupted calls stay dropped: the kernel
 * does not say which thread ptrace would have picked, and the others end
 * by SIGKILL with no exit stop (docs/edge-agent.md, known differences). A
 * real SIGKILL drops every call, as under ptrace.
 *
 * The task's signal_struct is read with bpf_probe_read_kernel, not by a
 * plain load through the trusted task pointer: each plain load of a
 * pointer field through it makes the verifier search the kernel's BTF by
 * name (linearly, on this kernel) for the field's trust at every start,
 * and this path runs only while a fatal signal is pending. */
static __always_inline int completed_before_fatal_signal(struct task_struct *task, __s64 ret)
{
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	if (!sig || !(BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT))
		return 0;
	int signo = BPF_CORE_READ(sig, group_exit_code) & 0x7f;
	if (!signo || signo == SIGKILL)
		return 0;
	int interrupted = ret == -EINTR || (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK);
	return !interrupted || BPF_CORE_READ(sig, live.counter) == 1;
}

/* Folds the call `t` completed at `now` with `ret` into its aggregate
 * `a` (from AGG_DENSE or AGG), generation `gen` (slot << 1 | generation):
 * the statistics, the transition, the errno, the peer. A function of its
 * own, verified once for both maps: inlined, the verifier walks all of it
 * once per map (the two pointers' states never merge), about 4 800
 * instructions more to check at every start. The object for kernels
 * before 6.1 inlines it (a global function's pointer arguments need
 * 5.12). */
#ifdef PREALLOC_MAPS
static __always_inline
#else
__noinline
#endif
int fold_call(struct agg *a, struct thread *t, __s64 ret, __u64 now, __u32 gen)
{
	if (!a || !t)
		return 0;
	__u64 d = now > t->entry_ns ? now - t->entry_ns : 0;
	__u32 id = t->id;
	__u32 kind = t->fd_kind;
	__u32 run_slot = (gen >> 1) & (MAX_SLOTS - 1);
	if (a->count == 0 || d < a->min_ns)
		a->min_ns = d;
	if (d > a->max_ns)
		a->max_ns = d;
	a->count += 1;
	a->total_ns += d;
	add_square(a, d);
	__u64 b = bucket_of(d);
	/* The cap at the last bucket, as one check the verifier can bound
	 * the index by. */
	if (b > BUCKETS - 1)
		b = BUCKETS - 1;
	barrier_var(b);
	if (b < BUCKETS)
		a->histogram[b] += 1;
	if (t->last_id != ID_NONE) {
		__u64 gap = t->entry_ns > t->last_exit_ns ? t->entry_ns - t->last_exit_ns : 0;
		if (t->last_id == id) {
			a->consecutive += 1;
			a->consecutive_gap_ns += gap;
		}
		/* No room in TRANS: the transition alone is lost (counted in
		 * LOST_MAPS), the call is counted. */
		__u64 tkey = (__u64)t->last_id << 32 | id << 16 | gen;
		struct trans tzero = {};
		struct trans *tr = slot(&TRANS, &tkey, &tzero, run_slot, 0);
		if (tr) {
			tr->count += 1;
			tr->gap_sum_ns += gap;
		}
	}
	if (ret < 0 && ret >= -4095) {
		if (a->errors == 0 || now < a->first_failure_ns)
			a->first_failure_ns = now;
		if (now > a->last_failure_ns)
			a->last_failure_ns = now;
		a->errors += 1;
		/* No room in ERRNOS: the failure is counted, its errno alone
		 * is lost (LOST_MAPS; the collector counts it as errno_other). */
		__u64 ekey = (__u64)id << 32 | kind << 24 | (__u64)gen << 16 | (__u64)(-ret);
		__u64 ezero = 0;
		__u64 *n = slot(&ERRNOS, &ekey, &ezero, run_slot, 0);
		if (n)
			*n += 1;
	} else {
		a->result_sum += ret;
	}
	a->param_sum += t->size;
	if (t->peer.family)
		count_peer(t, id, gen, now, d, ret);
	t->last_id = id;
	t->last_exit_ns = now;
	t->entry_ns = 0;
	return 0;
}

/* sys_exit(struct pt_regs *regs, long ret) */
SEC("raw_tracepoint/sys_exit")
int on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (STAGE < 1)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (STAGE < 2) {
		traced(pid_tgid >> 32);
		return 0;
	}
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread *t = thread_state(task, tid, 0);
	if (!t || !t->entry_ns)
		return 0;
	/* First, whatever follows: the change is done (the fd-kind memo). */
	if (STAGE >= 3 && fd_memo && t->changes_fds)
		fds_changed();
	/* After the lookup: the untraced rest of the system does not pay
	 * for the clock. */
	__u64 now = bpf_ktime_get_ns();
	/* A call cut short by the thread's death never returns to the
	 * program: every way a thread is killed (SIGKILL, a fatal signal to
	 * its group, exit_group or an exec in another thread) queues SIGKILL
	 * to the thread itself, and ptrace then sees no exit stop for the call
	 * (ptrace_stop skips a task with a fatal signal pending). Not a
	 * completed call here either. */
	if ((task->pending.signal.sig[0] & (1UL << (SIGKILL - 1))) &&
	    !completed_before_fatal_signal(task, (__s64)ctx->args[1])) {
		t->entry_ns = 0;
		return 0;
	}
	if (STAGE < 4) {
		t->last_id = t->id;
		t->last_exit_ns = now;
		t->entry_ns = 0;
		return 0;
	}
	__s64 ret = (__s64)ctx->args[1];
	if (t->compat)
		ret = (__s64)(__s32)ret;
	__u32 zero = 0;
	__u32 run_slot = t->slot & (MAX_SLOTS - 1);
	__u64 *control = bpf_map_lookup_elem(&CONTROL, &run_slot);
	__u64 c = control ? *control : ~0ULL;
	__u64 cut = c & ~1ULL;
	/* The slot rides with the generation in every key. */
	__u32 gen = ((c & 1) ^ (now >= cut)) | run_slot << 1;
	if (t->entry_ns < cut && now >= cut)
		send_crossed(tid, pid_tgid >> 32, t, cut);

	__u32 id = t->id;
	__u32 kind = t->fd_kind;
	struct agg *a = 0;
	int dense = 0;
#ifndef PREALLOC_MAPS
	__u32 cpu = bpf_get_smp_processor_id();
	/* dense_ids is read-only, so the verifier knows it: it bounds `id`
	 * for dense_at, and the branch is dropped when it is 0. */
	if (run_slot == 0 && id < dense_ids && cpu < dense_cpus && kind < dense_at[id].kinds) {
		dense = 1;
		__u32 g = gen & 1;
		__u32 index = (cpu * 2 + g) * dense_block + dense_at[id].base + kind;
		/* NULL only out of the array, which the loader sizes for
		 * dense_cpus blocks of dense_block. */
		a = bpf_map_lookup_elem(&AGG_DENSE, &index);
		if (a && a->count == 0) {
			/* The entry's first call on this CPU in this window. */
			struct dense_used *used = bpf_map_lookup_elem(&USED, &g);
			__u32 u = id * FD_KINDS + kind;
			if (used && u < DENSE_IDS * FD_KINDS)
				used->used[u] = 1;
		}
		if (!a)
			count_lost(LOST_CALLS_FULL, run_slot);
	}
#endif
	if (!dense) {
		__u32 key = id << 16 | kind << 8 | gen;
		a = bpf_map_lookup_elem(&AGG, &key);
		if (!a) {
			struct agg *init = bpf_map_lookup_elem(&ZERO, &zero);
			if (init)
				a = slot(&AGG, &key, init, run_slot, 1);
		}
	}
	if (!a) {
		/* A call AGG could not hold (counted in LOST_MAPS) is lost
		 * whole: not the end of a transition (a window would count
		 * more transitions than calls, which the decoder refuses), not
		 * the start of the next one (a transition from a call the
		 * summary does not count: the thread's previous call is
		 * unknown now, as before its first), not a peer's call (more
		 * calls on a socket than the summary counts). */
		t->last_id = ID_NONE;
		t->entry_ns = 0;
		return 0;
	}
	return fold_call(a, t, ret, now, gen);
}

static __always_inline void send_task_event(__u32 kind, __u32 tid, __u32 tgid, __u32 nr, __u8 flag,
					    __u8 run_slot)
{
	struct event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING, run_slot);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->tid = tid;
	e->tgid = tgid;
	e->nr = nr;
	e->at_ns = bpf_ktime_get_ns(); /* when it happened */
	e->flag = flag;
	e->slot = run_slot;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* sched_process_fork(struct task_struct *parent, struct task_struct *child) */
SEC("raw_tracepoint/sched_process_fork")
int on_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u8 *run = traced(parent_tgid);
	if (!run)
		return 0;
	/* Copied before the update: the child joins its parent's run. */
	__u8 run_slot = *run;
	__u32 child_tid = BPF_CORE_READ(child, pid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u8 process = child_tgid != parent_tgid;
	if (process)
		bpf_map_update_elem(&TRACED, &child_tgid, &run_slot, BPF_ANY);
	send_task_event(KIND_FORK, child_tid, child_tgid, BPF_CORE_READ(parent, pid), process, run_slot);
	return 0;
}

/* sched_process_exec(struct task_struct *p, pid_t old_pid, ...): a thread
 * other than the leader that execs takes the leader's tid; its execve
 * completes under the new tid, as the first call known of that tid (the
 * leader's state went with the leader, as the collector forgets it). */
SEC("raw_tracepoint/sched_process_exec")
int on_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 old_tid = (__u32)ctx->args[1];
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (!traced(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(task, pid);
	if (tid == old_tid)
		return 0;
#ifndef PREALLOC_MAPS
	if (IN_TASK_STORAGE) {
		/* The storage stays with the task (the exec-ing thread, current
		 * here), whatever its tid now. */
		struct thread *own = bpf_task_storage_get(&THREAD_STORE, bpf_get_current_task_btf(), 0, 0);
		if (own)
			own->last_id = ID_NONE;
		return 0;
	}
#endif
	struct thread *t = bpf_map_lookup_elem(&THREADS, &old_tid);
	if (!t)
		return 0;
	struct thread moved = *t;
	moved.last_id = ID_NONE;
	bpf_map_update_elem(&THREADS, &tid, &moved, BPF_ANY);
	bpf_map_delete_elem(&THREADS, &old_tid);
	return 0;
}

/* sched_process_exit(struct task_struct *p, ...): every thread's end. */
SEC("raw_tracepoint/sched_process_exit")
int on_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tgid = BPF_CORE_READ(task, tgid);
	__u8 *run = traced(tgid);
	if (!run)
		return 0;
	__u8 run_slot = *run;
	__u32 tid = BPF_CORE_READ(task, pid);
	/* A call that never returns (exit, exit_group) stays unfinished; the
	 * thread's previous call is forgotten with it (task storage goes
	 * with the task). */
	if (!IN_TASK_STORAGE)
		bpf_map_delete_elem(&THREADS, &tid);
	/* do_exit decrements signal->live before this tracepoint: zero means
	 * this was the process's last thread. */
	__u8 group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	/* The record first, the removal after: once the agent sees the run's
	 * last process gone from TRACED, its exit record is in the ring, so
	 * the drain that finishes the run reads it and no record of this run
	 * reaches the next run of the slot. The entry goes at the process's
	 * end, before its pid can be reused: a new process with this pid
	 * never finds it. */
	send_task_event(KIND_EXIT, tid, tgid, BPF_CORE_READ(task, exit_code), group_dead, run_slot);
	if (group_dead)
		bpf_map_delete_elem(&TRACED, &tgid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
