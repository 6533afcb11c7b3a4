//! Per-architecture register decoding, behind one small trait.
//!
//! When the kernel lacks PTRACE_GET_SYSCALL_INFO (before Linux 5.3), the
//! syscall number, arguments and result come from the `NT_PRSTATUS` regset.
//! Its layout depends on the tracer's architecture and, on a 64-bit kernel,
//! on whether the stopped thread is a 32-bit (compat) process: the kernel
//! then returns the 32-bit layout, so the regset's size tells them apart.
//!
//! Each architecture's module decodes its own regset layout from plain
//! bytes and knows nothing of the others; which layouts a tracer can meet,
//! told apart by size, is said once here ([`Abi::LAYOUTS`]). Everything is
//! compiled on every target, so the decoders of all four architectures are
//! unit-tested on any host; only the [`Native`] alias picks the one the
//! tracer uses.

use agent_core::Arch;

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

/// One regset layout: its size in bytes and its decoder, which is given
/// exactly that many bytes.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Size of the regset in this layout.
    pub len: usize,
    /// Decodes `len` bytes.
    pub decode: fn(&[u8]) -> SyscallRegs,
}

/// One architecture's view of its tracees' registers.
pub trait Abi {
    /// The tracer's own ABI.
    const NATIVE: Arch;
    /// The ABIs this kernel can run processes in, native first (the seccomp
    /// filter needs a branch for each).
    const ABIS: &'static [Arch];
    /// The regset layouts its tracees can show, told apart by size (the
    /// kernel returns a compat task's registers in the 32-bit layout).
    const LAYOUTS: &'static [Layout];

    /// Decodes a `NT_PRSTATUS` regset; `None` for a size this architecture
    /// does not produce.
    fn decode(regs: &[u8]) -> Option<SyscallRegs> {
        Self::LAYOUTS
            .iter()
            .find(|l| l.len == regs.len())
            .map(|l| (l.decode)(regs))
    }
}

/// The x86_64 tracer.
#[derive(Debug)]
pub struct X86_64;

impl Abi for X86_64 {
    const NATIVE: Arch = Arch::X86_64;
    const ABIS: &'static [Arch] = &[Arch::X86_64, Arch::I386];
    const LAYOUTS: &'static [Layout] = &[x86_64::LAYOUT, x86::LAYOUT];
}

/// The i686 tracer.
#[derive(Debug)]
pub struct I686;

impl Abi for I686 {
    const NATIVE: Arch = Arch::I386;
    /// An i686 agent on an x86_64 kernel can meet 64-bit children (a 64-bit
    /// program it starts, or one exec'd by a traced process): the seccomp
    /// filter needs their branch too, and their registers arrive in the
    /// 64-bit layout. On an i386 kernel it never matches.
    const ABIS: &'static [Arch] = &[Arch::I386, Arch::X86_64];
    const LAYOUTS: &'static [Layout] = &[x86::LAYOUT, x86_64::LAYOUT];
}

/// The aarch64 tracer.
#[derive(Debug)]
pub struct Aarch64;

impl Abi for Aarch64 {
    const NATIVE: Arch = Arch::Aarch64;
    const ABIS: &'static [Arch] = &[Arch::Aarch64, Arch::Arm];
    const LAYOUTS: &'static [Layout] = &[aarch64::LAYOUT, arm::LAYOUT];
}

/// The armv7 tracer.
#[derive(Debug)]
pub struct Armv7;

impl Abi for Armv7 {
    const NATIVE: Arch = Arch::Arm;
    const ABIS: &'static [Arch] = &[Arch::Arm];
    const LAYOUTS: &'static [Layout] = &[arm::LAYOUT];
}

/// The tracer's architecture.
#[cfg(target_arch = "x86_64")]
pub type Native = X86_64;
/// The tracer's architecture.
#[cfg(target_arch = "x86")]
pub type Native = I686;
/// The tracer's architecture.
#[cfg(target_arch = "aarch64")]
pub type Native = Aarch64;
/// The tracer's architecture.
#[cfg(target_arch = "arm")]
pub type Native = Armv7;

/// Word `i` of a buffer of 64-bit registers.
pub(crate) fn word64(regs: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&regs[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(b)
}

/// Word `i` of a buffer of 32-bit registers.
pub(crate) fn word32(regs: &[u8], i: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&regs[i * 4..i * 4 + 4]);
    u32::from_ne_bytes(b)
}

/// -ENOSYS, which x86 kernels put in the result register before the
/// syscall-entry stop.
pub(crate) const ENOSYS: i64 = -38;

#[cfg(test)]
pub(crate) mod testutil {
    /// As large as the largest regset (aarch64's 272 bytes and more).
    pub type Regs = [u8; 288];

    pub fn with_words64(words: &[(usize, u64)]) -> Regs {
        let mut b = [0; 288];
        for (i, w) in words {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }

    pub fn with_words32(words: &[(usize, u32)]) -> Regs {
        let mut b = [0; 288];
        for (i, w) in words {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{with_words32, with_words64};
    use super::*;

    #[test]
    fn x86_64_tracer_reads_compat_processes_in_the_i386_layout() {
        let regs = with_words32(&[(0, 7), (6, (-2i32) as u32), (11, 5)]);
        let r = X86_64::decode(&regs[..x86::REGS_LEN]).unwrap();
        assert_eq!(r.arch, Arch::I386);
        assert_eq!(r.nr, 5);
        assert_eq!(r.args[0], 7);
        assert_eq!(r.ret, -2);
        assert_eq!(X86_64::decode(&regs[..100]), None);
    }

    #[test]
    fn i686_tracer_reads_64bit_children_in_the_64bit_layout() {
        let wide = with_words64(&[(15, 1), (10, 64), (14, 3)]);
        let r = I686::decode(&wide[..x86_64::REGS_LEN]).unwrap();
        assert_eq!((r.arch, r.nr, r.ret, r.args[0]), (Arch::X86_64, 1, 64, 3));
        assert_eq!(I686::decode(&wide[..100]), None);
    }

    #[test]
    fn aarch64_tracer_reads_compat_processes_in_the_arm_layout() {
        let regs = with_words32(&[(0, 1), (7, 4), (12, 1)]);
        let r = Aarch64::decode(&regs[..arm::REGS_LEN]).unwrap();
        assert_eq!(r.arch, Arch::Arm);
        assert_eq!(r.nr, 4);
        assert_eq!(r.at_entry, Some(false));
    }

    #[test]
    fn armv7_tracer_knows_only_its_own_layout() {
        let regs = with_words32(&[(7, 3)]);
        assert_eq!(Armv7::decode(&regs[..arm::REGS_LEN]).unwrap().nr, 3);
        assert_eq!(Armv7::decode(&regs[..aarch64::REGS_LEN]), None);
    }
}
