//! Issue 34: jobs of many ranks. The control plane runs over a binomial tree (rank r's parent is r with
//! its highest bit cleared), so a lost rank is seen first by its tree neighbours
//! only; every other survivor must still name it, within the timeout. Kills a leaf
//! (15) and an inner node (2, which relays for 6, 10 and 14) of a 16-rank job with
//! SIGKILL while the ranks run control-plane barriers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;

const EXE: &str = env!("CARGO_BIN_EXE_ngauge");
const NP: usize = 16;
/// `--timeout` of the job; it ends within it plus the launcher's grace (3 s) and
/// slack for a loaded machine.
const TIMEOUT_S: u64 = 2;
const END_WITHIN: Duration = Duration::from_secs(TIMEOUT_S + 3 + 20);

/// The pid of the local launcher's child that is rank `rank`.
fn rank_pid(launcher: u32, rank: usize) -> Option<u32> {
    let want = format!("NGAUGE_RANK={rank}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(launcher) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// Whether `pid` runs its liveness thread (started once its tree links are up).
fn linked(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| {
        d.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "ngauge-liveness")
        })
    })
}

fn kill_and_check(dead: usize) {
    let mut child = Command::new(EXE)
        .args(["--np", &NP.to_string(), "--timeout", &TIMEOUT_S.to_string()])
        .args([
            "--verbose",
            "sync",
            "--sync",
            "linear",
            "--exchanges",
            "100000",
        ])
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_LAUNCHER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let began = Instant::now();
    let pid = loop {
        if let Some(pid) = rank_pid(launcher, dead).filter(|&p| linked(p)) {
            break pid;
        }
        if began.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("rank {dead} never connected");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    let signalled = Instant::now();
    let out =
        support::output_within(child, END_WITHIN + Duration::from_secs(20)).unwrap_or_else(|o| {
            panic!(
                "the job did not end: {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    let took = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(took < END_WITHIN, "ended {took:?} after the kill: {stderr}");
    for rank in (0..NP).filter(|&r| r != dead) {
        // Rank 0's lines come unprefixed, the others' with `[rank N]`.
        let mine = |l: &&str| match rank {
            0 => l.starts_with("ngauge: error: rank 0:"),
            r => l.starts_with(&format!("[rank {r}] ")),
        };
        let named = stderr
            .lines()
            .filter(mine)
            .filter(|l| l.contains("error:"))
            .any(|l| {
                l.contains(&format!("lost rank {dead} "))
                    || l.contains(&format!("rank {dead} closed"))
            });
        assert!(named, "rank {rank} does not name rank {dead}:\n{stderr}");
    }
}

#[test]
fn issue34_a_killed_leaf_of_the_control_tree_is_named_by_every_survivor() {
    kill_and_check(15);
}

#[test]
fn issue34_a_killed_inner_node_of_the_control_tree_is_named_by_every_survivor() {
    kill_and_check(2);
}

/// The issue's first failure: 300 local ranks could not start (rank 0's liveness
/// listener held at most 256 waiting connections and dropped the oldest).
#[test]
fn issue34_three_hundred_local_ranks_start_and_report() {
    let child = Command::new(EXE)
        .args(["--np", "300", "--wait", "block", "info", "--json"])
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_LAUNCHER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = support::output_within(child, Duration::from_secs(240))
        .unwrap_or_else(|o| panic!("did not end: {}", String::from_utf8_lossy(&o.stderr)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["launcher"]["size"], 300, "{doc}");
    assert_eq!(doc["launcher"]["ranks"].as_array().map(Vec::len), Some(300));
}

/// A descriptor limit too small for the job is named in one line before anything
/// starts, with the status of bad input (2), not as "dropped for a newer
/// connection (too many waiting)" from some listener halfway through the job.
#[test]
fn issue34_a_descriptor_limit_too_small_for_the_job_is_one_line() {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 56; exec {EXE} --np 64 pingpong --sizes 1-1K --reps 100"
        ))
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_LAUNCHER")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("64 ranks needs about 112 open files") && stderr.contains("ulimit -n 112"),
        "{stderr}"
    );
}
