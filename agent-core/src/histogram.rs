//! The log2 latency histogram.
//!
//! Bucket 0 holds calls shorter than 1 µs; bucket `k` (1..=24) holds calls of
//! `[2^(k-1), 2^k)` µs; bucket 25 holds calls of `2^24` µs (16.8 s) or more.

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Number of buckets.
pub const BUCKETS: usize = 26;

/// The bucket a call of `ns` nanoseconds falls in.
#[inline]
pub const fn bucket_of(ns: u64) -> usize {
    let us = ns / 1000;
    let b = (u64::BITS - us.leading_zeros()) as usize;
    if b < BUCKETS {
        b
    } else {
        BUCKETS - 1
    }
}

/// The lower bound of bucket `b`, in µs (0 for bucket 0).
pub const fn bucket_floor_us(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1u64 << (b - 1)
    }
}

/// Counts per latency bucket.
///
/// On the wire only the non-empty buckets are written, as `(bucket, count)`
/// pairs in increasing bucket order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Histogram {
    /// Calls per bucket.
    pub counts: [u64; BUCKETS],
}

impl Histogram {
    /// Counts one call of `ns` nanoseconds.
    #[inline]
    pub fn add(&mut self, ns: u64) {
        let c = &mut self.counts[bucket_of(ns)];
        *c = c.saturating_add(1);
    }

    /// Adds every bucket of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// Total calls counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }

    /// A histogram holding one call of `ns`.
    pub fn single(ns: u64) -> Histogram {
        let mut h = Histogram::default();
        h.add(ns);
        h
    }
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.counts.iter().filter(|c| **c != 0).count();
        let mut seq = s.serialize_seq(Some(n))?;
        for (b, c) in self.counts.iter().enumerate() {
            if *c != 0 {
                seq.serialize_element(&(b as u8, *c))?;
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Histogram;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("(bucket, count) pairs in increasing bucket order")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Histogram, A::Error> {
                let mut h = Histogram::default();
                let mut next_min = 0usize;
                while let Some((b, c)) = seq.next_element::<(u8, u64)>()? {
                    let b = b as usize;
                    if b >= BUCKETS {
                        return Err(A::Error::custom("histogram bucket out of range"));
                    }
                    if b < next_min {
                        return Err(A::Error::custom("histogram buckets not increasing"));
                    }
                    if c == 0 {
                        return Err(A::Error::custom("empty histogram bucket written"));
                    }
                    h.counts[b] = c;
                    next_min = b + 1;
                }
                Ok(h)
            }
        }
        d.deserialize_seq(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(1000), 1);
        assert_eq!(bucket_of(1999), 1);
        assert_eq!(bucket_of(2000), 2);
        assert_eq!(bucket_of(16_777_215_999), 24);
        assert_eq!(bucket_of(16_777_216_000), 25);
        assert_eq!(bucket_of(u64::MAX), 25);
        for b in 1..BUCKETS {
            assert_eq!(bucket_of(bucket_floor_us(b) * 1000), b);
        }
    }
}
