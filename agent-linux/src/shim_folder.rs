//! The shim folder as the agent writes it: its safety rule, and writes
//! into it that no one else can redirect.
//!
//! The agent writes the folder's scripts and `directive.json` — as root
//! when a root `watch --shim-dir DIR` applies the service's directives. If
//! anyone else could write the folder, they could plant a symbolic link
//! where the agent writes and make it overwrite any file (and make it
//! executable), or swap the scripts a user's PATH runs. So:
//!
//! - **The rule.** The folder and every folder above it up to `/` must be
//!   owned by root or by the agent's own user, and not writable by others,
//!   nor by a group other than root's (on Android also `system`'s and
//!   `shell`'s, which own `/data` and `/data/local/tmp`, mode 0771, and
//!   hold no one else); a folder above it may be writable by all if it is sticky
//!   and owned by root (`/tmp`: no one else may rename or remove what is
//!   in it). A symbolic link on the way must be owned by root or the agent's
//!   user too (its target is checked by the same rule). A folder that fails
//!   is refused with an error naming it and why ([`UnsafeFolder`]).
//! - **The writes.** Each file is written to a temporary name with a random
//!   suffix, created with `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the
//!   folder's own fd (a link or a stale file there is never followed or
//!   reused), given its mode with `fchmod`, then renamed over the name
//!   within the same folder fd.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, fstat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// What makes a folder unsafe to write as the agent.
#[derive(Debug)]
pub enum Why {
    /// Owned by someone other than root and the agent's user.
    Owner {
        /// Its owner.
        uid: u32,
    },
    /// Writable by group or others (and not a sticky root-owned folder
    /// above the shim folder).
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// A symbolic link on the way, made by someone else.
    LinkOwner {
        /// The link's owner.
        uid: u32,
    },
    /// Not a folder.
    NotAFolder,
    /// It could not be looked at.
    Io(io::Error),
}

/// A shim folder refused by the rule: which folder on its path and why.
#[derive(Debug)]
pub struct UnsafeFolder {
    /// The shim folder asked for.
    pub folder: PathBuf,
    /// The folder (or link) on its path that fails the rule.
    pub part: PathBuf,
    /// Why it fails.
    pub why: Why,
}

impl std::fmt::Display for UnsafeFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let me = nix::unistd::geteuid().as_raw();
        write!(f, "shim folder {} refused: ", self.folder.display())?;
        let part = self.part.display();
        match &self.why {
            Why::Owner { uid } => write!(
                f,
                "{part} is owned by uid {uid}, neither root nor the agent's uid {me}"
            ),
            Why::Writable { mode } => write!(
                f,
                "{part} is writable by others or by a group other than root's (mode {:04o}); only a sticky folder owned by root may be, above the shim folder",
                mode & 0o7777
            ),
            Why::LinkOwner { uid } => write!(
                f,
                "{part} is a symbolic link owned by uid {uid}, neither root nor the agent's uid {me}"
            ),
            Why::NotAFolder => write!(f, "{part} is not a folder"),
            Why::Io(e) => write!(f, "cannot look at {part}: {e}"),
        }
    }
}

impl std::error::Error for UnsafeFolder {}

/// Android's system user and group (`AID_SYSTEM`): it owns `/data`
/// (`system:system 0771`), above every folder an app or `adb shell` has.
const ANDROID_SYSTEM: u32 = 1000;
/// Android's shell group (`AID_SHELL`): `/data/local/tmp`, where binaries
/// pushed over adb live, is `shell:shell 0771`.
const ANDROID_SHELL: u32 = 2000;

/// Whether files owned by `uid` are as trusted as the agent's own: root's,
/// the agent's, and on Android the system user's (it owns `/data`).
fn trusted(uid: u32) -> bool {
    uid == 0
        || uid == nix::unistd::geteuid().as_raw()
        || (cfg!(target_os = "android") && uid == ANDROID_SYSTEM)
}

/// Whether a folder writable by group `gid` is still safe: root's group
/// (only root is in it), and on Android the system and shell groups, which
/// hold no user but the one of the same name (`/data`, `/data/local/tmp`
/// are group-writable by them). Anywhere else a group write bit is refused:
/// a group such as `users` or `staff` holds other people.
fn trusted_group(gid: u32) -> bool {
    gid == 0 || (cfg!(target_os = "android") && (gid == ANDROID_SYSTEM || gid == ANDROID_SHELL))
}

/// The rule for one folder's owner, group and mode; `above`: a folder
/// above the shim folder (which may be a sticky root-owned one writable by
/// all).
fn judge(uid: u32, gid: u32, mode: u32, above: bool) -> Option<Why> {
    if !trusted(uid) {
        return Some(Why::Owner { uid });
    }
    let sticky_root = mode & 0o1000 != 0 && uid == 0;
    let others_write = mode & 0o002 != 0 && !(above && sticky_root);
    let group_write = mode & 0o020 != 0 && !trusted_group(gid) && !(above && sticky_root);
    if others_write || group_write {
        return Some(Why::Writable { mode });
    }
    None
}

/// Checks `dir` (absolute, existing) and every folder above it by the
/// rule (module docs).
pub fn check(dir: &Path) -> Result<(), UnsafeFolder> {
    let refuse = |part: &Path, why| UnsafeFolder {
        folder: dir.to_path_buf(),
        part: part.to_path_buf(),
        why,
    };
    // Links on the path as given: only root's or the agent's.
    for part in dir.ancestors() {
        let m = std::fs::symlink_metadata(part).map_err(|e| refuse(part, Why::Io(e)))?;
        if m.file_type().is_symlink() && !trusted(m.uid()) {
            return Err(refuse(part, Why::LinkOwner { uid: m.uid() }));
        }
    }
    // Then every folder it really is in.
    let real = std::fs::canonicalize(dir).map_err(|e| refuse(dir, Why::Io(e)))?;
    for (i, part) in real.ancestors().enumerate() {
        let m = std::fs::metadata(part).map_err(|e| refuse(part, Why::Io(e)))?;
        if !m.is_dir() {
            return Err(refuse(part, Why::NotAFolder));
        }
        if let Some(why) = judge(m.uid(), m.gid(), m.mode(), i > 0) {
            return Err(refuse(part, why));
        }
    }
    Ok(())
}

