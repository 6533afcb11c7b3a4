//! The 128-bit ids a summary carries: [`RunId`] (the summary's own id, by
//! which the service deduplicates), [`DeviceId`] (the device that made it)
//! and [`StreamId`] (the traced run its windows share).
//!
//! Each is written as 32 lower-case hex digits (`Display`, `LowerHex`,
//! `Debug`) and read from exactly 32 hex digits of either case (`FromStr`,
//! as the service has always read ids in URLs and arguments), with a
//! [`ParseIdError`] that says what was wrong.
//!
//! Serde: in a binary format (postcard, `is_human_readable() == false`) an
//! id is its 16 bytes, exactly as the bare `[u8; 16]` it replaced, so the
//! summary format is unchanged; in a human-readable one (JSON) it is its
//! 32 hex digits, the form the service's JSON bodies always used. The
//! types carry no allocation and work in `no_std`.

use core::fmt;
use core::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::ser::{Serialize, Serializer};

/// Digits of an id in hex.
pub const HEX_LEN: usize = 32;

/// Why a text is not an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseIdError {
    /// Not 32 characters long (the length found, in bytes).
    Length(usize),
    /// The byte at this position (from 0) is not a hex digit.
    NotHex(usize),
}

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseIdError::Length(n) => write!(f, "{n} characters instead of 32 hex digits"),
            ParseIdError::NotHex(i) => write!(f, "not a hex digit at position {i}"),
        }
    }
}

impl core::error::Error for ParseIdError {}

/// 16 bytes from 32 hex digits of either case.
fn parse_hex(text: &str) -> Result<[u8; 16], ParseIdError> {
    let digits = text.as_bytes();
    if digits.len() != HEX_LEN {
        return Err(ParseIdError::Length(digits.len()));
    }
    let nibble = |i: usize| -> Result<u8, ParseIdError> {
        match digits[i] {
            c @ b'0'..=b'9' => Ok(c - b'0'),
            c @ b'a'..=b'f' => Ok(c - b'a' + 10),
            c @ b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(ParseIdError::NotHex(i)),
        }
    };
    let mut bytes = [0u8; 16];
    for (k, b) in bytes.iter_mut().enumerate() {
        *b = (nibble(2 * k)? << 4) | nibble(2 * k + 1)?;
    }
    Ok(bytes)
}

/// The 32 lower-case hex digits of `bytes`, on the stack.
fn hex_digits(bytes: &[u8; 16]) -> [u8; HEX_LEN] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; HEX_LEN];
    for (k, b) in bytes.iter().enumerate() {
        out[2 * k] = DIGITS[usize::from(b >> 4)];
        out[2 * k + 1] = DIGITS[usize::from(b & 0xf)];
    }
    out
}

/// Writes `bytes` as hex into `f` (padding and width honoured).
fn write_hex(bytes: &[u8; 16], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let digits = hex_digits(bytes);
    // Only ASCII hex digits were written.
    f.pad(core::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $expecting:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub [u8; 16]);

        impl $name {
            /// The all-zero id: "not known" where a summary may lack it.
            pub const ZERO: $name = $name([0; 16]);

            /// The 16 bytes.
            pub const fn as_bytes(&self) -> &[u8; 16] {
                &self.0
            }

            /// Whether this is the all-zero id.
            pub fn is_zero(&self) -> bool {
                self.0 == [0; 16]
            }

            /// The id, or `None` when it is all zero (not known).
            pub fn nonzero(self) -> Option<$name> {
                (!self.is_zero()).then_some(self)
            }
        }

        impl From<[u8; 16]> for $name {
            fn from(bytes: [u8; 16]) -> $name {
                $name(bytes)
            }
        }

        impl From<$name> for [u8; 16] {
            fn from(id: $name) -> [u8; 16] {
                id.0
            }
        }

        impl AsRef<[u8]> for $name {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }

        impl PartialEq<[u8; 16]> for $name {
            fn eq(&self, other: &[u8; 16]) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<$name> for [u8; 16] {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(&self.0, f)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;
            fn from_str(text: &str) -> Result<$name, ParseIdError> {
                parse_hex(text).map($name)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                if serializer.is_human_readable() {
                    let digits = hex_digits(&self.0);
                    // Only ASCII hex digits were written.
                    let text = core::str::from_utf8(&digits).unwrap_or_default();
                    serializer.serialize_str(text)
                } else {
                    // The bare array's encoding: postcard writes 16 bytes.
                    self.0.serialize(serializer)
                }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<$name, D::Error> {
                if deserializer.is_human_readable() {
                    struct HexVisitor;
                    impl Visitor<'_> for HexVisitor {
                        type Value = $name;
                        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                            f.write_str(concat!($expecting, " (32 hex digits)"))
                        }
                        fn visit_str<E: de::Error>(self, text: &str) -> Result<$name, E> {
                            text.parse().map_err(|e| {
                                E::custom(format_args!(
                                    concat!($expecting, " {:?}: {}"),
                                    text, e
                                ))
                            })
                        }
                    }
                    deserializer.deserialize_str(HexVisitor)
                } else {
                    <[u8; 16]>::deserialize(deserializer).map($name)
                }
            }
        }
    };
}

