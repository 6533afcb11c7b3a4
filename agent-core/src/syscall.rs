//! Canonical syscall ids: one stable id per syscall name, the same on every
//! architecture, so that summaries from a phone and a laptop compare.
//!
//! The ids are the line numbers of `agent-core/syscall-ids.txt` (comments
//! skipped). That file is append-only across releases: a name, once given an
//! id, keeps it forever. The per-architecture raw-number tables are generated
//! at build time from the `syscalls` crate (see `build.rs`); a name the crate
//! knows that the file lacks maps to [`SyscallId::UNKNOWN`] and fails the
//! `every_known_name_has_an_id` test until it is appended.

use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Arch, FdKind};

mod tables {
    include!(concat!(env!("OUT_DIR"), "/syscall_tables.rs"));
}

/// A canonical syscall id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SyscallId(pub u16);

impl SyscallId {
    /// Entries folded together because a table or the size budget was full.
    pub const OTHER: SyscallId = SyscallId(0);
    /// A raw number with no name in the tables.
    pub const UNKNOWN: SyscallId = SyscallId(1);
    /// How many ids this build knows (ids are `0..COUNT`).
    pub const COUNT: usize = tables::NAMES.len();
    /// The first id of the range that carries a raw number with no name:
    /// id `UNKNOWN_RAW_BASE + nr` is raw number `nr` (shown as strace does,
    /// `syscall_0x1d8`). Far above the named ids (the list grows by a few
    /// names a year), so the two never meet.
    pub const UNKNOWN_RAW_BASE: u16 = 0xc000;
    /// Raw numbers below this can be carried (ids up to `0xfffe`; `0xffff`
    /// stays free, the BPF program's "no call"). Larger unknown numbers
    /// are counted as [`SyscallId::UNKNOWN`].
    pub const UNKNOWN_RAW_LIMIT: u32 = 0x3fff;

    /// The id carrying unknown raw number `nr`, if it is below
    /// [`SyscallId::UNKNOWN_RAW_LIMIT`]. Whether `nr` has a name is not
    /// checked here: see [`SyscallId::from_raw_carrying`].
    #[inline]
    pub const fn carrying_raw(nr: u32) -> Option<SyscallId> {
        if nr < Self::UNKNOWN_RAW_LIMIT {
            Some(SyscallId(Self::UNKNOWN_RAW_BASE + nr as u16))
        } else {
            None
        }
    }

    /// The raw number this id carries (an unknown number kept apart), if
    /// it is one.
    #[inline]
    pub const fn carried_raw(self) -> Option<u32> {
        if self.0 >= Self::UNKNOWN_RAW_BASE && self.0 < u16::MAX {
            Some((self.0 - Self::UNKNOWN_RAW_BASE) as u32)
        } else {
            None
        }
    }

    /// Like [`SyscallId::from_raw`], but a number with no name gets the id
    /// carrying it ([`SyscallId::carrying_raw`]) when it fits, so distinct
    /// unknown numbers stay apart. The collector keeps a few such ids per
    /// window and counts the rest as [`SyscallId::UNKNOWN`].
    #[inline]
    pub fn from_raw_carrying(arch: Arch, nr: u32) -> SyscallId {
        match SyscallId::from_raw(arch, nr) {
            SyscallId::UNKNOWN => SyscallId::carrying_raw(nr).unwrap_or(SyscallId::UNKNOWN),
            id => id,
        }
    }

    /// Whether this build can name the id: one of its `0..COUNT`, or a
    /// carried raw number.
    #[inline]
    pub const fn is_known(self) -> bool {
        (self.0 as usize) < Self::COUNT || self.carried_raw().is_some()
    }

    /// The canonical id of raw syscall `nr` in `arch`. A `const fn`, so
    /// that a caller that knows its call at build time (the in-process
    /// backend's wrappers) has the id as a constant.
    #[inline]
    pub const fn from_raw(arch: Arch, nr: u32) -> SyscallId {
        let table: &[u16] = match arch {
            Arch::X86_64 => &tables::RAW_TO_ID_X86_64,
            Arch::I386 => &tables::RAW_TO_ID_I386,
            Arch::Aarch64 => &tables::RAW_TO_ID_AARCH64,
            Arch::Arm => &tables::RAW_TO_ID_ARM,
        };
        if (nr as usize) < table.len() {
            return SyscallId(table[nr as usize]);
        }
        if let Arch::Arm = arch {
            let mut i = 0;
            while i < tables::ARM_PRIVATE.len() {
                let (raw, id) = tables::ARM_PRIVATE[i];
                if raw == nr {
                    return SyscallId(id);
                }
                i += 1;
            }
        }
        SyscallId::UNKNOWN
    }

