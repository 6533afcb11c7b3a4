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

use super::{word32, Layout, SyscallRegs, ENOSYS};

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

/// The i386 layout.
pub const LAYOUT: Layout = Layout {
    len: REGS_LEN,
    decode,
};

/// Decodes [`REGS_LEN`] bytes of the i386 layout.
fn decode(regs: &[u8]) -> SyscallRegs {
    let ret = word32(regs, EAX) as i32 as i64;
    SyscallRegs {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::testutil::with_words32;

    /// Decodes through the layout table, as the tracers do.
    fn decode_i386(regs: &[u8]) -> Option<SyscallRegs> {
        (LAYOUT.len == regs.len()).then(|| (LAYOUT.decode)(regs))
    }

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
        let r = decode_i386(&regs[..REGS_LEN]).unwrap();
        assert_eq!(r.arch, Arch::I386);
        assert_eq!(r.nr, 4);
        assert_eq!(r.args, [1, 2, 3, 4, 5, 6]);
        assert_eq!(r.at_entry, None);
        let exit = with_words32(&[(EAX, 0xf700_0000), (ORIG_EAX, 192)]);
        let r = decode_i386(&exit[..REGS_LEN]).unwrap();
        assert_eq!(r.ret, 0xf700_0000u32 as i32 as i64, "sign-extended");
        assert_eq!(r.at_entry, Some(false));
        assert_eq!(decode_i386(&regs[..100]), None);
    }
}
