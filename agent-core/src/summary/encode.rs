//! Encoding under the hard size cap, folding the smallest entries into
//! "other" until the summary fits.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::{Summary, SyscallSummary, Transition, FORMAT_VERSION, MAX_ENCODED_LEN};
use crate::{Key, SyscallId};

/// The summary's layout (after the format version): its fields in
/// declaration order, as each version appended them, then the coverage's
/// source, which version 4 appended at the end so that a version 3 summary
/// stays a prefix of the same run's version 4 summary (a derived
/// `Serialize` would write it inside `coverage`, in the middle of version
/// 3's fields).
impl Serialize for Summary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut st = serializer.serialize_struct("Summary", 18)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("run", &self.run)?;
        st.serialize_field("facts", &self.facts)?;
        st.serialize_field("truncated", &self.truncated)?;
        st.serialize_field("syscalls", &self.syscalls)?;
        st.serialize_field("transitions", &self.transitions)?;
        // Version 2.
        st.serialize_field("origin", &self.origin)?;
        st.serialize_field("cpu", &self.cpu)?;
        st.serialize_field("in_flight", &self.in_flight)?;
        st.serialize_field("peers", &self.peers)?;
        // Version 3 (`coverage` without its source).
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("coverage", &self.coverage)?;
        st.serialize_field("io", &self.io)?;
        // Version 4.
        st.serialize_field("source", &self.coverage.source)?;
        st.end()
    }
}

/// Why a summary could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// Even with every entry folded into "other" the summary exceeds the
    /// buffer (only possible with a buffer far below 2048 bytes).
    CannotFit,
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("summary cannot fit the size cap even with every entry folded")
    }
}

impl Summary {
    /// Encodes into `buf` (at most [`MAX_ENCODED_LEN`] bytes of it are used)
    /// and returns the encoded bytes.
    ///
    /// While the summary does not fit, the entry with the lowest count is
    /// folded into "other" (a transition before a syscall entry of the same
    /// count; among equals, the lowest key) and `truncated` is set; only
    /// when no entry is left to fold are peers folded and in-flight calls'
    /// descriptions dropped. The result is deterministic.
    pub fn encode<'b>(&mut self, buf: &'b mut [u8]) -> Result<&'b [u8], EncodeError> {
        let cap = buf.len().min(MAX_ENCODED_LEN);
        loop {
            match postcard::to_slice(&(FORMAT_VERSION, &*self), &mut buf[..cap]) {
                Ok(used) => {
                    let n = used.len();
                    return Ok(&buf[..n]);
                }
                Err(postcard::Error::SerializeBufferFull) => {
                    if !self.fold_smallest() && !self.fold_observation() {
                        return Err(EncodeError::CannotFit);
                    }
                    self.truncated = true;
                }
                // Nothing else can fail when writing to a slice.
                Err(_) => return Err(EncodeError::CannotFit),
            }
        }
    }

    /// Folds the smallest entry into "other"; false when nothing is left to
    /// fold.
    fn fold_smallest(&mut self) -> bool {
        let syscall = self
            .syscalls
            .iter()
            .enumerate()
            .filter(|(_, s)| s.key != Key::OTHER)
            .min_by_key(|(_, s)| (s.count, s.key))
            .map(|(i, s)| (i, s.count));
        let transition = self
            .transitions
            .iter()
            .enumerate()
            .filter(|(_, t)| !is_other_transition(t))
            .min_by_key(|(_, t)| (t.count, t.from, t.to))
            .map(|(i, t)| (i, t.count));
        match (syscall, transition) {
            (_, Some((ti, tc))) if syscall.is_none_or(|(_, sc)| tc <= sc) => {
                self.fold_transition(ti);
                true
            }
            (Some((si, _)), _) => {
                self.fold_syscall(si);
                true
            }
            _ => false,
        }
    }

    /// Once every entry is folded: moves the peer with the fewest calls into
    /// the folded peers, then drops the description of the newest in-flight
    /// call (its count stays); false when nothing is left.
    fn fold_observation(&mut self) -> bool {
        if let Some(p) = self.peers.list.pop() {
            self.peers.rest.fold(&p);
            return true;
        }
        self.in_flight.oldest.pop().is_some()
    }

    /// Moves syscall entry `index` into the "other" entry.
    pub(crate) fn fold_syscall(&mut self, index: usize) {
        let entry = self.syscalls.remove(index);
        match self.syscalls.first_mut() {
            Some(first) if first.key == Key::OTHER => first.merge(&entry),
            _ => {
                let mut other = entry;
                other.key = Key::OTHER;
                // Cannot fail: one entry was just removed.
                let _ = self.syscalls.insert(0, other);
            }
        }
    }

    /// Moves transition `index` into the "other" transition.
    pub(crate) fn fold_transition(&mut self, index: usize) {
        let entry = self.transitions.remove(index);
        merge_into_other_transition(&mut self.transitions, &entry);
    }
}

/// Whether `t` is the "other" transition.
pub(crate) fn is_other_transition(t: &Transition) -> bool {
    t.from == SyscallId::OTHER && t.to == SyscallId::OTHER
}

/// Adds `t` to the "other" transition at the front of `list`, creating it if
/// needed (the caller guarantees room).
pub(crate) fn merge_into_other_transition<const N: usize>(
    list: &mut heapless::Vec<Transition, N>,
    t: &Transition,
) {
    match list.first_mut() {
        Some(first) if is_other_transition(first) => first.merge(t),
        _ => {
            let other = Transition {
                from: SyscallId::OTHER,
                to: SyscallId::OTHER,
                count: t.count,
                gap_sum_ns: t.gap_sum_ns,
            };
            let _ = list.insert(0, other);
        }
    }
}

/// Adds `entry` to the "other" syscall entry at the front of `list`.
pub(crate) fn merge_into_other_syscall<const N: usize>(
    list: &mut heapless::Vec<SyscallSummary, N>,
    entry: &SyscallSummary,
) {
    match list.first_mut() {
        Some(first) if first.key == Key::OTHER => first.merge(entry),
        _ => {
            let mut other = entry.clone();
            other.key = Key::OTHER;
            let _ = list.insert(0, other);
        }
    }
}
