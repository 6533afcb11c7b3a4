//! Facts about the run: who ran what, where. They become categorical
//! attributes on the service side (`fact.<key>`).

use heapless::{String, Vec};
use serde::{Deserialize, Serialize};

/// Longest free fact key, bytes.
pub const FACT_KEY_MAX: usize = 24;
/// Longest free fact value, bytes.
pub const FACT_VALUE_MAX: usize = 40;
/// Most free facts per summary.
pub const MAX_FACTS: usize = 16;

/// One free `key=value` fact given by the caller (e.g. `net.adapter=bridged`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// `[A-Za-z0-9._-]`, 1 to 24 bytes.
    pub key: String<FACT_KEY_MAX>,
    /// UTF-8 without control characters, at most 40 bytes.
    pub value: String<FACT_VALUE_MAX>,
}

/// The facts of a run. The fixed ones are filled by the platform shim
/// (truncated at a character boundary when longer than their capacity); the
/// free ones come from the caller and are validated.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Facts {
    /// OS name (`Debian GNU/Linux`, `Android`).
    pub os_name: String<24>,
    /// OS version (`12`, `14`).
    pub os_version: String<24>,
    /// Kernel release (`uname -r`).
    pub kernel: String<48>,
    /// Device model (`ro.product.model`, DMI product name).
    pub device_model: String<40>,
    /// Agent version.
    pub agent_version: String<16>,
    /// Traced program (its executable's base name).
    pub program: String<40>,
    /// Free facts, in the order given.
    pub extra: Vec<Fact, MAX_FACTS>,
}

/// Why a free fact was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactError {
    /// The key is empty, longer than 24 bytes, or has a character outside
    /// `[A-Za-z0-9._-]`.
    BadKey,
    /// The value is longer than 40 bytes or has a control character.
    BadValue,
    /// The key was given twice.
    Duplicate,
    /// More than 16 free facts.
    TooMany,
}

impl core::fmt::Display for FactError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FactError::BadKey => "fact key must be 1-24 characters of [A-Za-z0-9._-]",
            FactError::BadValue => {
                "fact value must be at most 40 bytes, without control characters"
            }
            FactError::Duplicate => "fact key given twice",
            FactError::TooMany => "at most 16 facts",
        })
    }
}

/// Whether `key` is a valid free fact key.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= FACT_KEY_MAX
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Whether `value` is a valid fact value of at most `max` bytes.
pub fn valid_value(value: &str, max: usize) -> bool {
    value.len() <= max && !value.chars().any(char::is_control)
}

/// Copies `src` into a `String<N>`, cut at the last character boundary that
/// fits; control characters become `?`.
pub fn truncated<const N: usize>(src: &str) -> String<N> {
    let mut out = String::new();
    for c in src.chars() {
        let c = if c.is_control() { '?' } else { c };
        if out.push(c).is_err() {
            break;
        }
    }
    out
}

impl Facts {
    /// Facts with the agent version filled in.
    pub fn new() -> Facts {
        Facts {
            agent_version: truncated(crate::AGENT_VERSION),
            ..Facts::default()
        }
    }

    /// Adds a free fact, refusing invalid, duplicate or excess ones.
    pub fn add(&mut self, key: &str, value: &str) -> Result<(), FactError> {
        if !valid_key(key) {
            return Err(FactError::BadKey);
        }
        if !valid_value(value, FACT_VALUE_MAX) {
            return Err(FactError::BadValue);
        }
        if self.get(key).is_some() {
            return Err(FactError::Duplicate);
        }
        let fact = Fact {
            key: truncated(key),
            value: truncated(value),
        };
        self.extra.push(fact).map_err(|_| FactError::TooMany)
    }

    /// The value of free fact `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|f| f.key.as_str() == key)
            .map(|f| f.value.as_str())
    }

    /// Checks what a decoder cannot: key syntax, uniqueness, control
    /// characters.
    pub fn validate(&self) -> Result<(), FactError> {
        for (i, f) in self.extra.iter().enumerate() {
            if !valid_key(&f.key) {
                return Err(FactError::BadKey);
            }
            if !valid_value(&f.value, FACT_VALUE_MAX) {
                return Err(FactError::BadValue);
            }
            if self.extra[..i].iter().any(|g| g.key == f.key) {
                return Err(FactError::Duplicate);
            }
        }
        let fixed = [
            self.os_name.as_str(),
            self.os_version.as_str(),
            self.kernel.as_str(),
            self.device_model.as_str(),
            self.agent_version.as_str(),
            self.program.as_str(),
        ];
        if fixed.iter().any(|s| s.chars().any(char::is_control)) {
            return Err(FactError::BadValue);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_validates() {
        let mut f = Facts::new();
        assert_eq!(f.add("net.adapter", "bridged"), Ok(()));
        assert_eq!(f.get("net.adapter"), Some("bridged"));
        assert_eq!(f.add("net.adapter", "nat"), Err(FactError::Duplicate));
        assert_eq!(f.add("", "x"), Err(FactError::BadKey));
        assert_eq!(f.add("a b", "x"), Err(FactError::BadKey));
        assert_eq!(f.add("k", "line\nbreak"), Err(FactError::BadValue));
        assert_eq!(f.add("k", &"v".repeat(41)), Err(FactError::BadValue));
        for i in 1..16 {
            let mut k: String<8> = String::new();
            let _ = core::fmt::write(&mut k, format_args!("k{i}"));
            assert_eq!(f.add(&k, "v"), Ok(()));
        }
        assert_eq!(f.add("one-more", "v"), Err(FactError::TooMany));
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        let s: String<5> = truncated("aébcdef");
        assert_eq!(s.as_str(), "aébc");
        let s: String<4> = truncated("a\tb");
        assert_eq!(s.as_str(), "a?b");
    }
}
