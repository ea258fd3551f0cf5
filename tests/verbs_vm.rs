//! Issue 8: the verbs transport on a real (software) RDMA device. Boots the host's
//! Debian kernel under qemu with soft-RoCE (`scripts/rxe-vm`, one boot) and runs,
//! inside it, ngauge over `-t verbs` with both data paths over 1 B .. 1 MiB with data
//! checks, and perftest's `ib_send_lat`/`ib_write_lat` beside it. Prints both
//! figures side by side: emulated time (TCG), so only a ratio, never a speed claim.
//!
//! Skipped, with a message, only where qemu or a kernel image is missing.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The commands run in the guest: (label, command line). Each must exit 0.
fn guest_commands() -> Vec<(&'static str, String)> {
    let mut cmds = Vec::new();
    for op in ["send", "write"] {
        cmds.push((
            op,
            format!(
                "ngauge --np 2 -t verbs --verbs-op {op} --timeout 120 selftest pingpong \
                 --max 1048576 --iters 10"
            ),
        ));
    }
    cmds
}

fn guest_script() -> String {
    let mut s = String::from("#!/bin/sh\nRC=0\nulimit -l unlimited\n");
    for (label, cmd) in guest_commands() {
        s.push_str(&format!(
            "echo '=== ngauge {label}'\n{cmd} || {{ echo 'FAILED: {label}'; RC=1; }}\n"
        ));
    }
    for tool in ["ib_send_lat", "ib_write_lat"] {
        s.push_str(&format!(
            "echo '=== {tool}'\n\
             {tool} -d rxe0 -x 1 -s 1 -n 500 >/tmp/{tool}.srv 2>&1 &\n\
             sleep 2\n\
             {tool} -d rxe0 -x 1 -s 1 -n 500 127.0.0.1 2>&1 | grep -A1 '#bytes' || echo '{tool}: no result'\n\
             wait\n"
        ));
    }
    s.push_str("exit $RC\n");
    s
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kernel_image() -> Option<PathBuf> {
    let mut images: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .filter(|p| std::fs::File::open(p).is_ok())
        .collect();
    images.sort();
    images.pop()
}

/// Median half round trip (us) per size from `ngauge selftest pingpong` lines.
fn ngauge_points(section: &str) -> Vec<(usize, f64)> {
    section
        .lines()
        .filter(|l| l.contains("data checked"))
        .filter_map(|l| {
            let size = l.split(" size ").nth(1)?.split(' ').next()?.parse().ok()?;
            let us = l
                .split("round trip ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            Some((size, us))
        })
        .collect()
}

/// perftest's t_typical (us) from the line after its `#bytes` header.
fn perftest_typical(section: &str) -> Option<f64> {
    let mut lines = section.lines().skip_while(|l| !l.contains("#bytes"));
    lines.next()?;
    lines.next()?.split_whitespace().nth(4)?.parse().ok()
}

fn section<'a>(log: &'a str, title: &str) -> &'a str {
    let start = log
        .find(&format!("=== {title}"))
        .map_or(log.len(), |i| i + 4);
    let rest = &log[start..];
    &rest[..rest.find("=== ").unwrap_or(rest.len())]
}

#[test]
fn verbs_over_soft_roce_in_a_vm() {
    if !have("qemu-system-x86_64") {
        eprintln!("skipping verbs VM test: qemu-system-x86_64 is not installed");
        return;
    }
    if kernel_image().is_none() {
        eprintln!("skipping verbs VM test: no readable /boot/vmlinuz-* (linux-image-amd64)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("guest.sh");
    std::fs::write(&script, guest_script()).unwrap();
    let out = Command::new(root.join("scripts/rxe-vm"))
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_ngauge"))
        .env("OUTDIR", dir.path())
        .env("TIMEOUT", "600")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(3) {
        eprintln!(
            "skipping verbs VM test: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return;
    }
    assert!(
        out.status.success(),
        "guest failed (status {:?}):\n{log}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sizes_expected: Vec<usize> = (0..=20).map(|p| 1usize << p).collect();
    sizes_expected.sort();
    let mut rows = Vec::new();
    for (op, tool) in [("send", "ib_send_lat"), ("write", "ib_write_lat")] {
        let points = ngauge_points(section(&log, &format!("ngauge {op}")));
        let sizes: Vec<usize> = points.iter().map(|p| p.0).collect();
        assert_eq!(sizes, sizes_expected, "ngauge {op}: sizes missing\n{log}");
        let ours = points[0].1;
        let theirs = perftest_typical(section(&log, tool));
        rows.push((op, tool, ours, theirs));
    }
    eprintln!("soft-RoCE under TCG (emulated time: compare ratios, not speeds)");
    eprintln!("op     ngauge 1 B half-RTT [us]   perftest 1 B t_typical [us]   ratio");
    for (op, tool, ours, theirs) in rows {
        match theirs {
            Some(t) => eprintln!(
                "{op:<6} {ours:>24.2}   {tool} {t:>14.2}   {:>6.2}",
                ours / t
            ),
            None => eprintln!("{op:<6} {ours:>24.2}   {tool}: no result"),
        }
    }
}

#[test]
fn log_parsers_read_known_lines() {
    let log = "=== ngauge send\nverbs (poll) size 1 median half round trip 12.50 us (data checked)\n\
               verbs (poll) size 2 median half round trip 13.00 us (data checked)\n\
               === ib_send_lat\n #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n \
               1       500          8.87           15108.69      9.50\n";
    assert_eq!(
        ngauge_points(section(log, "ngauge send")),
        vec![(1, 12.5), (2, 13.0)]
    );
    assert_eq!(perftest_typical(section(log, "ib_send_lat")), Some(9.5));
    assert_eq!(perftest_typical(section(log, "ib_write_lat")), None);
}
