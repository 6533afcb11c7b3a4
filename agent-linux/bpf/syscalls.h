// SPDX-License-Identifier: GPL-2.0
/* What the BPF program (syscalls.bpf.c) and the agent (src/ebpf/) share:
 * the layouts of the ring's records and of the maps' keys and values, and
 * the values both sides must agree on. The one definition of them:
 * scripts/build-bpf generates src/ebpf/kernel_types.rs from this file
 * with bindgen, and the staleness test (src/ebpf/mod.rs) fails when the
 * committed objects or the generated file are older than it.
 *
 * Only fixed-width fields, in an order that leaves no hidden padding, so
 * the layout is the same for the BPF target and for every 64-bit host
 * the eBPF backend runs on (x86_64, aarch64). */
#ifndef EDGE_AGENT_SYSCALLS_H
#define EDGE_AGENT_SYSCALLS_H

#ifndef EDGE_VMLINUX_H
#include <linux/types.h> /* bindgen reads this header alone */
#endif

/** Record kinds of `struct event`. */
#define KIND_SYSCALL 0
#define KIND_FORK 1
#define KIND_EXIT 2
#define KIND_CROSSED 3

/** agent_core::FdKind values. */
#define FD_NONE 0
#define FD_FILE 1
#define FD_SOCKET 2
#define FD_PIPE 3
#define FD_OTHER 4
#define FD_TCP 5
#define FD_UDP 6
#define FD_UNIX 7

/** How the host tells a compat (32-bit) syscall (the loader sets
 * `compat_probe` to one of these). */
#define COMPAT_NONE 0
#define COMPAT_X86_TS_COMPAT 1	/* thread_info.status & TS_COMPAT */
#define COMPAT_ARM64_TIF_32BIT 2 /* thread_info.flags bit TIF_32BIT */

/** fd kinds (FD_NONE to FD_UNIX): a dense AGG index's low bits. */
#define FD_KINDS 8

/** AGG_DENSE covers the canonical ids below this (the loader sets how
 * many: agent_core's ids, at most this); USED's value per generation is
 * a byte per (id, fd kind). */
#define DENSE_IDS 512

/** Where a canonical id's aggregates are in each (CPU, generation) block
 * of AGG_DENSE (the loader sets one per id, `dense_at`): `kinds` entries
 * from `base` on, FD_KINDS (one per fd kind) for the ids whose calls take
 * an fd argument, 1 for the others (whose kind is always FD_NONE); 0: not
 * in the array. */
struct dense_at {
	__u16 base;
	__u16 kinds;
};

/** Syscall numbers below this have an entry in SYSINFO. */
#define MAX_NR 1024

/** agent_core::SyscallId of a number with no entry. */
#define ID_UNKNOWN 1
/** "No previous call". */
#define ID_NONE 0xffff

/** agent_core::histogram::BUCKETS */
#define BUCKETS 26

/** Per-run slots: the key layouts keep 6 bits for one. */
#define MAX_SLOTS 64

/** What LOST counts, per run slot (its index: what * MAX_SLOTS + slot):
 * records the full ring could not take; counted calls whose transition,
 * errno or peer figures found no room in TRANS, ERRNOS or PEERS; whole
 * calls AGG had no room for, because it was full, or because the kernel
 * refused the new key with room left (its per-CPU memory allocator had
 * nothing ready, or the map's bucket was busy). */
#define LOST_RING 0
#define LOST_PARTS 1
#define LOST_CALLS_FULL 2
#define LOST_CALLS_REFUSED 3
#define LOST_KINDS 4

/** A TCP or UDP socket's remote end (family 0: none). */
struct peer {
	__u8 addr[16];  /* network order; IPv4 in the first 4 bytes */
	__u16 port;     /* host order; 0: no peer */
	__u8 family;    /* AF_INET or AF_INET6; 0: no peer */
	__u8 transport; /* FD_TCP or FD_UDP */
	__u8 pad[4];
};

/** A PEERS key: per peer and syscall id (the agent tells the read/write
 * family apart and picks the latest last call over ids and CPUs); `gen`
 * is slot << 1 | generation. */
struct peer_key {
	struct peer peer;
	__u16 id;
	__u8 gen;
	__u8 pad[5];
};

