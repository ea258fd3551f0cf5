//! Issue 8: the verbs transport on a real (software) RDMA device. Boots the host's
//! Debian kernel under qemu with soft-RoCE (`scripts/rxe-vm`, one boot) and runs,
//! inside it, `ngauge pingpong -t verbs --check` with both data paths over 1 B .. 256 KiB,
//! the same with `--wait block` (completion channel) for three sizes, `ngauge info`,
//! `ngauge loggp -t verbs`, `ngauge sync -t verbs`, `ngauge rma -t verbs --check` (every
//! one-sided op with both synchronizations), the transport's own self test
//! (`transports/verbs/examples/verbs_selftest.rs`: both data paths in both wait modes,
//! the transport contract suite (`ngauge_transport::conformance`), then at queue
//! depth 8 four times the depth of messages in flight each way, an eager-only
//! flood that must cost credit messages on the send path, eager messages
//! that arrive before their receives while a rendezvous message goes the other way,
//! requests overlapping a pending receive refused, blocking sends of 1 KiB and 4 KiB
//! with their buffer reused at once (staged sends), size mismatches reported as such;
//! soft-RoCE's count of receiver-not-ready NAKs must stay 0 throughout), and
//! perftest's `ib_send_lat`/`ib_write_lat` beside them. Prints both figures side by
//! side: emulated time (TCG), so only a ratio, never a speed claim.
//!
//! Skipped, with a message, only where qemu or a kernel image is missing; with
//! `NGAUGE_REQUIRE_VM=1` (set by `scripts/test` once it has installed them) a
//! missing prerequisite fails the test instead.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::coll_rows as coll_support;
use crate::support;
use support::Lack;

/// The commands run in the guest: (label, command line). Each must exit 0.
fn guest_commands() -> Vec<(&'static str, String)> {
    let mut cmds = Vec::new();
    for op in ["send", "write", "write-poll"] {
        cmds.push((
            op,
            format!(
                "ngauge --np 2 -t verbs --verbs-op {op} --timeout 120 pingpong --sizes 1-256K \
                 --reps 10 --warmup 2 --check"
            ),
        ));
    }
    // streaming: a window of sends in flight, every message of the window checked
    for (label, op) in [
        ("stream send", "send"),
        ("stream write", "write"),
        ("stream write-poll", "write-poll"),
    ] {
        cmds.push((
            label,
            format!(
                "ngauge --np 2 -t verbs --verbs-op {op} --timeout 120 pingpong --sizes 1,4K,16K \
                 --reps 5 --warmup 2 --window 64 --check"
            ),
        ));
    }
    cmds.push((
        "block",
        "ngauge --np 2 -t verbs --wait block --timeout 120 pingpong --sizes 1,4K,256K \
         --reps 10 --warmup 2 --check"
            .into(),
    ));
    cmds.push(("info", "ngauge --np 1 info".into()));
    cmds.push((
        "sync",
        "ngauge --np 2 -t verbs --timeout 120 sync --sync linear --fitpoints 50 \
         --exchanges 20 --check-after 0s"
            .into(),
    ));
    // The sweep and the fits over verbs; confirming candidates in emulated time
    // re-measures for 15-40 s without testing anything transport-specific.
    cmds.push((
        "loggp",
        "ngauge --np 2 -t verbs --timeout 120 loggp --sizes 1-16K --reps 10 --warmup 2 \
         --no-confirm --no-refine"
            .into(),
    ));
    // Issue 14: every collective and algorithm over verbs on 4 ranks, each point's
    // warm-up calls data-checked on every rank (a wrong byte fails the run); the
    // barrier scheme and few sizes keep the boot short, one window-scheme run shows
    // the default timing path (clocks synchronized over verbs).
    for (op, _) in COLL_ALGOS {
        cmds.push((
            op,
            format!(
                "ngauge --np 4 -t verbs --timeout 120 coll --op {op} --algo all \
                 --sizes 1,4K,64K --segment 8K --scheme barrier --reps 5 --warmup 2"
            ),
        ));
    }
    // Issue 39: one-sided operations on the verbs window, every op and both
    // synchronizations at two sizes, the data checked (put and fetch-and-add).
    cmds.push((
        "rma",
        "ngauge --np 2 -t verbs --timeout 120 rma --sizes 1,4K --reps 5 --warmup 2 \
         --window 8 --check"
            .into(),
    ));
    cmds.push((
        "coll-window",
        "ngauge --np 4 -t verbs --timeout 120 coll --op bcast --algo binomial --sizes 1,4K \
         --reps 5 --warmup 2 --max-rounds 3 --sync linear --fitpoints 20 --exchanges 10"
            .into(),
    ));
    cmds
}

