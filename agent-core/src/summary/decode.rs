//! Strict decoding: every field is validated; any defect is a typed error.

use core::fmt;
use core::marker::PhantomData;

use serde::de::{DeserializeSeed, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{
    Coverage, InFlight, Kind, Origin, Peers, Source, Summary, FORMAT_VERSION, MAX_ENCODED_LEN,
    MAX_ERRNOS, OLDEST_FORMAT_VERSION,
};
use crate::histogram::BUCKETS;
use crate::Key;

/// Why bytes are not a valid summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No bytes at all.
    Empty,
    /// The bytes end in the middle of a field.
    Truncated,
    /// More than [`MAX_ENCODED_LEN`] bytes.
    Oversized {
        /// The length given.
        len: usize,
    },
    /// A format version this decoder does not know.
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// A field could not be decoded (bad varint, bad enum tag, invalid
    /// UTF-8, a list longer than its capacity, ...).
    Malformed(postcard::Error),
    /// Bytes left after the summary.
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// Fields that decode but contradict each other; names the rule broken.
    Inconsistent(&'static str),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Empty => f.write_str("empty summary"),
            DecodeError::Truncated => f.write_str("summary truncated"),
            DecodeError::Oversized { len } => {
                write!(f, "summary of {len} bytes exceeds the {MAX_ENCODED_LEN}-byte cap")
            }
            DecodeError::UnsupportedVersion { found } => write!(
                f,
                "summary format version {found} is not supported (this decoder reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
            DecodeError::Malformed(e) => write!(f, "malformed summary: {}", malformed_reason(e)),
            DecodeError::TrailingBytes { extra } => {
                write!(f, "{extra} unexpected bytes after the summary")
            }
            DecodeError::Inconsistent(why) => write!(f, "inconsistent summary: {why}"),
        }
    }
}

/// What a postcard decoding error means in a summary, in the decoder's
/// own words (postcard's talk of varints and usize is about its internals,
/// not about the file the user gave).
fn malformed_reason(e: &postcard::Error) -> &'static str {
    use postcard::Error as P;
    match e {
        P::DeserializeBadVarint => "a number's encoding does not end where it must",
        P::DeserializeBadBool => "a yes/no field is neither 0 nor 1",
        P::DeserializeBadChar => "a character field is not a valid character",
        P::DeserializeBadUtf8 => "a text field is not valid UTF-8",
        P::DeserializeBadOption => "an optional field's marker is neither 0 nor 1",
        P::DeserializeBadEnum => "a field names a kind that does not exist",
        P::DeserializeUnexpectedEnd => "the bytes end in the middle of a field",
        P::SerdeDeCustom => {
            "a field's value is out of range (a list longer than its capacity, an unknown code)"
        }
        _ => "a field cannot be decoded",
    }
}

fn map_postcard(e: postcard::Error) -> DecodeError {
    match e {
        postcard::Error::DeserializeUnexpectedEnd => DecodeError::Truncated,
        other => DecodeError::Malformed(other),
    }
}

impl Summary {
    /// Decodes and validates one encoded summary.
    pub fn decode(bytes: &[u8]) -> Result<Summary, DecodeError> {
        let mut summary = Summary::empty();
        Summary::decode_into(bytes, &mut summary)?;
        Ok(summary)
    }

