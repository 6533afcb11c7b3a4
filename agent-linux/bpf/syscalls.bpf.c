// SPDX-License-Identifier: GPL-2.0
/* agent-linux's eBPF backend, in the kernel: one record per completed
 * syscall of the traced processes, through a ring buffer, for the same
 * agent_core::Collector the ptrace backend feeds (src/ebpf/).
 *
 * - on_exec moves a call in flight to the new tid when a non-leader thread
 *   execs (it takes the leader's tid).
 * - TRACED holds the traced processes' tgids: the agent puts the root in,
 *   sched_process_fork adds the children of traced processes (threads need
 *   nothing: the filter is on the tgid), sched_process_exit removes a
 *   process when its last thread ends.
 * - sys_enter keeps the call per thread in INFLIGHT (number, six args,
 *   entry time, the fd argument's kind resolved now, as ptrace does at
 *   entry: after close the fd is gone); sys_exit completes it and sends it.
 * - Raw tracepoints: attached by name (no tracefs needed) and cheaper than
 *   the classic ones. Their `regs` is the user register set; the loader
 *   gives the offsets of the six argument registers of the host's native
 *   and compat ABIs (ARG_OFF), so one object serves x86_64 and aarch64.
 * - Records lost to a full ring buffer are counted per CPU in LOST.
 *
 * Rebuild with scripts/build-bpf (the object and its hash are committed).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* Record kinds (src/ebpf/events.rs mirrors this layout). */
#define KIND_SYSCALL 0
#define KIND_FORK 1
#define KIND_EXIT 2

/* agent_core::FdKind values. */
#define FD_NONE 0
#define FD_FILE 1
#define FD_SOCKET 2
#define FD_PIPE 3
#define FD_OTHER 4
#define FD_TCP 5
#define FD_UDP 6
#define FD_UNIX 7

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFIFO 0010000
#define S_IFREG 0100000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFBLK 0060000
#define S_IFLNK 0120000

#define SIGKILL 9

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

/* How the host tells a compat (32-bit) syscall (set by the loader). */
#define COMPAT_NONE 0
#define COMPAT_X86_TS_COMPAT 1	/* thread_info.status & TS_COMPAT */
#define COMPAT_ARM64_TIF_32BIT 2 /* thread_info.flags bit TIF_32BIT */

/* The cost breakdown (scripts/bench-tracer builds each, the backend is the
 * default): STAGE 0 empty sys_enter/sys_exit programs; 1 + the traced-set
 * filter; 2 + the per-thread call state (number, entry time); 3 + the
 * arguments and the fd kind; 4 + the per-call record (everything). */
#ifndef STAGE
#define STAGE 4
#endif

/* Syscall numbers below this have an entry in FD_ARG. */
#define MAX_NR 1024

struct event {
	__u32 kind;
	__u32 tid;
	__u32 tgid;
	/* KIND_SYSCALL: the raw number; KIND_FORK: the parent's tid;
	 * KIND_EXIT: the task's exit code (a wait status). */
	__u32 nr;
	__u64 args[6];
	__s64 ret;
	__u64 entry_ns;
	__u64 exit_ns;
	__u8 fd_kind;
	/* KIND_SYSCALL: 1 for a compat-ABI call; KIND_FORK: 1 for a new
	 * process (not a thread); KIND_EXIT: 1 when the process ended. */
	__u8 flag;
	__u8 pad[6];
};

struct inflight {
	__u64 args[6];
	__u64 entry_ns;
	__u32 nr;
	__u8 fd_kind;
	__u8 compat;
	__u8 pad[2];
};

/* Set by the loader before load. */
const volatile __u32 compat_probe = COMPAT_NONE;
/* Byte offsets in struct pt_regs of the six argument registers: native
 * ABI, then compat ABI. */
const volatile __u32 arg_off[2][6] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} TRACED SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct inflight);
} INFLIGHT SEC(".maps");