/// Checks the part of `dir` (absolute) that exists: `dir` itself, or the
/// nearest folder above it that exists (a missing folder is made by the
/// agent, 0755, when first written).
pub fn check_existing_part(dir: &Path) -> Result<(), UnsafeFolder> {
    let Some(existing) = dir
        .ancestors()
        .find(|p| std::fs::symlink_metadata(p).is_ok())
    else {
        return Ok(());
    };
    check(existing).map_err(|mut e| {
        e.folder = dir.to_path_buf();
        e
    })
}

/// A shim folder that passed the rule, held open: every write goes
/// through its fd.
#[derive(Debug)]
pub struct ShimFolder {
    path: PathBuf,
    fd: OwnedFd,
}

impl ShimFolder {
    /// Makes `dir` (absolute) and any missing folder above it (mode 0755,
    /// less the umask), after checking the part that exists, then opens it.
    pub fn create(dir: &Path) -> anyhow::Result<ShimFolder> {
        check_existing_part(dir)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(ShimFolder::open(dir)?)
    }

    /// Opens the existing folder `dir` (absolute) if it passes the rule.
    pub fn open(dir: &Path) -> Result<ShimFolder, UnsafeFolder> {
        check(dir)?;
        let refuse = |why| UnsafeFolder {
            folder: dir.to_path_buf(),
            part: dir.to_path_buf(),
            why,
        };
        let fd = nix::fcntl::open(
            dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refuse(Why::Io(e.into())))?;
        // The folder opened is the one checked (its path's folders are
        // safe, so it cannot have been swapped; this says so cheaply).
        let st = fstat(&fd).map_err(|e| refuse(Why::Io(e.into())))?;
        #[allow(clippy::useless_conversion)]
        if let Some(why) = judge(st.st_uid, st.st_gid, u32::from(st.st_mode), false) {
            return Err(refuse(why));
        }
        Ok(ShimFolder {
            path: dir.to_path_buf(),
            fd,
        })
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` as the file `name` of the folder, whole or not at
    /// all, with `mode` (module docs: a temporary file made with
    /// `O_EXCL|O_NOFOLLOW` at the folder's fd, `fchmod`, `renameat`).
    pub fn write(&self, name: &str, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix)
            .map_err(|e| anyhow::anyhow!("no random bytes for a temporary name: {e}"))?;
        let tmp = format!(".{name}.tmp-{}", hex::encode(suffix));
        let created = openat(
            &self.fd,
            tmp.as_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        );
        let written = created.map_err(io::Error::from).and_then(|fd| {
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            // mode_t is 16 bits on 32-bit Android: the permission bits fit.
            #[allow(clippy::unnecessary_cast)]
            let bits = (mode & 0o7777) as libc::mode_t;
            fchmod(&file, Mode::from_bits_truncate(bits))?;
            renameat(&self.fd, tmp.as_str(), &self.fd, name)?;
            Ok(())
        });
        if let Err(e) = written {
            let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(anyhow::anyhow!(
                "cannot write {}: {e}",
                self.path.join(name).display()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_rule_refuses_writable_folders_and_accepts_sticky_root_parents() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("shims");
        let folder = ShimFolder::create(&dir).unwrap();
        folder.write("x", b"#!/bin/sh\n", 0o755).unwrap();
        let m = std::fs::metadata(dir.join("x")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o755);
        assert_eq!(std::fs::read(dir.join("x")).unwrap(), b"#!/bin/sh\n");
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

        chmod(&dir, 0o777);
        let err = ShimFolder::open(&dir).unwrap_err();
        assert!(matches!(err.why, Why::Writable { .. }), "{err}");
        assert!(err.to_string().contains("shims is writable"), "{err}");
        // Writable by its group: only root's group may be (it holds no
        // one else); a group such as `users` holds other people.
        if nix::unistd::geteuid().is_root() {
            chmod(&dir, 0o775);
            ShimFolder::open(&dir).unwrap();
            std::os::unix::fs::chown(&dir, None, Some(100)).unwrap();
            let err = ShimFolder::open(&dir).unwrap_err();
            assert!(matches!(err.why, Why::Writable { .. }), "{err}");
            std::os::unix::fs::chown(&dir, None, Some(0)).unwrap();
        }
        chmod(&dir, 0o755);
        // A writable folder above it is refused, unless sticky and root's.
        chmod(base.path(), 0o777);
        let err = ShimFolder::open(&dir).unwrap_err();
        assert_eq!(err.part, base.path());
        chmod(base.path(), 0o1777);
        let sticky = ShimFolder::open(&dir);
        if nix::unistd::geteuid().is_root() {
            sticky.unwrap();
        } else {
            assert!(sticky.is_err());
        }
        chmod(base.path(), 0o700);
    }

    #[test]
    fn a_planted_temporary_name_is_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("shims");
        let folder = ShimFolder::create(&dir).unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        // Every name the old pid-based scheme would have used.
        std::os::unix::fs::symlink(&victim, dir.join(format!(".x.tmp-{}", std::process::id())))
            .unwrap();
        folder.write("x", b"new", 0o644).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(dir.join("x")).unwrap(), b"new");
    }
}
