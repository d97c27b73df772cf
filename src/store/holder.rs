//! Who holds a token or a lease: enough to tell, from another process on
//! the same machine, whether the holder is certainly gone.
//!
//! A host name and a pid are not enough: two containers share a host name
//! and number their processes from 1 in their own PID namespaces, and a pid
//! is reused after its process exits. A holder is therefore also its random
//! engine id, the kernel's boot id, its PID namespace and its process start
//! time; another process concludes "dead" only when it shares the holder's
//! host, boot and PID namespace and the pid is gone or started at another
//! time. Anything else it cannot tell, and it watches the heartbeat instead.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The identity of one engine process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Random per process: never shared by two engines, whatever their run id.
    pub engine_id: String,
    /// Host name.
    pub host: String,
    /// pid, in the holder's own PID namespace.
    pub pid: u32,
    /// Start time of the pid in clock ticks since boot (Linux).
    #[serde(default)]
    pub pid_start: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id` (Linux).
    #[serde(default)]
    pub boot_id: Option<String>,
    /// The PID namespace, as `readlink /proc/self/ns/pid` shows it (Linux).
    #[serde(default)]
    pub pid_ns: Option<String>,
}

impl Holder {
    /// This process, computed once.
    pub fn current() -> &'static Holder {
        static ME: OnceLock<Holder> = OnceLock::new();
        ME.get_or_init(|| {
            let pid = std::process::id();
            Holder {
                engine_id: format!("{:016x}", fastrand::u64(..)),
                host: host_name(),
                pid,
                pid_start: process_start(pid),
                boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                    .ok()
                    .map(|s| s.trim().to_string()),
                pid_ns: pid_namespace(),
            }
        })
    }

    /// Whether the holder is certainly gone. Only a process that shares its
    /// host, boot and PID namespace can tell; any doubt is "not dead".
    pub fn certainly_dead(&self) -> bool {
        let me = Holder::current();
        if self.engine_id == me.engine_id {
            return false;
        }
        let same_machine = self.host == me.host
            && self.boot_id.is_some()
            && self.boot_id == me.boot_id
            && self.pid_ns.is_some()
            && self.pid_ns == me.pid_ns;
        if !same_machine {
            return false;
        }
        match (process_start(self.pid), self.pid_start) {
            (None, _) => true,
            (Some(now), Some(then)) => now != then,
            (Some(_), None) => false,
        }
    }
}

/// This host's name, as the kernel knows it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.display().to_string())
}

/// Field 22 of /proc/<pid>/stat: when the process started.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_process_of_this_machine_and_namespace_is_dead() {
        let me = Holder::current().clone();
        assert!(me.boot_id.is_some() && me.pid_ns.is_some(), "{me:?}");
        assert!(!me.certainly_dead());
        let gone = Holder {
            engine_id: "other".into(),
            pid: 0x3fff_fff0,
            pid_start: Some(1),
            ..me.clone()
        };
        assert!(gone.certainly_dead());
        // The same pid number in another PID namespace is another process.
        let elsewhere = Holder {
            pid_ns: Some("pid:[1]".into()),
            ..gone.clone()
        };
        assert!(!elsewhere.certainly_dead());
        let other_boot = Holder {
            boot_id: Some("another boot".into()),
            ..gone.clone()
        };
        assert!(!other_boot.certainly_dead());
        let unknown_ns = Holder {
            pid_ns: None,
            ..gone
        };
        assert!(!unknown_ns.certainly_dead());
    }
}
