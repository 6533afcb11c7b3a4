//! Trampolines for `--only` (issue 37 item 2), first part: finding the
//! kernel's syscall entry functions a `fentry`/`fexit` program would attach
//! to, and whether this kernel can have them.
//!
//! A traced set given with `--only` needs no raw tracepoint at all: one
//! `fentry`/`fexit` pair per syscall entry function (`__x64_sys_read`,
//! `__arm64_sys_read`, and the compat `__ia32_sys_*` /
//! `__arm64_compat_sys_*` where the kernel has them) costs only the traced
//! calls a trampoline each, and every other syscall nothing. The functions
//! are looked up by name in the kernel's BTF (`/sys/kernel/btf/vmlinux`),
//! which is also what a BTF-typed program is attached by.
//!
//! Not finished: the BPF program (`bpf/only.bpf.c`) and its loading are
//! still to come; the runner does not use this module yet.

use std::path::Path;

use super::btf::RawBtf;
use crate::sys::KERNEL_BTF;

/// `EDGE_AGENT_EBPF_TRAMPOLINES=off` makes [`supported`] say no, so
/// `--backend auto --only SET` keeps the raw-tracepoint path.
pub const TRAMPOLINES_ENV: &str = "EDGE_AGENT_EBPF_TRAMPOLINES";

/// The prefixes of this architecture's syscall entry functions: the
/// native ABI's, and the compat (32-bit) ABI's.
pub fn prefixes() -> (&'static str, &'static str) {
    if cfg!(target_arch = "aarch64") {
        ("__arm64_sys_", "__arm64_compat_sys_")
    } else {
        ("__x64_sys_", "__ia32_sys_")
    }
}

/// One function a program pair attaches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The syscall's name, as `--only` spells it.
    pub syscall: String,
    /// The kernel function, e.g. `__x64_sys_read`.
    pub function: String,
    /// The compat (32-bit) entry point rather than the native one.
    pub compat: bool,
}

/// The names in a BTF blob's string section (not only functions': a
/// name found here is then attached by, which fails cleanly when it is
/// not a function).
pub struct KernelNames {
    strings: Vec<u8>,
}

impl std::fmt::Debug for KernelNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelNames({} bytes of strings)", self.strings.len())
    }
}

impl KernelNames {
    /// The kernel's own BTF.
    pub fn read() -> Result<KernelNames, String> {
        let bytes =
            std::fs::read(Path::new(KERNEL_BTF)).map_err(|e| format!("{KERNEL_BTF}: {e}"))?;
        KernelNames::parse(&bytes)
    }

    /// A BTF blob's string section.
    pub fn parse(bytes: &[u8]) -> Result<KernelNames, String> {
        let strings = RawBtf::strings_of(bytes).map_err(|e| e.to_string())?;
        Ok(KernelNames {
            strings: strings.to_vec(),
        })
    }

    /// Whether `name` is one of the strings.
    pub fn has(&self, name: &str) -> bool {
        let mut whole = Vec::with_capacity(name.len() + 2);
        whole.push(0);
        whole.extend_from_slice(name.as_bytes());
        whole.push(0);
        self.strings.windows(whole.len()).any(|w| w == whole)
    }

    /// The entry functions for `syscalls`: the native one of each (an
    /// error names those the kernel lacks), and the compat one where the
    /// kernel has it.
    pub fn targets(&self, syscalls: &[&str]) -> Result<Vec<Target>, String> {
        let (native, compat) = prefixes();
        let mut out = Vec::new();
        let mut missing = Vec::new();
        for &syscall in syscalls {
            let function = format!("{native}{syscall}");
            if !self.has(&function) {
                missing.push(function);
                continue;
            }
            out.push(Target {
                syscall: syscall.to_string(),
                function,
                compat: false,
            });
            let function = format!("{compat}{syscall}");
            if self.has(&function) {
                out.push(Target {
                    syscall: syscall.to_string(),
                    function,
                    compat: true,
                });
            }
        }
        if missing.is_empty() {
            Ok(out)
        } else {
            Err(format!("not in the kernel's BTF: {}", missing.join(", ")))
        }
    }
}

/// Whether this kernel can have trampolines on its syscall entry
/// functions: a 6.x (or later) kernel with BTF naming `read`'s entry
/// function, unless [`TRAMPOLINES_ENV`] is `off`. Necessary, not
/// sufficient: on the 6.18 x86_64 development machine loading any
/// `BPF_PROG_TYPE_TRACING` program (an `fentry` on `__x64_sys_read`)
/// fails with EPERM and an empty verifier log although raw tracepoints
/// load (a kernel in forced lockdown with the BPF LSM built in), so
/// `--backend auto` must also load one before choosing trampolines.
pub fn supported() -> bool {
    if std::env::var(TRAMPOLINES_ENV).is_ok_and(|v| v == "off") {
        return false;
    }
    let major = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| r.split('.').next()?.parse::<u32>().ok());
    if major.is_none_or(|m| m < 6) {
        return false;
    }
    KernelNames::read().is_ok_and(|names| names.targets(&["read"]).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(strings: &[u8]) -> Vec<u8> {
        let mut b = vec![0x9f, 0xeb, 1, 0];
        b.extend_from_slice(&24u32.to_le_bytes()); // header length
        b.extend_from_slice(&0u32.to_le_bytes()); // type offset
        b.extend_from_slice(&0u32.to_le_bytes()); // type length
        b.extend_from_slice(&0u32.to_le_bytes()); // string offset
        b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn finds_native_and_compat_entry_points() {
        let (native, compat) = prefixes();
        let strings = format!("\0{native}read\0{compat}read\0{native}write\0");
        let names = KernelNames::parse(&blob(strings.as_bytes())).unwrap();
        let targets = names.targets(&["read", "write"]).unwrap();
        assert_eq!(targets.len(), 3);
        assert!(targets[1].compat && targets[1].syscall == "read");
        assert!(!names.has(&format!("{native}rea")));
        let err = names.targets(&["pread64"]).unwrap_err();
        assert!(err.contains("pread64"), "{err}");
    }

    #[test]
    fn rejects_what_is_not_btf() {
        assert!(KernelNames::parse(b"not btf at all, no").is_err());
    }

    #[test]
    fn this_kernel() {
        // Where the kernel has BTF, read and write have entry points.
        let Ok(names) = KernelNames::read() else {
            return;
        };
        let targets = names.targets(&["read", "write"]).unwrap();
        assert!(targets.iter().filter(|t| !t.compat).count() == 2);
    }

    #[test]
    fn forced_off() {
        // Set only for this check; no other test reads the variable.
        std::env::set_var(TRAMPOLINES_ENV, "off");
        assert!(!supported());
        std::env::remove_var(TRAMPOLINES_ENV);
    }
}
