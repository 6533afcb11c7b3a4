//! Conditions the platform sets on uploading (on AC power, unmetered
//! network, ...). Each platform supplies one [`Conditions`]; the uploader
//! asks it before sending and holds back while it says no.

use std::fs;
use std::path::PathBuf;

/// A platform's say on whether to upload now.
pub trait Conditions: std::fmt::Debug + Send + Sync {
    /// `Some(reason)` to hold the upload back now, `None` to go ahead.
    fn hold_back(&self) -> Option<String>;
}

/// No conditions: always go ahead (`--ignore-power`; tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unconditional;

impl Conditions for Unconditional {
    fn hold_back(&self) -> Option<String> {
        None
    }
}

/// Linux: hold back while running on battery. A machine without a battery
/// (desktop, server, container) always goes ahead. (Android supplies its
/// own: charging and unmetered network, as WorkManager constraints.)
#[derive(Debug, Clone)]
pub struct LinuxPower {
    /// The power-supply class directory, normally `/sys/class/power_supply`.
    pub root: PathBuf,
}

impl Default for LinuxPower {
    fn default() -> Self {
        LinuxPower {
            root: PathBuf::from("/sys/class/power_supply"),
        }
    }
}

impl Conditions for LinuxPower {
    fn hold_back(&self) -> Option<String> {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return None;
        };
        let mut battery = false;
        for entry in entries.flatten() {
            let read = |name: &str| {
                fs::read_to_string(entry.path().join(name))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            };
            match read("type").as_str() {
                "Battery" => battery = true,
                // Mains, USB, USB_C, ...: any external supply that is online.
                "" => {}
                _ if read("online") == "1" => return None,
                _ => {}
            }
        }
        battery.then(|| "on battery power (use --ignore-power to upload anyway)".to_string())
    }
}

/// The platform's own conditions, used by `edge-agent upload`: AC power on
/// Linux; none on Android, where the app schedules the upload with
/// WorkManager constraints (charging, unmetered network) and may pass its
/// own [`Conditions`] to [`crate::session::run_with`].
pub fn platform() -> Box<dyn Conditions> {
    if cfg!(target_os = "android") {
        Box::new(Unconditional)
    } else {
        Box::new(LinuxPower::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supply(root: &std::path::Path, name: &str, kind: &str, online: Option<&str>) {
        let dir = root.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("type"), format!("{kind}\n")).unwrap();
        if let Some(online) = online {
            fs::write(dir.join("online"), format!("{online}\n")).unwrap();
        }
    }

    #[test]
    fn battery_without_mains_holds_back() {
        let dir = tempfile::tempdir().unwrap();
        let power = LinuxPower {
            root: dir.path().to_path_buf(),
        };
        assert_eq!(power.hold_back(), None, "no supplies at all: a desktop");
        supply(dir.path(), "BAT0", "Battery", None);
        assert!(power.hold_back().unwrap().contains("battery"));
        supply(dir.path(), "AC", "Mains", Some("0"));
        assert!(power.hold_back().is_some(), "charger unplugged");
        supply(dir.path(), "AC", "Mains", Some("1"));
        assert_eq!(power.hold_back(), None, "on AC");
    }

    #[test]
    fn missing_sysfs_goes_ahead() {
        let power = LinuxPower {
            root: "/nonexistent/power".into(),
        };
        assert_eq!(power.hold_back(), None);
    }
}
