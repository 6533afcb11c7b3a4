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
//! variadic), `vfork` (a wrapper cannot return twice on a shared stack)
//! and `posix_spawn`, `system`, `popen` (their calls are libc's own) are
//! not wrapped: see docs/edge-agent.md.

/// The wrappers, each with the attributes given (e.g. `#[no_mangle]`).
#[macro_export]
macro_rules! libc_wrappers {
    ($(#[$attr:meta])*) => {
        use $crate::__private::libc::{
            c_char, c_int, c_uint, c_void, iovec, msghdr, off_t, pid_t, pollfd, size_t,
            sockaddr, socklen_t, ssize_t, timespec, timeval, epoll_event, fd_set, sigset_t,
            rusage, clockid_t, useconds_t, nfds_t,
        };
        use $crate::__private::{calls, observe, FdKind};

        // The read/write family and the other calls filed by their fd.
        $crate::libc_wrappers!(@fd [$(#[$attr])*] read, calls::READ, (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] write, calls::WRITE, (fd: c_int, buf: *const c_void, n: size_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] pread, calls::PREAD, (fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] pread64, calls::PREAD, (fd: c_int, buf: *mut c_void, n: size_t, off: i64) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] pwrite, calls::PWRITE, (fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] pwrite64, calls::PWRITE, (fd: c_int, buf: *const c_void, n: size_t, off: i64) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] readv, calls::READV, (fd: c_int, iov: *const iovec, n: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] writev, calls::WRITEV, (fd: c_int, iov: *const iovec, n: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] preadv, calls::PREADV, (fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] pwritev, calls::PWRITEV, (fd: c_int, iov: *const iovec, n: c_int, off: off_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] sendfile, calls::SENDFILE, (out_fd: c_int, in_fd: c_int, off: *mut off_t, n: size_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] sendfile64, calls::SENDFILE, (out_fd: c_int, in_fd: c_int, off: *mut i64, n: size_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] fsync, calls::FSYNC, (fd: c_int) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] fdatasync, calls::FDATASYNC, (fd: c_int) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] bind, calls::BIND, (fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] listen, calls::LISTEN, (fd: c_int, backlog: c_int) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] shutdown, calls::SHUTDOWN, (fd: c_int, how: c_int) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] send, calls::SENDTO, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] sendto, calls::SENDTO, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int, to: *const sockaddr, len: socklen_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] sendmsg, calls::SENDMSG, (fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] recv, calls::RECVFROM, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] recvfrom, calls::RECVFROM, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, from: *mut sockaddr, len: *mut socklen_t) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] recvmsg, calls::RECVMSG, (fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] epoll_wait, calls::EPOLL_WAIT, (fd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int) -> c_int);
        $crate::libc_wrappers!(@fd [$(#[$attr])*] epoll_pwait, calls::EPOLL_PWAIT, (fd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int);

        // Calls with no fd argument; those that make an fd forget what
        // was known of its number.
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] open, calls::OPEN_AS, (path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] open64, calls::OPEN_AS, (path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] openat, calls::OPENAT, (dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] openat64, calls::OPENAT, (dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] creat, calls::CREAT_AS, (path: *const c_char, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] creat64, calls::CREAT_AS, (path: *const c_char, mode: c_uint) -> c_int);
        $crate::libc_wrappers!(@new_fd [$(#[$attr])*] socket, calls::SOCKET, (domain: c_int, ty: c_int, protocol: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] stat, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] stat64, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] lstat, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] lstat64, calls::STAT_AS, (path: *const c_char, buf: *mut c_void) -> c_int);
        // Filed without an fd kind on glibc, as the other backends file the
        // `newfstatat` it makes (a path call); bionic's is `fstat` itself.
        $crate::libc_wrappers!(@plain [$(#[$attr])*] fstat, calls::FSTAT_AS, (fd: c_int, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] fstat64, calls::FSTAT_AS, (fd: c_int, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] fstatat, calls::STAT_AS, (dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] fstatat64, calls::STAT_AS, (dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int);
        // glibc before 2.33 exported the stat family under these names only.
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __xstat, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __xstat64, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __lxstat, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __lxstat64, calls::STAT_AS, (ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __fxstatat, calls::STAT_AS, (ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] __fxstatat64, calls::STAT_AS, (ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] poll, calls::POLL, (fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] ppoll, calls::PPOLL, (fds: *mut pollfd, n: nfds_t, timeout: *const timespec, mask: *const sigset_t) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] select, calls::SELECT_AS, (n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *mut timeval) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] pselect, calls::PSELECT, (n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *const timespec, mask: *const sigset_t) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] nanosleep, calls::CLOCK_NANOSLEEP, (req: *const timespec, rem: *mut timespec) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] usleep, calls::CLOCK_NANOSLEEP, (us: useconds_t) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] sleep, calls::CLOCK_NANOSLEEP, (s: c_uint) -> c_uint);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] mmap, calls::MMAP, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] mmap64, calls::MMAP, (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] munmap, calls::MUNMAP, (addr: *mut c_void, len: size_t) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] madvise, calls::MADVISE, (addr: *mut c_void, len: size_t, advice: c_int) -> c_int);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] wait4, calls::WAIT4, (pid: pid_t, status: *mut c_int, options: c_int, usage: *mut rusage) -> pid_t);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] waitpid, calls::WAIT4, (pid: pid_t, status: *mut c_int, options: c_int) -> pid_t);
        $crate::libc_wrappers!(@plain [$(#[$attr])*] wait, calls::WAIT4, (status: *mut c_int) -> pid_t);

        // Calls that change what the process's fds are.
        $crate::libc_wrappers!(@real [$(#[$attr])*] close, (fd: c_int) -> c_int, |real| {
            let Some(obs) = observe::begin(calls::CLOSE) else {
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
        });
        $crate::libc_wrappers!(@copy [$(#[$attr])*] dup, calls::DUP, (fd: c_int) -> c_int, |r| r);
        $crate::libc_wrappers!(@copy [$(#[$attr])*] dup2, calls::DUP2, (fd: c_int, new_fd: c_int) -> c_int, |r| r);
        $crate::libc_wrappers!(@copy [$(#[$attr])*] dup3, calls::DUP3, (fd: c_int, new_fd: c_int, flags: c_int) -> c_int, |r| r);
        $crate::libc_wrappers!(@copy [$(#[$attr])*] accept, calls::ACCEPT, (fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int, |r| r);
        $crate::libc_wrappers!(@copy [$(#[$attr])*] accept4, calls::ACCEPT4, (fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int, |r| r);
        $crate::libc_wrappers!(@real [$(#[$attr])*] connect, (fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int, |real| {
            let Some(obs) = observe::begin(calls::CONNECT) else {
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
        });

        // Processes: `fork` is filed as the `clone` it makes, counted in
        // the parent (where strace counts it); `execve` by the image it
        // starts, or as a failure where it returns.
        $crate::libc_wrappers!(@real [$(#[$attr])*] fork, () -> pid_t, |real| {
            let Some(obs) = observe::begin(calls::CLONE) else {
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
        });
        $crate::libc_wrappers!(@real [$(#[$attr])*] execve, (path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int, |real| {
            let Some(obs) = observe::begin(calls::EXECVE) else {
                return real(path, argv, envp);
            };
            let pending = observe::exec_begins(&obs);
            let r = real(path, argv, envp);
            let errno = $crate::__private::errno();
            observe::exec_returned(pending, obs, [path as u64, argv as u64, envp as u64, 0, 0, 0], observe::kernel_ret(r as i64, errno));
            $crate::__private::set_errno(errno);
            r
        });
        $crate::libc_wrappers!(@real [$(#[$attr])*] execv, (path: *const c_char, argv: *const *const c_char) -> c_int, |real| {
            let Some(obs) = observe::begin(calls::EXECVE) else {
                return real(path, argv);
            };
            let pending = observe::exec_begins(&obs);
            let r = real(path, argv);
            let errno = $crate::__private::errno();
            observe::exec_returned(pending, obs, [path as u64, argv as u64, 0, 0, 0, 0], observe::kernel_ret(r as i64, errno));
            $crate::__private::set_errno(errno);
            r
        });
        $crate::libc_wrappers!(@real [$(#[$attr])*] clock_nanosleep, (clock: clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int, |real| {
            let Some(obs) = observe::begin(calls::CLOCK_NANOSLEEP) else {
                return real(clock, flags, req, rem);
            };
            // Returns the error number itself, errno untouched.
            let r = real(clock, flags, req, rem);
            obs.end([clock as u64, flags as u64, req as u64, rem as u64, 0, 0], -(r as i64), FdKind::None, None);
            r
        });
    };

    // A call filed under its first argument's fd kind (and peer).
    (@fd [$(#[$attr:meta])*] $name:ident, $nr:expr, ($fd:ident: $fdty:ty $(, $a:ident: $t:ty)*) -> $ret:ty) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($fd: $fdty $(, $a: $t)*) -> $ret, |real| {
            let Some(obs) = observe::begin($nr) else {
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
    // A call with no fd argument.
    (@plain [$(#[$attr:meta])*] $name:ident, $nr:expr, ($($a:ident: $t:ty),*) -> $ret:ty) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($($a: $t),*) -> $ret, |real| {
            let Some(obs) = observe::begin($nr) else {
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
            let Some(obs) = observe::begin($nr) else {
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
    (@copy [$(#[$attr:meta])*] $name:ident, $nr:expr, ($fd:ident: $fdty:ty $(, $a:ident: $t:ty)*) -> $ret:ty, |$r:ident| $new:expr) => {
        $crate::libc_wrappers!(@real [$(#[$attr])*] $name, ($fd: $fdty $(, $a: $t)*) -> $ret, |real| {
            let kind = observe::kind_of($fd as i64);
            let obs = observe::begin($nr);
            let $r = real($fd $(, $a)*);
            let errno = $crate::__private::errno();
            if $r >= 0 {
                observe::made($new as i64, kind);
            }
            if let Some(obs) = obs {
                let peer = if $r >= 0 { observe::peer_of($new as i64, kind) } else { None };
                obs.end(observe::args(&[$fd as u64 $(, $a as u64)*]), observe::kernel_ret($r as i64, errno), kind, peer);
            }
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
