//! The device's facts. On Android they come from system properties
//! (`ro.product.model`, `ro.build.version.release`, `ro.build.version.sdk`,
//! ...), which the tracer's Linux facts (`/etc/os-release`, DMI) cannot see.
//!
//! They go to the tracer as [`PlatformFacts`] (OS, version, model) and as
//! free facts (SDK level, maker, ABI) after the caller's own.
//!
//! The platform part is one small trait, [`Properties`], with one
//! implementation per platform ([`SystemProperties`]): bionic's
//! `__system_property_get` on Android, nothing elsewhere.

use agent_core::facts::{truncated, FACT_VALUE_MAX, MAX_FACTS};
use agent_linux::PlatformFacts;

#[cfg(target_os = "android")]
// One FFI call into bionic (`__system_property_get`).
#[allow(unsafe_code)]
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

/// The platform facts of an Android device (`ro.build.version.release` is
/// set), starting from what `detect` finds (the tracer's Linux view: kernel
/// release from uname); `None` elsewhere, where the tracer's detection is
/// right.
pub fn platform(
    props: &dyn Properties,
    detect: impl FnOnce() -> PlatformFacts,
) -> Option<PlatformFacts> {
    let release = props.get("ro.build.version.release")?;
    let detected = detect();
    Some(PlatformFacts {
        os_name: "Android".into(),
        os_version: release,
        device_model: props
            .get("ro.product.model")
            .unwrap_or(detected.device_model),
        ..detected
    })
}

/// The caller's free facts followed by the device's (SDK level, maker, ABI).
/// The caller's win: a device fact whose key the caller gave is left out,
/// and so are device facts beyond the 16 a summary holds. Values are cut to
/// fit and cleaned of control characters.
pub fn free_facts(props: &dyn Properties, given: &[(String, String)]) -> Vec<(String, String)> {
    let mut facts = given.to_vec();
    for (key, property) in FREE_FACTS {
        if facts.len() >= MAX_FACTS {
            break;
        }
        if facts.iter().any(|(k, _)| k == key) {
            continue;
        }
        if let Some(value) = props.get(property) {
            facts.push((key.into(), truncated::<FACT_VALUE_MAX>(&value).to_string()));
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::Facts;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, String>);

    impl Properties for Fake {
        fn get(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
    }

    fn pixel() -> Fake {
        Fake(HashMap::from([
            ("ro.build.version.release", "14".to_string()),
            ("ro.build.version.sdk", "34".to_string()),
            ("ro.product.model", "Pixel 8".to_string()),
            ("ro.product.manufacturer", "Google".to_string()),
            ("ro.product.cpu.abi", "arm64-v8a".to_string()),
        ]))
    }

    fn linux() -> PlatformFacts {
        PlatformFacts {
            os_name: String::new(),
            os_version: String::new(),
            kernel: "5.10.198-android12".into(),
            device_model: "Google Pixel 8 (DT)".into(),
        }
    }

    #[test]
    fn android_properties_become_platform_facts() {
        let p = platform(&pixel(), linux).unwrap();
        assert_eq!(p.os_name, "Android");
        assert_eq!(p.os_version, "14");
        assert_eq!(p.device_model, "Pixel 8");
        assert_eq!(p.kernel, "5.10.198-android12");
    }

    #[test]
    fn without_a_model_property_the_detected_model_stays() {
        let mut props = pixel();
        props.0.remove("ro.product.model");
        assert_eq!(
            platform(&props, linux).unwrap().device_model,
            "Google Pixel 8 (DT)"
        );
    }

    #[test]
    fn not_android_keeps_the_detection() {
        let props = Fake(HashMap::from([("ro.product.model", "x".to_string())]));
        assert_eq!(platform(&props, linux), None);
        assert_eq!(free_facts(&props, &[]), vec![]);
    }

    #[test]
    fn device_facts_follow_the_callers() {
        let given = vec![("net".to_string(), "wifi".to_string())];
        let facts = free_facts(&pixel(), &given);
        let keys: Vec<&str> = facts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["net", "android.sdk", "device.maker", "cpu.abi"]);
        let mut summary_facts = Facts::new();
        for (k, v) in &facts {
            summary_facts.add(k, v).unwrap();
        }
        assert_eq!(summary_facts.get("android.sdk"), Some("34"));
    }

    #[test]
    fn callers_facts_win_and_the_table_limit_holds() {
        let mut given = vec![("android.sdk".to_string(), "caller".to_string())];
        given.extend((0..14).map(|i| (format!("k{i}"), "v".to_string())));
        let facts = free_facts(&pixel(), &given);
        assert_eq!(facts.len(), 16);
        assert_eq!(facts[0].1, "caller");
        assert_eq!(facts[15].0, "device.maker");
    }

    #[test]
    fn long_and_odd_values_are_cut_and_cleaned() {
        let props = Fake(HashMap::from([
            ("ro.build.version.release", "14".to_string()),
            ("ro.product.manufacturer", "M".repeat(100)),
            ("ro.build.version.sdk", "3\u{7}4".to_string()),
        ]));
        let facts = free_facts(&props, &[]);
        let mut summary_facts = Facts::new();
        for (k, v) in &facts {
            summary_facts.add(k, v).unwrap();
        }
        assert_eq!(summary_facts.get("android.sdk"), Some("3?4"));
        assert_eq!(summary_facts.get("device.maker").unwrap().len(), 40);
    }
}
