//! The ingest body's framing (defined once, in `agent_core::batch`, for the
//! uploader and the service): items back to back, each its length as an
//! unsigned LEB128 varint followed by that many bytes of one encoded
//! summary.

use agent_core::batch::{length_prefix, Items, MAX_PREFIX};
pub use agent_core::batch::{FramingError, CONTENT_TYPE, MAX_BODY, MAX_ITEMS};

/// Splits a body into its items (borrowed slices, in order).
pub fn split(body: &[u8]) -> Result<Vec<&[u8]>, FramingError> {
    Items::new(body).collect()
}

/// Appends one item (length varint, then the bytes) to `body`.
pub fn push_item(body: &mut Vec<u8>, item: &[u8]) {
    let mut prefix = [0u8; MAX_PREFIX];
    body.extend_from_slice(length_prefix(item.len() as u32, &mut prefix));
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
