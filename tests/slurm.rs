//! Issue 20: ngauge under a real Slurm. A one-node Slurm 22.05 (`scripts/slurm-local`:
//! munge, slurmctld, slurmd, core binding by task/affinity) runs real `srun` steps of
//! the real binary: `info` (launcher, ranks, each rank's core), `pingpong`, `loggp`,
//! `sync` with more tasks than cores, a task killed with SIGKILL, and the shared-core
//! warning (issue 20's `srun -n 3 --overcommit --cpu-bind=cores`).
//!
//! The cluster is started once per test binary (a `OnceLock`) and left running: a
//! start finds it answering and returns at once, so a second run reuses it, and
//! several test binaries may use it at the same time (every job carries a name of
//! this process, and a job that outlives its time limit is cancelled by that name).
//! `scripts/slurm-local stop` stops it.
//!
//! When the cluster cannot be started (not root, Slurm not installed, or
//! `NGAUGE_SKIP_SLURM=1`), each test passes after writing `SKIPPED` and the reason
//! to the test process's stdout, which libtest does not capture (it captures only
//! `print!`); under `CI=true` (as `scripts/test` runs in CI) the same tests fail
//! instead. docs/testing-slurm.md describes the convention.

use crate::slurm_cluster;
use crate::support;

use serde_json::Value;
use slurm_cluster::{cluster, job_name, run, scancel, srun, SCRIPT};
use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The step succeeded and printed exactly one JSON document.
fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr_of(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

const LIMIT: Duration = Duration::from_secs(60);

fn host_cores() -> usize {
    ngauge::clock::allowed_cores().len()
}

#[test]
fn issue_20_srun_info_reports_the_slurm_launcher_and_each_ranks_core() {
    let Some(conf) = cluster("issue_20_srun_info_reports_the_slurm_launcher_and_each_ranks_core")
    else {
        return;
    };
    assert!(host_cores() >= 2, "these tests need 2 cores");
    // Cores in reverse rank order: what ngauge reports is the binding Slurm made,
    // not a guess from the rank.
    let name = job_name("info");
    let cmd = srun(
        conf,
        &name,
        &["-n", "2", "--cpu-bind=map_cpu:1,0"],
        &["info", "--json"],
    );
    let doc = json_of(&run(conf, &name, cmd, LIMIT));
    let launcher = &doc["launcher"];
    assert_eq!(launcher["kind"], "slurm", "{launcher}");
    assert_eq!(launcher["name"], "srun (Slurm)");
    assert_eq!(
        (launcher["rank"].as_u64(), launcher["size"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(launcher["ranks_on_host"], 2);
    let ranks = launcher["ranks"].as_array().unwrap();
    let got: Vec<(u64, u64)> = ranks
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["pinned_core"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, vec![(0, 1), (1, 0)], "{ranks:?}");
    let pids: BTreeSet<u64> = ranks.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "two processes: {ranks:?}");
    assert_eq!(doc["meta"]["launcher"], "srun (Slurm)");
    assert_eq!(doc["meta"]["np"], 2);
    assert_eq!(doc["meta"]["pinning"], serde_json::json!([1, 0]));
}

#[test]
fn issue_20_srun_pingpong_on_distinct_cores_does_not_warn() {
    let Some(conf) = cluster("issue_20_srun_pingpong_on_distinct_cores_does_not_warn") else {
        return;
    };
    let name = job_name("pingpong");
    let cmd = srun(
        conf,
        &name,
        &["-n", "2", "--cpu-bind=cores"],
        &["pingpong", "--sizes", "1-4K", "--reps", "50", "--json"],
    );
    let out = run(conf, &name, cmd, LIMIT);
    let doc = json_of(&out);
    let sizes: Vec<u64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (0..=12).map(|k| 1u64 << k).collect::<Vec<_>>());
    assert_eq!(doc["meta"]["launcher"], "srun (Slurm)");
    assert_eq!(doc["meta"]["np"], 2);
    let pinning = doc["meta"]["pinning"].as_array().unwrap();
    assert!(
        pinning.iter().all(Value::is_u64) && pinning[0] != pinning[1],
        "--cpu-bind=cores: two cores, {pinning:?}"
    );
    let stderr = stderr_of(&out);
    assert!(!stderr.contains("share core"), "{stderr}");
    assert!(!stderr.contains("may run on several cores"), "{stderr}");
    // A level that moved is the host's (`level_moved`) and may come in any run.
    let warned: Vec<&Value> = (doc["warnings"].as_array().unwrap().iter())
        .filter(|w| w["kind"] != "level_moved")
        .collect();
    assert!(warned.is_empty(), "{stderr}");
}

#[test]
fn issue_20_overcommitted_srun_pingpong_warns_that_ranks_share_a_core() {
    let Some(conf) = cluster("issue_20_overcommitted_srun_pingpong_warns_that_ranks_share_a_core")
    else {
        return;
    };
    let name = job_name("shared-core");
    let cmd = srun(
        conf,
        &name,
        &["-n", "3", "--overcommit", "--cpu-bind=cores"],
        &["pingpong", "--sizes", "1-64", "--reps", "50"],
    );
    let out = run(conf, &name, cmd, LIMIT);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Slurm 22.05 binds every task of this step to one core (issue 20).
    let header = stdout.lines().next().unwrap_or_default();
    let core = header
        .split("cores ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no cores in the header: {stdout}"));
    let (a, b) = core
        .split_once(',')
        .unwrap_or_else(|| panic!("cores {core}"));
    assert_eq!(a, b, "ranks 0 and 1 on one core: {header}");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("ngauge: warning: ranks 0 and 1 share core"))
        .unwrap_or_else(|| panic!("no shared-core warning: {stderr}"));
    assert!(
        warning.contains(&format!("share core {a} on ")),
        "{warning}"
    );
    assert!(warning.contains("`srun --cpu-bind=cores`"), "{warning}");
    assert!(warning.contains("--overcommit"), "{warning}");
    // Printed once, by rank 0, after the results.
    assert_eq!(stderr.matches("share core").count(), 1, "{stderr}");
}

