//! Which part of the time a window belongs to: its own file, because both
//! the fleet's reduction ([`super::fleet`]) and what it keeps per device
//! ([`super::trail`]) are keyed by it.

/// Training (fault-free, where thresholds and ranges are learnt) or
/// diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Where thresholds are learnt.
    Training,
    /// Where devices are judged.
    Diagnosis,
}
