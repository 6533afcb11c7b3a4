//! 32-bit ARM EABI: native (armv7), or a 32-bit process on an aarch64
//! kernel.
//!
//! `struct user_regs` / `pt_regs` (arch/arm/include/asm/ptrace.h): u32
//! `uregs[18]` = 72 bytes: r0..r15, cpsr, ORIG_r0.
//!
//! Syscall ABI (EABI): number in r7, arguments in r0..r5, result in r0. At a
//! syscall stop the kernel temporarily sets ip (r12) to 0 (entry) or 1
//! (exit) (arch/arm/kernel/ptrace.c, `report_syscall`; the aarch64 kernel
//! does the same for compat tasks), which tells the stops apart exactly.

use agent_core::Arch;

use super::{word32, Layout, SyscallRegs};

/// Size of the ARM regset.
pub const REGS_LEN: usize = 18 * 4;

const R7: usize = 7;
const IP: usize = 12;

/// The ARM layout.
pub const LAYOUT: Layout = Layout {
    len: REGS_LEN,
    decode,
};

/// Decodes [`REGS_LEN`] bytes of the ARM layout.
fn decode(regs: &[u8]) -> SyscallRegs {
    SyscallRegs {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words32;

    #[test]
    fn decodes_arm() {
        let entry = with_words32(&[(0, 3), (1, 0x1000), (2, 64), (R7, 3), (IP, 0)]);
        let r = decode(&entry[..REGS_LEN]);
        assert_eq!(r.arch, Arch::Arm);
        assert_eq!(r.nr, 3);
        assert_eq!(r.args[..3], [3, 0x1000, 64]);
        assert_eq!(r.at_entry, Some(true));
        let exit = with_words32(&[(0, (-11i32) as u32), (R7, 3), (IP, 1)]);
        let r = decode(&exit[..REGS_LEN]);
        assert_eq!(r.ret, -11);
        assert_eq!(r.at_entry, Some(false));
    }
}
