//! The names of programs a shim folder can hold: one rule for the agent
//! (`edge-agent shim install`, a directive's `programs` it applies) and the
//! service (`edge-service directive set --programs`), so that every name
//! the service accepts is one every device can shim.

/// The longest program name (bytes): Linux's `NAME_MAX`, the longest file
/// name a folder can hold.
pub const MAX_PROGRAM_NAME_LEN: usize = 255;

/// The rule in words, for error messages.
pub const PROGRAM_NAME_RULE: &str =
    "letters, digits, . _ + - (not first: .), at most 255 bytes; no /, blanks or control characters";

/// Whether `name` can be a shim's file name: non-empty, at most
/// [`MAX_PROGRAM_NAME_LEN`] bytes of ASCII letters, digits and `._+-`, not
/// starting with `.` (so never `.`, `..` or a hidden file), and not the
/// folder's own `directive.json`. A shim is a file of the folder named
/// after the program, so `/` would leave it, and a blank or control
/// character would break the script that names it.
pub fn valid_program_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROGRAM_NAME_LEN
        && !name.starts_with('.')
        && name != "directive.json"
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_paths_blanks_and_hidden_names_do_not() {
        for good in ["md5sum", "curl", "python3.12", "g++", "x-y_z", "a"] {
            assert!(valid_program_name(good), "{good}");
        }
        let long = [b'a'; MAX_PROGRAM_NAME_LEN + 1];
        let long = core::str::from_utf8(&long).unwrap();
        assert!(valid_program_name(&long[1..]));
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "directive.json",
            "/bin/ls",
            "a/b",
            "two words",
            "tab\there",
            "nl\n",
            "nul\0",
            "ümlaut",
            "semi;colon",
            "$(x)",
            long,
        ] {
            assert!(!valid_program_name(bad), "{bad:?}");
        }
    }
}