    /// The raw number of this syscall in `arch`, if it exists there.
    pub fn to_raw(self, arch: Arch) -> Option<u32> {
        if self == SyscallId::OTHER || self == SyscallId::UNKNOWN {
            return None;
        }
        if let Some(nr) = self.carried_raw() {
            return Some(nr);
        }
        let table: &[u16] = match arch {
            Arch::X86_64 => &tables::RAW_TO_ID_X86_64,
            Arch::I386 => &tables::RAW_TO_ID_I386,
            Arch::Aarch64 => &tables::RAW_TO_ID_AARCH64,
            Arch::Arm => &tables::RAW_TO_ID_ARM,
        };
        if let Some(nr) = table.iter().position(|id| *id == self.0) {
            return Some(nr as u32);
        }
        if arch == Arch::Arm {
            return tables::ARM_PRIVATE
                .iter()
                .find(|(_, id)| *id == self.0)
                .map(|(raw, _)| *raw);
        }
        None
    }

    /// The syscall's name; `None` for an id newer than this build and for
    /// a carried raw number (whose name [`fmt::Display`] writes:
    /// `syscall_0x1d8`).
    pub fn name(self) -> Option<&'static str> {
        tables::NAMES.get(self.0 as usize).copied()
    }

    /// The id of a syscall name (`"read"`, `"<other>"`, ...).
    pub fn from_name(name: &str) -> Option<SyscallId> {
        tables::SORTED_NAMES
            .binary_search_by(|(n, _)| (*n).cmp(name))
            .ok()
            .map(|i| SyscallId(tables::SORTED_NAMES[i].1))
    }

    /// For the read/write family, the index of the argument holding the
    /// requested size (the count argument). `recvmsg`/`sendmsg` carry theirs
    /// inside the `msghdr` in the tracee's memory, which the agent does not
    /// read: they have none.
    #[inline]
    pub fn size_arg(self) -> Option<usize> {
        let idx = self.0 as usize;
        if idx < SIZE_ARG_FAMILY.len() && SIZE_ARG_FAMILY[idx] {
            Some(2)
        } else {
            None
        }
    }

    /// Whether this syscall is one of the read/write family (read, write,
    /// pread64, pwrite64, readv, writev, recvfrom, sendto, recvmsg, sendmsg).
    #[inline]
    pub fn is_read_write_family(self) -> bool {
        READ_WRITE_FLAGS
            .get(self.0 as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Every name known to the `syscalls` crate that has no id yet. Empty in
    /// a correct build.
    pub fn missing_names() -> &'static [&'static str] {
        &tables::MISSING_NAMES
    }
}

/// The read/write family, by name.
pub const READ_WRITE_FAMILY: [&str; 10] = [
    "read", "write", "pread64", "pwrite64", "readv", "writev", "recvfrom", "sendto", "recvmsg",
    "sendmsg",
];

/// Membership of the family members whose size is argument 2, indexed by id.
/// Computed at compile time from the generated name table.
static SIZE_ARG_FAMILY: [bool; SyscallId::COUNT] = {
    let mut flags = [false; SyscallId::COUNT];
    let mut i = 0;
    while i < SyscallId::COUNT {
        let name = tables::NAMES[i].as_bytes();
        let mut f = 0;
        while f < 8 {
            // The first eight members take their size as argument 2.
            if const_eq(name, READ_WRITE_FAMILY[f].as_bytes()) {
                flags[i] = true;
            }
            f += 1;
        }
        i += 1;
    }
    flags
};

/// Membership of the whole read/write family, indexed by id (the
/// collector asks it for every call on a socket with a peer: one load, not
/// ten name searches).
static READ_WRITE_FLAGS: [bool; SyscallId::COUNT] = {
    let mut flags = [false; SyscallId::COUNT];
    let mut i = 0;
    while i < SyscallId::COUNT {
        let name = tables::NAMES[i].as_bytes();
        let mut f = 0;
        while f < READ_WRITE_FAMILY.len() {
            if const_eq(name, READ_WRITE_FAMILY[f].as_bytes()) {
                flags[i] = true;
            }
            f += 1;
        }
        i += 1;
    }
    flags
};

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl fmt::Debug for SyscallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None if self.carried_raw().is_some() => write!(f, "{self}({})", self.0),
            None => write!(f, "#{}", self.0),
        }
    }
}

