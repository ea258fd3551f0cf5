//! The one-node Slurm of `scripts/slurm-local` for the tests that run `srun`
//! steps (tests/slurm.rs, tests/pmix.rs): started once per test binary, jobs
//! named after this process, a step past its time limit cancelled. Included by
//! those files with `#[path]` (not from `support/mod.rs`, which crates outside
//! this package include too).
#![allow(dead_code)]

use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub const EXE: &str = env!("CARGO_BIN_EXE_ngauge");
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm-local");

/// What `scripts/slurm-local start` gave: the cluster's `SLURM_CONF`, or why not.
pub fn start_cluster() -> Result<String, String> {
    if std::env::var("NGAUGE_SKIP_SLURM").as_deref() == Ok("1") {
        return Err("NGAUGE_SKIP_SLURM=1".into());
    }
    if !rustix::process::geteuid().is_root() {
        return Err("scripts/slurm-local needs root".into());
    }
    if !std::path::Path::new("/usr/sbin/slurmctld").exists() {
        return Err(
            "Slurm is not installed (scripts/test installs slurmctld, slurmd, \
                    slurm-client and munge)"
                .into(),
        );
    }
    let child = Command::new(SCRIPT)
        .arg("start")
        .env("NGAUGE_NO_INSTALL", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {SCRIPT}: {e}"))?;
    let out = crate::support::output_within(child, Duration::from_secs(60))
        .map_err(|_| "scripts/slurm-local start took more than 60 s".to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match stdout.lines().find_map(|l| l.strip_prefix("SLURM_CONF=")) {
        Some(conf) if out.status.success() => Ok(conf.to_string()),
        _ => Err(format!(
            "scripts/slurm-local start failed ({}): {}",
            out.status,
            stderr.trim()
        )),
    }
}

/// The cluster's `SLURM_CONF`, or `None` after saying visibly why the test skips;
/// under `CI=true` a cluster that cannot start fails the test.
pub fn cluster(test: &str) -> Option<&'static str> {
    static CLUSTER: OnceLock<Result<String, String>> = OnceLock::new();
    match CLUSTER.get_or_init(start_cluster) {
        Ok(conf) => Some(conf),
        Err(reason) => {
            let reason = format!("{reason}; see docs/testing-slurm.md");
            crate::support::skip(test, crate::support::Lack::Installed, reason);
            None
        }
    }
}

/// A unique job name for one step of this process.
pub fn job_name(test: &str) -> String {
    format!("ngauge-test-{}-{test}", std::process::id())
}

/// `srun --job-name NAME SRUN_ARGS ngauge NGAUGE_ARGS` against the test cluster, with
/// none of this process's own Slurm or ngauge variables (a test run inside a Slurm
/// job must not make srun a step of that job).
pub fn srun(conf: &str, name: &str, srun_args: &[&str], ngauge_args: &[&str]) -> Command {
    let mut c = Command::new("srun");
    for (var, _) in std::env::vars() {
        if var.starts_with("SLURM_") || var.starts_with("NGAUGE_") {
            c.env_remove(var);
        }
    }
    c.env("SLURM_CONF", conf)
        .args(["--job-name", name])
        .args(srun_args)
        .arg(EXE)
        .args(ngauge_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs a step to its end within `limit`; past it, cancels the job (so that nothing
/// outlives the test) and fails with what it wrote.
pub fn run(conf: &str, name: &str, mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.spawn().expect("srun (slurm-client) runs");
    crate::support::output_within(child, limit).unwrap_or_else(|out| {
        scancel(conf, name);
        panic!(
            "{name}: no end within {limit:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn scancel(conf: &str, name: &str) {
    let _ = Command::new("scancel")
        .env("SLURM_CONF", conf)
        .args(["--name", name])
        .status();
}
