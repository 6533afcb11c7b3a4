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
        run: RunRecord::new(
            1_700_000_000_000_000_000,
            1_000_000,
            Exit::Code(0),
            Arch::X86_64,
        ),
        facts,
        truncated: false,
        syscalls: Default::default(),
        transitions: Default::default(),
        ..Summary::empty()
    }
}

/// A fresh random id.
pub fn random_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).expect("getrandom");
    id
}
