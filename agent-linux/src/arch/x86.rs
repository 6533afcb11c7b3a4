//! i386 / i686: native, or a 32-bit process on an x86_64 kernel.
//!
//! `struct user_regs_struct` (arch/x86/include/asm/user_32.h), 17 × u32 =
//! 68 bytes, in this order:
//! ebx ecx edx esi edi ebp eax xds xes xfs xgs orig_eax eip xcs eflags esp xss.
//!
//! Syscall ABI (`int 0x80` / sysenter): number in `orig_eax`, arguments in
//! ebx ecx edx esi edi ebp (preserved), result in `eax`, which holds -ENOSYS
//! before the entry stop.

use agent_core::Arch;

use super::{word32, Abi, SyscallRegs, ENOSYS};
use crate::sys::RegsBuf;

/// Size of the i386 regset.
pub const REGS_LEN: usize = 17 * 4;

const EBX: usize = 0;
const ECX: usize = 1;
const EDX: usize = 2;
const ESI: usize = 3;
const EDI: usize = 4;
const EBP: usize = 5;
const EAX: usize = 6;
const ORIG_EAX: usize = 11;

/// The i686 tracer.
#[derive(Debug)]
pub struct I686;

impl Abi for I686 {
    const NATIVE: Arch = Arch::I386;
    /// An i686 agent on an x86_64 kernel can meet 64-bit children (a 64-bit
    /// program it starts, or one exec'd by a traced process): the seccomp
    /// filter needs their branch too. On an i386 kernel it never matches.
    const ABIS: &'static [Arch] = &[Arch::I386, Arch::X86_64];

    fn decode(regs: &RegsBuf, len: usize) -> Option<SyscallRegs> {
        match len {
            REGS_LEN => decode_i386(regs),
            // A 64-bit tracee on an x86_64 kernel.
            super::x86_64::REGS_LEN => Some(super::x86_64::decode_x86_64(regs)),
            _ => None,
        }
    }
}

/// Decodes the i386 layout (shared with the x86_64 tracer's compat case).
pub fn decode_i386(regs: &RegsBuf) -> Option<SyscallRegs> {
    let ret = word32(regs, EAX) as i32 as i64;
    Some(SyscallRegs {
        arch: Arch::I386,
        nr: word32(regs, ORIG_EAX),
        args: [
            word32(regs, EBX) as u64,
            word32(regs, ECX) as u64,
            word32(regs, EDX) as u64,
            word32(regs, ESI) as u64,
            word32(regs, EDI) as u64,
            word32(regs, EBP) as u64,
        ],
        ret,
        at_entry: (ret != ENOSYS).then_some(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words32;

    #[test]
    fn decodes_i386() {
        let regs = with_words32(&[
            (EBX, 1),
            (ECX, 2),
            (EDX, 3),
            (ESI, 4),
            (EDI, 5),
            (EBP, 6),
            (EAX, (-38i32) as u32),
            (ORIG_EAX, 4),
        ]);
        let r = I686::decode(&regs, REGS_LEN).unwrap();
        assert_eq!(r.arch, Arch::I386);
        assert_eq!(r.nr, 4);
        assert_eq!(r.args, [1, 2, 3, 4, 5, 6]);
        assert_eq!(r.at_entry, None);
        let exit = with_words32(&[(EAX, 0xf700_0000), (ORIG_EAX, 192)]);
        let r = I686::decode(&exit, REGS_LEN).unwrap();
        assert_eq!(r.ret, 0xf700_0000u32 as i32 as i64, "sign-extended");
        assert_eq!(r.at_entry, Some(false));
        assert_eq!(I686::decode(&regs, 100), None);
        // A 64-bit child on an x86_64 kernel arrives in the 64-bit layout.
        let wide = crate::arch::testutil::with_words64(&[(15, 1), (10, 64), (14, 3)]);
        let r = I686::decode(&wide, super::super::x86_64::REGS_LEN).unwrap();
        assert_eq!((r.arch, r.nr, r.ret, r.args[0]), (Arch::X86_64, 1, 64, 3));
    }
}
