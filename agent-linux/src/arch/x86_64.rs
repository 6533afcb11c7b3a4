//! x86_64, and i386 processes on an x86_64 kernel.
//!
//! `struct user_regs_struct` (arch/x86/include/asm/user_64.h), 27 × u64 =
//! 216 bytes, in this order:
//! r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs
//! eflags rsp ss fs_base gs_base ds es fs gs.
//!
//! Syscall ABI: number in `orig_rax` (the kernel keeps `rax` for the
//! result), arguments in rdi rsi rdx r10 r8 r9 (preserved across the call),
//! result in `rax`. Before the entry stop the kernel sets `rax = -ENOSYS`.
//! For an i386 process the kernel returns the 68-byte i386 layout instead
//! (`super::x86`).

use agent_core::Arch;

use super::{word64, Layout, SyscallRegs, ENOSYS};

/// Size of the 64-bit regset.
pub const REGS_LEN: usize = 27 * 8;

const R10: usize = 7;
const R9: usize = 8;
const R8: usize = 9;
const RAX: usize = 10;
const RDX: usize = 12;
const RSI: usize = 13;
const RDI: usize = 14;
const ORIG_RAX: usize = 15;

/// The 64-bit layout.
pub const LAYOUT: Layout = Layout {
    len: REGS_LEN,
    decode,
};

/// Decodes [`REGS_LEN`] bytes of the 64-bit layout.
fn decode(regs: &[u8]) -> SyscallRegs {
    let ret = word64(regs, RAX) as i64;
    SyscallRegs {
        arch: Arch::X86_64,
        nr: word64(regs, ORIG_RAX) as u32,
        args: [
            word64(regs, RDI),
            word64(regs, RSI),
            word64(regs, RDX),
            word64(regs, R10),
            word64(regs, R8),
            word64(regs, R9),
        ],
        ret,
        at_entry: (ret != ENOSYS).then_some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words64;

    #[test]
    fn decodes_64bit_entry_and_exit() {
        let entry = with_words64(&[
            (ORIG_RAX, 0),
            (RAX, (-38i64) as u64),
            (RDI, 3),
            (RSI, 0x1000),
            (RDX, 64),
            (R10, 4),
            (R8, 5),
            (R9, 6),
        ]);
        let r = decode(&entry[..REGS_LEN]);
        assert_eq!(r.arch, Arch::X86_64);
        assert_eq!(r.nr, 0);
        assert_eq!(r.args, [3, 0x1000, 64, 4, 5, 6]);
        assert_eq!(r.at_entry, None);
        let exit = with_words64(&[(ORIG_RAX, 0), (RAX, (-11i64) as u64)]);
        let r = decode(&exit[..REGS_LEN]);
        assert_eq!(r.ret, -11);
        assert_eq!(r.at_entry, Some(false));
    }
}
