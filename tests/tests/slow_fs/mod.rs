//! A slow store for the tests: an in-memory FUSE filesystem (one flat
//! folder of regular files) whose every fsync takes the time given to
//! [`mount`], as on a device's worn SD card or a busy eMMC. The agent
//! writes to it on its real path (create, write, fsync, rename); only the
//! medium is slow, so the store falls behind an exec storm that a VM's
//! disk keeps up with.
//!
//! Served by a thread of the test process (pure Rust: `mount(2)` as root,
//! no libfuse, no fusermount); unmounted when the [`Mounted`] is dropped.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

/// The kernel caches nothing: every lookup and attribute comes from here
/// (a few hundred files; no stale size or name to reason about).
const TTL: Duration = Duration::ZERO;
const ROOT: u64 = 1;

#[derive(Default)]
struct State {
    /// Name -> inode, the one folder's entries.
    names: BTreeMap<OsString, u64>,
    /// Inode -> contents (regular files; the root is not here).
    files: BTreeMap<u64, Vec<u8>>,
    next_ino: u64,
}

/// The filesystem; `fsync` is how long each fsync of a file takes.
struct SlowFs {
    fsync: Duration,
    state: Mutex<State>,
    fsyncs: Arc<AtomicU64>,
}

/// A mounted [`SlowFs`]: unmounted (lazily) when dropped.
pub struct Mounted {
    _session: fuser::BackgroundSession,
    fsyncs: Arc<AtomicU64>,
}

impl Mounted {
    /// How many fsyncs the filesystem has served.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::SeqCst)
    }
}

/// Mounts a [`SlowFs`] whose fsyncs take `fsync` on the empty folder `at`.
pub fn mount(at: &Path, fsync: Duration) -> std::io::Result<Mounted> {
    let fsyncs = Arc::new(AtomicU64::new(0));
    let fs = SlowFs {
        fsync,
        state: Mutex::new(State {
            next_ino: ROOT + 1,
            ..State::default()
        }),
        fsyncs: Arc::clone(&fsyncs),
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![fuser::MountOption::FSName("edge-tests-slow".into())];
    // One thread serves every request in turn: a slow medium does one
    // thing at a time.
    let session = fuser::spawn_mount(fs, at, &config)?;
    Ok(Mounted {
        _session: session,
        fsyncs,
    })
}

fn attr(ino: u64, size: Option<usize>) -> FileAttr {
    let (kind, perm, nlink) = match size {
        None => (FileType::Directory, 0o755, 2),
        Some(_) => (FileType::RegularFile, 0o644, 1),
    };
    let size = size.unwrap_or(0) as u64;
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl State {
    fn attr(&self, ino: u64) -> Option<FileAttr> {
        if ino == ROOT {
            return Some(attr(ROOT, None));
        }
        Some(attr(ino, Some(self.files.get(&ino)?.len())))
    }
}

impl SlowFs {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Filesystem for SlowFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let state = self.state();
        match (parent.0 == ROOT)
            .then(|| state.names.get(name))
            .flatten()
            .and_then(|&ino| state.attr(ino))
        {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.state();
        if let (Some(size), Some(data)) = (size, state.files.get_mut(&ino.0)) {
            data.resize(size as usize, 0);
        }
        match state.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        if parent.0 != ROOT {
            return reply.error(Errno::ENOENT);
        }
        let mut state = self.state();
        let ino = match state.names.get(name) {
            Some(&ino) => ino,
            None => {
                let ino = state.next_ino;
                state.next_ino += 1;
                state.names.insert(name.to_owned(), ino);
                state.files.insert(ino, Vec::new());
                ino
            }
        };
        let a = state.attr(ino).expect("just made");
        reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty());
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.state();
        let Some(file) = state.files.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let end = offset as usize + data.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(data);
        reply.written(data.len() as u32);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let state = self.state();
        let Some(file) = state.files.get(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let start = (offset as usize).min(file.len());
        let end = (start + size as usize).min(file.len());
        reply.data(&file[start..end]);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// The slow part: the medium takes its time, and the one thread that
    /// serves the filesystem waits with it.
    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        std::thread::sleep(self.fsync);
        self.fsyncs.fetch_add(1, Ordering::SeqCst);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if parent.0 != ROOT || newparent.0 != ROOT {
            return reply.error(Errno::ENOENT);
        }
        if flags != RenameFlags::empty() {
            return reply.error(Errno::EINVAL);
        }
        let mut state = self.state();
        let Some(ino) = state.names.remove(name) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(replaced) = state.names.insert(newname.to_owned(), ino) {
            state.files.remove(&replaced);
        }
        reply.ok();
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut state = self.state();
        match (parent.0 == ROOT)
            .then(|| state.names.remove(name))
            .flatten()
        {
            Some(ino) => {
                state.files.remove(&ino);
                reply.ok();
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let state = self.state();
        let dots = [(ROOT, OsStr::new(".")), (ROOT, OsStr::new(".."))];
        let entries = dots
            .into_iter()
            .map(|(ino, name)| (ino, FileType::Directory, name))
            .chain(
                state
                    .names
                    .iter()
                    .map(|(name, &ino)| (ino, FileType::RegularFile, name.as_os_str())),
            );
        // Each entry's offset is where the next listing call resumes.
        for (i, (ino, kind, name)) in entries.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}
