//! Raw BTF (the kernel's type information, `Documentation/bpf/btf.rst`):
//! reading a blob's types and strings, and cutting the kernel's BTF down
//! to the types a BPF object's CO-RE relocations can reach.
//!
//! Why the cut (issue 37 item 3, a faster start): aya relocates each type
//! a CO-RE relocation names by scanning every type of the BTF it is given
//! for the same kind and name, and the kernel's has 125 266 types (5.5
//! MB) on the development machine. Given the whole of it, relocating
//! `syscalls.bpf.o` took 13.5-14.4 ms of each start; given the cut (553
//! types, 34 KB) under 0.1 ms. aya 0.13 still reads and parses the
//! whole kernel BTF when its loader is made (`EbpfLoader::new`); only the
//! relocation's scans are spared.
//!
//! What the cut keeps, so that every relocation resolves as against the
//! whole BTF:
//! - every kernel type whose kind can be a relocation's candidate
//!   (struct, union, enum, typedef, forward declaration, int, float) and
//!   whose name, less a `___flavor` suffix, is the name of a type in the
//!   object's own BTF: the candidates are the same set;
//! - with each of them whatever it holds by value, whole (the members of
//!   embedded structs and unions, array elements, typedefs and qualifiers
//!   down to an int): a relocation's access path walks members by value
//!   only, and its last member's size and sign are read there;
//! - a struct or union reached only through a pointer (or a function
//!   prototype) as a shell: its kind, name and size, no members. A
//!   relocation never walks through a pointer, and the type checks it
//!   makes on pointers compare a struct's kind and name only.
//!
//! A type the cut cannot read (an unknown kind, a reference out of range)
//! makes it fail, and the loader then gives aya the whole BTF as before.

use std::collections::HashMap;
use std::collections::HashSet;
use std::fmt;

const MAGIC: u16 = 0xeb9f;
const HEADER_MIN: usize = 24;
/// A type's fixed part: name offset, info, size or type.
const TYPE_HEAD: usize = 12;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// What was wrong with a BTF blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BtfError {
    /// No little-endian BTF magic (0xeB9F) at the start.
    NotBtf,
    /// The header, a section or a record runs past the blob's end.
    OutOfBounds(&'static str),
    /// A type of a kind this reader does not know (a kernel newer than
    /// BTF kind 19, ENUM64).
    UnknownKind {
        /// The type's id.
        id: u32,
        /// Its kind.
        kind: u32,
    },
    /// A type refers to a type id the blob does not have.
    BadReference {
        /// The referring type's id.
        id: u32,
        /// The id it names.
        refers: u32,
    },
}

impl fmt::Display for BtfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BtfError::NotBtf => write!(f, "not little-endian BTF"),
            BtfError::OutOfBounds(what) => write!(f, "BTF {what} out of bounds"),
            BtfError::UnknownKind { id, kind } => {
                write!(f, "BTF type {id} has kind {kind}, unknown here")
            }
            BtfError::BadReference { id, refers } => {
                write!(
                    f,
                    "BTF type {id} refers to type {refers}, which does not exist"
                )
            }
        }
    }
}

impl std::error::Error for BtfError {}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// A BTF blob read in place: its type and string sections, and where
/// each type starts (type ids count from 1; 0 is `void`).
pub struct RawBtf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// `starts[id - 1]`: type `id`'s offset in `types`.
    starts: Vec<u32>,
}

impl fmt::Debug for RawBtf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RawBtf({} types, {} bytes of strings)",
            self.starts.len(),
            self.strings.len()
        )
    }
}

/// The string and type sections of a blob, from its header (magic,
/// version, flags, header length, then type offset and length, string
/// offset and length, all counted from the header's end).
fn sections(bytes: &[u8]) -> Result<(&[u8], &[u8]), BtfError> {
    if bytes.len() < HEADER_MIN || u16::from_le_bytes([bytes[0], bytes[1]]) != MAGIC {
        return Err(BtfError::NotBtf);
    }
    let field = |at| u32_at(bytes, at).map(|v| v as usize);
    let header = field(4).ok_or(BtfError::OutOfBounds("header"))?;
    let (type_off, type_len) = (field(8), field(12));
    let (str_off, str_len) = (field(16), field(20));
    let section = |off: Option<usize>, len: Option<usize>| {
        let start = header.checked_add(off?)?;
        bytes.get(start..start.checked_add(len?)?)
    };
    let types = section(type_off, type_len).ok_or(BtfError::OutOfBounds("types"))?;
    let strings = section(str_off, str_len).ok_or(BtfError::OutOfBounds("strings"))?;
    Ok((types, strings))
}

