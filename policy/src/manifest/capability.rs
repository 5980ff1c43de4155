//! The Linux capabilities a service may ask for by name.
//!
//! Every service runs with every capability dropped; `capabilities:` gives some back. Those
//! that would let a process go around the sidecar (build its own packets, change its routes)
//! or act on the host past its container are refused when the manifest is read.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Declares the enum and its names from one list, so the manifest's spelling and the name
/// handed to the runtime cannot drift apart.
macro_rules! capabilities {
    ($($variant:ident = $name:literal,)+) => {
        /// A Linux capability, named as Docker and Kubernetes name it (without `CAP_`);
        /// capabilities(7) describes each.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            JsonSchema,
        )]
        #[allow(missing_docs)]
        pub enum Capability {
            $(#[serde(rename = $name)] $variant,)+
        }

        impl Capability {
            /// Every capability, in the kernel's order.
            pub const ALL: &[Capability] = &[$(Capability::$variant),+];

            /// The name Docker and Kubernetes take, e.g. `NET_BIND_SERVICE`.
            pub fn name(self) -> &'static str {
                match self { $(Capability::$variant => $name,)+ }
            }
        }
    };
}

capabilities! {
    Chown = "CHOWN",
    DacOverride = "DAC_OVERRIDE",
    DacReadSearch = "DAC_READ_SEARCH",
    Fowner = "FOWNER",
    Fsetid = "FSETID",
    Kill = "KILL",
    Setgid = "SETGID",
    Setuid = "SETUID",
    Setpcap = "SETPCAP",
    LinuxImmutable = "LINUX_IMMUTABLE",
    NetBindService = "NET_BIND_SERVICE",
    NetBroadcast = "NET_BROADCAST",
    NetAdmin = "NET_ADMIN",
    NetRaw = "NET_RAW",
    IpcLock = "IPC_LOCK",
    IpcOwner = "IPC_OWNER",
    SysModule = "SYS_MODULE",
    SysRawio = "SYS_RAWIO",
    SysChroot = "SYS_CHROOT",
    SysPtrace = "SYS_PTRACE",
    SysPacct = "SYS_PACCT",
    SysAdmin = "SYS_ADMIN",
    SysBoot = "SYS_BOOT",
    SysNice = "SYS_NICE",
    SysResource = "SYS_RESOURCE",
    SysTime = "SYS_TIME",
    SysTtyConfig = "SYS_TTY_CONFIG",
    Mknod = "MKNOD",
    Lease = "LEASE",
    AuditWrite = "AUDIT_WRITE",
    AuditControl = "AUDIT_CONTROL",
    Setfcap = "SETFCAP",
    MacOverride = "MAC_OVERRIDE",
    MacAdmin = "MAC_ADMIN",
    Syslog = "SYSLOG",
    WakeAlarm = "WAKE_ALARM",
    BlockSuspend = "BLOCK_SUSPEND",
    AuditRead = "AUDIT_READ",
    Perfmon = "PERFMON",
    Bpf = "BPF",
    CheckpointRestore = "CHECKPOINT_RESTORE",
}

impl Capability {
    /// Why a service may not have this capability, or `None` when it may.
    pub fn refusal(self) -> Option<&'static str> {
        use Capability::*;
        Some(match self {
            NetRaw => "it lets a process build its own packets and send them around the sidecar",
            NetAdmin => "it lets a process change its own routes, addresses and packet filter",
            SysAdmin => "it lets a process mount file systems and enter other namespaces",
            SysModule | Bpf | Perfmon => "it lets a process load code into the host's kernel",
            SysRawio | DacReadSearch => "it lets a process read the host's devices or files",
            SysBoot | SysTime | Syslog | AuditControl | AuditRead | MacAdmin | MacOverride => {
                "it acts on the host as a whole, not on its container"
            }
            _ => return None,
        })
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_spelling_is_the_runtime_name() {
        for cap in Capability::ALL {
            let spelled = serde_json::to_value(cap).expect("serializes");
            assert_eq!(spelled, cap.name(), "{cap:?}");
            let read: Capability =
                serde_json::from_value(serde_json::json!(cap.name())).expect("reads back");
            assert_eq!(read, *cap);
        }
        assert_eq!(Capability::ALL.len(), 41, "capabilities(7) lists 41");
    }

    #[test]
    fn the_network_and_host_capabilities_are_refused_and_common_ones_are_not() {
        for refused in [
            Capability::NetRaw,
            Capability::NetAdmin,
            Capability::SysAdmin,
        ] {
            assert!(refused.refusal().is_some(), "{refused}");
        }
        for granted in [
            Capability::Chown,
            Capability::Setuid,
            Capability::Setgid,
            Capability::NetBindService,
        ] {
            assert_eq!(granted.refusal(), None, "{granted}");
        }
    }
}
