//! The device's facts. On Android they come from system properties
//! (`ro.product.model`, `ro.build.version.release`, `ro.build.version.sdk`,
//! ...), which the tracer's Linux facts (`/etc/os-release`, DMI) cannot see.
//!
//! The platform part is one small trait, [`Properties`], with one
//! implementation per platform ([`SystemProperties`]): bionic's
//! `__system_property_get` on Android, nothing elsewhere.

use agent_core::facts::{truncated, FACT_VALUE_MAX};
use agent_core::{FactError, Facts};

#[cfg(target_os = "android")]
mod android;
#[cfg(target_os = "android")]
pub use android::SystemProperties;

#[cfg(not(target_os = "android"))]
mod elsewhere;
#[cfg(not(target_os = "android"))]
pub use elsewhere::SystemProperties;

/// A source of system properties.
pub trait Properties {
    /// The property's value; `None` when unset or empty.
    fn get(&self, name: &str) -> Option<String>;
}

/// Free facts taken from properties: (fact key, property).
const FREE_FACTS: [(&str, &str); 3] = [
    ("android.sdk", "ro.build.version.sdk"),
    ("device.maker", "ro.product.manufacturer"),
    ("cpu.abi", "ro.product.cpu.abi"),
];

/// Fills `facts` from the properties when they describe an Android device
/// (`ro.build.version.release` is set); otherwise leaves them alone.
///
/// The fixed facts (OS, version, model) are replaced: the tracer only knows
/// the Linux view, which on a phone says nothing useful. Free facts the caller
/// already gave win over the device's; a full fact table silently keeps the
/// caller's facts.
pub fn apply(facts: &mut Facts, props: &dyn Properties) {
    let Some(release) = props.get("ro.build.version.release") else {
        return;
    };
    facts.os_name = truncated("Android");
    facts.os_version = truncated(&release);
    if let Some(model) = props.get("ro.product.model") {
        facts.device_model = truncated(&model);
    }
    for (key, property) in FREE_FACTS {
        let Some(value) = props.get(property) else {
            continue;
        };
        let value = truncated::<FACT_VALUE_MAX>(&value);
        // Refusals are fine: a duplicate is the caller's own fact, and a
        // full table keeps the caller's facts; the keys are valid and
        // `truncated` made the value valid.
        let _: Result<(), FactError> = facts.add(key, &value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, &'static str>);

    impl Properties for Fake {
        fn get(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| v.to_string())
        }
    }

    fn pixel() -> Fake {
        Fake(HashMap::from([
            ("ro.build.version.release", "14"),
            ("ro.build.version.sdk", "34"),
            ("ro.product.model", "Pixel 8"),
            ("ro.product.manufacturer", "Google"),
            ("ro.product.cpu.abi", "arm64-v8a"),
        ]))
    }

    #[test]
    fn android_properties_become_facts() {
        let mut facts = Facts::new();
        facts.os_name = truncated("Debian GNU/Linux");
        apply(&mut facts, &pixel());
        assert_eq!(facts.os_name.as_str(), "Android");
        assert_eq!(facts.os_version.as_str(), "14");
        assert_eq!(facts.device_model.as_str(), "Pixel 8");
        assert_eq!(facts.get("android.sdk"), Some("34"));
        assert_eq!(facts.get("device.maker"), Some("Google"));
        assert_eq!(facts.get("cpu.abi"), Some("arm64-v8a"));
        assert_eq!(facts.validate(), Ok(()));
    }

    #[test]
    fn callers_facts_win_and_a_full_table_is_kept() {
        let mut facts = Facts::new();
        facts.add("android.sdk", "caller").unwrap();
        for i in 0..15 {
            facts.add(&format!("k{i}"), "v").unwrap();
        }
        apply(&mut facts, &pixel());
        assert_eq!(facts.get("android.sdk"), Some("caller"));
        assert_eq!(facts.extra.len(), 16);
        assert_eq!(facts.os_name.as_str(), "Android");
    }

    #[test]
    fn not_android_leaves_facts_alone() {
        let mut facts = Facts::new();
        facts.os_name = truncated("Debian GNU/Linux");
        let before = facts.clone();
        apply(&mut facts, &Fake(HashMap::from([("ro.product.model", "x")])));
        assert_eq!(facts, before);
    }

    #[test]
    fn long_and_odd_values_are_cut_and_cleaned() {
        let long = "M".repeat(100);
        let props = Fake(HashMap::from([
            ("ro.build.version.release", "14\n"),
            ("ro.product.model", Box::leak(long.into_boxed_str()) as &str),
            ("ro.build.version.sdk", "3\u{7}4"),
        ]));
        let mut facts = Facts::new();
        apply(&mut facts, &props);
        assert_eq!(facts.os_version.as_str(), "14?");
        assert_eq!(facts.device_model.len(), 40);
        assert_eq!(facts.get("android.sdk"), Some("3?4"));
        assert_eq!(facts.validate(), Ok(()));
    }
}
