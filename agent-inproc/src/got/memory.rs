//! Writing GOT entries: the pages' protection (as the kernel reports it in
//! `/proc/self/maps`, not guessed), made writable only for the moment of
//! the writes, and each entry written with one atomic compare-and-swap.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::PatchError;

/// The page size of this device (16 KiB on some arm64 phones).
pub(super) fn page_size() -> Result<usize, PatchError> {
    // SAFETY: sysconf takes no pointers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    match usize::try_from(size) {
        Ok(size) if size.is_power_of_two() => Ok(size),
        _ => Err(PatchError::PageSize(size as i64)),
    }
}

/// The current value of the GOT entry at `address`.
///
/// The caller has checked that `address` is an aligned word inside a
/// loaded segment of an object the loader keeps mapped meanwhile.
pub(super) fn load(address: usize) -> usize {
    // SAFETY: per the contract above the word is mapped, readable and
    // aligned; other threads (the loader binding lazily, another hooker)
    // only ever write it whole, so an atomic load is the right view.
    unsafe { AtomicUsize::from_ptr(address as *mut usize) }.load(Ordering::Acquire)
}

/// One entry to write: from `expected` (what the plan saw) to `value`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Write {
    pub address: usize,
    pub expected: usize,
    /// The real function: also replaced, when the entry holds it by the
    /// time of the write.
    pub real: usize,
    pub value: usize,
    /// The index of its object in the plan (for error messages).
    pub object: usize,
}

/// What `apply` did.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Applied {
    pub written: usize,
    /// Entries changed by someone else between the plan and the write.
    pub changed_meanwhile: usize,
    /// Pages whose read-only protection could not be put back.
    pub pages_left_writable: usize,
}

/// A mapping of `/proc/self/maps`: `[start, end)` and its protection.
struct Region {
    start: usize,
    end: usize,
    prot: libc::c_int,
}

fn regions() -> Result<Vec<Region>, PatchError> {
    let text = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| PatchError::Maps(format!("cannot read /proc/self/maps: {e}")))?;
    let parse = |line: &str| -> Option<Region> {
        let mut fields = line.split_ascii_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?.as_bytes();
        let mut prot = libc::PROT_NONE;
        for (at, letter, bit) in [
            (0, b'r', libc::PROT_READ),
            (1, b'w', libc::PROT_WRITE),
            (2, b'x', libc::PROT_EXEC),
        ] {
            if perms.get(at) == Some(&letter) {
                prot |= bit;
            }
        }
        Some(Region {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            prot,
        })
    };
    text.lines()
        .map(|line| {
            parse(line).ok_or_else(|| PatchError::Maps(format!("unreadable line {line:?}")))
        })
        .collect()
}

/// Writes every entry of `writes`, or none: the read-only pages among
/// theirs are all made writable first (if one cannot be, those already
/// changed get their protection back and nothing is written), then the
/// entries are written, then the pages are made read-only again.
/// `object_name` names a write's object in an error.
pub(super) fn apply(
    writes: &[Write],
    object_name: &dyn Fn(usize) -> String,
) -> Result<Applied, PatchError> {
    let mut applied = Applied::default();
    if writes.is_empty() {
        return Ok(applied);
    }
    let page = page_size()?;
    let maps = regions()?;
    // (page start, its protection now, the object of its first entry)
    let mut pages: Vec<(usize, libc::c_int, usize)> = Vec::new();
    for write in writes {
        let start = write.address & !(page - 1);
        if pages.iter().any(|(p, _, _)| *p == start) {
            continue;
        }
        let prot = maps
            .iter()
            .find(|r| r.start <= write.address && write.address < r.end)
            .map(|r| r.prot)
            .ok_or_else(|| {
                PatchError::Maps(format!(
                    "the GOT entry at {:#x} of {} is in no mapping",
                    write.address,
                    object_name(write.object)
                ))
            })?;
        pages.push((start, prot, write.object));
    }
    let read_only: Vec<_> = pages
        .into_iter()
        .filter(|(_, prot, _)| prot & libc::PROT_WRITE == 0)
        .collect();
    for (done, &(start, prot, object)) in read_only.iter().enumerate() {
        if let Err(errno) = protect(start, page, prot | libc::PROT_WRITE) {
            for &(start, prot, _) in &read_only[..done] {
                let _ = protect(start, page, prot);
            }
            return Err(PatchError::Mprotect {
                object: object_name(object),
                address: start,
                errno,
            });
        }
    }
    for write in writes {
        // SAFETY: the entry is an aligned word of a mapped object (checked
        // by the plan, which runs under the loader's lock as this does)
        // and its page is writable now. One compare-and-swap: a thread
        // calling through the entry sees the old or the new function,
        // and a value someone else wrote since the plan is kept.
        let entry = unsafe { AtomicUsize::from_ptr(write.address as *mut usize) };
        let swap =
            |from| entry.compare_exchange(from, write.value, Ordering::AcqRel, Ordering::Acquire);
        match swap(write.expected) {
            Ok(_) => applied.written += 1,
            // A lazy entry the loader resolved meanwhile (another thread's
            // first call): the real function now, which is ours to patch.
            Err(now) if now == write.real && swap(now).is_ok() => applied.written += 1,
            Err(_) => applied.changed_meanwhile += 1,
        }
    }
    for &(start, prot, _) in &read_only {
        if protect(start, page, prot).is_err() {
            applied.pages_left_writable += 1;
        }
    }
    Ok(applied)
}