/** A PEERS value, for one CPU. */
struct peer_stats {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 ok_result_sum; /* positive results of successful calls */
	__u64 last_exit_ns;
	__s64 last_ret;
};

/** A ring-buffer record: a new task, a task's end, or a call in flight
 * across a cut. */
struct event {
	__u32 kind;
	__u32 tid;
	__u32 tgid;
	/* KIND_FORK: the parent's tid; KIND_EXIT: the task's exit code (a
	 * wait status); KIND_CROSSED: the call's syscall id. */
	__u32 nr;
	/* KIND_CROSSED: when the call entered; else when the task event
	 * happened (monotonic ns). */
	__u64 at_ns;
	/* KIND_CROSSED: the cut it crossed. */
	__u64 cut_ns;
	__u8 fd_kind;
	/* KIND_FORK: 1 for a new process (not a thread); KIND_EXIT: 1 when
	 * the process ended. */
	__u8 flag;
	__u8 slot; /* the run's slot */
	__u8 pad[5];
	/* KIND_CROSSED: the call's socket peer (family 0: none). */
	struct peer peer;
};

/** `struct sysinfo`'s flags: the call may change which file an fd number
 * names in some file table (close, close_range, dup2, dup3, execve,
 * execveat, io_uring_enter, ioctl, numbers with no name): the fd-kind
 * memo is invalidated when it returns (see FD_EPOCH in syscalls.bpf.c). */
#define SYSINFO_CHANGES_FDS 1

/** Per ABI (0 native, 1 compat) and syscall number, from agent-core and
 * agent-linux's fd roles (set by the loader). */
struct sysinfo {
	__u16 id;      /* agent_core::SyscallId */
	__u8 fd_arg;   /* 1 + the index of the fd argument, 0 none */
	__u8 size_arg; /* 1 + the index of the size argument, 0 none */
	__u8 flags;    /* SYSINFO_* */
	__u8 pad;
};

/** The fd-kind memo's entries per thread (a power of two): direct-mapped
 * by fd number. */
#define FD_MEMOS 8

/** One fd kind a thread read (see the fd-kind memo in syscalls.bpf.c). */
struct fd_memo {
	/* The struct file's address (at least 8-byte aligned) | its kind in
	 * the low 3 bits; 0: empty. */
	__u64 file_kind;
	__u64 epoch; /* FD_EPOCH's count when it was read */
};

/** A THREADS value: a thread's call in flight and its previous call. */
struct thread {
	__u64 entry_ns;     /* the call in flight's entry; 0: none */
	__u64 size;         /* its size argument */
	__u64 last_exit_ns; /* when the previous call ended */
	__u16 id;           /* the call in flight */
	__u16 last_id;      /* the previous call; ID_NONE before the first */
	__u8 fd_kind;
	__u8 compat;        /* made through the compat ABI */
	__u8 slot;          /* the run's slot */
	__u8 changes_fds;   /* the call in flight has SYSINFO_CHANGES_FDS */
	struct peer peer;   /* the call in flight's socket peer */
	__u8 pad[4];
	/* TRACED_EPOCH's count when `slot` was last read from TRACED: while
	 * the count is the same, the thread's process is still traced as run
	 * `slot` (task storage only; see on_sys_enter). */
	__u32 traced_epoch;
	/* The fd-kind memo: whose it is (the task's start_time: a THREADS
	 * entry left by an earlier life of this tid is not this thread's),
	 * and the kinds. */
	__u64 memo_owner;
	struct fd_memo memo[FD_MEMOS];
};

/** What agent_core::KeyStats holds, for one CPU: an AGG value. */
struct agg {
	__u64 count;
	__u64 errors;
	__u64 total_ns;
	__u64 sum_sq_lo;
	__u64 sum_sq_hi;
	__u64 min_ns;
	__u64 max_ns;
	__u64 consecutive;
	__u64 consecutive_gap_ns;
	__s64 result_sum;
	__u64 param_sum;
	__u64 first_failure_ns; /* monotonic */
	__u64 last_failure_ns;
	__u64 histogram[BUCKETS];
};

/** A TRANS value, for one CPU. */
struct trans {
	__u64 count;
	__u64 gap_sum_ns;
};

#endif /* EDGE_AGENT_SYSCALLS_H */
