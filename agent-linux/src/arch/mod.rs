//! Per-architecture register decoding, behind one small trait.
//!
//! When the kernel lacks PTRACE_GET_SYSCALL_INFO (before Linux 5.3), the
//! syscall number, arguments and result come from the `NT_PRSTATUS` regset.
//! Its layout depends on the tracer's architecture and, on a 64-bit kernel,
//! on whether the stopped thread is a 32-bit (compat) process: the kernel
//! then returns the 32-bit layout, so the regset's size tells them apart.
//!
//! Every module here is plain byte decoding, compiled on every target, so
//! the decoders of all four architectures are unit-tested on any host; only
//! the [`Native`] alias picks the one the tracer uses.

use agent_core::Arch;

use crate::sys::RegsBuf;

pub mod aarch64;
pub mod arm;
pub mod x86;
pub mod x86_64;

/// `AUDIT_ARCH_*` values (include/uapi/linux/audit.h): the ABI tag of
/// PTRACE_GET_SYSCALL_INFO and of seccomp's `seccomp_data.arch`.
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
/// i386.
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// aarch64.
pub const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
/// 32-bit ARM, little-endian.
pub const AUDIT_ARCH_ARM: u32 = 0x4000_0028;

/// The ABI an `AUDIT_ARCH_*` value names.
pub fn arch_from_audit(audit: u32) -> Option<Arch> {
    match audit {
        AUDIT_ARCH_X86_64 => Some(Arch::X86_64),
        AUDIT_ARCH_I386 => Some(Arch::I386),
        AUDIT_ARCH_AARCH64 => Some(Arch::Aarch64),
        AUDIT_ARCH_ARM => Some(Arch::Arm),
        _ => None,
    }
}

/// The `AUDIT_ARCH_*` value of an ABI.
pub fn audit_of(arch: Arch) -> u32 {
    match arch {
        Arch::X86_64 => AUDIT_ARCH_X86_64,
        Arch::I386 => AUDIT_ARCH_I386,
        Arch::Aarch64 => AUDIT_ARCH_AARCH64,
        Arch::Arm => AUDIT_ARCH_ARM,
    }
}

/// What a syscall stop's registers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallRegs {
    /// The ABI of the stopped thread.
    pub arch: Arch,
    /// Syscall number (valid at entry; most ABIs keep it at exit too).
    pub nr: u32,
    /// Arguments (valid at entry; some ABIs overwrite the first at exit).
    pub args: [u64; 6],
    /// Result (valid at exit), sign-extended for 32-bit ABIs.
    pub ret: i64,
    /// Whether this is the entry stop, when the registers tell: exactly on
    /// ARM (the kernel marks the direction in a scratch register); on x86
    /// only "not entry" (at entry the result register holds -ENOSYS).
    pub at_entry: Option<bool>,
}

/// One architecture's view of its tracees' registers.
pub trait Abi {
    /// The tracer's own ABI.
    const NATIVE: Arch;
    /// The ABIs this kernel can run processes in, native first (the seccomp
    /// filter needs a branch for each).
    const ABIS: &'static [Arch];
    /// Decodes a `NT_PRSTATUS` regset of `len` bytes; `None` for a size this
    /// architecture does not produce.
    fn decode(regs: &RegsBuf, len: usize) -> Option<SyscallRegs>;
}

/// The tracer's architecture.
#[cfg(target_arch = "x86_64")]
pub type Native = x86_64::X86_64;
/// The tracer's architecture.
#[cfg(target_arch = "x86")]
pub type Native = x86::I686;
/// The tracer's architecture.
#[cfg(target_arch = "aarch64")]
pub type Native = aarch64::Aarch64;
/// The tracer's architecture.
#[cfg(target_arch = "arm")]
pub type Native = arm::Armv7;

/// Word `i` of a buffer of 64-bit registers.
pub(crate) fn word64(regs: &RegsBuf, i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&regs.0[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(b)
}

/// Word `i` of a buffer of 32-bit registers.
pub(crate) fn word32(regs: &RegsBuf, i: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&regs.0[i * 4..i * 4 + 4]);
    u32::from_ne_bytes(b)
}

/// -ENOSYS, which x86 kernels put in the result register before the
/// syscall-entry stop.
pub(crate) const ENOSYS: i64 = -38;

#[cfg(test)]
pub(crate) mod testutil {
    use crate::sys::RegsBuf;

    pub fn with_words64(words: &[(usize, u64)]) -> RegsBuf {
        let mut b = RegsBuf::new();
        for (i, w) in words {
            b.0[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }

    pub fn with_words32(words: &[(usize, u32)]) -> RegsBuf {
        let mut b = RegsBuf::new();
        for (i, w) in words {
            b.0[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}
