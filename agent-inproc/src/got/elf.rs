//! Reading one loaded object's dynamic relocations, in memory, as the
//! dynamic linker left them: which GOT entries hold the address of a
//! hooked symbol. Every read is checked to lie inside one of the object's
//! loaded segments first, so a malformed table is an error, not a fault.

use core::ffi::CStr;
use core::mem::size_of;

use super::{Hook, PatchError};

/// The ELF structures of this process's word size (Elf64 on x86_64 and
/// aarch64, Elf32 on i686 and armv7).
#[cfg(target_pointer_width = "64")]
mod word {
    pub type Addr = u64;
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Dyn {
        pub tag: i64,
        pub value: u64,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Sym {
        pub name: u32,
        pub info: u8,
        pub other: u8,
        pub section: u16,
        pub value: u64,
        pub size: u64,
    }
    /// The symbol index and the type of an `r_info`.
    pub fn split_info(info: Addr) -> (usize, u32) {
        ((info >> 32) as usize, (info & 0xffff_ffff) as u32)
    }
}

#[cfg(target_pointer_width = "32")]
mod word {
    pub type Addr = u32;
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Dyn {
        pub tag: i32,
        pub value: u32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Sym {
        pub name: u32,
        pub value: u32,
        pub size: u32,
        pub info: u8,
        pub other: u8,
        pub section: u16,
    }
    /// The symbol index and the type of an `r_info`.
    pub fn split_info(info: Addr) -> (usize, u32) {
        ((info >> 8) as usize, info & 0xff)
    }
}

use word::{split_info, Addr, Dyn, Sym};

/// `Elf_Rel` (what i686 and armv7 use): offset, info.
const REL_SIZE: usize = 2 * size_of::<Addr>();
/// `Elf_Rela` (what x86_64 and aarch64 use): offset, info, addend.
const RELA_SIZE: usize = 3 * size_of::<Addr>();

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_STRSZ: i64 = 10;
const DT_REL: i64 = 17;
const DT_RELSZ: i64 = 18;
const DT_PLTREL: i64 = 20;
const DT_JMPREL: i64 = 23;
// Not read, on purpose: DT_RELR (36) holds only relative relocations (no
// symbol); Android's packed DT_ANDROID_REL/RELA (0x6000000f/0x60000011,
// "APS2") hold the non-PLT relocations of objects built with
// `--pack-dyn-relocs=android`; the linker never packs JUMP_SLOTs (they
// stay in DT_JMPREL), so only a GLOB_DAT of such an object (a libc
// function's address taken in data or by `-fno-plt` code) is not seen.

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_W: u32 = 2;

/// What a relocation against a hooked symbol is to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A PLT call's GOT entry (lazily bound or not).
    JumpSlot,
    /// A GOT entry of the symbol's address (`-fPIC` code taking `&write`).
    GlobDat,
    /// A data word holding the address (`static void *p = write;`): a
    /// pointer the program stored itself, left as it is (it may be
    /// compared with other pointers to the function).
    DataWord,
}

/// This architecture's relocation types, by what they are.
fn kind_of(r_type: u32) -> Option<Kind> {
    #[cfg(target_arch = "x86_64")]
    const TYPES: [(u32, Kind); 3] = [
        (7, Kind::JumpSlot), // R_X86_64_JUMP_SLOT
        (6, Kind::GlobDat),  // R_X86_64_GLOB_DAT
        (1, Kind::DataWord), // R_X86_64_64
    ];
    #[cfg(target_arch = "x86")]
    const TYPES: [(u32, Kind); 3] = [
        (7, Kind::JumpSlot), // R_386_JMP_SLOT
        (6, Kind::GlobDat),  // R_386_GLOB_DAT
        (1, Kind::DataWord), // R_386_32
    ];
    #[cfg(target_arch = "aarch64")]
    const TYPES: [(u32, Kind); 3] = [
        (1026, Kind::JumpSlot), // R_AARCH64_JUMP_SLOT
        (1025, Kind::GlobDat),  // R_AARCH64_GLOB_DAT
        (257, Kind::DataWord),  // R_AARCH64_ABS64
    ];
    #[cfg(target_arch = "arm")]
    const TYPES: [(u32, Kind); 3] = [
        (22, Kind::JumpSlot), // R_ARM_JUMP_SLOT
        (21, Kind::GlobDat),  // R_ARM_GLOB_DAT
        (2, Kind::DataWord),  // R_ARM_ABS32
    ];
    TYPES
        .iter()
        .find(|(known, _)| *known == r_type)
        .map(|(_, kind)| *kind)
}

/// One program header, as much of it as the walk needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub kind: u32,
    pub flags: u32,
    /// Its first byte in this process (load bias applied).
    pub start: usize,
    pub end: usize,
}

