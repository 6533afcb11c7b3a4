//! aarch64, and 32-bit ARM processes on an aarch64 kernel.
//!
//! `struct user_pt_regs` (arch/arm64/include/uapi/asm/ptrace.h): u64
//! `regs[31]`, `sp`, `pc`, `pstate` = 34 × u64 = 272 bytes.
//!
//! Syscall ABI: number in x8, arguments in x0..x5, result in x0 (so the
//! first argument is gone at exit: it is read at entry). At a syscall stop
//! the kernel temporarily sets x7 to 0 (entry) or 1 (exit), which tells the
//! stops apart exactly (arch/arm64/kernel/ptrace.c, `report_syscall`).
//! For a 32-bit process the kernel returns the 72-byte ARM layout
//! (`super::arm`).

use agent_core::Arch;

use super::{word64, Layout, SyscallRegs};

/// Size of the 64-bit regset.
pub const REGS_LEN: usize = 34 * 8;

const X7: usize = 7;
const X8: usize = 8;

/// The 64-bit layout.
pub const LAYOUT: Layout = Layout {
    len: REGS_LEN,
    decode,
};

/// Decodes [`REGS_LEN`] bytes of the 64-bit layout.
fn decode(regs: &[u8]) -> SyscallRegs {
    SyscallRegs {
        arch: Arch::Aarch64,
        nr: word64(regs, X8) as u32,
        args: [
            word64(regs, 0),
            word64(regs, 1),
            word64(regs, 2),
            word64(regs, 3),
            word64(regs, 4),
            word64(regs, 5),
        ],
        ret: word64(regs, 0) as i64,
        at_entry: Some(word64(regs, X7) == 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words64;

    #[test]
    fn decodes_aarch64() {
        let entry = with_words64(&[(0, 3), (1, 0x1000), (2, 64), (X7, 0), (X8, 63)]);
        let r = decode(&entry[..REGS_LEN]);
        assert_eq!(r.arch, Arch::Aarch64);
        assert_eq!(r.nr, 63);
        assert_eq!(r.args[..3], [3, 0x1000, 64]);
        assert_eq!(r.at_entry, Some(true));
        let exit = with_words64(&[(0, (-4i64) as u64), (X7, 1), (X8, 63)]);
        let r = decode(&exit[..REGS_LEN]);
        assert_eq!(r.ret, -4);
        assert_eq!(r.at_entry, Some(false));
    }
}
