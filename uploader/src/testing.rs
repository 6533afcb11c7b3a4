//! Summaries for tests and measurements (not for production use).

use agent_core::{Arch, Exit, Facts, RunRecord, Summary};

/// A small valid summary with this id; `group` becomes the free fact
/// `group` when given.
pub fn sample_summary(id: [u8; 16], program: &str, group: Option<&str>) -> Summary {
    let mut facts = Facts::new();
    facts.program = agent_core::facts::truncated(program);
    if let Some(group) = group {
        // A test input: a bad group name is the caller's bug.
        facts.add("group", group).expect("valid group fact");
    }
    Summary {
        id,
        run: RunRecord {
            start_unix_ns: 1_700_000_000_000_000_000,
            duration_ns: 1_000_000,
            exit: Exit::Code(0),
            arch: Arch::X86_64,
            processes: 1,
            threads: 1,
            events: 0,
            overflow: Default::default(),
            window: 0,
            spool_dropped: 0,
        },
        facts,
        truncated: false,
        syscalls: Default::default(),
        transitions: Default::default(),
    }
}

/// A fresh random id.
pub fn random_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).expect("getrandom");
    id
}