id_type!(
    /// A summary's id: 128 random bits from the device; the service stores
    /// a summary once per id and acknowledges it by id.
    RunId,
    "a run id"
);

id_type!(
    /// A device's id: 128 random bits made on the device's first use (never
    /// derived from hardware); all zero: not known.
    DeviceId,
    "a device id"
);

id_type!(
    /// A stream's id: 128 random bits shared by every window of one traced
    /// run; all zero: not known.
    StreamId,
    "a stream id"
);

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write as _;

    /// A fixed-size text buffer (no allocator here).
    struct Buf {
        bytes: [u8; 128],
        len: usize,
    }

    impl Buf {
        fn new() -> Buf {
            Buf {
                bytes: [0; 128],
                len: 0,
            }
        }
        fn as_str(&self) -> &str {
            core::str::from_utf8(&self.bytes[..self.len]).unwrap()
        }
    }

    impl fmt::Write for Buf {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.bytes
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    const BYTES: [u8; 16] = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0xff, 0x10, 0x0f, 0xa5, 0x5a, 0x7e,
        0xe7,
    ];
    const HEX: &str = "0123456789abcdef00ff100fa55a7ee7";

    #[test]
    fn display_lower_hex_and_debug_are_32_lower_case_digits() {
        let id = RunId::from(BYTES);
        let mut b = Buf::new();
        write!(b, "{id}").unwrap();
        assert_eq!(b.as_str(), HEX);
        let mut b = Buf::new();
        write!(b, "{id:x}").unwrap();
        assert_eq!(b.as_str(), HEX);
        let mut b = Buf::new();
        write!(b, "{:?}", DeviceId(BYTES)).unwrap();
        assert_eq!(b.as_str(), "DeviceId(0123456789abcdef00ff100fa55a7ee7)");
    }

    #[test]
    fn parses_what_it_writes_in_either_case() {
        assert_eq!(HEX.parse::<RunId>(), Ok(RunId(BYTES)));
        assert_eq!(
            "0123456789ABCDEF00FF100FA55A7EE7".parse::<DeviceId>(),
            Ok(DeviceId(BYTES))
        );
        assert_eq!(
            "00000000000000000000000000000000".parse::<StreamId>(),
            Ok(StreamId::ZERO)
        );
        assert!(StreamId::ZERO.is_zero());
        assert_eq!(StreamId::ZERO.nonzero(), None);
        assert_eq!(StreamId(BYTES).nonzero(), Some(StreamId(BYTES)));
        assert_eq!(RunId(BYTES).as_bytes(), &BYTES);
        assert_eq!(<[u8; 16]>::from(RunId(BYTES)), BYTES);
        assert!(RunId(BYTES) == BYTES && BYTES == RunId(BYTES));
    }

    #[test]
    fn refuses_wrong_lengths_and_non_hex_naming_what_was_wrong() {
        assert_eq!(HEX[..31].parse::<RunId>(), Err(ParseIdError::Length(31)));
        let mut long = Buf::new();
        write!(long, "{HEX}0").unwrap();
        assert_eq!(
            long.as_str().parse::<RunId>(),
            Err(ParseIdError::Length(33))
        );
        assert_eq!("".parse::<RunId>(), Err(ParseIdError::Length(0)));
        assert_eq!(
            "0123456789abcdefg0ff100fa55a7ee7".parse::<RunId>(),
            Err(ParseIdError::NotHex(16))
        );
        assert_eq!(
            "+123456789abcdef00ff100fa55a7ee7".parse::<RunId>(),
            Err(ParseIdError::NotHex(0))
        );
        // Multi-byte characters: 32 bytes, the first not a digit.
        assert_eq!(
            "é23456789abcdef00ff100fa55a7ee7".parse::<RunId>(),
            Err(ParseIdError::NotHex(0))
        );
        assert_eq!(
            "éééééééééééééééé".parse::<RunId>(),
            Err(ParseIdError::NotHex(0))
        );
        let mut b = Buf::new();
        write!(b, "{}", ParseIdError::NotHex(16)).unwrap();
        assert_eq!(b.as_str(), "not a hex digit at position 16");
        let mut b = Buf::new();
        write!(b, "{}", ParseIdError::Length(31)).unwrap();
        assert_eq!(b.as_str(), "31 characters instead of 32 hex digits");
    }

    #[test]
    fn postcard_bytes_are_the_bare_arrays() {
        let mut bare = [0u8; 64];
        let bare = postcard::to_slice(&BYTES, &mut bare).unwrap();
        for encoded in [
            postcard::to_slice(&RunId(BYTES), &mut [0u8; 64]).unwrap() as &[u8],
            postcard::to_slice(&DeviceId(BYTES), &mut [0u8; 64]).unwrap(),
            postcard::to_slice(&StreamId(BYTES), &mut [0u8; 64]).unwrap(),
        ] {
            assert_eq!(encoded, &bare[..]);
        }
        assert_eq!(
            postcard::from_bytes::<RunId>(bare).unwrap(),
            RunId(BYTES),
            "reads the bare array's bytes"
        );
    }
}