/// A loaded object as `dl_iterate_phdr` showed it.
#[derive(Debug)]
pub(super) struct Object {
    pub name: String,
    pub bias: usize,
    pub segments: Vec<Segment>,
}

/// One GOT entry of a hooked symbol.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub address: usize,
    /// The index of the hook in the table given to `install`.
    pub hook: usize,
    pub kind: Kind,
    /// Whether the object defines the symbol itself (then a value inside
    /// the object is its own function, not a lazy-binding stub).
    pub defined_here: bool,
    /// Whether the entry lies in PT_GNU_RELRO (made read-only after
    /// relocation, by the loader).
    pub in_relro: bool,
}

impl Object {
    fn loads(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter().filter(|s| s.kind == PT_LOAD)
    }

    /// Whether `[address, address + len)` lies inside one loaded segment.
    pub fn holds(&self, address: usize, len: usize) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        self.loads().any(|s| s.start <= address && end <= s.end)
    }

    /// Whether `[address, address + len)` lies in a writable segment.
    pub fn holds_writable(&self, address: usize, len: usize) -> bool {
        let Some(end) = address.checked_add(len) else {
            return false;
        };
        self.loads()
            .any(|s| s.flags & PF_W != 0 && s.start <= address && end <= s.end)
    }

    pub fn in_relro(&self, address: usize) -> bool {
        self.segments
            .iter()
            .any(|s| s.kind == PT_GNU_RELRO && s.start <= address && address < s.end)
    }

    /// A `d_ptr` of the dynamic section as an address: glibc rewrites
    /// them in place to absolute addresses when it loads an object, musl
    /// and bionic leave them as the file's virtual addresses (to add the
    /// bias to). Which one is told by where each lands: the value taken
    /// as it is, or with the bias added, must point into the object.
    fn pointer(&self, value: usize, len: usize) -> Option<usize> {
        if self.holds(value, len) {
            return Some(value);
        }
        let relocated = value.checked_add(self.bias)?;
        self.holds(relocated, len).then_some(relocated)
    }

    fn read<T: Copy>(&self, address: usize) -> Option<T> {
        if !self.holds(address, size_of::<T>()) {
            return None;
        }
        // SAFETY: the whole value lies inside one PT_LOAD segment of an
        // object the loader keeps mapped while we are in
        // `dl_iterate_phdr` (the caller's contract); every loaded segment
        // is readable. read_unaligned: no alignment is assumed.
        Some(unsafe { core::ptr::read_unaligned(address as *const T) })
    }

    /// The GOT entries of hooked symbols in this object; `None` when it
    /// has no dynamic section (a static program, or nothing to relocate).
    pub fn slots(&self, hooks: &[Hook]) -> Result<Option<Vec<Slot>>, PatchError> {
        let Some(dynamic) = self.segments.iter().find(|s| s.kind == PT_DYNAMIC) else {
            return Ok(None);
        };
        let bad = |what: &str| PatchError::BadObject {
            object: self.name.clone(),
            what: what.to_owned(),
        };
        let mut table = Tables::default();
        let mut at = dynamic.start;
        while at + size_of::<Dyn>() <= dynamic.end {
            let entry: Dyn = self
                .read(at)
                .ok_or_else(|| bad("its dynamic section is not in a loaded segment"))?;
            let value = entry.value as usize;
            #[allow(clippy::useless_conversion)] // i32 on 32-bit targets
            match i64::from(entry.tag) {
                DT_NULL => break,
                DT_STRTAB => table.strtab = value,
                DT_STRSZ => table.strsz = value,
                DT_SYMTAB => table.symtab = value,
                DT_JMPREL => table.jmprel = value,
                DT_PLTRELSZ => table.pltrelsz = value,
                DT_PLTREL => table.pltrel = value as i64,
                DT_RELA => table.rela = value,
                DT_RELASZ => table.relasz = value,
                DT_REL => table.rel = value,
                DT_RELSZ => table.relsz = value,
                _ => {}
            }
            at += size_of::<Dyn>();
        }
        if table.symtab == 0 || table.strtab == 0 {
            return Ok(Some(Vec::new()));
        }
        let strtab = self
            .pointer(table.strtab, table.strsz)
            .ok_or_else(|| bad("DT_STRTAB/DT_STRSZ is outside the object"))?;
        let symtab = self
            .pointer(table.symtab, size_of::<Sym>())
            .ok_or_else(|| bad("DT_SYMTAB is outside the object"))?;
        let names = Names {
            object: self,
            strtab,
            strsz: table.strsz,
            symtab,
        };

        let mut slots = Vec::new();
        let plt_entry = match table.pltrel {
            DT_RELA => RELA_SIZE,
            DT_REL => REL_SIZE,
            _ if table.pltrelsz == 0 => REL_SIZE,
            other => {
                return Err(bad(&format!(
                    "DT_PLTREL is {other}, neither DT_REL nor DT_RELA"
                )))
            }
        };
        for (start, size, entry, what) in [
            (table.jmprel, table.pltrelsz, plt_entry, "DT_JMPREL"),
            (table.rela, table.relasz, RELA_SIZE, "DT_RELA"),
            (table.rel, table.relsz, REL_SIZE, "DT_REL"),
        ] {
            if start == 0 || size == 0 {
                continue;
            }
            let start = self
                .pointer(start, size)
                .ok_or_else(|| bad(&format!("{what} is outside the object")))?;
            self.scan(start, size / entry, entry, &names, hooks, &mut slots)?;
        }
        Ok(Some(slots))
    }

    /// Takes the relocations of `[start, start + count * entry)` against a
    /// hooked symbol.
    fn scan(
        &self,
        start: usize,
        count: usize,
        entry: usize,
        names: &Names<'_>,
        hooks: &[Hook],
        slots: &mut Vec<Slot>,
    ) -> Result<(), PatchError> {
        for i in 0..count {
            let at = start + i * entry;
            let (Some(offset), Some(info)) = (
                self.read::<Addr>(at),
                self.read::<Addr>(at + size_of::<Addr>()),
            ) else {
                return Err(PatchError::BadObject {
                    object: self.name.clone(),
                    what: "a relocation table is outside the object".to_owned(),
                });
            };
            let (symbol, r_type) = split_info(info);
            if symbol == 0 {
                continue; // relative, IRELATIVE, TLS module...: no symbol
            }
            let (name, defined_here) = names.get(symbol)?;
            let Some(hook) = hooks.iter().position(|h| h.symbol.to_bytes() == name) else {
                continue;
            };
            let kind = kind_of(r_type).ok_or_else(|| PatchError::UnknownRelocation {
                object: self.name.clone(),
                symbol: hooks[hook].symbol.to_string_lossy().into_owned(),
                r_type,
            })?;
            if kind == Kind::DataWord {
                continue;
            }
            let address = (offset as usize).wrapping_add(self.bias);
            if !self.holds(address, size_of::<usize>())
                || address % core::mem::align_of::<usize>() != 0
            {
                return Err(PatchError::BadObject {
                    object: self.name.clone(),
                    what: format!("the GOT entry of {name:?} at {address:#x} is outside the object or misaligned", name = hooks[hook].symbol),
                });
            }
            slots.push(Slot {
                address,
                hook,
                kind,
                defined_here,
                in_relro: self.in_relro(address),
            });
        }
        Ok(())
    }
}

