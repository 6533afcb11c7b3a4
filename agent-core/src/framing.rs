//! The upload body's framing, writer and reader: several encoded summaries
//! back to back, each preceded by its length as an unsigned LEB128 varint
//! (postcard's `u32` varint). The device's uploader writes bodies with
//! [`write_item`]/[`write_body`] and the service reads them with [`Items`];
//! this is the one definition, and its tests are here.

use core::fmt;

/// Most items one request may carry.
pub const MAX_ITEMS: usize = 256;
/// Largest request body, bytes.
pub const MAX_BODY: usize = 1024 * 1024;
/// The HTTP content type of a body.
pub const CONTENT_TYPE: &str = "application/vnd.edge-agent.summaries";
/// Longest length prefix, bytes.
pub const MAX_PREFIX: usize = 5;

/// Writes the length prefix of an item of `len` bytes into `out`; returns
/// the bytes to send.
pub fn length_prefix(len: u32, out: &mut [u8; MAX_PREFIX]) -> &[u8] {
    let mut rest = len;
    let mut n = 0;
    loop {
        let byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            out[n] = byte;
            return &out[..n + 1];
        }
        out[n] = byte | 0x80;
        n += 1;
    }
}

/// Appends one item (its length prefix, then its bytes) to `out`: a
/// `Vec<u8>` on the host, any byte sink on the device.
pub fn write_item<E>(out: &mut E, item: &[u8])
where
    E: for<'b> Extend<&'b u8>,
{
    let mut prefix = [0u8; MAX_PREFIX];
    out.extend(length_prefix(item.len() as u32, &mut prefix));
    out.extend(item);
}

/// Appends a whole body holding `items`, in order, to `out`.
pub fn write_body<'a, E>(out: &mut E, items: impl IntoIterator<Item = &'a [u8]>)
where
    E: for<'b> Extend<&'b u8>,
{
    for item in items {
        write_item(out, item);
    }
}

/// Why a body could not be split into items. Once the framing is broken the
/// following items cannot be located, so the whole body is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramingError {
    /// The length varint of item `index` is cut short or longer than 5 bytes.
    BadLength {
        /// The item.
        index: usize,
        /// Where its length starts in the body.
        offset: usize,
    },
    /// Item `index` claims more bytes than the body has left.
    Overrun {
        /// The item.
        index: usize,
        /// The length it claims.
        len: u64,
        /// The bytes left.
        remaining: usize,
    },
    /// More than [`MAX_ITEMS`] items.
    TooManyItems,
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FramingError::BadLength { index, offset } => write!(
                f,
                "item {index}: invalid length varint at body offset {offset}"
            ),
            FramingError::Overrun {
                index,
                len,
                remaining,
            } => write!(
                f,
                "item {index}: length {len} exceeds the {remaining} bytes left in the body"
            ),
            FramingError::TooManyItems => write!(f, "more than {MAX_ITEMS} items in one request"),
        }
    }
}

/// The items of a body, in order; after an error it yields nothing more.
#[derive(Clone, Debug)]
pub struct Items<'a> {
    body: &'a [u8],
    pos: usize,
    index: usize,
    failed: bool,
}

impl<'a> Items<'a> {
    /// Iterates over the items of `body`.
    pub fn new(body: &'a [u8]) -> Items<'a> {
        Items {
            body,
            pos: 0,
            index: 0,
            failed: false,
        }
    }

    fn next_item(&mut self) -> Result<&'a [u8], FramingError> {
        let index = self.index;
        if index == MAX_ITEMS {
            return Err(FramingError::TooManyItems);
        }
        let start = self.pos;
        let (len, used) = read_varint(&self.body[start..]).ok_or(FramingError::BadLength {
            index,
            offset: start,
        })?;
        let from = start + used;
        let remaining = self.body.len() - from;
        if len > remaining as u64 {
            return Err(FramingError::Overrun {
                index,
                len,
                remaining,
            });
        }
        let end = from + len as usize;
        self.pos = end;
        self.index += 1;
        Ok(&self.body[from..end])
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Result<&'a [u8], FramingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.body.len() {
            return None;
        }
        let item = self.next_item();
        self.failed = item.is_err();
        Some(item)
    }
}

/// Reads an unsigned LEB128 `u32`; returns the value and the bytes used.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().take(MAX_PREFIX).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (value <= u64::from(u32::MAX)).then_some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let mut buf = [0u8; MAX_PREFIX];
        assert_eq!(length_prefix(0, &mut buf), &[0]);
        assert_eq!(length_prefix(300, &mut buf), &[0xac, 0x02]);
        assert_eq!(
            length_prefix(u32::MAX, &mut buf),
            &[0xff, 0xff, 0xff, 0xff, 0x0f]
        );
        let pv = postcard::to_slice(&300u32, &mut [0u8; 8]).map(|s| [s[0], s[1]]);
        assert_eq!(pv, Ok([0xac, 0x02]), "the same varint as postcard's u32");
    }

    /// A fixed-capacity byte sink (agent-core has no allocator).
    struct Sink {
        bytes: [u8; 400],
        len: usize,
    }

    impl<'b> Extend<&'b u8> for Sink {
        fn extend<I: IntoIterator<Item = &'b u8>>(&mut self, iter: I) {
            for b in iter {
                self.bytes[self.len] = *b;
                self.len += 1;
            }
        }
    }

    #[test]
    fn written_bodies_read_back() {
        let a = [7u8; 3];
        let b = [9u8; 300];
        let mut sink = Sink {
            bytes: [0; 400],
            len: 0,
        };
        write_body(&mut sink, [&a[..], &b[..], &[][..]]);
        let body = &sink.bytes[..sink.len];
        assert_eq!(body.len(), 1 + 3 + 2 + 300 + 1);
        assert_eq!(&body[..1], &[3]);
        assert_eq!(&body[4..6], &[0xac, 0x02]);
        let mut items = Items::new(body);
        assert_eq!(items.next(), Some(Ok(&a[..])));
        assert_eq!(items.next(), Some(Ok(&b[..])));
        assert_eq!(items.next(), Some(Ok(&[][..])));
        assert_eq!(items.next(), None);
        assert_eq!(Items::new(&[]).next(), None);
    }

    #[test]
    fn items_and_errors() {
        let body = [3, 7, 7, 7, 0, 1, 9];
        let mut it = Items::new(&body);
        assert_eq!(it.next(), Some(Ok(&[7u8, 7, 7][..])));
        assert_eq!(it.next(), Some(Ok(&[][..])));
        assert_eq!(it.next(), Some(Ok(&[9u8][..])));
        assert_eq!(it.next(), None);
        let mut bad = Items::new(&[5, 1, 2]);
        assert_eq!(
            bad.next(),
            Some(Err(FramingError::Overrun {
                index: 0,
                len: 5,
                remaining: 2
            }))
        );
        assert_eq!(bad.next(), None);
        let mut cut = Items::new(&[1, 0, 0x80]);
        assert!(cut.next().unwrap().is_ok());
        assert_eq!(
            cut.next(),
            Some(Err(FramingError::BadLength {
                index: 1,
                offset: 2
            }))
        );
        let too_long = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(
            Items::new(&too_long).next(),
            Some(Err(FramingError::BadLength { .. }))
        ));
        let many = [0u8; MAX_ITEMS + 1];
        assert_eq!(
            Items::new(&many).last(),
            Some(Err(FramingError::TooManyItems))
        );
        assert_eq!(
            Items::new(&many[..MAX_ITEMS]).filter(Result::is_ok).count(),
            MAX_ITEMS
        );
    }
}
