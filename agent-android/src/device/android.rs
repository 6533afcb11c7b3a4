//! Android: system properties through bionic's `__system_property_get`.

use std::ffi::{CStr, CString};

/// Android's system properties.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemProperties;

/// Bionic's `PROP_VALUE_MAX`: the longest value, terminating NUL included.
const PROP_VALUE_MAX: usize = 92;

impl super::Properties for SystemProperties {
    fn get(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        let mut value = [0 as libc::c_char; PROP_VALUE_MAX];
        // SAFETY: `name` is NUL-terminated; `value` has the PROP_VALUE_MAX
        // bytes bionic may write (it always NUL-terminates within them).
        let len = unsafe { libc::__system_property_get(name.as_ptr(), value.as_mut_ptr()) };
        if len <= 0 {
            return None;
        }
        // SAFETY: bionic wrote a NUL-terminated string into `value`.
        let value = unsafe { CStr::from_ptr(value.as_ptr()) };
        Some(value.to_string_lossy().into_owned())
    }
}
