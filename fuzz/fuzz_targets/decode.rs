//! Arbitrary bytes into the strict summary decoder: it must return an error
//! or a summary that validates, re-encodes without folding and decodes
//! again to the same value — never panic.
#![no_main]

use agent_core::{Summary, MAX_ENCODED_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut summary) = Summary::decode(data) {
        assert!(summary.validate().is_ok());
        let before = summary.clone();
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let bytes = summary
            .encode(&mut buf)
            .expect("a decoded summary re-encodes");
        // It fitted before (the canonical encoding is never longer than the
        // input), so nothing was folded.
        assert_eq!(summary, before);
        assert!(bytes.len() <= data.len());
        assert_eq!(Summary::decode(bytes).expect("re-decodes"), before);
    }
});
