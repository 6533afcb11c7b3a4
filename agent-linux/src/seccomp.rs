//! The `--only` prefilter: a classic-BPF seccomp program that returns
//! SECCOMP_RET_TRACE for the chosen syscalls (a ptrace seccomp stop) and
//! SECCOMP_RET_ALLOW for everything else, which then runs at full speed.
//!
//! The program branches on `seccomp_data.arch` first: a process may exec a
//! program of another ABI of the same kernel (i386 on x86_64, arm on
//! aarch64), and syscall numbers differ per ABI. Unknown ABIs are allowed.

use agent_core::{Arch, SyscallId};

use crate::arch::audit_of;
use crate::sys::SockFilter;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JA: u16 = 0x05;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// Return values.
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
/// The kernel's limit on a program's length.
const BPF_MAXINSNS: usize = 4096;

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter {
        code: BPF_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// Builds the program for the ABIs `abis` tracing `ids`; `None` if it would
/// exceed the kernel's length limit.
pub fn build(abis: &[Arch], ids: &[SyscallId]) -> Option<Vec<SockFilter>> {
    let blocks: Vec<Vec<u32>> = abis
        .iter()
        .map(|a| {
            let mut nrs: Vec<u32> = ids.iter().filter_map(|id| id.to_raw(*a)).collect();
            nrs.sort_unstable();
            nrs.dedup();
            nrs
        })
        .collect();
    let mut prog = vec![stmt(BPF_LD_W_ABS, OFFSET_ARCH)];
    // Dispatch: `jeq arch; ja block` per ABI, then allow.
    let dispatch_len = 2 * abis.len() + 1;
    let mut block_start = 1 + dispatch_len;
    for (abi, nrs) in abis.iter().zip(&blocks) {
        prog.push(jeq(audit_of(*abi), 0, 1));
        let here = prog.len() + 1; // pc after the ja
        prog.push(stmt(BPF_JA, (block_start - here) as u32));
        block_start += 2 + 2 * nrs.len();
    }
    prog.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    for nrs in &blocks {
        prog.push(stmt(BPF_LD_W_ABS, OFFSET_NR));
        for nr in nrs {
            prog.push(jeq(*nr, 0, 1));
            prog.push(stmt(BPF_RET_K, SECCOMP_RET_TRACE));
        }
        prog.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    }
    (prog.len() <= BPF_MAXINSNS).then_some(prog)
}

/// Runs `prog` on (arch, nr) the way the kernel would (only the
/// instructions [`build`] emits). For tests.
#[cfg(test)]
pub fn simulate(prog: &[SockFilter], audit_arch: u32, nr: u32) -> Option<u32> {
    let mut pc = 0usize;
    let mut acc = 0u32;
    for _ in 0..=prog.len() {
        let ins = prog.get(pc)?;
        pc += 1;
        match ins.code {
            BPF_LD_W_ABS => {
                acc = match ins.k {
                    OFFSET_NR => nr,
                    OFFSET_ARCH => audit_arch,
                    _ => return None,
                }
            }
            BPF_JEQ_K => pc += if acc == ins.k { ins.jt } else { ins.jf } as usize,
            BPF_JA => pc += ins.k as usize,
            BPF_RET_K => return Some(ins.k),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, AUDIT_ARCH_I386, AUDIT_ARCH_X86_64};

    fn id(n: &str) -> SyscallId {
        SyscallId::from_name(n).unwrap()
    }

    #[test]
    fn traces_exactly_the_chosen_syscalls_per_abi() {
        let ids = [id("read"), id("write"), id("openat")];
        let prog = build(&[Arch::X86_64, Arch::I386], &ids).unwrap();
        for nr in 0..500 {
            let want = if ids.contains(&SyscallId::from_raw(Arch::X86_64, nr)) {
                SECCOMP_RET_TRACE
            } else {
                SECCOMP_RET_ALLOW
            };
            assert_eq!(
                simulate(&prog, AUDIT_ARCH_X86_64, nr),
                Some(want),
                "x86_64 {nr}"
            );
            let want = if ids.contains(&SyscallId::from_raw(Arch::I386, nr)) {
                SECCOMP_RET_TRACE
            } else {
                SECCOMP_RET_ALLOW
            };
            assert_eq!(
                simulate(&prog, AUDIT_ARCH_I386, nr),
                Some(want),
                "i386 {nr}"
            );
        }
        assert_eq!(
            simulate(&prog, AUDIT_ARCH_AARCH64, 63),
            Some(SECCOMP_RET_ALLOW)
        );
    }

    #[test]
    fn arm_abis_and_long_lists() {
        // Every id: long jumps must still land (ja carries 32-bit offsets).
        let all: Vec<SyscallId> = (2..SyscallId::COUNT as u16).map(SyscallId).collect();
        let prog = build(&[Arch::Aarch64, Arch::Arm], &all).unwrap();
        assert_eq!(
            simulate(&prog, AUDIT_ARCH_AARCH64, 63),
            Some(SECCOMP_RET_TRACE)
        );
        assert_eq!(simulate(&prog, AUDIT_ARCH_ARM, 3), Some(SECCOMP_RET_TRACE));
        assert_eq!(
            simulate(&prog, AUDIT_ARCH_ARM, 0x0f0005),
            Some(SECCOMP_RET_TRACE)
        );
        assert_eq!(
            simulate(&prog, AUDIT_ARCH_ARM, 0x0eeeee),
            Some(SECCOMP_RET_ALLOW)
        );
        let one = build(&[Arch::Arm], &[id("read")]).unwrap();
        assert_eq!(simulate(&one, AUDIT_ARCH_ARM, 4), Some(SECCOMP_RET_ALLOW));
        assert_eq!(simulate(&one, AUDIT_ARCH_ARM, 3), Some(SECCOMP_RET_TRACE));
    }
}