/// The name: `read`; a carried unknown number as strace writes it
/// (`syscall_0x1d8`); `#<id>` for an id newer than this build.
impl fmt::Display for SyscallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name(), self.carried_raw()) {
            (Some(n), _) => f.write_str(n),
            (None, Some(nr)) => write!(f, "syscall_{nr:#x}"),
            (None, None) => write!(f, "#{}", self.0),
        }
    }
}

/// What statistics are kept per: a syscall and the kind of fd it used.
///
/// On the wire a key is one varint, `id << 3 | fd_kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The syscall.
    pub id: SyscallId,
    /// The kind of fd it used.
    pub fd_kind: FdKind,
}

impl Key {
    /// The "other" entry that full tables and size folding spill into.
    pub const OTHER: Key = Key {
        id: SyscallId::OTHER,
        fd_kind: FdKind::None,
    };

    /// Packs the key into one integer (`id << 3 | fd_kind`).
    #[inline]
    pub const fn packed(self) -> u32 {
        ((self.id.0 as u32) << 3) | self.fd_kind as u32
    }

    /// Unpacks [`Key::packed`]; `None` for an invalid fd kind or id.
    pub const fn from_packed(v: u32) -> Option<Key> {
        let id = v >> 3;
        if id > u16::MAX as u32 {
            return None;
        }
        match FdKind::from_u8((v & 7) as u8) {
            Some(fd_kind) => Some(Key {
                id: SyscallId(id as u16),
                fd_kind,
            }),
            None => None,
        }
    }
}

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.packed())
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u32::deserialize(d)?;
        Key::from_packed(v).ok_or_else(|| serde::de::Error::custom("invalid syscall key"))
    }
}

/// Why an `--only` list (the agent's option, the service's directive)
/// cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnlyListError<'a> {
    /// No syscall name at all (`--only ''`): a filter that traces nothing
    /// is surely a mistake.
    Empty,
    /// A name that is not a real syscall's canonical name (`<other>` and
    /// `<unknown>` are summary buckets, not syscalls).
    Unknown(&'a str),
}

impl core::fmt::Display for OnlyListError<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OnlyListError::Empty => f.write_str("--only needs at least one syscall name"),
            OnlyListError::Unknown(name) => {
                write!(f, "--only: unknown syscall name {name:?}")
            }
        }
    }
}

/// The names of an `--only` list: comma-separated, blanks around a name
/// and empty items ignored.
fn only_names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|n| !n.is_empty())
}

/// Checks an `--only` list the way the agent does before tracing: at least
/// one name, each a real syscall's canonical name. Any such set works with
/// the agent (its start-up does not depend on any syscall the filter
/// traps), so this is the whole rule the service needs too.
pub fn validate_only_list(list: &str) -> Result<(), OnlyListError<'_>> {
    let mut any = false;
    for name in only_names(list) {
        match SyscallId::from_name(name) {
            Some(id) if id != SyscallId::OTHER && id != SyscallId::UNKNOWN => any = true,
            _ => return Err(OnlyListError::Unknown(name)),
        }
    }
    if any {
        Ok(())
    } else {
        Err(OnlyListError::Empty)
    }
}

