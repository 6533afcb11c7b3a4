// SPDX-License-Identifier: GPL-2.0
/* The floor of the eBPF backend (agent-linux/examples/ebpf_floor.rs, run
 * by scripts/bench-tracer, which compiles this file): the same traced-set
 * filter as bpf/syscalls.bpf.c (a hash of tgids kept current through
 * sched_process_fork and sched_process_exit), and a per-CPU count of the
 * traced processes' syscalls, nothing else: no per-call state, no record,
 * no user-space consumer. With `exit` also attached, the same count at
 * sys_exit (the backend needs both tracepoints).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} TRACED SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} COUNT SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&TRACED, &tgid))
		return;
	__u64 *n = bpf_map_lookup_elem(&COUNT, &slot);
	if (n)
		*n += 1; /* per CPU: no other writer */
}

SEC("raw_tracepoint/sys_enter")
int floor_enter(struct bpf_raw_tracepoint_args *ctx)
{
	count(0);
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int floor_exit(struct bpf_raw_tracepoint_args *ctx)
{
	count(1);
	return 0;
}

SEC("raw_tracepoint/sched_process_fork")
int floor_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	if (child_tgid != parent_tgid && bpf_map_lookup_elem(&TRACED, &parent_tgid)) {
		__u8 one = 1;
		bpf_map_update_elem(&TRACED, &child_tgid, &one, BPF_ANY);
	}
	return 0;
}

SEC("raw_tracepoint/sched_process_exit")
int floor_exit_task(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tgid = BPF_CORE_READ(task, tgid);
	if (BPF_CORE_READ(task, signal, live.counter) == 0)
		bpf_map_delete_elem(&TRACED, &tgid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
