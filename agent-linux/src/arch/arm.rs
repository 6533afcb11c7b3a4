//! 32-bit ARM EABI: native (armv7), or a 32-bit process on an aarch64
//! kernel.
//!
//! `struct user_regs` / `pt_regs` (arch/arm/include/asm/ptrace.h): u32
//! uregs[18] = 72 bytes: r0..r15, cpsr, ORIG_r0.
//!
//! Syscall ABI (EABI): number in r7, arguments in r0..r5, result in r0. At a
//! syscall stop the kernel temporarily sets ip (r12) to 0 (entry) or 1
//! (exit) (arch/arm/kernel/ptrace.c, `report_syscall`; the aarch64 kernel
//! does the same for compat tasks), which tells the stops apart exactly.

use agent_core::Arch;

use super::{word32, Abi, SyscallRegs};
use crate::sys::RegsBuf;

/// Size of the ARM regset.
pub const REGS_LEN: usize = 18 * 4;

const R7: usize = 7;
const IP: usize = 12;

/// The armv7 tracer.
#[derive(Debug)]
pub struct Armv7;

impl Abi for Armv7 {
    const NATIVE: Arch = Arch::Arm;
    const ABIS: &'static [Arch] = &[Arch::Arm];

    fn decode(regs: &RegsBuf, len: usize) -> Option<SyscallRegs> {
        (len == REGS_LEN).then(|| decode_arm(regs)).flatten()
    }
}

/// Decodes the ARM layout (shared with the aarch64 tracer's compat case).
pub fn decode_arm(regs: &RegsBuf) -> Option<SyscallRegs> {
    Some(SyscallRegs {
        arch: Arch::Arm,
        nr: word32(regs, R7),
        args: [
            word32(regs, 0) as u64,
            word32(regs, 1) as u64,
            word32(regs, 2) as u64,
            word32(regs, 3) as u64,
            word32(regs, 4) as u64,
            word32(regs, 5) as u64,
        ],
        ret: word32(regs, 0) as i32 as i64,
        at_entry: Some(word32(regs, IP) == 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words32;

    #[test]
    fn decodes_arm() {
        let entry = with_words32(&[(0, 3), (1, 0x1000), (2, 64), (R7, 3), (IP, 0)]);
        let r = Armv7::decode(&entry, REGS_LEN).unwrap();
        assert_eq!(r.arch, Arch::Arm);
        assert_eq!(r.nr, 3);
        assert_eq!(r.args[..3], [3, 0x1000, 64]);
        assert_eq!(r.at_entry, Some(true));
        let exit = with_words32(&[(0, (-11i32) as u32), (R7, 3), (IP, 1)]);
        let r = Armv7::decode(&exit, REGS_LEN).unwrap();
        assert_eq!(r.ret, -11);
        assert_eq!(r.at_entry, Some(false));
        assert_eq!(Armv7::decode(&entry, 272), None);
    }
}