/// The collectives `ngauge coll` runs in the guest and the algorithms `--algo all`
/// must measure for each (as the table's headers name them).
use coll_support::ALGOS_OF_ALL as COLL_ALGOS;

/// The algorithms of `op` whose table a `coll` section prints, in order
/// (`OP verbs/ALGO on 4 ranks, ...` headers), and the number of size rows under each
/// (the rows right below its column header; the side-by-side table is not counted).
fn coll_tables(section: &str, op: &str) -> Vec<(String, usize)> {
    let prefix = format!("{op} verbs/");
    let mut tables: Vec<(String, usize)> = Vec::new();
    let mut open = false;
    for line in section.lines() {
        // The progress line ends in a carriage return, so on the serial console the
        // first header shares its line.
        let header = line
            .find(&prefix)
            .and_then(|i| line[i + prefix.len()..].split_once(" on 4 ranks"));
        let first = line.split_whitespace().next().unwrap_or("");
        let row = !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit());
        if let Some((algo, _)) = header {
            tables.push((algo.to_string(), 0));
            open = true;
        } else if open && row {
            if let Some(last) = tables.last_mut() {
                last.1 += 1;
            }
        } else if !line.starts_with("size [B]") {
            open = false;
        }
    }
    tables
}

fn guest_script() -> String {
    let mut s = String::from("#!/bin/sh\nRC=0\n");
    s.push_str(
        "echo '=== verbs_selftest'\nT0=$(cut -d' ' -f1 /proc/uptime)\n\
         verbs_selftest --device rxe0 --iters 5 --max 262144 || { echo 'FAILED: selftest'; RC=1; }\n\
         echo \"=== took selftest: $T0 $(cut -d' ' -f1 /proc/uptime)\"\n",
    );
    for (label, cmd) in guest_commands() {
        s.push_str(&format!(
            "echo '=== ngauge {label}'\nT0=$(cut -d' ' -f1 /proc/uptime)\n\
             {cmd} || {{ echo 'FAILED: {label}'; RC=1; }}\n\
             echo \"=== took {label}: $T0 $(cut -d' ' -f1 /proc/uptime)\"\n"
        ));
    }
    // receiver-not-ready NAKs soft-RoCE received for all of the above (perftest
    // follows): send credits must keep every message within the posted receives
    s.push_str(
        "echo '=== rnr'\n\
         echo \"rnr_naks $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_rnr_err)\"\n",
    );
    for tool in ["ib_send_lat", "ib_write_lat"] {
        s.push_str(&format!(
            "echo '=== {tool}'\n\
             {tool} -d rxe0 -x 1 -s 1 -n 500 >/tmp/{tool}.srv 2>&1 &\n\
             sleep 2\n\
             {tool} -d rxe0 -x 1 -s 1 -n 500 127.0.0.1 2>&1 | grep -A1 '#bytes' || echo '{tool}: no result'\n\
             wait\n"
        ));
    }
    s.push_str("echo '=== end'\nexit $RC\n");
    s
}

/// Skips the test visibly, or fails it under `CI=true` or `NGAUGE_REQUIRE_VM=1`
/// (`scripts/test` installs everything the VM needs).
fn skip(reason: &str) {
    support::skip(
        "verbs_over_soft_roce_in_a_vm",
        Lack::InstalledOrRequired("NGAUGE_REQUIRE_VM"),
        reason,
    );
}

/// Builds the transport's self test (an example, which `cargo test --test integration`
/// does not build) into the target directory this test runs from.
fn build_selftest() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/integration-<hash>
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let target_dir = profile_dir.parent().unwrap();
    // The profile that built this test, from its directory: `debug` is `dev`'s,
    // every other directory is named after its profile (`release`, `ci`).
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("no profile directory above {}", exe.display()),
    };
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "ngauge-verbs",
        "--features",
        "rdma",
    ])
    .args(["--example", "verbs_selftest", "--profile", profile])
    .arg("--target-dir")
    .arg(target_dir)
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    let status = cmd.status().unwrap();
    assert!(status.success(), "building verbs_selftest failed: {status}");
    let bin = profile_dir.join("examples/verbs_selftest");
    assert!(bin.exists(), "{} missing after the build", bin.display());
    bin
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

/// (size, min, median) half round trip in us per row of the pingpong table.
fn ngauge_points(section: &str) -> Vec<(usize, f64, f64)> {
    section
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let size = cols.first()?.parse().ok()?;
            let _reps: u64 = cols.get(1)?.parse().ok()?;
            Some((size, cols.get(2)?.parse().ok()?, cols.get(3)?.parse().ok()?))
        })
        .collect()
}

