//! Which launcher started this process, and the rank and size it assigned.
//!
//! Read from the environment only: no MPI library is linked for this. Open MPI sets
//! `OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}`; MPICH's Hydra sets `PMI_RANK`,
//! `PMI_SIZE` and `MPI_LOCALRANKID`; Slurm's `srun` sets `SLURM_PROCID`,
//! `SLURM_NTASKS`, `SLURM_LOCALID`, `SLURM_STEP_ID` and `SLURM_JOB_NODELIST`
//! (a batch script without `srun` is not a step: ngauge starts its own ranks there).
//! ngauge's own local
//! launcher and users starting ranks by hand set `NGAUGE_RANK`/`NGAUGE_SIZE` (the
//! local launcher adds `NGAUGE_LAUNCHER=local`); those win over everything else.
//!
//! A launcher's job id is the seed for what every rank must agree on without talking:
//! the job token ([`job_token`]) and, when all ranks share one host, the rendezvous
//! port ([`derived_port`]).

use serde::Serialize;

/// The kind of launcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LauncherKind {
    /// No launcher: ngauge starts its own ranks on this host.
    #[default]
    Local,
    /// Open MPI's `mpirun`/`mpiexec`.
    OpenMpi,
    /// MPICH's Hydra `mpiexec`.
    Hydra,
    /// Slurm's `srun`.
    Slurm,
    /// Started by hand with `--rank`/`--size` (or `NGAUGE_RANK`/`NGAUGE_SIZE`).
    Manual,
    /// Any launcher with a PMIx server (`srun --mpi=pmix`, `mpirun`, `prterun`),
    /// bootstrapped through it (cargo feature `pmix`; `launch::pmix`).
    Pmix,
}

impl LauncherKind {
    /// Human name.
    pub fn describe(self) -> &'static str {
        match self {
            LauncherKind::Local => "local (ngauge starts its ranks)",
            LauncherKind::OpenMpi => "mpirun (Open MPI)",
            LauncherKind::Hydra => "mpiexec (MPICH Hydra)",
            LauncherKind::Slurm => "srun (Slurm)",
            LauncherKind::Manual => "by hand (--rank/--size)",
            LauncherKind::Pmix => "pmix",
        }
    }
}

/// What the environment says about this process's place in a job (by default:
/// no launcher, nothing known).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LauncherEnv {
    /// The launcher.
    pub kind: LauncherKind,
    /// This process's rank, when a launcher assigned one.
    pub rank: Option<usize>,
    /// The job size, when a launcher assigned one.
    pub size: Option<usize>,
    /// Rank among the processes on this host.
    pub local_rank: Option<usize>,
    /// The launcher's job identifier, when it has one (for deriving a job token).
    pub job_id: Option<String>,
    /// Number of ranks on this host, when the launcher says.
    pub local_size: Option<usize>,
    /// Number of hosts in the job, when the launcher says.
    pub nodes: Option<usize>,
    /// Slurm's compressed node list (`SLURM_JOB_NODELIST`, `SLURM_STEP_NODELIST`).
    pub nodelist: Option<String>,
}

impl LauncherEnv {
    /// Whether every rank runs on this host: `Some(true/false)` when the launcher
    /// says, `None` when it does not.
    pub fn single_host(&self) -> Option<bool> {
        if let Some(nodes) = self.nodes {
            return Some(nodes <= 1);
        }
        match (self.local_size, self.size) {
            (Some(local), Some(size)) => Some(local >= size),
            _ => None,
        }
    }
}

/// 64-bit FNV-1a: a stable hash (std's `DefaultHasher` may change between releases,
/// and every rank of a job, possibly built separately, must agree).
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The job token every rank of a launcher job derives from its job id.
///
/// It is not a secret (anyone who can read the job id can compute it); it keeps
/// ranks of different jobs, and stray clients, from joining the wrong job.
pub fn job_token(job_id: &str) -> String {
    let seeded = format!("ngauge-job-token/{job_id}");
    format!(
        "{:016x}{:016x}",
        fnv1a(1, seeded.as_bytes()),
        fnv1a(2, seeded.as_bytes())
    )
}

/// First port of the range rendezvous ports are derived into (below Linux's
/// default ephemeral range 32768-60999, so outgoing connections do not take it).
pub const DERIVED_PORT_BASE: u16 = 20_000;
/// Number of ports in that range.
pub const DERIVED_PORT_COUNT: u16 = 10_000;

/// The rendezvous port every rank of a launcher job derives from its job id.
pub fn derived_port(job_id: &str) -> u16 {
    let h = fnv1a(3, format!("ngauge-port/{job_id}").as_bytes());
    DERIVED_PORT_BASE + (h % u64::from(DERIVED_PORT_COUNT)) as u16
}

/// Detects the launcher from the process environment.
pub fn detect() -> LauncherEnv {
    detect_from(|name| std::env::var(name).ok())
}