#[test]
fn issue_20_srun_loggp_fits_a_small_sweep() {
    let Some(conf) = cluster("issue_20_srun_loggp_fits_a_small_sweep") else {
        return;
    };
    let name = job_name("loggp");
    let cmd = srun(
        conf,
        &name,
        &["-n", "2", "--cpu-bind=cores"],
        &[
            "loggp", "--sizes", "1K-8K:1K", "--reps", "3", "--warmup", "1", "--json",
        ],
    );
    let out = run(conf, &name, cmd, LIMIT);
    let doc = json_of(&out);
    assert_eq!(
        (doc["client"].as_u64(), doc["server"].as_u64()),
        (Some(0), Some(1))
    );
    let sizes: Vec<u64> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (1..=8).map(|k| k * 1024).collect::<Vec<_>>());
    let ranges = doc["ranges"].as_array().unwrap();
    // The fit's values are timing (3 repetitions on a shared host); its coverage is not.
    assert_eq!(ranges.first().map(|r| &r["from"]), Some(&Value::from(1024)));
    assert_eq!(ranges.last().map(|r| &r["to"]), Some(&Value::from(8192)));
    for r in ranges {
        for field in [
            "half_rtt_1b_us",
            "wire_latency_us",
            "g_us",
            "G_us_per_byte",
            "os_us",
            "or_us",
        ] {
            assert!(
                r[field].as_f64().is_some_and(f64::is_finite),
                "{field}: {r}"
            );
        }
    }
    assert_eq!(doc["meta"]["launcher"], "srun (Slurm)");
    let stderr = stderr_of(&out);
    assert!(!stderr.contains("share core"), "{stderr}");
}

