//! The eBPF backend where it does not exist (armv7, i686, Android): the
//! same names, an uninhabited probe, and the reason.

/// No probe can be loaded on this target.
#[derive(Debug)]
pub enum Probe {}

impl Probe {
    /// Always the reason this build has no eBPF backend.
    pub fn load(_ring_bytes: u32) -> anyhow::Result<Probe> {
        anyhow::bail!(
            "this build has no eBPF backend (only x86_64 and aarch64 Linux have one; this target keeps ptrace)"
        )
    }

    /// Never called: there is no probe.
    pub fn dense_refused(&self) -> Option<&str> {
        match *self {}
    }

    /// Never called: there is no probe.
    pub fn btf_refused(&self) -> Option<&str> {
        match *self {}
    }
}

/// The runner's names; nothing here can run without a probe.
pub mod runner {
    use super::Probe;
    use crate::trace::{AttachOptions, TraceOptions};
    use agent_core::Summary;

    /// The backend's counters.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct RunnerStats {
        /// Syscalls recorded.
        pub syscalls: u64,
        /// Records lost.
        pub lost: u64,
        /// Calls not counted (full kernel maps).
        pub uncounted: u64,
        /// Calls counted without their transition, errno or peer figures.
        pub partial: u64,
        /// Records that could not be read.
        pub unreadable: u64,
        /// Polls of the ring buffer.
        pub polls: u64,
        /// Threads' state in task storage (never here).
        pub task_storage: bool,
        /// Aggregates in the dense array (never here).
        pub dense: bool,
        /// fd kinds remembered per thread (never here).
        pub fd_memo: bool,
        /// Relocated against the kernel BTF's cut (never here).
        pub btf_cut: bool,
    }

    /// A command under the eBPF backend (never exists here).
    #[derive(Debug)]
    pub struct EbpfStarted(Probe);

    impl EbpfStarted {
        /// Unreachable: there is no probe.
        pub fn start(_opts: &TraceOptions, probe: Probe) -> anyhow::Result<EbpfStarted> {
            match probe {}
        }
        /// Unreachable.
        pub fn trace(&mut self, _on_window: &mut dyn FnMut(Summary)) -> anyhow::Result<Summary> {
            match self.0 {}
        }
        /// Unreachable.
        pub fn pid(&self) -> crate::sys::Tid {
            match self.0 {}
        }
        /// Unreachable.
        pub fn stats(&self) -> RunnerStats {
            match self.0 {}
        }
        /// Unreachable.
        pub fn wait(&mut self) -> anyhow::Result<std::process::ExitStatus> {
            match self.0 {}
        }
    }

    /// Unreachable: there is no probe.
    pub fn attach(
        _opts: &AttachOptions,
        probe: Probe,
        _on_window: &mut dyn FnMut(Summary),
    ) -> anyhow::Result<(Summary, RunnerStats)> {
        match probe {}
    }
}
