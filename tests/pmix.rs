//! Issue 34: the PMIx bootstrap (cargo feature `pmix`) under the two PMIx
//! launchers this machine has: Slurm's `srun --mpi=pmix` on the one-node Slurm
//! of `scripts/slurm-local` (support::slurm) and Open MPI's `mpirun`. Rank, size
//! and the ranks on the host come from the PMIx server, the endpoints go through
//! its key-value store, and `info` names the launcher `pmix` and the server in
//! `meta.pmix`; a TCP pingpong shows that the exchanged endpoints work.
//!
//! Built with `--features pmix` (`scripts/test`'s workspace step has it). A
//! missing Slurm or `mpirun` fails these tests under `CI=true`, as in
//! tests/slurm.rs.
#![cfg(feature = "pmix")]

use crate::slurm_cluster;
use crate::support;

use serde_json::Value;
use slurm_cluster::{cluster, job_name, run, srun, EXE};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::Lack;

const LIMIT: Duration = Duration::from_secs(60);

/// The run succeeded and printed exactly one JSON document.
fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// What every `info` of a 4-rank job on this host says under PMIx.
fn assert_pmix_info(doc: &Value, server: &str) {
    let launcher = &doc["launcher"];
    assert_eq!(launcher["kind"], "pmix", "{launcher}");
    assert_eq!(launcher["size"], 4, "{launcher}");
    assert_eq!(launcher["ranks_on_host"], 4, "{launcher}");
    let ranks = launcher["ranks"].as_array().unwrap();
    let listed: Vec<u64> = ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(listed, [0, 1, 2, 3]);
    let pids: std::collections::BTreeSet<u64> =
        ranks.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 4, "four processes: {ranks:?}");
    assert!(
        ranks.iter().all(|r| r["data_addr"] == "127.0.0.1"),
        "one host: loopback data addresses: {ranks:?}"
    );
    assert_eq!(doc["meta"]["launcher"], "pmix");
    assert_eq!(doc["meta"]["np"], 4);
    let pmix = &doc["meta"]["pmix"];
    assert_eq!(pmix["server"], server, "{pmix}");
    assert!(
        pmix["library_version"]
            .as_str()
            .is_some_and(|v| v.contains("PMIx")),
        "{pmix}"
    );
    assert!(
        pmix["namespace"].as_str().is_some_and(|n| !n.is_empty()),
        "{pmix}"
    );
}

#[test]
fn issue_34_srun_mpi_pmix_info_reports_the_pmix_launcher_with_4_ranks() {
    const TEST: &str = "issue_34_srun_mpi_pmix_info_reports_the_pmix_launcher_with_4_ranks";
    let Some(conf) = cluster(TEST) else {
        return;
    };
    let name = job_name("pmix-info");
    let cmd = srun(
        conf,
        &name,
        &["--mpi=pmix", "-n", "4", "--overcommit"],
        &["info", "--json"],
    );
    let doc = json_of(&run(conf, &name, cmd, LIMIT));
    assert_pmix_info(&doc, "srun (Slurm)");
    assert!(
        doc["meta"]["pmix"]["namespace"]
            .as_str()
            .is_some_and(|n| n.starts_with("slurm.pmix.")),
        "{}",
        doc["meta"]["pmix"]
    );
}

#[test]
fn issue_34_srun_mpi_pmix_pingpong_over_tcp_uses_the_exchanged_endpoints() {
    const TEST: &str = "issue_34_srun_mpi_pmix_pingpong_over_tcp_uses_the_exchanged_endpoints";
    let Some(conf) = cluster(TEST) else {
        return;
    };
    let name = job_name("pmix-pingpong");
    let cmd = srun(
        conf,
        &name,
        &["--mpi=pmix", "-n", "2", "--cpu-bind=cores"],
        &[
            "-t", "tcp", "pingpong", "--sizes", "1-4K", "--reps", "50", "--json",
        ],
    );
    let doc = json_of(&run(conf, &name, cmd, LIMIT));
    let sizes: Vec<u64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (0..=12).map(|k| 1u64 << k).collect::<Vec<_>>());
    assert_eq!(doc["meta"]["launcher"], "pmix");
    assert_eq!(doc["meta"]["np"], 2);
    assert_eq!(doc["meta"]["pmix"]["server"], "srun (Slurm)");
}

#[test]
fn issue_34_mpirun_info_reports_the_pmix_launcher_with_4_ranks() {
    const TEST: &str = "issue_34_mpirun_info_reports_the_pmix_launcher_with_4_ranks";
    let probe = Command::new("mpirun").arg("--version").output();
    let Ok(probe) = probe else {
        return support::skip(TEST, Lack::Installed, "no mpirun (openmpi-bin) on PATH");
    };
    if !String::from_utf8_lossy(&probe.stdout).contains("Open MPI") {
        // Both MPIs installed, and the alternatives chose MPICH's mpirun.
        return support::skip(TEST, Lack::Host, "mpirun on PATH is not Open MPI's");
    }
    let mut cmd = Command::new("mpirun");
    for (var, _) in std::env::vars() {
        if var.starts_with("NGAUGE_") || var.starts_with("PMIX_") || var.starts_with("SLURM_") {
            cmd.env_remove(var);
        }
    }
    let child = cmd
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", "4", EXE, "info", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun runs");
    let out = support::output_within(child, LIMIT).unwrap_or_else(|out| {
        panic!(
            "mpirun: no end within {LIMIT:?}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_pmix_info(&json_of(&out), "mpirun (Open MPI)");
}