#[test]
fn issue_20_srun_sync_with_4_overcommitted_tasks_finds_the_injected_offsets() {
    let Some(conf) =
        cluster("issue_20_srun_sync_with_4_overcommitted_tasks_finds_the_injected_offsets")
    else {
        return;
    };
    let name = job_name("sync");
    let mut cmd = srun(
        conf,
        &name,
        &["-n", "4", "--overcommit"],
        &[
            "sync",
            "--fitpoints",
            "50",
            "--exchanges",
            "5",
            "--check-after",
            "0s",
            "--json",
        ],
    );
    // Known truth: offsets of tens of milliseconds (see tests/sync.rs for why 5 ms
    // tells a right estimate from a wrong one on a loaded host).
    cmd.env(
        "NGAUGE_TEST_CLOCK_SKEW",
        "1:+30ms:+40ppm,2:-50ms:-25ppm,3:+20ms:+10ppm",
    );
    let out = run(conf, &name, cmd, LIMIT);
    let doc = json_of(&out);
    assert_eq!(doc["np"], 4);
    assert_eq!(doc["meta"]["launcher"], "srun (Slurm)");
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i);
        let (offset, truth) = (
            r["offset_ns"].as_f64().unwrap(),
            r["true_offset_ns"].as_f64().unwrap(),
        );
        assert!(
            (offset - truth).abs() < 5e6,
            "rank {i}: {offset} vs {truth}"
        );
    }
    // Under srun the skew's epoch is the raw clock rounded down to 2^37 ticks (about
    // 53 s, `sync::skew`), so rank 2's -25 ppm has added up to 1.3 ms by now.
    let truth_2 = ranks[2]["true_offset_ns"].as_f64().unwrap();
    assert!(
        (truth_2 + 50e6).abs() < 2e6,
        "rank 2 true offset {truth_2} ns, not -50 ms"
    );
    // Four tasks on two cores: if Slurm pinned them, some share a core, and the
    // warning says so.
    let pinning: Vec<Option<u64>> = doc["meta"]["pinning"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::as_u64)
        .collect();
    let pinned: Vec<u64> = pinning.iter().flatten().copied().collect();
    let distinct: BTreeSet<u64> = pinned.iter().copied().collect();
    let stderr = stderr_of(&out);
    assert_eq!(
        distinct.len() < pinned.len(),
        stderr.contains("share core"),
        "pinning {pinning:?}: {stderr}"
    );
}

/// The step's job id and node, once it runs.
fn job_of(conf: &str, name: &str) -> Option<(String, String)> {
    let out = Command::new("squeue")
        .env("SLURM_CONF", conf)
        .args(["-h", "-t", "R", "-n", name, "-o", "%A %N"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    Some((fields.next()?.to_string(), fields.next()?.to_string()))
}

/// The pids of task `task` of job `job`'s steps on `node` (`scontrol listpids`).
fn task_pids(conf: &str, job: &str, node: &str, task: usize) -> Vec<i32> {
    let out = Command::new("scontrol")
        .env("SLURM_CONF", conf)
        .args(["listpids", job, node])
        .output()
        .expect("scontrol");
    // PID JOBID STEPID LOCALID GLOBALID
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(4)?.parse::<usize>().ok()? == task).then(|| f[0].parse().ok())?
        })
        .collect()
}

