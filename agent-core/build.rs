//! Generates the per-architecture syscall tables from the `syscalls` crate and
//! the committed, append-only canonical id list (`syscall-ids.txt`).
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

fn arch_table<I: Iterator<Item = (String, u32)>>(entries: I) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = entries.collect();
    v.sort_by_key(|e| e.1);
    v
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
        (
            "X86_64",
            arch_table(
                syscalls::x86_64::Sysno::iter()
                    .map(|s| (s.name().trim_start_matches("r#").to_string(), s.id() as u32)),
            ),
        ),
        (
            "I386",
            arch_table(
                syscalls::x86::Sysno::iter()
                    .map(|s| (s.name().trim_start_matches("r#").to_string(), s.id() as u32)),
            ),
        ),
        (
            "AARCH64",
            arch_table(
                syscalls::aarch64::Sysno::iter()
                    .map(|s| (s.name().trim_start_matches("r#").to_string(), s.id() as u32)),
            ),
        ),
        (
            "ARM",
            arch_table(
                syscalls::arm::Sysno::iter()
                    .map(|s| (s.name().trim_start_matches("r#").to_string(), s.id() as u32)),
            ),
        ),
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