/// (op, sync, size, checked) per row of `rma`'s table.
fn rma_rows(section: &str) -> Vec<(String, String, usize, String)> {
    section
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let sync = *cols.get(1)?;
            if !["flush", "fence"].contains(&sync) || cols.len() != 10 {
                return None;
            }
            let size = cols[2].parse().ok()?;
            Some((cols[0].into(), sync.into(), size, cols[9].into()))
        })
        .collect()
}

/// perftest's (t_min, t_typical) in us from the line after its `#bytes` header.
fn perftest_figures(section: &str) -> Option<(f64, f64)> {
    let mut lines = section.lines().skip_while(|l| !l.contains("#bytes"));
    lines.next()?;
    let cols: Vec<&str> = lines.next()?.split_whitespace().collect();
    Some((cols.get(2)?.parse().ok()?, cols.get(4)?.parse().ok()?))
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
    let _heavy = support::heavy();
    if !have("qemu-system-x86_64") {
        return skip("qemu-system-x86_64 is not installed");
    }
    if kernel_image().is_none() {
        return skip("no readable /boot/vmlinuz-* (linux-image-amd64)");
    }
    let selftest = build_selftest();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("guest.sh");
    std::fs::write(&script, guest_script()).unwrap();
    let out = Command::new(root.join("scripts/rxe-vm"))
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_ngauge"))
        .arg(&selftest)
        .env("OUTDIR", dir.path())
        .env("TIMEOUT", "600")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    for l in log.lines().filter(|l| l.starts_with("=== took")) {
        eprintln!("{l}");
    }
    if out.status.code() == Some(3) {
        return skip(String::from_utf8_lossy(&out.stderr).trim());
    }
    assert!(
        out.status.success(),
        "guest failed (status {:?}):\n{log}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let sizes_expected: Vec<usize> = (0..=18).map(|p| 1usize << p).collect();
    let mut rows = Vec::new();
    for (op, tool) in [
        ("send", "ib_send_lat"),
        ("write", "ib_write_lat"),
        ("write-poll", "ib_write_lat"),
    ] {
        let points = ngauge_points(section(&log, &format!("ngauge {op}")));
        let sizes: Vec<usize> = points.iter().map(|p| p.0).collect();
        assert_eq!(sizes, sizes_expected, "ngauge {op}: sizes missing\n{log}");
        rows.push((op, tool, points[0], perftest_figures(section(&log, tool))));
    }
    let selftest_log = section(&log, "verbs_selftest");
    assert!(
        selftest_log
            .lines()
            .any(|l| l.trim() == "refused write-poll block: ok"),
        "verbs_selftest: write-poll with --wait block not refused cleanly\n{log}"
    );
    for op in ["send", "write", "write-poll"] {
        for wait in ["poll", "block"] {
            if op == "write-poll" && wait == "block" {
                continue;
            }
            for what in [
                "conformance",
                "selftest",
                "flood",
                "eager",
                "held",
                "staged",
            ] {
                let prefix = format!("{what} {op} {wait}: ");
                // the held line also reports the direct blocking send and recv
                let ok = if what == "held" {
                    "direct send and recv: ok"
                } else {
                    ": ok"
                };
                assert!(
                    selftest_log
                        .lines()
                        .any(|l| l.starts_with(&prefix) && l.contains(ok)),
                    "verbs_selftest: no `{prefix}ok` line\n{log}"
                );
            }
        }
    }
    let rnr = section(&log, "rnr");
    assert!(
        rnr.lines().any(|l| l.trim() == "rnr_naks 0"),
        "receiver-not-ready NAKs (a send found no receive posted): {rnr}\n{log}"
    );
    assert!(
        section(&log, "ngauge loggp").contains("LogGP parameters"),
        "loggp printed no parameters\n{log}"
    );
    for op in ["send", "write", "write-poll"] {
        let sizes: Vec<usize> = ngauge_points(section(&log, &format!("ngauge stream {op}")))
            .iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(
            sizes,
            vec![1, 4096, 16384],
            "pingpong --window 64 over {op}\n{log}"
        );
    }
    let block: Vec<usize> = ngauge_points(section(&log, "ngauge block"))
        .iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(
        block,
        vec![1, 4096, 1 << 18],
        "pingpong --wait block\n{log}"
    );
    assert!(
        section(&log, "ngauge info")
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["verbs", "usable"]),
        "info does not call verbs usable\n{log}"
    );
    assert!(
        section(&log, "ngauge sync").contains("clock sync: linear over verbs"),
        "sync over verbs printed no result\n{log}"
    );
    for (op, algos) in COLL_ALGOS {
        let tables = coll_tables(section(&log, &format!("ngauge {op}")), op);
        let rows = if op == "barrier" { 1 } else { 3 };
        let expected: Vec<(String, usize)> = algos.iter().map(|a| (a.to_string(), rows)).collect();
        assert_eq!(tables, expected, "coll --op {op} over verbs\n{log}");
    }
    let mut rma_expected = Vec::new();
    for (op, sync, sizes, checked) in [
        ("put", "flush", &[1, 4096][..], "yes"),
        ("get", "flush", &[1, 4096], "-"),
        ("put-bw", "flush", &[1, 4096], "-"),
        ("put-notify", "flush", &[1, 4096], "-"),
        ("fetch-add", "flush", &[8], "yes"),
        ("put", "fence", &[1, 4096], "yes"),
        ("get", "fence", &[1, 4096], "-"),
    ] {
        for &size in sizes {
            rma_expected.push((op.to_string(), sync.to_string(), size, checked.to_string()));
        }
    }
    assert_eq!(
        rma_rows(section(&log, "ngauge rma")),
        rma_expected,
        "rma over verbs (no accumulate: verbs has no floating-point atomics)\n{log}"
    );
    assert_eq!(
        coll_tables(section(&log, "ngauge coll-window"), "bcast"),
        vec![("binomial".to_string(), 2)],
        "coll over verbs, window scheme\n{log}"
    );
    eprintln!("{}\n{}", selftest_log.trim(), rnr.trim());
    eprintln!("soft-RoCE under TCG, 1-byte messages (emulated time: ratios, not speeds)");
    eprintln!(
        "op     ngauge min/median [us]   perftest          min/typical [us]   ratio of medians"
    );
    for (op, tool, (_, min, median), theirs) in rows {
        match theirs {
            Some((tmin, typical)) => eprintln!(
                "{op:<6} {min:>9.2} {median:>10.2}   {tool:<13} {tmin:>9.2} {typical:>10.2}   {:>8.2}",
                median / typical
            ),
            None => eprintln!("{op:<6} {min:>9.2} {median:>10.2}   {tool}: no result"),
        }
    }
}

