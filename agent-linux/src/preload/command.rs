//! Whether a command can be observed through `LD_PRELOAD`: the dynamic
//! linker must load it (a dynamically linked executable, one with an
//! `PT_INTERP` program header) and honour the variable (not set-user-ID
//! or set-group-ID: the loader ignores `LD_PRELOAD` for those, unless the
//! agent runs as the same user, so it is refused for everyone).

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use object::read::elf::{FileHeader, ProgramHeader};
use object::{elf, Endianness};

/// Why a command cannot be observed in-process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotPreloadable {
    /// Its file could not be read.
    Unreadable(String),
    /// Not an ELF file (a script's interpreter is what would run: the
    /// caller checks that one).
    NotElf,
    /// Statically linked: no dynamic linker reads `LD_PRELOAD`.
    Static,
    /// Set-user-ID or set-group-ID: the loader ignores `LD_PRELOAD`.
    SetId,
}

impl fmt::Display for NotPreloadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotPreloadable::Unreadable(e) => write!(f, "it cannot be read ({e})"),
            NotPreloadable::NotElf => f.write_str("it is not an ELF executable"),
            NotPreloadable::Static => {
                f.write_str("it is statically linked (no dynamic linker loads the wrappers)")
            }
            NotPreloadable::SetId => {
                f.write_str("it is set-user-ID or set-group-ID (its loader ignores LD_PRELOAD)")
            }
        }
    }
}

/// Checks the executable at `path` (resolved already).
pub fn check(path: &Path) -> Result<(), NotPreloadable> {
    let meta = path
        .metadata()
        .map_err(|e| NotPreloadable::Unreadable(e.to_string()))?;
    if meta.permissions().mode() & 0o6000 != 0 {
        return Err(NotPreloadable::SetId);
    }
    let data = std::fs::read(path).map_err(|e| NotPreloadable::Unreadable(e.to_string()))?;
    if data.starts_with(b"#!") {
        // The interpreter runs; its own check is the caller's (a script
        // of a dynamically linked shell is the usual case).
        return script_interpreter(&data).map_or(Err(NotPreloadable::NotElf), |interp| {
            check(Path::new(&interp))
        });
    }
    let interp = match object::FileKind::parse(&*data) {
        Ok(object::FileKind::Elf64) => has_interp::<elf::FileHeader64<Endianness>>(&data),
        Ok(object::FileKind::Elf32) => has_interp::<elf::FileHeader32<Endianness>>(&data),
        _ => return Err(NotPreloadable::NotElf),
    };
    match interp {
        Some(true) => Ok(()),
        Some(false) => Err(NotPreloadable::Static),
        None => Err(NotPreloadable::NotElf),
    }
}

/// Whether the ELF file has a `PT_INTERP` header (`None`: malformed).
fn has_interp<H: FileHeader<Endian = Endianness>>(data: &[u8]) -> Option<bool> {
    let header = H::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let headers = header.program_headers(endian, data).ok()?;
    Some(headers.iter().any(|ph| ph.p_type(endian) == elf::PT_INTERP))
}

/// The interpreter a `#!` line names.
fn script_interpreter(data: &[u8]) -> Option<String> {
    let line = data[2..].split(|b| *b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?.trim();
    text.split_ascii_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_passes_and_a_script_is_judged_by_its_interpreter() {
        assert_eq!(check(Path::new("/bin/sh")), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(check(&script), Ok(()));
        let text = dir.path().join("t");
        std::fs::write(&text, "plain text").unwrap();
        assert_eq!(check(&text), Err(NotPreloadable::NotElf));
        assert!(matches!(
            check(&dir.path().join("missing")),
            Err(NotPreloadable::Unreadable(_))
        ));
    }

    #[test]
    fn set_id_executables_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("sh");
        std::fs::copy("/bin/sh", &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert_eq!(check(&copy), Err(NotPreloadable::SetId));
    }
}