#[test]
fn issue_20_a_task_killed_with_sigkill_is_named_by_the_others_within_the_timeout() {
    let Some(conf) =
        cluster("issue_20_a_task_killed_with_sigkill_is_named_by_the_others_within_the_timeout")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("points.jsonl");
    let name = job_name("kill");
    const TIMEOUT_S: u64 = 5;
    // A sweep far longer than the test: it is still measuring when task 1 dies.
    let mut cmd = srun(
        conf,
        &name,
        &["-n", "3", "--overcommit", "--label"],
        &[
            "pingpong",
            "--sizes",
            "1-1M",
            "--reps",
            "20000",
            "--timeout",
            &TIMEOUT_S.to_string(),
            "-o",
            jsonl.to_str().unwrap(),
        ],
    );
    let child = cmd.spawn().expect("srun");
    let began = Instant::now();
    // Measuring: rank 0 has written its first point.
    while std::fs::metadata(&jsonl).map_or(true, |m| m.len() == 0) {
        if began.elapsed() > LIMIT {
            scancel(conf, &name);
            panic!("no point measured within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (job, node) = job_of(conf, &name).expect("the job runs");
    let pids = task_pids(conf, &job, &node, 1);
    assert_eq!(pids.len(), 1, "task 1 of job {job}: {pids:?}");
    let pid = rustix::process::Pid::from_raw(pids[0]).unwrap();
    let killed = Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let limit = Duration::from_secs(TIMEOUT_S + 10);
    let out = support::output_within(child, limit).unwrap_or_else(|out| {
        scancel(conf, &name);
        panic!(
            "srun still running {limit:?} after the kill: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let ended_after = killed.elapsed();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "{stderr}");
    // srun labels each line with its task: both survivors name the dead one.
    for task in [0, 2] {
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&format!("{task}: ngauge: error:")))
            .unwrap_or_else(|| panic!("task {task} said nothing: {stderr}"));
        assert!(line.contains("rank 1"), "task {task}: {line}");
    }
    assert!(stderr.contains("task 1: Killed"), "{stderr}");
    assert!(
        ended_after < Duration::from_secs(TIMEOUT_S + 5),
        "the step ended {ended_after:?} after the kill (timeout {TIMEOUT_S} s)"
    );
    eprintln!("step ended {ended_after:?} after the kill");
}

/// The daemons `scripts/slurm-local` starts keep nothing of their caller's: run
/// under `flock FILE scripts/test`, munged once held the suite's lock for its whole
/// life (2026-11-28), so every later `flock` on that file waited. Checked on the
/// script's own function (a child started through it sees only 0, 1 and 2 of the
/// caller's descriptors 0, 1, 2, 7 and 9, and its stderr is the caller's; the
/// caller keeps its own) and on every
/// line of the script that starts a daemon. Needs no cluster.
#[test]
fn slurm_local_starts_its_daemons_without_the_callers_descriptors() {
    let dir = tempfile_dir();
    let script = std::fs::read_to_string(SCRIPT).expect("scripts/slurm-local");
    let code = format!(
        r#"source <(sed -n '/^without_inherited_fds() (/,/^)/p' {SCRIPT})
exec 7>{dir}/seven 9>{dir}/nine
without_inherited_fds bash -c 'ls /proc/$$/fd > {dir}/child; readlink /proc/$$/fd/2 > {dir}/child2'
ls /proc/$$/fd > {dir}/parent
readlink /proc/$$/fd/2 > {dir}/parent2"#
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&code)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fds = |name: &str| -> BTreeSet<u32> {
        std::fs::read_to_string(format!("{dir}/{name}"))
            .expect("fd listing")
            .split_whitespace()
            .map(|f| f.parse().expect("fd number"))
            .collect()
    };
    let child = fds("child");
    assert!(
        !child.contains(&7) && !child.contains(&9),
        "the child inherited {child:?}"
    );
    let stderr_of = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).expect("fd 2");
    assert_eq!(
        stderr_of("child2"),
        stderr_of("parent2"),
        "the child's stderr is not the caller's (a daemon's start-up errors would be lost)"
    );
    let parent = fds("parent");
    assert!(
        parent.contains(&7) && parent.contains(&9),
        "the caller lost its own descriptors: {parent:?}"
    );
    // every start goes through the function, and no line starts a daemon directly
    for daemon in [
        "su -s /bin/sh munge -c /usr/sbin/munged",
        "slurmctld -c",
        "slurmd ||",
    ] {
        assert!(
            script.lines().any(|l| l
                .trim_start()
                .starts_with(&format!("without_inherited_fds {daemon}"))),
            "{daemon} is not started through without_inherited_fds"
        );
    }
    for line in script.lines().map(str::trim_start) {
        assert!(
            !["su ", "slurmctld", "slurmd ", "/usr/sbin/munged"]
                .iter()
                .any(|d| line.starts_with(d)),
            "a daemon starts with the caller's descriptors: {line}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("ngauge-slurm-fds-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir.to_string_lossy().into_owned()
}
