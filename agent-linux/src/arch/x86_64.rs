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
//! (see [`super::x86`]).

use agent_core::Arch;

use super::{word64, x86, Abi, SyscallRegs, ENOSYS};
use crate::sys::RegsBuf;

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

/// The x86_64 tracer.
#[derive(Debug)]
pub struct X86_64;

impl Abi for X86_64 {
    const NATIVE: Arch = Arch::X86_64;
    const ABIS: &'static [Arch] = &[Arch::X86_64, Arch::I386];

    fn decode(regs: &RegsBuf, len: usize) -> Option<SyscallRegs> {
        match len {
            REGS_LEN => Some(decode_x86_64(regs)),
            x86::REGS_LEN => x86::decode_i386(regs),
            _ => None,
        }
    }
}

/// Decodes the 64-bit layout (shared with the i686 tracer, which sees a
/// 64-bit child's registers in this layout on an x86_64 kernel).
pub fn decode_x86_64(regs: &RegsBuf) -> SyscallRegs {
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
    use crate::arch::testutil::{with_words32, with_words64};

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
        let r = X86_64::decode(&entry, REGS_LEN).unwrap();
        assert_eq!(r.arch, Arch::X86_64);
        assert_eq!(r.nr, 0);
        assert_eq!(r.args, [3, 0x1000, 64, 4, 5, 6]);
        assert_eq!(r.at_entry, None);
        let exit = with_words64(&[(ORIG_RAX, 0), (RAX, (-11i64) as u64)]);
        let r = X86_64::decode(&exit, REGS_LEN).unwrap();
        assert_eq!(r.ret, -11);
        assert_eq!(r.at_entry, Some(false));
    }

    #[test]
    fn compat_process_uses_the_i386_layout() {
        let regs = with_words32(&[(0, 7), (6, (-2i32) as u32), (11, 5)]);
        let r = X86_64::decode(&regs, x86::REGS_LEN).unwrap();
        assert_eq!(r.arch, Arch::I386);
        assert_eq!(r.nr, 5);
        assert_eq!(r.args[0], 7);
        assert_eq!(r.ret, -2);
        assert_eq!(X86_64::decode(&regs, 100), None);
    }
}