    /// [`Summary::decode`] into an existing value, so a caller can keep one
    /// summary (33 KB) off a small stack. On error `out` holds a partly
    /// decoded summary and must not be used.
    ///
    /// The lists are decoded element by element straight into `out`: the
    /// derived decoder would build each list on the stack and move it through
    /// several frames, which an unoptimized build does not elide.
    pub fn decode_into(bytes: &[u8], out: &mut Summary) -> Result<(), DecodeError> {
        if bytes.is_empty() {
            return Err(DecodeError::Empty);
        }
        if bytes.len() > MAX_ENCODED_LEN {
            return Err(DecodeError::Oversized { len: bytes.len() });
        }
        let (version, rest) = postcard::take_from_bytes::<u16>(bytes).map_err(map_postcard)?;
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(DecodeError::UnsupportedVersion { found: version });
        }
        let mut de = postcard::Deserializer::from_bytes(rest);
        out.id = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        out.run = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        out.facts = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        out.truncated = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        out.syscalls.clear();
        IntoVec(&mut out.syscalls)
            .deserialize(&mut de)
            .map_err(map_postcard)?;
        out.transitions.clear();
        IntoVec(&mut out.transitions)
            .deserialize(&mut de)
            .map_err(map_postcard)?;
        if version >= 2 {
            out.origin = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
            out.cpu = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
            out.in_flight = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
            out.peers = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        } else {
            out.origin = Origin::default();
            out.cpu = None;
            out.in_flight = InFlight::default();
            out.peers = Peers::default();
        }
        if version >= 3 {
            out.kind = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
            out.coverage = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
            out.io = Deserialize::deserialize(&mut de).map_err(map_postcard)?;
        } else {
            out.kind = Kind::Full;
            out.coverage = Coverage::default();
            out.io = None;
        }
        // Written after `io`, not inside `coverage` (see `Summary`'s
        // `Serialize`). Every summary before version 4 came from the ptrace
        // or eBPF backend: the kernel's view is what they saw, not "unknown".
        out.coverage.source = if version >= 4 {
            Deserialize::deserialize(&mut de).map_err(map_postcard)?
        } else {
            Source::Kernel
        };
        let rest = de.finalize().map_err(map_postcard)?;
        if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes { extra: rest.len() });
        }
        out.validate()
    }

    /// Checks the rules that tie the fields together.
    pub fn validate(&self) -> Result<(), DecodeError> {
        use DecodeError::Inconsistent as Bad;
        if self.facts.validate().is_err() {
            return Err(Bad("facts: invalid key, value or duplicate"));
        }
        let mut prev: Option<Key> = None;
        let mut total_count: u64 = 0;
        for s in &self.syscalls {
            if prev.is_some_and(|p| p >= s.key) {
                return Err(Bad("syscalls: keys not strictly increasing"));
            }
            prev = Some(s.key);
            if s.count == 0 {
                return Err(Bad("syscalls: entry with zero calls"));
            }
            total_count = total_count.saturating_add(s.count);
            match &s.spread {
                None if s.count > 1 => return Err(Bad("syscalls: spread missing for count > 1")),
                Some(_) if s.count == 1 => return Err(Bad("syscalls: spread given for count 1")),
                Some(sp) => {
                    if sp.min_ns > sp.max_ns {
                        return Err(Bad("syscalls: min_ns > max_ns"));
                    }
                    let (lo, hi) = (
                        sp.min_ns as u128 * s.count as u128,
                        sp.max_ns as u128 * s.count as u128,
                    );
                    let total = s.total_ns as u128;
                    // A saturated total (u64::MAX) is only a lower bound.
                    if s.total_ns != u64::MAX && (total < lo || total > hi) {
                        return Err(Bad("syscalls: total_ns outside count * [min, max]"));
                    }
                    if sp.histogram.total() != s.count {
                        return Err(Bad("syscalls: histogram does not add up to count"));
                    }
                    let used = sp
                        .histogram
                        .counts
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| **c > 0);
                    let lowest = crate::histogram::bucket_of(sp.min_ns);
                    let highest = crate::histogram::bucket_of(sp.max_ns);
                    if used
                        .clone()
                        .any(|(b, _)| b < lowest || b > highest || b >= BUCKETS)
                    {
                        return Err(Bad("syscalls: histogram outside [min, max]"));
                    }
                }
                None => {}
            }
            if let Some(f) = &s.failures {
                if f.errors == 0 || f.errors > s.count {
                    return Err(Bad("syscalls: errors not in 1..=count"));
                }
                if f.errnos.len() > MAX_ERRNOS {
                    return Err(Bad("syscalls: too many errnos"));
                }
                let mut sum = f.errno_other;
                for (i, (errno, n)) in f.errnos.iter().enumerate() {
                    if *errno == 0 || *errno > 4095 || *n == 0 {
                        return Err(Bad("syscalls: errno or errno count out of range"));
                    }
                    if let Some((pe, pn)) = i.checked_sub(1).map(|j| f.errnos[j]) {
                        if pn < *n || (pn == *n && pe >= *errno) {
                            return Err(Bad("syscalls: errnos not in decreasing count order"));
                        }
                    }
                    sum = sum.saturating_add(*n);
                }
                if sum != f.errors {
                    return Err(Bad("syscalls: errno counts do not add up to errors"));
                }
                if f.first_ns > f.last_ns {
                    return Err(Bad("syscalls: first failure after last failure"));
                }
            }
            if let Some(c) = &s.consecutive {
                if c.count == 0 || c.count > s.count {
                    return Err(Bad("syscalls: consecutive not in 1..=count"));
                }
            }
        }
        if total_count != self.run.events {
            return Err(Bad("run: events differs from the sum of syscall counts"));
        }
        let mut prev_pair = None;
        let mut transitions: u64 = 0;
        for t in &self.transitions {
            let pair = (t.from, t.to);
            if prev_pair.is_some_and(|p| p >= pair) {
                return Err(Bad("transitions: pairs not strictly increasing"));
            }
            prev_pair = Some(pair);
            if t.count == 0 {
                return Err(Bad("transitions: entry with zero count"));
            }
            transitions = transitions.saturating_add(t.count);
        }
        if transitions > self.run.events {
            return Err(Bad("transitions: more transitions than events"));
        }
        if self.run.threads < self.run.processes {
            return Err(Bad("run: fewer threads than processes"));
        }
        self.in_flight.validate().map_err(Bad)?;
        self.peers.validate().map_err(Bad)?;
        self.coverage.validate().map_err(Bad)?;
        if self.kind == Kind::Light
            && (!self.syscalls.is_empty()
                || !self.transitions.is_empty()
                || self.in_flight.count > 0
                || !self.peers.list.is_empty()
                || self.peers.rest.peers > 0)
        {
            return Err(Bad(
                "light record with syscall, transition, in-flight or peer entries",
            ));
        }
        Ok(())
    }
}

/// Deserializes a sequence by pushing each element into an existing
/// `heapless::Vec` (see [`Summary::decode_into`]).
struct IntoVec<'a, T, const N: usize>(&'a mut heapless::Vec<T, N>);

impl<'de, T: Deserialize<'de>, const N: usize> DeserializeSeed<'de> for IntoVec<'_, T, N> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(IntoVecVisitor(self.0, PhantomData))
    }
}

struct IntoVecVisitor<'a, T, const N: usize>(&'a mut heapless::Vec<T, N>, PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for IntoVecVisitor<'_, T, N> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {N} entries")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<T>()? {
            if self.0.push(item).is_err() {
                return Err(A::Error::invalid_length(N + 1, &self));
            }
        }
        Ok(())
    }
}