/// The dynamic section's table addresses and sizes (0: absent).
#[derive(Default)]
struct Tables {
    strtab: usize,
    strsz: usize,
    symtab: usize,
    jmprel: usize,
    pltrelsz: usize,
    pltrel: i64,
    rela: usize,
    relasz: usize,
    rel: usize,
    relsz: usize,
}

/// The dynamic symbol table and its strings.
struct Names<'a> {
    object: &'a Object,
    strtab: usize,
    strsz: usize,
    symtab: usize,
}

impl Names<'_> {
    /// Symbol `index`'s name, and whether the object defines it.
    fn get(&self, index: usize) -> Result<(&[u8], bool), PatchError> {
        let bad = |what: String| PatchError::BadObject {
            object: self.object.name.clone(),
            what,
        };
        let sym: Sym = index
            .checked_mul(size_of::<Sym>())
            .and_then(|offset| self.object.read(self.symtab + offset))
            .ok_or_else(|| bad(format!("symbol {index} is outside the object")))?;
        let offset = sym.name as usize;
        if offset >= self.strsz {
            return Err(bad(format!("symbol {index}'s name is outside DT_STRTAB")));
        }
        // SAFETY: [strtab, strtab + strsz) was checked to lie inside one
        // loaded segment (`pointer`), and offset < strsz.
        let rest = unsafe {
            core::slice::from_raw_parts((self.strtab + offset) as *const u8, self.strsz - offset)
        };
        let name = CStr::from_bytes_until_nul(rest)
            .map_err(|_| bad(format!("symbol {index}'s name is not terminated")))?;
        // SHN_UNDEF (0): the object only refers to it.
        Ok((name.to_bytes(), sym.section != 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize;

    static UNUSED: AtomicUsize = AtomicUsize::new(0);
    const HOOKS: [Hook; 1] = [Hook {
        symbol: c"write",
        wrapper: 0,
        real: &UNUSED,
    }];
    const PF_R: u32 = 4;

    /// A fake object in memory: a dynamic section, a symbol table
    /// (symbol 1 is `write`, undefined), its strings, and a DT_JMPREL
    /// table of one relocation of `r_type` against `write` whose GOT
    /// entry is the image's last word. `jmprel_outside` points DT_JMPREL
    /// far away instead.
    struct Image {
        words: Vec<usize>,
    }

    const W: usize = size_of::<usize>();

    impl Image {
        fn new(r_type: u32, jmprel_outside: bool) -> Self {
            let mut image = Self { words: vec![0; 64] };
            let base = image.words.as_ptr() as usize;
            let (dynamic, symtab, strtab, jmprel, got) = (0, 16 * W, 28 * W, 36 * W, 63 * W);
            let strings = b"\0write\0";
            let (pltrel, entry) = if W == 8 {
                (DT_RELA, RELA_SIZE)
            } else {
                (DT_REL, REL_SIZE)
            };
            let jmprel_at = if jmprel_outside { 0x10 } else { base + jmprel };
            let tags: [(i64, usize); 7] = [
                (DT_STRTAB, base + strtab),
                (DT_STRSZ, strings.len()),
                (DT_SYMTAB, base + symtab),
                (DT_JMPREL, jmprel_at),
                (DT_PLTRELSZ, entry),
                (DT_PLTREL, pltrel as usize),
                (DT_NULL, 0),
            ];
            for (i, (tag, value)) in tags.into_iter().enumerate() {
                image.put(dynamic + i * 2 * W, tag as usize);
                image.put(dynamic + (i * 2 + 1) * W, value);
            }
            // Symbol 1: st_name 1 ("write"), everything else 0 (undefined).
            image.put_bytes(symtab + size_of::<Sym>(), &1u32.to_ne_bytes());
            image.put_bytes(strtab, strings);
            let info = if W == 8 {
                (1usize << 32) | r_type as usize
            } else {
                (1usize << 8) | r_type as usize
            };
            image.put(jmprel, base + got); // r_offset: the bias is 0
            image.put(jmprel + W, info);
            image
        }

        fn put(&mut self, offset: usize, value: usize) {
            self.put_bytes(offset, &value.to_ne_bytes());
        }

        fn put_bytes(&mut self, offset: usize, bytes: &[u8]) {
            assert!(offset + bytes.len() <= self.words.len() * W);
            // SAFETY: inside the vector's buffer (asserted).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    self.words.as_mut_ptr().cast::<u8>().add(offset),
                    bytes.len(),
                )
            };
        }

        fn object(&self) -> Object {
            let start = self.words.as_ptr() as usize;
            Object {
                name: "fake".to_owned(),
                bias: 0,
                segments: vec![
                    Segment {
                        kind: PT_LOAD,
                        flags: PF_R | PF_W,
                        start,
                        end: start + self.words.len() * W,
                    },
                    Segment {
                        kind: PT_DYNAMIC,
                        flags: PF_R | PF_W,
                        start,
                        end: start + 14 * W,
                    },
                ],
            }
        }
    }

    fn jump_slot() -> u32 {
        (1..2000)
            .find(|t| kind_of(*t) == Some(Kind::JumpSlot))
            .unwrap()
    }

    #[test]
    fn a_jump_slot_of_a_hooked_symbol_is_found() {
        let image = Image::new(jump_slot(), false);
        let object = image.object();
        let slots = object.slots(&HOOKS).unwrap().unwrap();
        assert_eq!(slots.len(), 1);
        assert_eq!(slots[0].address, image.words.as_ptr() as usize + 63 * W);
        assert_eq!(
            (slots[0].kind, slots[0].defined_here),
            (Kind::JumpSlot, false)
        );
    }

    #[test]
    fn an_unknown_relocation_type_is_refused_by_name() {
        let image = Image::new(99, false);
        let error = image.object().slots(&HOOKS).unwrap_err();
        assert_eq!(
            error,
            PatchError::UnknownRelocation {
                object: "fake".into(),
                symbol: "write".into(),
                r_type: 99
            }
        );
        assert!(error.to_string().contains("relocation type 99"), "{error}");
    }

    #[test]
    fn a_table_outside_the_object_is_an_error_not_a_fault() {
        let image = Image::new(jump_slot(), true);
        let error = image.object().slots(&HOOKS).unwrap_err();
        assert!(
            matches!(&error, PatchError::BadObject { what, .. } if what.contains("DT_JMPREL")),
            "{error}"
        );
    }

    #[test]
    fn no_dynamic_section_is_nothing_to_patch() {
        let image = Image::new(jump_slot(), false);
        let mut object = image.object();
        object.segments.retain(|s| s.kind != PT_DYNAMIC);
        assert!(object.slots(&HOOKS).unwrap().is_none());
    }
}