/// `mprotect` of one page; the errno when it fails.
fn protect(start: usize, len: usize, prot: libc::c_int) -> Result<(), i32> {
    // SAFETY: the page belongs to a loaded object's segment (it holds a
    // GOT entry the plan checked); changing its protection to what it was
    // plus PROT_WRITE, and back, leaves every mapping valid.
    if unsafe { libc::mprotect(start as *mut libc::c_void, len, prot) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::fd::AsRawFd;

    fn prot_at(address: usize) -> libc::c_int {
        regions()
            .unwrap()
            .into_iter()
            .find(|r| r.start <= address && address < r.end)
            .unwrap()
            .prot
    }

    /// A failing mprotect (a read-only shared file mapping cannot be made
    /// writable) leaves everything as it was: the page already made
    /// writable is read-only again, and no entry is written.
    #[test]
    fn a_failing_mprotect_writes_nothing_and_restores_protection() {
        let page = page_size().unwrap();
        // SAFETY: a fresh anonymous mapping of one page, then made
        // read-only; only this test uses it.
        let anon = unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            *p.cast::<usize>() = 7;
            assert_eq!(libc::mprotect(p, page, libc::PROT_READ), 0);
            p as usize
        };
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![0u8; page]).unwrap();
        let read_only = std::fs::File::open(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        // SAFETY: a shared read-only mapping of the test's own file.
        let shared = unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                page,
                libc::PROT_READ,
                libc::MAP_SHARED,
                read_only.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            p as usize
        };
        let writes = [
            Write {
                address: anon,
                expected: 7,
                real: 9,
                value: 8,
                object: 0,
            },
            Write {
                address: shared,
                expected: 0,
                real: 9,
                value: 8,
                object: 1,
            },
        ];
        let error = apply(&writes, &|i| format!("object {i}")).unwrap_err();
        assert_eq!(
            error,
            PatchError::Mprotect {
                object: "object 1".into(),
                address: shared,
                errno: libc::EACCES
            }
        );
        assert_eq!(load(anon), 7, "nothing written");
        assert_eq!(prot_at(anon), libc::PROT_READ, "read-only again");
        // And without the failing page, the write is done and the page
        // read-only again.
        let applied = apply(&writes[..1], &|i| format!("object {i}")).unwrap();
        assert_eq!((applied.written, applied.pages_left_writable), (1, 0));
        assert_eq!(load(anon), 8);
        assert_eq!(prot_at(anon), libc::PROT_READ);
        // SAFETY: the test's own mappings, unused from here.
        unsafe {
            libc::munmap(anon as *mut libc::c_void, page);
            libc::munmap(shared as *mut libc::c_void, page);
        }
    }

    /// A lazy entry planned while it held the PLT stub, resolved by the
    /// loader to the real function before the write, is patched; any
    /// other value is someone else's and kept.
    #[test]
    fn an_entry_resolved_meanwhile_is_patched_another_is_kept() {
        let mut words = vec![9usize, 5];
        let base = words.as_mut_ptr() as usize;
        let write = |i: usize| Write {
            address: base + i * size_of::<usize>(),
            expected: 7, // the stub the plan saw
            real: 9,
            value: 8,
            object: 0,
        };
        let applied = apply(&[write(0), write(1)], &|_| "heap".into()).unwrap();
        assert_eq!((applied.written, applied.changed_meanwhile), (1, 1));
        assert_eq!(words, [8, 5]);
    }
}