/// Detects the launcher from an environment lookup function (testable).
pub fn detect_from(var: impl Fn(&str) -> Option<String>) -> LauncherEnv {
    let num = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
    if let (Some(rank), Some(size)) = (num("NGAUGE_RANK"), num("NGAUGE_SIZE")) {
        let local = var("NGAUGE_LAUNCHER").as_deref() == Some("local");
        return LauncherEnv {
            kind: if local {
                LauncherKind::Local
            } else {
                LauncherKind::Manual
            },
            rank: Some(rank),
            size: Some(size),
            local_rank: local.then_some(rank),
            local_size: local.then_some(size),
            nodes: local.then_some(1),
            ..LauncherEnv::default()
        };
    }
    if let (Some(rank), Some(size)) = (num("OMPI_COMM_WORLD_RANK"), num("OMPI_COMM_WORLD_SIZE")) {
        return LauncherEnv {
            kind: LauncherKind::OpenMpi,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("OMPI_COMM_WORLD_LOCAL_RANK"),
            job_id: var("OMPI_MCA_ess_base_jobid")
                .or_else(|| var("OMPI_MCA_orte_ess_jobid"))
                .or_else(|| var("PMIX_NAMESPACE")),
            local_size: num("OMPI_COMM_WORLD_LOCAL_SIZE"),
            nodes: num("OMPI_MCA_orte_num_nodes").or_else(|| num("PRTE_MCA_prte_num_nodes")),
            nodelist: None,
        };
    }
    if let (Some(rank), Some(size)) = (num("PMI_RANK"), num("PMI_SIZE")) {
        return LauncherEnv {
            kind: LauncherKind::Hydra,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("MPI_LOCALRANKID"),
            job_id: var("PMI_KVSNAME").or_else(|| var("PMI_JOBID")),
            local_size: num("MPI_LOCALNRANKS"),
            ..LauncherEnv::default()
        };
    }
    // Only inside a job step: a batch script's own environment carries SLURM_PROCID
    // and the allocation's SLURM_NTASKS too, and `ngauge --np 2` run there must
    // start its own ranks instead of waiting for tasks that never come.
    let step = var("SLURM_STEP_ID").or_else(|| var("SLURM_STEPID"));
    let slurm_size = num("SLURM_STEP_NUM_TASKS").or_else(|| num("SLURM_NTASKS"));
    if let (Some(rank), Some(size), Some(_)) = (num("SLURM_PROCID"), slurm_size, &step) {
        return LauncherEnv {
            kind: LauncherKind::Slurm,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("SLURM_LOCALID"),
            job_id: var("SLURM_JOB_ID").map(|j| match &step {
                Some(step) => format!("{j}.{step}"),
                None => j,
            }),
            local_size: None,
            nodes: num("SLURM_STEP_NUM_NODES").or_else(|| num("SLURM_JOB_NUM_NODES")),
            nodelist: var("SLURM_STEP_NODELIST").or_else(|| var("SLURM_JOB_NODELIST")),
        };
    }
    LauncherEnv::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn open_mpi_wins_over_slurm_inside_an_allocation() {
        let e = detect_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ]));
        assert_eq!(e.kind, LauncherKind::OpenMpi);
        assert_eq!((e.rank, e.size, e.local_rank), (Some(3), Some(4), Some(1)));
    }

    #[test]
    fn hydra_and_slurm_are_recognised() {
        let h = detect_from(env(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "1"),
        ]));
        assert_eq!(
            (h.kind, h.rank, h.local_rank),
            (LauncherKind::Hydra, Some(1), Some(1))
        );
        let s = detect_from(env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ]));
        assert_eq!((s.kind, s.size), (LauncherKind::Slurm, Some(8)));
        assert_eq!(s.job_id.as_deref(), Some("77.0"));
    }

    #[test]
    fn ngauge_variables_win_and_mark_the_local_launcher() {
        let child = detect_from(env(&[
            ("NGAUGE_RANK", "2"),
            ("NGAUGE_SIZE", "4"),
            ("NGAUGE_LAUNCHER", "local"),
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
        ]));
        assert_eq!(
            (child.kind, child.rank, child.size),
            (LauncherKind::Local, Some(2), Some(4))
        );
        assert_eq!(child.single_host(), Some(true));
        let manual = detect_from(env(&[("NGAUGE_RANK", "1"), ("NGAUGE_SIZE", "2")]));
        assert_eq!(manual.kind, LauncherKind::Manual);
        assert_eq!(manual.single_host(), None);
    }

    #[test]
    fn single_host_from_launcher_facts() {
        let one = detect_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_MCA_ess_base_jobid", "1218314241"),
        ]));
        assert_eq!(one.single_host(), Some(true));
        assert_eq!(one.job_id.as_deref(), Some("1218314241"));
        let two = detect_from(env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_STEP_ID", "3"),
            ("SLURM_JOB_NODELIST", "node[01-02]"),
        ]));
        assert_eq!(two.single_host(), Some(false));
        assert_eq!(two.nodelist.as_deref(), Some("node[01-02]"));
    }

    #[test]
    fn derived_token_and_port_are_stable_and_in_range() {
        assert_eq!(job_token("77.0"), job_token("77.0"));
        assert_ne!(job_token("77.0"), job_token("77.1"));
        assert_eq!(job_token("x").len(), 32);
        for id in ["1", "2", "1218314241", "77.0", ""] {
            let p = derived_port(id);
            assert!((DERIVED_PORT_BASE..DERIVED_PORT_BASE + DERIVED_PORT_COUNT).contains(&p));
        }
        assert_ne!(derived_port("1"), derived_port("2"));
        // Pinned values: every rank, whatever build, must compute the same.
        assert_eq!(fnv1a(0, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(0, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_slurm_batch_script_is_not_a_step() {
        let e = detect_from(env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_ID", "77"),
        ]));
        assert_eq!(e.kind, LauncherKind::Local);
        let e = detect_from(env(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURM_STEPID", "0"),
        ]));
        assert_eq!((e.kind, e.size), (LauncherKind::Slurm, Some(2)));
    }

    #[test]
    fn garbage_values_fall_back_to_local() {
        let e = detect_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "x"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]));
        assert_eq!(e.kind, LauncherKind::Local);
    }
}