#[test]
fn log_parsers_read_known_lines() {
    let log = "=== ngauge send\nsize [B]  reps  min [us]  median [us]  mean [us]\n\
               1           20     20.50      21.16    28.71\n\
               2           20     18.39        19.34      21.23\n\
               === ib_send_lat\n #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n \
               1       500          8.87           15108.69      9.50\n=== end\n";
    assert_eq!(
        ngauge_points(section(log, "ngauge send")),
        vec![(1, 20.5, 21.16), (2, 18.39, 19.34)]
    );
    assert_eq!(
        perftest_figures(section(log, "ib_send_lat")),
        Some((8.87, 9.5))
    );
    assert_eq!(perftest_figures(section(log, "ib_write_lat")), None);
    let coll = "=== ngauge gather\n\
                2/2 points (verbs/binomial 65536 B done)      \
                gather verbs/linear on 4 ranks, root 0, segment 8192, barrier scheme, wait poll; x\n\
                size [B]  valid  invalid  min [us]\n1  5  0  3.1\n4096  5  0  9.0\n\
                ngauge: warning: 4 ranks on 2 cores\n\
                gather verbs/binomial on 4 ranks, root 0, segment 8192, barrier scheme, wait poll; x\n\
                size [B]  valid  invalid  min [us]\n65536  5  0  3.1\n\
                side by side (measured interleaved, size by size): median run-time\n\
                size [B]  verbs/linear [us]  verbs/binomial [us]\n65536  3.1  3.1\n=== end\n";
    assert_eq!(
        coll_tables(section(coll, "ngauge gather"), "gather"),
        vec![("linear".to_string(), 2), ("binomial".to_string(), 1)]
    );
    assert_eq!(coll_tables(section(coll, "ngauge gather"), "bcast"), vec![]);
    let rma = "=== ngauge rma\nverbs one-sided, origin rank 0 -> target rank 1; x\n\
               op         sync   size [B]  reps  min [us]  median [us]  p99 [us]  max [us]  bandwidth [MB/s]  checked\n\
               put        flush  1         5     9.10      9.50         9.90      9.90      -                 yes\n\
               put-bw     flush  4096      5     90.10     95.50        99.90     99.90     343.1             -\n=== end\n";
    assert_eq!(
        rma_rows(section(rma, "ngauge rma")),
        vec![
            ("put".into(), "flush".into(), 1, "yes".into()),
            ("put-bw".into(), "flush".into(), 4096, "-".into())
        ]
    );
}