/* Per ABI (0 native, 1 compat) and syscall number: 1 + the index of the
 * fd argument, 0 when the call takes none (from agent-linux's fd roles). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * MAX_NR);
	__type(key, __u32);
	__type(value, __u8);
} FD_ARG SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} EVENTS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} LOST SEC(".maps");

static __always_inline int traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&TRACED, &tgid) != 0;
}

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *lost = bpf_map_lookup_elem(&LOST, &zero);
	if (lost)
		*lost += 1; /* per CPU: no other writer */
}

/* Wake the reader only when a quarter of the ring is full: it polls with
 * a short timeout anyway, and a wakeup per record would cost more than
 * the record. */
static __always_inline __u64 wakeup_flag(void)
{
	__u64 avail = bpf_ringbuf_query(&EVENTS, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&EVENTS, BPF_RB_RING_SIZE);
	return avail > size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline int is_compat(struct task_struct *task)
{
	if (compat_probe == COMPAT_X86_TS_COMPAT) {
		if (!bpf_core_field_exists(task->thread_info.status))
			return 0;
		return (BPF_CORE_READ(task, thread_info.status) & 0x2) != 0;
	}
	if (compat_probe == COMPAT_ARM64_TIF_32BIT)
		return (BPF_CORE_READ(task, thread_info.flags) >> 22) & 1;
	return 0;
}

static __always_inline __u8 socket_kind(struct file *file)
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
	if (type == SOCK_STREAM && protocol == IPPROTO_TCP)
		return FD_TCP;
	if (type == SOCK_DGRAM && protocol == IPPROTO_UDP)
		return FD_UDP;
	return FD_SOCKET;
}

/* The kind of the current task's fd `fd`, read from its file table. */
static __always_inline __u8 fd_kind(struct task_struct *task, __s64 fd)
{
	if (fd < 0)
		return FD_NONE;
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt)
		return FD_NONE;
	if ((__u64)fd >= BPF_CORE_READ(fdt, max_fds))
		return FD_NONE;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *file = 0;
	bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
	if (!file)
		return FD_NONE;
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (!inode)
		return FD_NONE;
	umode_t mode = BPF_CORE_READ(inode, i_mode);
	switch (mode & S_IFMT) {
	case S_IFSOCK:
		return socket_kind(file);
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

static __always_inline __u64 read_arg(void *regs, __u32 abi, int i)
{
	__u64 v = 0;
	__u32 off = arg_off[abi][i];
	if (off > 512)
		return 0;
	bpf_probe_read_kernel(&v, sizeof(v), (char *)regs + off);
	return v;
}

/* sys_enter(struct pt_regs *regs, long id) */
SEC("raw_tracepoint/sys_enter")
int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	if (STAGE < 1)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!traced(pid_tgid >> 32))
		return 0;
	if (STAGE < 2)
		return 0;
	__u32 tid = (__u32)pid_tgid;
	void *regs = (void *)ctx->args[0];
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct inflight call = {};
	call.nr = (__u32)ctx->args[1];
	call.compat = is_compat(task);
	__u32 abi = call.compat ? 1 : 0;
	if (STAGE >= 3)
		for (int i = 0; i < 6; i++)
			call.args[i] = read_arg(regs, abi, i);
	if (STAGE >= 3 && call.nr < MAX_NR) {
		__u32 key = abi * MAX_NR + call.nr;
		__u8 *slot = bpf_map_lookup_elem(&FD_ARG, &key);
		__u32 idx = slot ? (__u32)*slot - 1 : 6;
		if (idx < 6) {
			__u64 raw = call.args[idx];
			__s64 fd = call.compat ? (__s64)(__s32)raw : (__s64)raw;
			call.fd_kind = fd_kind(task, fd);
		}
	}
	call.entry_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&INFLIGHT, &tid, &call, BPF_ANY);
	return 0;
}

