//! libc's ways of saying a call failed, in the kernel's form the
//! statistics take (`-errno`), and what a wrapper returns when the real
//! function does not exist in this libc.

/// A wrapped function's return type.
pub trait CRet: Copy {
    /// The value, in the kernel's form, given the `errno` after the call.
    fn kernel(self, errno: i32) -> i64;
    /// libc's failure value (with `errno` ENOSYS: no such function).
    fn failure() -> Self;
}

macro_rules! minus_one {
    ($($t:ty),*) => {$(
        impl CRet for $t {
            #[inline]
            fn kernel(self, errno: i32) -> i64 {
                crate::observe::kernel_ret(self as i64, errno)
            }
            fn failure() -> Self {
                -1
            }
        }
    )*};
}
minus_one!(i32, i64, isize);

/// `mmap`: `MAP_FAILED` on failure, else an address (not negative as a
/// kernel return: the kernel's `mmap` returns it too).
impl CRet for *mut libc::c_void {
    #[inline]
    fn kernel(self, errno: i32) -> i64 {
        if self == libc::MAP_FAILED {
            -(errno as i64)
        } else {
            self as usize as i64
        }
    }
    fn failure() -> Self {
        libc::MAP_FAILED
    }
}

/// `popen`: NULL on failure.
impl CRet for *mut libc::FILE {
    #[inline]
    fn kernel(self, errno: i32) -> i64 {
        if self.is_null() {
            -(errno as i64)
        } else {
            0
        }
    }
    fn failure() -> Self {
        core::ptr::null_mut()
    }
}

/// `sleep`: the seconds left when a signal ended it early.
impl CRet for u32 {
    #[inline]
    fn kernel(self, _errno: i32) -> i64 {
        if self == 0 {
            0
        } else {
            -(libc::EINTR as i64)
        }
    }
    fn failure() -> Self {
        0
    }
}

/// The failure a wrapper returns when this libc lacks the real function.
pub fn unresolved<R: CRet>() -> R {
    crate::sys::set_errno(libc::ENOSYS);
    R::failure()
}
