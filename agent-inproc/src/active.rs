//! The table this process records into now, if it is observed: one
//! pointer every wrapper reads first (null: not observed, every wrapper
//! passes straight through).

use core::sync::atomic::{AtomicPtr, Ordering};

use crate::table::RunTable;

static TABLE: AtomicPtr<RunTable> = AtomicPtr::new(core::ptr::null_mut());

/// The table recorded into, if the process is observed.
#[inline]
pub fn table() -> Option<&'static RunTable> {
    let p = TABLE.load(Ordering::Acquire);
    // SAFETY: TABLE holds null or a pointer taken from a `&'static
    // RunTable` (`activate`), valid and shared-only for the process's life.
    unsafe { p.as_ref() }
}

/// Starts recording into `table`; false when the process is observed
/// already (its first table stays).
pub fn activate(table: &'static RunTable) -> bool {
    let p = table as *const RunTable as *mut RunTable;
    TABLE
        .compare_exchange(
            core::ptr::null_mut(),
            p,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
}

/// Stops recording: wrappers pass straight through from now on (a call
/// already past its check still records into the table, which lives on).
pub fn deactivate() {
    TABLE.store(core::ptr::null_mut(), Ordering::Release);
}
