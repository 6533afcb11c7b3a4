//! Generates the per-architecture syscall tables from the `syscalls` crate
//! (plus [`OVERLAY`]: the calls of newer kernels the crate lacks) and the
//! committed, append-only canonical id list (`syscall-ids.txt`).
//!
//! Output (`$OUT_DIR/syscall_tables.rs`):
//! - `NAMES`: canonical id -> name;
//! - `SORTED_NAMES`: (name, id) sorted by name, for lookups by name;
//! - `RAW_TO_ID_<ARCH>`: raw syscall number -> canonical id (gaps are `UNKNOWN`);
//! - `MISSING_NAMES`: names the `syscalls` crate knows that the id list does
//!   not yet have (a unit test fails while it is non-empty).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// ARM's private syscalls live above `__ARM_NR_BASE` (0x0f0000) and are not
/// in the `syscalls` crate (arch/arm/include/uapi/asm/unistd.h).
const ARM_PRIVATE: &[(&str, u32)] = &[
    ("breakpoint", 0x0f0001),
    ("cacheflush", 0x0f0002),
    ("usr26", 0x0f0003),
    ("usr32", 0x0f0004),
    ("set_tls", 0x0f0005),
    ("get_tls", 0x0f0006),
];

/// Syscalls of Linux up to 6.18 (and the one strace 7.2 names after it)
/// that the `syscalls` crate 0.8.1 lacks (its tables end at `file_setattr`,
/// 469): (name, number on x86_64, i386, aarch64, arm). Each is added to a
/// table unless the crate already has the name (a newer crate: its number
/// wins); `arch_table` fails the build if the crate gives the number to
/// another syscall.
///
/// - `listns` (Linux 6.18): 470 in arch/x86/entry/syscalls/syscall_64.tbl
///   (common), syscall_32.tbl (i386), scripts/syscall.tbl (the generic
///   table aarch64 uses; include/uapi/asm-generic/unistd.h `__NR_listns`)
///   and arch/arm/tools/syscall.tbl.
/// - `rseq_slice_yield` (merged after 6.18, for 6.19/7.0; strace 7.2 names
///   it): 471 in the same four tables ("rseq: Implement
///   sys_rseq_slice_yield()", asm-generic `__NR_rseq_slice_yield 471`). On
///   6.18 it returns ENOSYS, and strace still calls it by its name.
const OVERLAY: &[(&str, [u32; 4])] = &[
    ("listns", [470, 470, 470, 470]),
    ("rseq_slice_yield", [471, 471, 471, 471]),
];

/// Indices into an overlay entry's numbers.
const X86_64: usize = 0;
const I386: usize = 1;
const AARCH64: usize = 2;
const ARM: usize = 3;

/// One ABI's (name, number) list: the crate's entries, then the overlay's
/// (`abi`: the overlay column), sorted by number.
fn arch_table<I: Iterator<Item = (String, u32)>>(entries: I, abi: usize) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = entries.collect();
    for (name, nrs) in OVERLAY {
        let nr = nrs[abi];
        if v.iter().any(|(n, _)| n == name) {
            continue; // a newer crate has it: its number wins
        }
        assert!(
            !v.iter().any(|e| e.1 == nr),
            "overlay syscall {name} ({nr}) is another syscall's number in the syscalls crate"
        );
        v.push((name.to_string(), nr));
    }
    v.sort_by_key(|e| e.1);
    v
}

/// Every (name, number) of one of the `syscalls` crate's tables. Not
/// `Sysno::iter()`: in 0.8.1 it stops before the table's last entry (its
/// `next()` searches only numbers below `last()`), which lost
/// `file_setattr` (469) on every ABI.
macro_rules! every_syscall {
    ($arch:ident) => {{
        use syscalls::$arch::Sysno;
        (Sysno::first().id()..=Sysno::last().id())
            .filter_map(|nr| Sysno::new(nr as usize))
            .map(|s| (s.name().trim_start_matches("r#").to_string(), s.id() as u32))
    }};
}

fn main() {
    println!("cargo:rerun-if-changed=syscall-ids.txt");
    println!("cargo:rerun-if-changed=build.rs");
    let list = std::fs::read_to_string("syscall-ids.txt").expect("read syscall-ids.txt");
    let names: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut id_of: HashMap<&str, u16> = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        assert!(
            id_of.insert(n, i as u16).is_none(),
            "duplicate name {n} in syscall-ids.txt"
        );
    }

    let arches: Vec<(&str, Vec<(String, u32)>)> = vec![
        ("X86_64", arch_table(every_syscall!(x86_64), X86_64)),
        ("I386", arch_table(every_syscall!(x86), I386)),
        ("AARCH64", arch_table(every_syscall!(aarch64), AARCH64)),
        ("ARM", arch_table(every_syscall!(arm), ARM)),
    ];

    let mut out = String::new();
    writeln!(out, "/// Canonical id -> syscall name (append-only).").unwrap();
    writeln!(out, "pub(crate) static NAMES: [&str; {}] = [", names.len()).unwrap();
    for n in &names {
        writeln!(out, "    {n:?},").unwrap();
    }
    writeln!(out, "];").unwrap();

    let sorted: BTreeMap<&str, u16> = id_of.iter().map(|(k, v)| (*k, *v)).collect();
    writeln!(out, "/// (name, id) sorted by name.").unwrap();
    writeln!(
        out,
        "pub(crate) static SORTED_NAMES: [(&str, u16); {}] = [",
        sorted.len()
    )
    .unwrap();
    for (n, i) in &sorted {
        writeln!(out, "    ({n:?}, {i}),").unwrap();
    }
    writeln!(out, "];").unwrap();

    let mut missing: Vec<String> = Vec::new();
    for (arch, table) in &arches {
        let size = table.last().map(|e| e.1 as usize + 1).unwrap_or(0);
        let mut raw = vec![1u16; size]; // 1 == SyscallId::UNKNOWN
        for (name, nr) in table {
            match id_of.get(name.as_str()) {
                Some(id) => raw[*nr as usize] = *id,
                None => {
                    if !missing.contains(name) {
                        missing.push(name.clone())
                    }
                }
            }
        }
        writeln!(out, "/// {arch}: raw syscall number -> canonical id.").unwrap();
        writeln!(
            out,
            "pub(crate) static RAW_TO_ID_{arch}: [u16; {size}] = {raw:?};"
        )
        .unwrap();
    }
    writeln!(out, "/// ARM private syscalls: (raw number, canonical id).").unwrap();
    let arm_private: Vec<(u32, u16)> = ARM_PRIVATE
        .iter()
        .map(|(n, nr)| (*nr, *id_of.get(n).unwrap_or(&1)))
        .collect();
    writeln!(
        out,
        "pub(crate) static ARM_PRIVATE: [(u32, u16); {}] = {arm_private:?};",
        arm_private.len()
    )
    .unwrap();
    writeln!(
        out,
        "/// Names known to the `syscalls` crate but absent from syscall-ids.txt."
    )
    .unwrap();
    writeln!(out, "#[allow(dead_code)]").unwrap();
    writeln!(
        out,
        "pub(crate) static MISSING_NAMES: [&str; {}] = {missing:?};",
        missing.len()
    )
    .unwrap();

    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("syscall_tables.rs");
    std::fs::write(path, out).expect("write syscall tables");
}
