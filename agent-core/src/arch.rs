//! The architectures whose syscalls the agent decodes.

use serde::{Deserialize, Serialize};

/// The syscall ABI of a traced thread. A 64-bit kernel can run 32-bit
/// processes (i386 on x86_64, arm on aarch64): the ABI is per event, not per
/// machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Arch {
    /// x86_64 (the 64-bit ABI; x32 is not supported).
    X86_64,
    /// i386 / i686, natively or as a 32-bit process on x86_64.
    I386,
    /// aarch64.
    Aarch64,
    /// 32-bit ARM EABI, natively or as a 32-bit process on aarch64.
    Arm,
}

impl Arch {
    /// Every supported architecture.
    pub const ALL: [Arch; 4] = [Arch::X86_64, Arch::I386, Arch::Aarch64, Arch::Arm];

    /// The name used in reports and attribute values.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::I386 => "i386",
            Arch::Aarch64 => "aarch64",
            Arch::Arm => "arm",
        }
    }

    /// Parses a name produced by [`Arch::name`].
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether the ABI's registers are 32 bits wide (results must be
    /// sign-extended from 32 bits by the shim).
    pub const fn is_32bit(self) -> bool {
        matches!(self, Arch::I386 | Arch::Arm)
    }
}
