//! What each fd refers to, resolved once per (fd table, fd) and cached
//! until the fd can have changed: on close, close_range, dup2/dup3 onto it,
//! a syscall returning it as a new fd, and exec (the table is replaced).
//! Tasks that share a table (CLONE_FILES) share one cache.
//!
//! Most kinds are known without asking `/proc`: `socket(domain, type, _)`
//! says TCP, UDP or Unix from its arguments, and accept/dup/dup2/F_DUPFD
//! give the new fd the kind of the one they copy. An fd opened by path
//! (open, openat, creat) is a file unless a `stat` of `/proc/TID/fd/N`
//! says FIFO. Anything else is resolved from `readlink /proc/TID/fd/N`;
//! a `socket:[INODE]` is looked up by its inode in the tracee's
//! `/proc/TID/net/{tcp,tcp6,udp,udp6,unix}` (the tracee's network
//! namespace), and a socket found in none of them stays `socket`.
//!
//! A TCP or UDP socket's remote end (its peer) is kept beside its kind:
//! from `connect`'s argument or `accept`'s result when they name it (read
//! from the tracee's memory), else from the socket's line in those same
//! net tables, at the first call that follows its creation or its last
//! `connect` (see [`cache`]).
//!
//! [`cache`] keeps the per-table kinds and peers, [`resolve`] asks
//! `/proc`, [`sockaddr`] reads a socket address in tracee memory, and
//! [`roles`] says what each syscall does to the table (the syscall
//! semantics, like the flags of strace's syscall tables).

pub mod cache;
pub mod resolve;
pub mod roles;
pub mod sockaddr;

pub use cache::{has_peer, new_table, SharedFds};
pub use roles::{FdRole, FdRoles};
