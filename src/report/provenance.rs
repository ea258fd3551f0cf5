//! The parts of `meta` that say how the libraries under a result were tuned and how
//! the job was started (Hunold & Carpen-Amarie, sec. 2, list the MPI library, its
//! version and its settings among the factors to record): an Open MPI eager limit
//! given as `--mca btl_tcp_eager_limit 20000` reaches the rank only as
//! `OMPI_MCA_btl_tcp_eager_limit`, and a protocol switch measured without it
//! cannot be reproduced.

use std::collections::BTreeMap;

/// Prefixes of the variables that tune an MPI library, its runtime or the
/// fabrics under it: Open MPI and PRRTE MCA parameters (what `mpirun --mca` sets),
/// PMIx, UCX, libfabric, Intel MPI, MPICH (and its CVARs).
pub const TUNING_PREFIXES: [&str; 8] = [
    "OMPI_MCA_",
    "PRTE_MCA_",
    "PMIX_MCA_",
    "UCX_",
    "FI_",
    "I_MPI_",
    "MPICH_",
    "MPIR_CVAR_",
];

/// Prefixes of the variables Open MPI's runtime sets in every rank to wire the job
/// (daemon URIs, job and process ids, session directories, the per-job transport
/// key `orte_precondition_transports`): they differ from job to job, tune nothing
/// a measurement sees, and the key is not for publishing.
pub const RUNTIME_WIRING_PREFIXES: [&str; 5] = [
    "OMPI_MCA_orte_",
    "OMPI_MCA_ess",
    "OMPI_MCA_pmix",
    "OMPI_MCA_initial_wdir",
    "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
];

/// The variables of `vars` whose name starts with one of [`TUNING_PREFIXES`] and
/// none of [`RUNTIME_WIRING_PREFIXES`].
pub fn tuning_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    let starts = |name: &str, prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    vars.into_iter()
        .filter(|(name, _)| {
            starts(name, &TUNING_PREFIXES) && !starts(name, &RUNTIME_WIRING_PREFIXES)
        })
        .collect()
}

/// How the names of the processes that launch jobs start (their `comm`, at most 15
/// bytes: `mpirun.openmpi`, `mpiexec.hydra`).
pub const LAUNCHERS: [&str; 5] = ["mpirun", "mpiexec", "orterun", "prterun", "srun"];

/// The command line of the nearest ancestor of this process that is a job launcher
/// ([`LAUNCHERS`]), from `/proc`: visible when the launcher runs on this host
/// (`mpirun` and `srun` do, for rank 0 of a job started here); `None` elsewhere.
pub fn launcher_command() -> Option<Vec<String>> {
    let mut pid = std::process::id();
    for _ in 0..16 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        pid = parent_of(&stat)?;
        if pid <= 1 {
            return None;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        if LAUNCHERS.iter().any(|l| comm.trim().starts_with(l)) {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            return Some(split_cmdline(&raw));
        }
    }
    None
}

/// The parent pid of a `/proc/PID/stat` line: the second field after the command
/// name, which is in parentheses and may hold spaces and parentheses itself.
fn parent_of(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// `/proc/PID/cmdline`'s NUL-separated arguments.
fn split_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: the MCA parameters mpirun passed, the fabrics' and the other
    /// libraries' settings are kept; nothing else is.
    #[test]
    fn issue_37_the_tuning_environment_is_kept() {
        let vars = [
            ("OMPI_MCA_btl_tcp_eager_limit", "20000"),
            ("UCX_TLS", "tcp"),
            ("FI_PROVIDER", "tcp"),
            ("I_MPI_FABRICS", "shm"),
            ("MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE", "4096"),
            ("HOME", "/root"),
            ("XUCX_TLS", "no"),
            (
                "OMPI_MCA_orte_precondition_transports",
                "23e6ae91f63407fb-04a8ae403fb7669c",
            ),
            ("OMPI_MCA_ess_base_vpid", "0"),
        ]
        .map(|(n, v)| (n.to_string(), v.to_string()));
        let kept = tuning_env(vars);
        assert_eq!(kept.len(), 5, "{kept:?}");
        assert_eq!(kept["OMPI_MCA_btl_tcp_eager_limit"], "20000");
        assert!(!kept.contains_key("HOME") && !kept.contains_key("XUCX_TLS"));
        assert!(!kept
            .keys()
            .any(|k| k.starts_with("OMPI_MCA_orte_") || k.starts_with("OMPI_MCA_ess")));
    }

    #[test]
    fn proc_fields_are_parsed() {
        assert_eq!(parent_of("42 (a) b) c) S 17 42 42 0"), Some(17));
        assert_eq!(parent_of("garbage"), None);
        assert_eq!(
            split_cmdline(b"mpirun\0--mca\0btl_tcp_eager_limit\x0020000\0"),
            ["mpirun", "--mca", "btl_tcp_eager_limit", "20000"]
        );
    }
}
