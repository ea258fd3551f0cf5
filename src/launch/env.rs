//! Which launcher started this process, and the rank and size it assigned.
//!
//! Read from the environment only: no MPI library is linked for this. Open MPI sets
//! `OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}`; MPICH's Hydra sets `PMI_RANK`,
//! `PMI_SIZE` and `MPI_LOCALRANKID`; Slurm's `srun` sets `SLURM_PROCID`,
//! `SLURM_NTASKS`, `SLURM_LOCALID` and `SLURM_JOB_NODELIST`.

use serde::Serialize;

/// The kind of launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LauncherKind {
    /// No launcher: ngauge starts its own ranks on this host.
    Local,
    /// Open MPI's `mpirun`/`mpiexec`.
    OpenMpi,
    /// MPICH's Hydra `mpiexec`.
    Hydra,
    /// Slurm's `srun`.
    Slurm,
    /// Started by hand with `--rank`/`--size` (or `NGAUGE_RANK`/`NGAUGE_SIZE`).
    Manual,
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
        }
    }
}

/// What the environment says about this process's place in a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
}

/// Detects the launcher from the process environment.
pub fn detect() -> LauncherEnv {
    detect_from(|name| std::env::var(name).ok())
}

/// Detects the launcher from an environment lookup function (testable).
pub fn detect_from(var: impl Fn(&str) -> Option<String>) -> LauncherEnv {
    let num = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
    if let (Some(rank), Some(size)) = (num("OMPI_COMM_WORLD_RANK"), num("OMPI_COMM_WORLD_SIZE")) {
        return LauncherEnv {
            kind: LauncherKind::OpenMpi,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("OMPI_COMM_WORLD_LOCAL_RANK"),
            job_id: var("OMPI_MCA_ess_base_jobid").or_else(|| var("OMPI_MCA_orte_ess_jobid")),
        };
    }
    if let (Some(rank), Some(size)) = (num("PMI_RANK"), num("PMI_SIZE")) {
        return LauncherEnv {
            kind: LauncherKind::Hydra,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("MPI_LOCALRANKID"),
            job_id: var("PMI_KVSNAME").or_else(|| var("PMI_JOBID")),
        };
    }
    if let (Some(rank), Some(size)) = (num("SLURM_PROCID"), num("SLURM_NTASKS")) {
        return LauncherEnv {
            kind: LauncherKind::Slurm,
            rank: Some(rank),
            size: Some(size),
            local_rank: num("SLURM_LOCALID"),
            job_id: var("SLURM_JOB_ID").map(|j| match var("SLURM_STEP_ID") {
                Some(step) => format!("{j}.{step}"),
                None => j,
            }),
        };
    }
    LauncherEnv {
        kind: LauncherKind::Local,
        rank: None,
        size: None,
        local_rank: None,
        job_id: None,
    }
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
    fn garbage_values_fall_back_to_local() {
        let e = detect_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "x"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]));
        assert_eq!(e.kind, LauncherKind::Local);
    }
}
