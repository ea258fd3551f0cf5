//! Network namespaces for the tests that need real links between ranks
//! (`tests/network.rs`, `tests/loggp_shaped.rs`, `tests/udp_loss.rs`): a set of
//! namespaces, veth pairs created straight into them, addresses, routes and a
//! `tc ... tbf` shaper, and commands run inside one. Names carry the PID; the
//! namespaces (and the veths inside them) are removed on drop, on every exit
//! path. Needs root and `ip` (and `tc` to shape). The tests include this file
//! themselves (`#[path]`), as `support/documents.rs`.
// Each test crate uses a part of this module.
#![allow(dead_code)]

use std::process::{Command, Output, Stdio};

/// Whether `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `args` (the program first), which must succeed; its output.
pub fn sh(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Namespaces `0..n`, each with its loopback up; removed on drop.
pub struct Netns {
    names: Vec<String>,
}

impl Netns {
    /// `n` namespaces named `{tag}{pid}r{i}` (`tag` tells the tests apart).
    pub fn new(tag: &str, n: usize) -> Netns {
        let pid = std::process::id();
        let netns = Netns {
            names: (0..n).map(|i| format!("{tag}{pid}r{i}")).collect(),
        };
        for ns in &netns.names {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        netns
    }

    /// Namespace `i`'s name.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// How many namespaces there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// A veth pair, `dev_a` in namespace `a` and `dev_b` in `b`, both up
    /// (created inside the namespaces: the names cannot clash with the host's).
    pub fn veth(&self, a: usize, dev_a: &str, b: usize, dev_b: &str) {
        let (na, nb) = (self.name(a), self.name(b));
        sh(&[
            "ip", "link", "add", dev_a, "netns", na, "type", "veth", "peer", "name", dev_b,
            "netns", nb,
        ]);
        for (ns, dev) in [(na, dev_a), (nb, dev_b)] {
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
    }

    /// Gives `dev` in namespace `i` the address `cidr` (`10.1.2.3/24`).
    pub fn addr(&self, i: usize, cidr: &str, dev: &str) {
        sh(&["ip", "-n", self.name(i), "addr", "add", cidr, "dev", dev]);
    }

    /// Routes `dest` (`10.1.2.3/32`) through `dev` in namespace `i`, from the
    /// source address `src`.
    pub fn route(&self, i: usize, dest: &str, dev: &str, src: &str) {
        sh(&[
            "ip",
            "-n",
            self.name(i),
            "route",
            "add",
            dest,
            "dev",
            dev,
            "src",
            src,
        ]);
    }

    /// Shapes what leaves `dev` in namespace `i` to `rate` (tc's `20mbit`) with a
    /// token bucket: a burst of a few packets (so a message cannot slip through
    /// at line rate) and a queue of 800 ms, deep enough for a window of 64 KiB
    /// messages without drops.
    pub fn shape(&self, i: usize, dev: &str, rate: &str) {
        sh(&[
            "ip",
            "netns",
            "exec",
            self.name(i),
            "tc",
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "16kb",
            "latency",
            "800ms",
        ]);
    }

    /// `args` (the program first) as a command run inside namespace `i`.
    pub fn exec(&self, i: usize, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.name(i)]).args(args);
        cmd
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