/// What a 32-bit word of a type's records holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    /// An offset in the string section.
    Name,
    /// A type id.
    Type,
    /// Anything else (a size, bit offset, value, count).
    Value,
}

/// The layout of a kind: whether the fixed part's third word is a type
/// id (else a size, or 0), the words of each record after the fixed part
/// (a member, enum value, parameter, ...), and whether there are `vlen`
/// records (else one; none where the record has no words).
struct Layout {
    head_refers: bool,
    record: &'static [Word],
    counted: bool,
}

fn layout(kind: u32) -> Option<Layout> {
    use Word::{Name, Type, Value};
    let (head_refers, record, counted): (bool, &'static [Word], bool) = match kind {
        KIND_INT => (false, &[Value], false),
        KIND_VAR | KIND_DECL_TAG => (true, &[Value], false),
        KIND_ARRAY => (false, &[Type, Type, Value], false),
        KIND_STRUCT | KIND_UNION => (false, &[Name, Type, Value], true),
        KIND_ENUM => (false, &[Name, Value], true),
        KIND_ENUM64 => (false, &[Name, Value, Value], true),
        KIND_FUNC_PROTO => (true, &[Name, Type], true),
        KIND_DATASEC => (false, &[Type, Value, Value], true),
        KIND_PTR | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_FUNC
        | KIND_TYPE_TAG => (true, &[], false),
        KIND_FWD | KIND_FLOAT => (false, &[], false),
        _ => return None,
    };
    Some(Layout {
        head_refers,
        record,
        counted,
    })
}

/// Whether what a type of this kind refers to is reached through a
/// pointer (or is a function's, a variable's, a section's), rather than
/// held by value as a member, an array's element or a typedef's type.
fn refers_by_pointer(kind: u32) -> bool {
    matches!(
        kind,
        KIND_PTR | KIND_FUNC_PROTO | KIND_FUNC | KIND_VAR | KIND_DECL_TAG | KIND_DATASEC
    )
}

fn kind_of(info: u32) -> u32 {
    (info >> 24) & 0x1f
}

fn vlen_of(info: u32) -> usize {
    (info & 0xffff) as usize
}

impl<'a> RawBtf<'a> {
    /// Reads a blob's header and walks its types.
    pub fn parse(bytes: &'a [u8]) -> Result<RawBtf<'a>, BtfError> {
        let (types, strings) = sections(bytes)?;
        let mut starts = Vec::new();
        let mut at = 0usize;
        while at < types.len() {
            let id = starts.len() as u32 + 1;
            let info = u32_at(types, at + 4).ok_or(BtfError::OutOfBounds("type"))?;
            let kind = kind_of(info);
            let layout = layout(kind).ok_or(BtfError::UnknownKind { id, kind })?;
            let records = if layout.counted { vlen_of(info) } else { 1 };
            let end = at + TYPE_HEAD + 4 * layout.record.len() * records;
            if end > types.len() {
                return Err(BtfError::OutOfBounds("type"));
            }
            starts.push(at as u32);
            at = end;
        }
        Ok(RawBtf {
            types,
            strings,
            starts,
        })
    }

    /// The string section alone, without walking the types (what
    /// [`super::trampoline`] searches for function names); both
    /// sections must lie within the blob.
    pub fn strings_of(bytes: &'a [u8]) -> Result<&'a [u8], BtfError> {
        sections(bytes).map(|(_, strings)| strings)
    }

    /// How many types (the largest id).
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there are no types.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Type `id`'s bytes, fixed part and trailer (1 ≤ id ≤ len).
    fn record(&self, id: u32) -> &'a [u8] {
        let i = id as usize - 1;
        let start = self.starts[i] as usize;
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.types.len(), |&s| s as usize);
        &self.types[start..end]
    }

    fn info(&self, id: u32) -> u32 {
        u32_at(self.record(id), 4).unwrap_or(0)
    }