/// The ids of a list [`validate_only_list`] accepted (unknown names are
/// skipped).
pub fn only_list_ids(list: &str) -> impl Iterator<Item = SyscallId> + '_ {
    only_names(list)
        .filter_map(SyscallId::from_name)
        .filter(|id| *id != SyscallId::OTHER && *id != SyscallId::UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_name_has_an_id() {
        assert!(
            SyscallId::missing_names().is_empty(),
            "append these names to agent-core/syscall-ids.txt: {:?}",
            SyscallId::missing_names()
        );
    }

    #[test]
    fn read_is_one_id_on_every_arch() {
        let read = SyscallId::from_name("read").unwrap();
        assert_eq!(SyscallId::from_raw(Arch::X86_64, 0), read);
        assert_eq!(SyscallId::from_raw(Arch::I386, 3), read);
        assert_eq!(SyscallId::from_raw(Arch::Aarch64, 63), read);
        assert_eq!(SyscallId::from_raw(Arch::Arm, 3), read);
        let write = SyscallId::from_name("write").unwrap();
        assert_eq!(SyscallId::from_raw(Arch::X86_64, 1), write);
        assert_eq!(SyscallId::from_raw(Arch::Aarch64, 64), write);
        assert_eq!(SyscallId::from_raw(Arch::Arm, 4), write);
        assert_eq!(SyscallId::from_raw(Arch::I386, 4), write);
    }

    #[test]
    fn ids_are_stable() {
        // The first entries of the append-only table: a change here breaks
        // every stored summary.
        assert_eq!(SyscallId::OTHER.name(), Some("<other>"));
        assert_eq!(SyscallId::UNKNOWN.name(), Some("<unknown>"));
        assert_eq!(SyscallId::from_name("read"), Some(SyscallId(2)));
        assert_eq!(SyscallId::from_name("write"), Some(SyscallId(3)));
        assert_eq!(SyscallId::from_name("openat"), Some(SyscallId(259)));
    }

    #[test]
    fn raw_round_trip_and_unknowns() {
        for arch in Arch::ALL {
            for nr in 0..600u32 {
                let id = SyscallId::from_raw(arch, nr);
                if id != SyscallId::UNKNOWN {
                    assert_eq!(id.to_raw(arch), Some(nr), "{arch:?} {nr}");
                }
            }
            assert_eq!(SyscallId::from_raw(arch, u32::MAX), SyscallId::UNKNOWN);
        }
        let set_tls = SyscallId::from_name("set_tls").unwrap();
        assert_eq!(SyscallId::from_raw(Arch::Arm, 0x0f0005), set_tls);
        assert_eq!(set_tls.to_raw(Arch::Arm), Some(0x0f0005));
        assert_eq!(SyscallId(u16::MAX).name(), None);
    }

    #[test]
    fn size_argument_family() {
        for n in [
            "read", "write", "pread64", "pwrite64", "readv", "writev", "recvfrom", "sendto",
        ] {
            assert_eq!(SyscallId::from_name(n).unwrap().size_arg(), Some(2), "{n}");
        }
        for n in ["recvmsg", "sendmsg", "openat", "close"] {
            assert_eq!(SyscallId::from_name(n).unwrap().size_arg(), None, "{n}");
        }
        assert!(SyscallId::from_name("recvmsg")
            .unwrap()
            .is_read_write_family());
        assert!(!SyscallId::from_name("close")
            .unwrap()
            .is_read_write_family());
        // The table says what the names say, for every id.
        for i in 0..SyscallId::COUNT as u16 + 2 {
            let id = SyscallId(i);
            let named = id.name().is_some_and(|n| READ_WRITE_FAMILY.contains(&n));
            assert_eq!(id.is_read_write_family(), named, "{id:?}");
        }
    }

    #[test]
    fn key_packing() {
        for kind in FdKind::ALL {
            let k = Key {
                id: SyscallId(484),
                fd_kind: kind,
            };
            assert_eq!(Key::from_packed(k.packed()), Some(k));
        }
        // Three bits hold every kind: 7 is a Unix-socket key of id 0.
        assert_eq!(
            Key::from_packed(7),
            Some(Key {
                id: SyscallId(0),
                fd_kind: FdKind::Unix
            })
        );
        assert_eq!(Key::from_packed(u32::MAX), None);
    }

    #[test]
    fn only_lists() {
        assert_eq!(validate_only_list("read, write,"), Ok(()));
        assert_eq!(validate_only_list(""), Err(OnlyListError::Empty));
        assert_eq!(validate_only_list(" , "), Err(OnlyListError::Empty));
        assert_eq!(
            validate_only_list("read,<other>"),
            Err(OnlyListError::Unknown("<other>"))
        );
        assert_eq!(
            validate_only_list("read,bogus"),
            Err(OnlyListError::Unknown("bogus"))
        );
        let mut ids = only_list_ids(" read ,write");
        assert_eq!(ids.next(), SyscallId::from_name("read"));
        assert_eq!(ids.next(), SyscallId::from_name("write"));
        assert_eq!(ids.next(), None);
    }
}
