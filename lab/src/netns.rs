//! Network namespaces for testbeds: one server namespace holding a bridge,
//! client namespaces joined to it by veth pairs. Deleted on drop; stale ones
//! of an interrupted run are deleted by the next.

use std::path::Path;

use crate::procs::sh;

/// Namespace names start with this, then the creating process's pid.
pub const NS_PREFIX: &str = "edgedemo";
/// The server's address inside the namespaces (10.213.0.0/24 is never
/// routed anywhere: everything stays inside namespaces made here).
pub const SERVER_IP: &str = "10.213.0.1";

/// The demo's network namespaces; deleted on drop.
#[derive(Debug)]
pub struct Namespaces {
    /// The server's namespace (it holds the bridge).
    pub server: String,
    /// The clients' namespaces, client 1 first.
    pub clients: Vec<String>,
}

impl Namespaces {
    /// Deletes namespaces left by demos that no longer run.
    pub fn remove_stale() {
        let Ok(list) = sh("ip", &["netns", "list"]) else {
            return;
        };
        for line in list.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let Some(rest) = name.strip_prefix(NS_PREFIX) else {
                continue;
            };
            let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = sh("ip", &["netns", "del", name]);
            }
        }
    }

    /// Creates the server namespace with a bridge and `clients` client
    /// namespaces, each joined to the bridge by a veth pair.
    pub fn create(clients: u32) -> anyhow::Result<Namespaces> {
        let pid = std::process::id();
        let mut ns = Namespaces {
            server: format!("{NS_PREFIX}{pid}s"),
            clients: Vec::new(),
        };
        let server = ns.server.clone();
        sh("ip", &["netns", "add", &server])?;
        sh("ip", &["-n", &server, "link", "set", "lo", "up"])?;
        sh(
            "ip",
            &["-n", &server, "link", "add", "br0", "type", "bridge"],
        )?;
        sh(
            "ip",
            &[
                "-n",
                &server,
                "addr",
                "add",
                &format!("{SERVER_IP}/24"),
                "dev",
                "br0",
            ],
        )?;
        sh("ip", &["-n", &server, "link", "set", "br0", "up"])?;
        for i in 1..=clients {
            let name = format!("{NS_PREFIX}{pid}c{i}");
            sh("ip", &["netns", "add", &name])?;
            ns.clients.push(name.clone());
            let (inside, port) = (format!("eth{i}"), format!("vb{i}"));
            sh(
                "ip",
                &[
                    "link", "add", &inside, "netns", &name, "type", "veth", "peer", "name", &port,
                    "netns", &server,
                ],
            )?;
            sh(
                "ip",
                &["-n", &server, "link", "set", &port, "master", "br0"],
            )?;
            sh("ip", &["-n", &server, "link", "set", &port, "up"])?;
            sh("ip", &["-n", &name, "link", "set", "lo", "up"])?;
            sh(
                "ip",
                &[
                    "-n",
                    &name,
                    "addr",
                    "add",
                    &format!("10.213.0.{}/24", 10 + i),
                    "dev",
                    &inside,
                ],
            )?;
            sh("ip", &["-n", &name, "link", "set", &inside, "up"])?;
        }
        Ok(ns)
    }

    /// Sets `net.ipv4.tcp_rmem` in client `client`'s namespace (the sysctl is
    /// per namespace).
    pub fn set_rmem(&self, client: usize, rmem: &str) -> anyhow::Result<()> {
        sh(
            "ip",
            &[
                "netns",
                "exec",
                &self.clients[client],
                "sysctl",
                "-q",
                "-w",
                &format!("net.ipv4.tcp_rmem={rmem}"),
            ],
        )
        .map(|_| ())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.clients.iter().chain(std::iter::once(&self.server)) {
            let _ = sh("ip", &["netns", "del", name]);
        }
    }
}