/* sys_exit(struct pt_regs *regs, long ret) */
SEC("raw_tracepoint/sys_exit")
int on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (STAGE < 1)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (STAGE < 2) {
		traced(pid_tgid >> 32);
		return 0;
	}
	struct inflight *call = bpf_map_lookup_elem(&INFLIGHT, &tid);
	if (!call)
		return 0;
	/* A call cut short by the thread's death never returns to the
	 * program: every way a thread is killed (SIGKILL, a fatal signal to
	 * its group, exit_group or an exec in another thread) queues SIGKILL
	 * to the thread itself, and ptrace then sees no exit stop for the call
	 * (ptrace_stop skips a task with a fatal signal pending). Not a
	 * completed call here either. */
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	sigset_t pending;
	BPF_CORE_READ_INTO(&pending, task, pending.signal);
	if (pending.sig[0] & (1UL << (SIGKILL - 1))) {
		bpf_map_delete_elem(&INFLIGHT, &tid);
		return 0;
	}
	if (STAGE < 4) {
		bpf_map_delete_elem(&INFLIGHT, &tid);
		return 0;
	}
	struct event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e) {
		count_lost();
		bpf_map_delete_elem(&INFLIGHT, &tid);
		return 0;
	}
	e->kind = KIND_SYSCALL;
	e->tid = tid;
	e->tgid = pid_tgid >> 32;
	e->nr = call->nr;
	for (int i = 0; i < 6; i++)
		e->args[i] = call->args[i];
	e->ret = (__s64)ctx->args[1];
	e->entry_ns = call->entry_ns;
	e->exit_ns = now;
	e->fd_kind = call->fd_kind;
	e->flag = call->compat;
	bpf_map_delete_elem(&INFLIGHT, &tid);
	bpf_ringbuf_submit(e, wakeup_flag());
	return 0;
}

static __always_inline void send_task_event(__u32 kind, __u32 tid, __u32 tgid, __u32 nr, __u8 flag)
{
	struct event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->tid = tid;
	e->tgid = tgid;
	e->nr = nr;
	e->exit_ns = bpf_ktime_get_ns(); /* when it happened */
	e->flag = flag;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* sched_process_fork(struct task_struct *parent, struct task_struct *child) */
SEC("raw_tracepoint/sched_process_fork")
int on_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	if (!traced(parent_tgid))
		return 0;
	__u32 child_tid = BPF_CORE_READ(child, pid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u8 process = child_tgid != parent_tgid;
	if (process) {
		__u8 one = 1;
		bpf_map_update_elem(&TRACED, &child_tgid, &one, BPF_ANY);
	}
	send_task_event(KIND_FORK, child_tid, child_tgid, BPF_CORE_READ(parent, pid), process);
	return 0;
}

/* sched_process_exec(struct task_struct *p, pid_t old_pid, ...): a thread
 * other than the leader that execs takes the leader's tid; its execve
 * completes under the new tid. */
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
	struct inflight *call = bpf_map_lookup_elem(&INFLIGHT, &old_tid);
	if (!call)
		return 0;
	struct inflight moved = *call;
	bpf_map_update_elem(&INFLIGHT, &tid, &moved, BPF_ANY);
	bpf_map_delete_elem(&INFLIGHT, &old_tid);
	return 0;
}

/* sched_process_exit(struct task_struct *p, ...): every thread's end. */
SEC("raw_tracepoint/sched_process_exit")
int on_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (!traced(tgid))
		return 0;
	__u32 tid = BPF_CORE_READ(task, pid);
	/* A call that never returns (exit, exit_group) stays unfinished. */
	bpf_map_delete_elem(&INFLIGHT, &tid);
	/* do_exit decrements signal->live before this tracepoint: zero means
	 * this was the process's last thread. */
	__u8 group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	if (group_dead)
		bpf_map_delete_elem(&TRACED, &tgid);
	send_task_event(KIND_EXIT, tid, tgid, BPF_CORE_READ(task, exit_code), group_dead);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
