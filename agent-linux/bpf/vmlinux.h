/* The few kernel types agent-linux's BPF program reads, trimmed by hand
 * from the kernel's BTF (`bpftool btf dump file /sys/kernel/btf/vmlinux
 * format c`). Every struct carries preserve_access_index: the loader
 * relocates each field access against the running kernel's own BTF
 * (CO-RE), so only the names and types used here must match, not the
 * offsets or the other fields. */
#ifndef EDGE_VMLINUX_H
#define EDGE_VMLINUX_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef unsigned short umode_t;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
};

#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	int counter;
} atomic_t;

struct thread_info {
	unsigned long flags;
	__u32 status;
};

struct super_block {
	unsigned long s_magic;
};

struct inode {
	umode_t i_mode;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
	void *private_data;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct signal_struct {
	atomic_t live;
	int group_exit_code;
	unsigned int flags;
};

struct list_head {
	struct list_head *next, *prev;
};

/* 64-bit kernels: one word of signal bits. */
typedef struct {
	unsigned long sig[1];
} sigset_t;

struct sigpending {
	struct list_head list;
	sigset_t signal;
};

struct bpf_local_storage;

struct task_struct {
	struct thread_info thread_info;
	struct bpf_local_storage *bpf_storage;
	int pid;
	int tgid;
	int exit_code;
	__u64 start_time;
	struct files_struct *files;
	struct signal_struct *signal;
	struct sigpending pending;
};

struct in6_addr {
	__u8 s6_addr[16];
};

/* In the kernel skc_daddr and skc_dport sit in anonymous unions: CO-RE
 * finds them by name through those. */
struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
};

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
};

struct socket {
	short type;
	struct sock *sk;
};

#pragma clang attribute pop

/* The raw tracepoint context is UAPI: a fixed layout, no relocation
 * (aya cannot relocate an index into its flexible array). */
struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#endif
