//! The ingest body's framing: items back to back, each its length as an
//! unsigned LEB128 varint (postcard's `u32` varint) followed by that many
//! bytes of one encoded summary.

use std::fmt;

/// Most items one request may carry.
pub const MAX_ITEMS: usize = 256;
/// Largest request body, bytes.
pub const MAX_BODY: usize = 1024 * 1024;
/// The content type of an ingest body.
pub const CONTENT_TYPE: &str = "application/vnd.edge-agent.summaries";

/// Why a body could not be split into items. Once the framing is broken the
/// following items cannot be located, so the whole request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramingError {
    /// The length varint of item `index` is cut short or longer than 5 bytes.
    BadLength { index: usize, offset: usize },
    /// Item `index` claims more bytes than the body has left.
    Overrun {
        index: usize,
        len: u64,
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

impl std::error::Error for FramingError {}

/// Splits a body into its items (borrowed slices, in order).
pub fn split(body: &[u8]) -> Result<Vec<&[u8]>, FramingError> {
    let mut items = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let index = items.len();
        if index == MAX_ITEMS {
            return Err(FramingError::TooManyItems);
        }
        let (len, used) =
            read_varint(&body[pos..]).ok_or(FramingError::BadLength { index, offset: pos })?;
        pos += used;
        let remaining = body.len() - pos;
        if len > remaining as u64 {
            return Err(FramingError::Overrun {
                index,
                len,
                remaining,
            });
        }
        let end = pos + len as usize;
        items.push(&body[pos..end]);
        pos = end;
    }
    Ok(items)
}

/// Reads an unsigned LEB128 `u32`; returns the value and the bytes used.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().take(5).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (value <= u64::from(u32::MAX)).then_some((value, i + 1));
        }
    }
    None
}

/// Appends one item (length varint, then the bytes) to `body`.
pub fn push_item(body: &mut Vec<u8>, item: &[u8]) {
    let mut len = item.len() as u32;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            body.push(byte);
            break;
        }
        body.push(byte | 0x80);
    }
    body.extend_from_slice(item);
}

/// A body holding `items`.
pub fn join<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    for item in items {
        push_item(&mut body, item);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let a = [7u8; 3];
        let b = vec![9u8; 300];
        let body = join([&a[..], &b[..], &[][..]]);
        assert_eq!(&body[..1], &[3]);
        assert_eq!(&body[4..6], &[0xac, 0x02]);
        assert_eq!(split(&body).unwrap(), vec![&a[..], &b[..], &[][..]]);
        assert_eq!(split(&[]).unwrap(), Vec::<&[u8]>::new());
    }

    #[test]
    fn broken_framing() {
        assert_eq!(
            split(&[5, 1, 2]),
            Err(FramingError::Overrun {
                index: 0,
                len: 5,
                remaining: 2
            })
        );
        assert_eq!(
            split(&[1, 0, 0x80]),
            Err(FramingError::BadLength {
                index: 1,
                offset: 2
            })
        );
        assert!(matches!(
            split(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(FramingError::BadLength { .. })
        ));
        let many = vec![0u8; MAX_ITEMS + 1];
        assert_eq!(split(&many), Err(FramingError::TooManyItems));
        assert_eq!(split(&many[..MAX_ITEMS]).unwrap().len(), MAX_ITEMS);
    }
}