    /// The string at `offset` in the string section (empty when out of
    /// range or unterminated).
    pub fn string(&self, offset: u32) -> &'a [u8] {
        let rest = self.strings.get(offset as usize..).unwrap_or(&[]);
        std::ffi::CStr::from_bytes_until_nul(rest).map_or(&[], |s| s.to_bytes())
    }

    /// Type `id`'s name (empty for anonymous types).
    pub fn name(&self, id: u32) -> &'a [u8] {
        self.string(u32_at(self.record(id), 0).unwrap_or(0))
    }

    /// Type `id`'s words after its fixed part, each with what it holds.
    fn trailer_words(&self, id: u32) -> impl Iterator<Item = (Word, u32)> + 'a {
        let record = self.record(id);
        let layout = layout(kind_of(self.info(id))).map_or(&[][..], |l| l.record);
        (TYPE_HEAD..record.len())
            .step_by(4)
            .zip(layout.iter().cycle())
            .map(move |(at, &word)| (word, u32_at(record, at).unwrap_or(0)))
    }

    /// The ids type `id` refers to, each with whether it is reached
    /// through a pointer (or a function prototype) rather than held by
    /// value.
    fn references(&self, id: u32) -> Vec<(u32, bool)> {
        let kind = kind_of(self.info(id));
        let pointer = refers_by_pointer(kind);
        let head = layout(kind)
            .filter(|l| l.head_refers)
            .map(|_| u32_at(self.record(id), 8).unwrap_or(0));
        head.into_iter()
            .chain(
                self.trailer_words(id)
                    .filter(|&(word, _)| word == Word::Type)
                    .map(|(_, t)| t),
            )
            .map(|t| (t, pointer))
            .collect()
    }
}

/// A name less its `___flavor` suffix, as relocations match names.
fn essential(name: &[u8]) -> &[u8] {
    name.windows(3)
        .position(|w| w == b"___")
        .map_or(name, |at| &name[..at])
}

/// Whether a type of this kind can be a relocation's candidate.
fn candidate_kind(kind: u32) -> bool {
    matches!(
        kind,
        KIND_STRUCT
            | KIND_UNION
            | KIND_ENUM
            | KIND_ENUM64
            | KIND_FWD
            | KIND_TYPEDEF
            | KIND_INT
            | KIND_FLOAT
    )
}

/// The essential names of the types a relocation can name in `local`
/// (an object's own BTF).
pub fn candidate_names<'a>(local: &RawBtf<'a>) -> HashSet<&'a [u8]> {
    (1..=local.len() as u32)
        .filter(|&id| candidate_kind(kind_of(local.info(id))))
        .map(|id| essential(local.name(id)))
        .filter(|name| !name.is_empty())
        .collect()
}

/// How much of a type the cut keeps.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Keep {
    Not,
    /// A struct or union's kind, name and size, no members.
    Shell,
    Whole,
}

/// `kernel` cut to the types relocations naming `names` can reach (see
/// the module's documentation): a BTF blob aya parses as any other.
pub fn cut(kernel: &RawBtf<'_>, names: &HashSet<&[u8]>) -> Result<Vec<u8>, BtfError> {
    let count = kernel.len();
    let mut keep = vec![Keep::Not; count + 1];
    keep[0] = Keep::Whole; // void
    let mut work: Vec<(u32, bool)> = (1..=count as u32)
        .filter(|&id| {
            candidate_kind(kind_of(kernel.info(id))) && names.contains(essential(kernel.name(id)))
        })
        .map(|id| (id, false))
        .collect();
    let roots: HashSet<u32> = work.iter().map(|&(id, _)| id).collect();
    while let Some((id, by_pointer)) = work.pop() {
        if id == 0 {
            continue; // void
        }
        let kind = kind_of(kernel.info(id));
        let composite = matches!(kind, KIND_STRUCT | KIND_UNION);
        let wanted = if composite && by_pointer && !roots.contains(&id) {
            Keep::Shell
        } else {
            Keep::Whole
        };
        if keep[id as usize] >= wanted {
            continue;
        }
        keep[id as usize] = wanted;
        if wanted == Keep::Shell {
            continue;
        }
        for (refers, pointer) in kernel.references(id) {
            if refers as usize > count {
                return Err(BtfError::BadReference { id, refers });
            }
            // An array or qualifier reached through a pointer passes it on.
            let through = pointer || (by_pointer && !composite);
            work.push((refers, through));
        }
    }
    Ok(write_cut(kernel, &keep))
}

