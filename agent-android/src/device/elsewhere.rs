//! Platforms without Android system properties (desktop Linux, the host
//! where the JNI layer is tested): no properties, so the tracer's own Linux
//! facts stay as they are.

/// No system properties on this platform.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemProperties;

impl super::Properties for SystemProperties {
    fn get(&self, _name: &str) -> Option<String> {
        None
    }
}
