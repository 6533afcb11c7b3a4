//! The wrapper set: one `extern "C"` function per wrapped libc function,
//! of the same name and signature, that times the real call and records
//! it. Written once, as a macro, and made by the crate that installs it:
//! `agent-preload` exports them under libc's names (`#[no_mangle]`: the
//! dynamic linker binds the program's calls to them), an app's library
//! keeps them under its own and patches GOT entries to them. A feature
//! could not choose between the two: features are unified across a
//! workspace build, and every binary that linked the exported names would
//! wrap its own libc calls.
//!
//! Each wrapper keeps `errno` exactly as the real call left it, records
//! nothing when the process is not observed (one atomic load), and
//! allocates and waits for nothing (see the recorder).
//!
//! Variadic functions (`open`, `openat`) are declared with their optional
//! `mode` as a fixed argument: on the four ABIs the agent runs on an
//! `int` passed through `...` is where the fixed one would be, and the
//! real call reads it only when `flags` say there is one. `execl*` (only
//! variadic: stable Rust cannot define them) and `vfork` (a wrapper's
//! frame would be returned through twice on the stack parent and child
//! share; the child counts its parent's `vfork` instead, see
//! `observe::vfork_child_check`) are not wrapped; `posix_spawn`, `system`,
//! `popen` are, and file the calls libc makes inside them from what they
//! return: see docs/edge-agent.md.
//!
//! The set also lists itself (`wrapped()`, `WRAPPED_COUNT`), so that an
//! installer hooks every wrapper defined here and nothing else.