/// Writes the kept types, renumbered in their order, with the strings
/// they name.
fn write_cut(kernel: &RawBtf<'_>, keep: &[Keep]) -> Vec<u8> {
    let mut new_id = vec![0u32; keep.len()];
    let mut next = 1u32;
    for id in 1..keep.len() {
        if keep[id] != Keep::Not {
            new_id[id] = next;
            next += 1;
        }
    }
    let mut strings: Vec<u8> = vec![0];
    let mut interned: HashMap<&[u8], u32> = HashMap::new();
    let mut intern = |offset: u32| -> u32 {
        let s = kernel.string(offset);
        if s.is_empty() {
            return 0;
        }
        *interned.entry(s).or_insert_with(|| {
            let at = strings.len() as u32;
            strings.extend_from_slice(s);
            strings.push(0);
            at
        })
    };
    let mut types: Vec<u8> = Vec::new();
    let put = |types: &mut Vec<u8>, v: u32| types.extend_from_slice(&v.to_le_bytes());
    for id in 1..keep.len() as u32 {
        let how = keep[id as usize];
        if how == Keep::Not {
            continue;
        }
        let record = kernel.record(id);
        let word = |at: usize| u32_at(record, at).unwrap_or(0);
        let info = word(4);
        let kind = kind_of(info);
        let renumber = |t: u32| new_id[t as usize];
        put(&mut types, intern(word(0)));
        if how == Keep::Shell {
            put(&mut types, info & !0xffff);
            put(&mut types, word(8));
            continue;
        }
        put(&mut types, info);
        let head_refers = layout(kind).is_some_and(|l| l.head_refers);
        put(
            &mut types,
            if head_refers {
                renumber(word(8))
            } else {
                word(8)
            },
        );
        for (what, value) in kernel.trailer_words(id) {
            let value = match what {
                Word::Name => intern(value),
                Word::Type => renumber(value),
                Word::Value => value,
            };
            put(&mut types, value);
        }
    }
    let mut blob = Vec::with_capacity(HEADER_MIN + types.len() + strings.len());
    blob.extend_from_slice(&MAGIC.to_le_bytes());
    blob.push(1); // version
    blob.push(0); // flags
    for v in [
        HEADER_MIN as u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        blob.extend_from_slice(&v.to_le_bytes());
    }
    blob.extend_from_slice(&types);
    blob.extend_from_slice(&strings);
    blob
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob built type by type.
    struct Blob {
        types: Vec<u8>,
        strings: Vec<u8>,
    }

    impl Blob {
        fn new() -> Blob {
            Blob {
                types: Vec::new(),
                strings: vec![0],
            }
        }

        fn name(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let at = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            at
        }

        fn words(&mut self, words: &[u32]) {
            for w in words {
                self.types.extend_from_slice(&w.to_le_bytes());
            }
        }

        fn head(&mut self, name: &str, kind: u32, vlen: u32, size_or_type: u32) {
            let name = self.name(name);
            self.words(&[name, kind << 24 | vlen, size_or_type]);
        }

        fn int(&mut self, name: &str) {
            self.head(name, KIND_INT, 0, 4);
            self.words(&[32]);
        }

        fn pointer(&mut self, to: u32) {
            self.head("", KIND_PTR, 0, to);
        }

        fn composite(&mut self, kind: u32, name: &str, size: u32, members: &[(&str, u32)]) {
            self.head(name, kind, members.len() as u32, size);
            for (i, (member, ty)) in members.iter().enumerate() {
                let member = self.name(member);
                self.words(&[member, *ty, i as u32 * 32]);
            }
        }

        fn bytes(&self) -> Vec<u8> {
            let mut b = vec![0x9f, 0xeb, 1, 0];
            for v in [
                24,
                0,
                self.types.len() as u32,
                self.types.len() as u32,
                self.strings.len() as u32,
            ] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&self.types);
            b.extend_from_slice(&self.strings);
            b
        }
    }

    /// 1 int; 2 struct inner { int x }; 3 struct other { int y };
    /// 4 other *; 5 union (anon) { int z }; 6 struct outer { inner in;
    /// other *p; union { int z } }; 7 struct unrelated { int u };
    /// 8 typedef outer outer_t.
    fn kernel() -> Vec<u8> {
        let mut b = Blob::new();
        b.int("int");
        b.composite(KIND_STRUCT, "inner", 4, &[("x", 1)]);
        b.composite(KIND_STRUCT, "other", 4, &[("y", 1)]);
        b.pointer(3);
        b.composite(KIND_UNION, "", 4, &[("z", 1)]);
        b.composite(KIND_STRUCT, "outer", 16, &[("in", 2), ("p", 4), ("", 5)]);
        b.composite(KIND_STRUCT, "unrelated", 4, &[("u", 1)]);
        b.head("outer_t", KIND_TYPEDEF, 0, 6);
        b.bytes()
    }

    /// (kind, name, vlen) of every type, in order.
    fn listing(blob: &[u8]) -> Vec<(u32, String, usize)> {
        let btf = RawBtf::parse(blob).unwrap();
        (1..=btf.len() as u32)
            .map(|id| {
                let info = btf.info(id);
                let name = String::from_utf8_lossy(btf.name(id)).into_owned();
                (kind_of(info), name, vlen_of(info))
            })
            .collect()
    }

    #[test]
    fn keeps_what_relocations_reach_and_shells_what_pointers_reach() {
        let kernel = kernel();
        let btf = RawBtf::parse(&kernel).unwrap();
        assert_eq!(btf.len(), 8);
        // The object names `outer` in a flavor of its own.
        let names: HashSet<&[u8]> = [essential(b"outer___v2")].into_iter().collect();
        let cut = cut(&btf, &names).unwrap();
        assert_eq!(
            listing(&cut),
            vec![
                (KIND_INT, "int".into(), 0),
                (KIND_STRUCT, "inner".into(), 1), // held by value: whole
                (KIND_STRUCT, "other".into(), 0), // behind a pointer: a shell
                (KIND_PTR, "".into(), 0),
                (KIND_UNION, "".into(), 1),
                (KIND_STRUCT, "outer".into(), 3),
            ]
        );
        // Renumbered: outer's members name the cut's ids.
        let cut = RawBtf::parse(&cut).unwrap();
        assert_eq!(cut.references(6), vec![(2, false), (4, false), (5, false)]);
        assert_eq!(cut.references(4), vec![(3, true)]);
        assert_eq!(
            u32_at(cut.record(3), 8),
            Some(4),
            "the shell keeps its size"
        );
    }

    #[test]
    fn a_pointed_to_type_the_object_names_is_whole() {
        let kernel = kernel();
        let btf = RawBtf::parse(&kernel).unwrap();
        let names: HashSet<&[u8]> = [&b"outer"[..], b"other"].into_iter().collect();
        let cut = cut(&btf, &names).unwrap();
        assert!(listing(&cut).contains(&(KIND_STRUCT, "other".into(), 1)));
        // A typedef the object names brings what it names.
        let names: HashSet<&[u8]> = [&b"outer_t"[..]].into_iter().collect();
        let cut = super::cut(&btf, &names).unwrap();
        assert!(listing(&cut).contains(&(KIND_STRUCT, "outer".into(), 3)));
        assert!(listing(&cut).contains(&(KIND_TYPEDEF, "outer_t".into(), 0)));
    }

    #[test]
    fn candidate_names_are_essential_names_of_candidate_kinds() {
        let mut b = Blob::new();
        b.int("int");
        b.composite(KIND_STRUCT, "task_struct___old", 4, &[("x", 1)]);
        b.head("on_sys_enter", KIND_FUNC, 0, 0);
        let blob = b.bytes();
        let btf = RawBtf::parse(&blob).unwrap();
        let mut names: Vec<&[u8]> = candidate_names(&btf).into_iter().collect();
        names.sort();
        assert_eq!(names, vec![&b"int"[..], b"task_struct"]);
    }

    #[test]
    fn what_is_wrong_is_said_and_nothing_panics() {
        assert_eq!(RawBtf::parse(b"not btf").unwrap_err(), BtfError::NotBtf);
        let kernel = kernel();
        // The type section's length past the end.
        let mut long = kernel.clone();
        long[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            RawBtf::parse(&long).unwrap_err(),
            BtfError::OutOfBounds("types")
        );
        // A kind from the future.
        let mut b = Blob::new();
        b.head("x", 31, 0, 0);
        let blob = b.bytes();
        assert_eq!(
            RawBtf::parse(&blob).unwrap_err(),
            BtfError::UnknownKind { id: 1, kind: 31 }
        );
        // A member of a type that does not exist.
        let mut b = Blob::new();
        b.composite(KIND_STRUCT, "outer", 4, &[("x", 9)]);
        let blob = b.bytes();
        let btf = RawBtf::parse(&blob).unwrap();
        let names: HashSet<&[u8]> = [&b"outer"[..]].into_iter().collect();
        assert_eq!(
            cut(&btf, &names).unwrap_err(),
            BtfError::BadReference { id: 1, refers: 9 }
        );
        // Any byte of a blob set to any of a few values: an error or a
        // cut, never a panic.
        let names: HashSet<&[u8]> = [&b"outer"[..], b"inner"].into_iter().collect();
        for at in 0..kernel.len() {
            for value in [0u8, 1, 0x7f, 0xff] {
                let mut bent = kernel.clone();
                bent[at] = value;
                if let Ok(btf) = RawBtf::parse(&bent) {
                    let _ = cut(&btf, &names);
                }
            }
        }
    }
}