/// The wrappers, each with the attributes given (e.g. `#[no_mangle]`).
#[macro_export]
macro_rules! libc_wrappers {
    ($(#[$attr:meta])*) => {
        use $crate::__private::libc::{
            c_char, c_int, c_uint, c_void, iovec, msghdr, off_t, pid_t, pollfd, size_t,
            sockaddr, socklen_t, ssize_t, timespec, timeval, epoll_event, fd_set, sigset_t,
            rusage, clockid_t, useconds_t, nfds_t, FILE,
        };
        use $crate::__private::{calls, observe, FdKind};
        $crate::libc_wrappers!(@all [$(#[$attr])*]

        // The read/write family and the other calls filed by their fd.
        (fd read, calls::READ, (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t)
        (fd write, calls::WRITE, (fd: c_int, buf: *const c_void, n: size_t) -> ssize_t)
        (fd pread, calls::PREAD, (fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t)
        (fd pread64, calls::PREAD, (fd: c_int, buf: *mut c_void, n: size_t, off: i64) -> ssize_t)
        (fd pwrite, calls::PWRITE, (fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t)
        (fd pwrite64, calls::PWRITE, (fd: c_int, buf: *const c_void, n: size_t, off: i64) -> ssize_t)
        (fd readv, calls::READV, (fd: c_int, iov: *const iovec, n: c_int) -> ssize_t)
        (fd writev, calls::WRITEV, (fd: c_int, iov: *const iovec, n: c_int) -> ssize_t)
        (fd preadv, calls::PREADV, (fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t)
        (fd pwritev, calls::PWRITEV, (fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t)
        (fd sendfile, calls::SENDFILE, (out_fd: c_int, in_fd: c_int, off: *mut off_t, n: size_t) -> ssize_t)
        (fd sendfile64, calls::SENDFILE, (out_fd: c_int, in_fd: c_int, off: *mut i64, n: size_t) -> ssize_t)
        (fd fsync, calls::FSYNC, (fd: c_int) -> c_int)
        (fd fdatasync, calls::FDATASYNC, (fd: c_int) -> c_int)
        (fd bind, calls::BIND, (fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int)
        (fd listen, calls::LISTEN, (fd: c_int, backlog: c_int) -> c_int)
        (fd shutdown, calls::SHUTDOWN, (fd: c_int, how: c_int) -> c_int)
        (fd send, calls::SENDTO, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t)
        (fd sendto, calls::SENDTO, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int, to: *const sockaddr, len: socklen_t) -> ssize_t)
        (fd sendmsg, calls::SENDMSG, (fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t)
        (fd recv, calls::RECVFROM, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t)
        (fd recvfrom, calls::RECVFROM, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, from: *mut sockaddr, len: *mut socklen_t) -> ssize_t)
        (fd recvmsg, calls::RECVMSG, (fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t)
        (fd epoll_wait, calls::EPOLL_WAIT, (fd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int) -> c_int)
        (fd epoll_pwait, calls::EPOLL_PWAIT, (fd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int)

        // Calls with no fd argument; those that make an fd forget what
        // was known of its number.
        (new_fd open, calls::OPEN_AS, (path: *const c_char, flags: c_int, mode: c_uint) -> c_int)
        (new_fd open64, calls::OPEN_AS, (path: *const c_char, flags: c_int, mode: c_uint) -> c_int)
        (new_fd openat, calls::OPENAT, (dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int)
        (new_fd openat64, calls::OPENAT, (dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int)
        (new_fd creat, calls::CREAT_AS, (path: *const c_char, mode: c_uint) -> c_int)
        (new_fd creat64, calls::CREAT_AS, (path: *const c_char, mode: c_uint) -> c_int)
        (new_fd socket, calls::SOCKET, (domain: c_int, ty: c_int, protocol: c_int) -> c_int)
        (plain stat, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int)
        (plain stat64, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int)
        (plain lstat, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int)
        (plain lstat64, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int)
        // Filed without an fd kind on glibc, as the other backends file the
        // `newfstatat` it makes (a path call); bionic's is `fstat` itself.
        (plain fstat, calls::FSTAT_AS, (fd: c_int, buf: *mut c_void) -> c_int)
        (plain fstat64, calls::FSTAT_AS, (fd: c_int, buf: *mut c_void) -> c_int)
        (plain fstatat, calls::STAT_AS, (dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int)
        (plain fstatat64, calls::STAT_AS, (dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int)
        // glibc before 2.33 exported the stat family under these names only.
        (plain __xstat, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int)
        (plain __xstat64, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int)
        (plain __lxstat, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int)
        (plain __lxstat64, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int)
        (plain __fxstatat, calls::STAT_AS, (ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int)
        (plain __fxstatat64, calls::STAT_AS, (ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int)
        (plain poll, calls::POLL, (fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int)
        (plain ppoll, calls::PPOLL, (fds: *mut pollfd, n: nfds_t, timeout: *const timespec, mask: *const sigset_t) -> c_int)
        (plain select, calls::SELECT_AS, (n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *mut timeval) -> c_int)
        (plain pselect, calls::PSELECT, (n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *const timespec, mask: *const sigset_t) -> c_int)
        (plain nanosleep, calls::CLOCK_NANOSLEEP, (req: *const timespec, rem: *mut timespec) -> c_int)
        (plain usleep, calls::CLOCK_NANOSLEEP, (us: useconds_t) -> c_int)
        (plain sleep, calls::CLOCK_NANOSLEEP, (s: c_uint) -> c_uint)
        (plain mmap, calls::MMAP, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void)
        (plain mmap64, calls::MMAP, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void)
        (plain munmap, calls::MUNMAP, (addr: *mut c_void, len: size_t) -> c_int)
        (plain madvise, calls::MADVISE, (addr: *mut c_void, len: size_t, advice: c_int) -> c_int)
        (plain wait4, calls::WAIT4, (pid: pid_t, status: *mut c_int, options: c_int, usage: *mut rusage) -> pid_t)
        (plain waitpid, calls::WAIT4, (pid: pid_t, status: *mut c_int, options: c_int) -> pid_t)
        (plain wait, calls::WAIT4, (status: *mut c_int) -> pid_t)

        // Calls that change what the process's fds are.
        (real close, (fd: c_int) -> c_int, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::CLOSE); CALL }) else {
                let r = real(fd);
                observe::forget(fd as i64);
                return r;
            };
            // Its socket's peer, as the other backends file a close: asked
            // before the fd is gone.
            let kind = observe::kind_of(fd as i64);
            let peer = observe::peer_of(fd as i64, kind);
            let r = real(fd);
            let errno = $crate::__private::errno();
            observe::forget(fd as i64);
            obs.end([fd as u64, 0, 0, 0, 0, 0], observe::kernel_ret(r as i64, errno), kind, peer);
            $crate::__private::set_errno(errno);
            r
        })
        (copy dup, calls::DUP, (fd: c_int) -> c_int, |r| r)
        (copy dup2, calls::DUP2, (fd: c_int, new_fd: c_int) -> c_int, |r| r)
        (copy dup3, calls::DUP3, (fd: c_int, new_fd: c_int, flags: c_int) -> c_int, |r| r)
        (copy accept, calls::ACCEPT, (fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int, |r| r)
        (copy accept4, calls::ACCEPT4, (fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int, |r| r)
        // `fcntl` (variadic: its optional argument declared as a fixed one,
        // as `open`'s `mode`; passed on whatever it holds, the real call
        // reads it only for the commands that take one): filed under its
        // fd; F_DUPFD's new fd is of its kind.
        (fcntl_like fcntl)
        (fcntl_like fcntl64)
        (real connect, (fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::CONNECT); CALL }) else {
                let r = real(fd, addr, len);
                let errno = $crate::__private::errno();
                observe::connected(fd as i64, None);
                $crate::__private::set_errno(errno);
                return r;
            };
            let kind = observe::kind_of(fd as i64);
            let r = real(fd, addr, len);
            let errno = $crate::__private::errno();
            // The address it named is the peer, connected or not yet
            // (a non-blocking connect's EINPROGRESS); not read when the
            // kernel could not (EFAULT).
            let peer = if r == 0 || errno != $crate::__private::libc::EFAULT {
                // SAFETY: the kernel read `len` bytes at `addr` for this
                // call without a fault.
                unsafe { $crate::__private::peer_named(kind, addr.cast(), len as usize) }
            } else {
                None
            };
            // A connect that failed outright leaves the socket's peer to
            // be asked again; one under way (EINPROGRESS) or done has it.
            observe::connected(fd as i64, if r == 0 || errno == $crate::__private::libc::EINPROGRESS { peer } else { None });
            obs.end([fd as u64, addr as u64, len as u64, 0, 0, 0], observe::kernel_ret(r as i64, errno), kind, peer);
            $crate::__private::set_errno(errno);
            r
        })

        // Processes: `fork` is filed as the `clone` it makes, counted in
        // the parent (where strace counts it); `execve` by the image it
        // starts, or as a failure where it returns.
        (real fork, () -> pid_t, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::CLONE); CALL }) else {
                return real();
            };
            let r = real();
            if r == 0 {
                return r;
            }
            let errno = $crate::__private::errno();
            obs.end([0; 6], observe::kernel_ret(r as i64, errno), FdKind::None, None);
            $crate::__private::set_errno(errno);
            r
        })
        (real execve, (path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int, |real| {
            observe::vfork_child_check();
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::EXECVE); CALL }) else {
                return real(path, argv, envp);
            };
            let pending = observe::exec_begins(&obs);
            let r = real(path, argv, envp);
            let errno = $crate::__private::errno();
            observe::exec_returned(pending, obs, [path as u64, argv as u64, envp as u64, 0, 0, 0], observe::kernel_ret(r as i64, errno));
            $crate::__private::set_errno(errno);
            r
        })
        (exec execv, (path: *const c_char, argv: *const *const c_char))
        // A PATH search (no `/` in the name) is filed as one `execve`: the
        // attempts libc makes before the one that runs (or the last that
        // failed) are its own calls.
        (exec execvp, (path: *const c_char, argv: *const *const c_char))
        (exec execvpe, (path: *const c_char, argv: *const *const c_char, envp: *const *const c_char))
        // A `vfork` child ends here or in an exec: where it counts its
        // parent's `vfork` (see `observe::vfork_child_check`).
        (exit _exit)

        // Processes libc makes itself: the process, its `execve` (in the
        // child, on a stack of libc's) and the `wait4`s are libc's own
        // calls, filed here from what the function returned.
        (real posix_spawn, (pid: *mut pid_t, path: *const c_char, actions: *const c_void, attr: *const c_void, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int, |real| {
            let Some(spawn) = observe::spawn_begins() else {
                return real(pid, path, actions, attr, argv, envp);
            };
            let r = real(pid, path, actions, attr, argv, envp);
            let errno = $crate::__private::errno();
            let child = if r == 0 && !pid.is_null() { *pid as u32 } else { 0 };
            spawn.ended(observe::Spawned::of_posix_spawn(r, child));
            $crate::__private::set_errno(errno);
            r
        })
        (real posix_spawnp, (pid: *mut pid_t, path: *const c_char, actions: *const c_void, attr: *const c_void, argv: *const *mut c_char, envp: *const *mut c_char) -> c_int, |real| {
            let Some(spawn) = observe::spawn_begins() else {
                return real(pid, path, actions, attr, argv, envp);
            };
            let r = real(pid, path, actions, attr, argv, envp);
            let errno = $crate::__private::errno();
            let child = if r == 0 && !pid.is_null() { *pid as u32 } else { 0 };
            spawn.ended(observe::Spawned::of_posix_spawn(r, child));
            $crate::__private::set_errno(errno);
            r
        })
        // `system`: `/bin/sh -c` spawned and waited for (`system(NULL)`
        // too: it runs `exit 0`). Filed as started (a shell that could not
        // start reads as the shell's own exit 127); -1 is the wait's
        // failure.
        (real system, (command: *const c_char) -> c_int, |real| {
            let Some(spawn) = observe::spawn_begins() else {
                return real(command);
            };
            let r = real(command);
            let errno = $crate::__private::errno();
            spawn.waited(if r == -1 { -(errno as i64) } else { 1 });
            spawn.ended(observe::Spawned::Ran { pid: 0 });
            $crate::__private::set_errno(errno);
            r
        })
        // `popen`: the shell spawned (nothing when it returns NULL: its
        // pipe or its process failed); `pclose` waits for it.
        (real popen, (command: *const c_char, mode: *const c_char) -> *mut FILE, |real| {
            let Some(spawn) = observe::spawn_begins() else {
                return real(command, mode);
            };
            let r = real(command, mode);
            let errno = $crate::__private::errno();
            if !r.is_null() {
                spawn.ended(observe::Spawned::Ran { pid: 0 });
            }
            $crate::__private::set_errno(errno);
            r
        })
        (real pclose, (stream: *mut FILE) -> c_int, |real| {
            let Some(spawn) = observe::spawn_begins() else {
                return real(stream);
            };
            let r = real(stream);
            let errno = $crate::__private::errno();
            // -1 with ECHILD is the wait's failure; another -1 is not a
            // stream of `popen`'s (no wait made).
            if r != -1 || errno == $crate::__private::libc::ECHILD {
                spawn.waited(if r == -1 { -(errno as i64) } else { 1 });
            }
            $crate::__private::set_errno(errno);
            r
        })
        (real clock_nanosleep, (clock: clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::CLOCK_NANOSLEEP); CALL }) else {
                return real(clock, flags, req, rem);
            };
            // Returns the error number itself, errno untouched.
            let r = real(clock, flags, req, rem);
            obs.end([clock as u64, flags as u64, req as u64, rem as u64, 0, 0], -(r as i64), FdKind::None, None);
            r
        })
        );
    };

    // Every wrapper, each an entry `(kind name, ...)` made by the arm
    // `@kind`, and the list of them all (`wrapped()`): a wrapper added to
    // the set is in the list, so every installer hooks it.
    (@all $attrs:tt $(($kind:ident $name:ident $($rest:tt)*))*) => {
        $( $crate::libc_wrappers!(@$kind $attrs $name $($rest)*); )*

        /// How many wrappers the set has.
        pub const WRAPPED_COUNT: usize = [$(stringify!($name)),*].len();

        /// Every wrapper of the set: libc's name, the wrapper, where its
        /// real function is (what an installer hooks).
        #[allow(dead_code)]
        pub fn wrapped() -> [$crate::Wrapped; WRAPPED_COUNT] {
            [$($crate::Wrapped {
                symbol: concat!(stringify!($name), "\0"),
                wrapper: $name as *const () as usize,
                real: &$name::REAL,
            }),*]
        }
    };
    // `fcntl` and `fcntl64`.
    (@fcntl_like [$(#[$attr:meta])*] $name:ident) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, (fd: c_int, cmd: c_int, arg: $crate::__private::libc::c_ulong) -> c_int, |real| {
            let dup = cmd == $crate::__private::libc::F_DUPFD || cmd == $crate::__private::libc::F_DUPFD_CLOEXEC;
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::FCNTL); CALL }) else {
                let r = real(fd, cmd, arg);
                if dup && r >= 0 {
                    observe::forget(r as i64);
                }
                return r;
            };
            let kind = observe::kind_of(fd as i64);
            let r = real(fd, cmd, arg);
            let errno = $crate::__private::errno();
            if dup && r >= 0 {
                observe::made(r as i64, kind);
            }
            let peer = observe::peer_of(fd as i64, kind);
            obs.end([fd as u64, cmd as u64, arg as u64, 0, 0, 0], observe::kernel_ret(r as i64, errno), kind, peer);
            $crate::__private::set_errno(errno);
            r
        });
    };
    // `_exit`: never returns.
    (@exit [$(#[$attr:meta])*] _exit) => {
        #[allow(non_snake_case, non_upper_case_globals)]
        pub mod _exit {
            /// Where the real function is.
            pub static REAL: $crate::Real = $crate::Real::new("_exit\0");
        }
        $(#[$attr])*
        #[allow(clippy::missing_safety_doc)]
        /// The wrapper of libc's `_exit`.
        pub unsafe extern "C" fn _exit(status: c_int) -> ! {
            observe::vfork_child_check();
            match _exit::REAL.get() {
                Some(addr) => {
                    // SAFETY: `addr` is libc's `_exit`, of this signature.
                    let real = unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(c_int) -> !>(addr) };
                    // SAFETY: the caller's argument, passed on.
                    unsafe { real(status) }
                }
                None => $crate::__private::exit_now(status),
            }
        }

    };
    // A call filed under its first argument's fd kind (and peer).
    (@fd [$(#[$attr:meta])*] $name:ident, $nr:expr, ($fd:ident: $fdty:ty $(, $a:ident: $t:ty)*) -> $ret:ty) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($fd: $fdty $(, $a: $t)*) -> $ret, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of($nr); CALL }) else {
                return real($fd $(, $a)*);
            };
            let kind = observe::kind_of($fd as i64);
            let r = real($fd $(, $a)*);
            let errno = $crate::__private::errno();
            let peer = observe::peer_of($fd as i64, kind);
            obs.end(observe::args(&[$fd as u64 $(, $a as u64)*]), $crate::__private::CRet::kernel(r, errno), kind, peer);
            $crate::__private::set_errno(errno);
            r
        });
    };
    // An exec of this process by path: counted by the image it starts,
    // or as a failure where it returns.
    (@exec [$(#[$attr:meta])*] $name:ident, ($($a:ident: $t:ty),*)) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($($a: $t),*) -> c_int, |real| {
            observe::vfork_child_check();
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of(calls::EXECVE); CALL }) else {
                return real($($a),*);
            };
            let pending = observe::exec_begins(&obs);
            let r = real($($a),*);
            let errno = $crate::__private::errno();
            observe::exec_returned(pending, obs, observe::args(&[$($a as u64),*]), observe::kernel_ret(r as i64, errno));
            $crate::__private::set_errno(errno);
            r
        });
    };
    // A call with no fd argument.
    (@plain [$(#[$attr:meta])*] $name:ident, $nr:expr, ($($a:ident: $t:ty),*) -> $ret:ty) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($($a: $t),*) -> $ret, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of($nr); CALL }) else {
                return real($($a),*);
            };
            let r = real($($a),*);
            let errno = $crate::__private::errno();
            obs.end(observe::args(&[$($a as u64),*]), $crate::__private::CRet::kernel(r, errno), FdKind::None, None);
            $crate::__private::set_errno(errno);
            r
        });
    };
    // A call that returns a new fd: what was known of that number is
    // forgotten (observed or not: the number was reused either way).
    (@new_fd [$(#[$attr:meta])*] $name:ident, $nr:expr, ($($a:ident: $t:ty),*) -> $ret:ty) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($($a: $t),*) -> $ret, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of($nr); CALL }) else {
                let r = real($($a),*);
                observe::forget(r as i64);
                return r;
            };
            let r = real($($a),*);
            let errno = $crate::__private::errno();
            observe::forget(r as i64);
            obs.end(observe::args(&[$($a as u64),*]), $crate::__private::CRet::kernel(r, errno), FdKind::None, None);
            $crate::__private::set_errno(errno);
            r
        });
    };
    // A call whose new fd (its return, or its second argument for
    // dup2/dup3) is of its first argument's kind.
    // Not observed (or not wanted), the new fd's number is only forgotten
    // (asked at its next observed use): the kind of the copied fd is asked
    // only for a call that is recorded.
    (@copy [$(#[$attr:meta])*] $name:ident, $nr:expr, ($fd:ident: $fdty:ty $(, $a:ident: $t:ty)*) -> $ret:ty, |$r:ident| $new:expr) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($fd: $fdty $(, $a: $t)*) -> $ret, |real| {
            let Some(obs) = observe::begin({ const CALL: observe::Call = observe::Call::of($nr); CALL }) else {
                let $r = real($fd $(, $a)*);
                if $r >= 0 {
                    observe::forget($new as i64);
                }
                return $r;
            };
            let kind = observe::kind_of($fd as i64);
            let $r = real($fd $(, $a)*);
            let errno = $crate::__private::errno();
            if $r >= 0 {
                observe::made($new as i64, kind);
            }
            let peer = if $r >= 0 { observe::peer_of($new as i64, kind) } else { None };
            obs.end(observe::args(&[$fd as u64 $(, $a as u64)*]), observe::kernel_ret($r as i64, errno), kind, peer);
            $crate::__private::set_errno(errno);
            $r
        });
    };
    // The wrapper itself: the real function found (or ENOSYS), then `body`
    // with `real` bound to it.
    (@real [$(#[$attr:meta])*] $name:ident, ($($a:ident: $t:ty),*) -> $ret:ty, |$real:ident| $body:block) => {
        #[allow(non_snake_case, non_upper_case_globals)]
        pub mod $name {
            /// Where the real function is.
            pub static REAL: $crate::Real = $crate::Real::new(concat!(stringify!($name), "\0"));
        }
        $(#[$attr])*
        #[allow(clippy::missing_safety_doc, clippy::useless_conversion, clippy::unnecessary_cast)]
        /// The wrapper of libc's function of this name.
        pub unsafe extern "C" fn $name($($a: $t),*) -> $ret {
            let Some(addr) = $name::REAL.get() else {
                return $crate::__private::unresolved();
            };
            // SAFETY: `addr` is the address of libc's function of this
            // name, whose C signature is this wrapper's.
            let $real = unsafe {
                core::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $ret>(addr)
            };
            #[allow(unused_unsafe)]
            // SAFETY: the caller's arguments are passed on unchanged, as
            // the caller's contract with libc's function requires.
            unsafe { $body }
        }
    };
}
