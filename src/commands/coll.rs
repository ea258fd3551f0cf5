//! `ngauge coll`: one collective, timed correctly, per size, over every transport
//! of `-t` and every implementation of `--algo` ([`ngauge::experiment::coll`]); and
//! the flags `late` and `nbc` share with it.
//!
//! **Open MPI's algorithms.** `--mpi-algo N` sets
//! `OMPI_MCA_coll_tuned_use_dynamic_rules=1` and
//! `OMPI_MCA_coll_tuned_<op>_algorithm=N` in the environment before MPI starts, so
//! the `mpi` rows time that algorithm of Open MPI's tuned component; for a
//! broadcast, `--segment` sets `OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize`
//! too, so our chain and Open MPI's cut the message alike.

use super::common::{check_outputs, job_spec, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{CollArgs, CollCmdArgs, GlobalArgs};
use ngauge::coll::Collective;
use ngauge::job::{JobSpec, TransportName};
use ngauge::report::coll::CollWarning;
use ngauge::spec::{CollCmdSpec, SizeList, WindowColl};

impl CollCmdArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<CollCmdSpec, UsageError> {
        let w = &self.window;
        Ok(CollCmdSpec {
            op: self.op,
            algo: self.algo.clone(),
            segment: self.segment,
            root: self.root,
            scheme: self.scheme,
            sizes: match &self.sizes {
                Some(text) => sizes(text)?,
                None => default_sizes(self.op, &self.algo),
            },
            reps: w.reps,
            warmup: w.warmup,
            max_rounds: w.max_rounds,
            no_check: w.no_check,
            mpi_algo: self.mpi_algo,
            counts: self.counts.clone(),
            per_rank: self.per_rank,
            samples: self.samples,
            predict: self.predict.clone(),
            sync: w.sync.algorithm,
            fitpoints: w.sync.fitpoints,
            exchanges: w.sync.exchanges,
            estimator: w.sync.estimator,
        })
    }
}

impl CollArgs {
    /// The collective and its window timing these flags ask for (`late`, `nbc`).
    pub fn spec(&self) -> WindowColl {
        let w = &self.window;
        WindowColl {
            op: self.op,
            algo: self.algo.clone(),
            segment: self.segment,
            root: self.root,
            reps: w.reps,
            warmup: w.warmup,
            max_rounds: w.max_rounds,
            no_check: w.no_check,
            sync: w.sync.algorithm,
            fitpoints: w.sync.fitpoints,
            exchanges: w.sync.exchanges,
            estimator: w.sync.estimator,
        }
    }
}

/// The sizes without `--sizes`: 1-64K, but only its multiples of 8 for MPI's
/// own reductions, which sum 8-byte words and refuse other sizes.
fn default_sizes(op: Collective, algo: &[String]) -> SizeList {
    let mut all = sizes("1-64K").expect("a valid spec");
    if op.is_reduction() && algo.iter().any(|a| a.trim() == "mpi") {
        all.0.retain(|s| s % 8 == 0);
    }
    all
}

/// `--sizes`.
pub fn sizes(text: &str) -> Result<SizeList, UsageError> {
    text.parse()
        .map_err(|e| UsageError(format!("--sizes: {e}")))
}

/// The job of the global flags, refusing `--algo mpi` (one of `algos`) without
/// `-t mpi` in the flags' words.
pub fn job_for<'a>(
    global: &GlobalArgs,
    mut algos: impl Iterator<Item = &'a String>,
) -> Result<JobSpec, UsageError> {
    let job = job_spec(global);
    if algos.any(|a| a.trim() == "mpi") && !job.transports.contains(&TransportName::Mpi) {
        return Err(UsageError(
            "--algo mpi: MPI's own collectives run on the MPI transport; add -t mpi \
             (under mpirun, with a build that has the `mpi` feature)"
                .into(),
        ));
    }
    Ok(job)
}

pub fn run(global: &GlobalArgs, args: &CollCmdArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?, args.plot.as_deref())
}

/// Runs `spec`, drawing the plot to `plot` if given.
pub fn run_spec(
    global: &GlobalArgs,
    spec: &CollCmdSpec,
    plot: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    let job = job_for(global, spec.algo.iter())?;
    let np = super::common::known_size(global);
    (spec.validate_for_job(&job.transports, np))
        .and(spec.load_predict().map(drop))
        .map_err(spec_usage)?;
    check_outputs(global, &[("--plot", plot)])?;
    if let Some(n) = spec.mpi_algo {
        // Read by Open MPI's tuned component when MPI starts (in `with_world`);
        // single-threaded here.
        std::env::set_var("OMPI_MCA_coll_tuned_use_dynamic_rules", "1");
        std::env::set_var(
            format!("OMPI_MCA_coll_tuned_{}_algorithm", spec.op),
            n.to_string(),
        );
        if spec.op == Collective::Bcast && spec.segment > 0 {
            std::env::set_var(
                "OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize",
                spec.segment.to_string(),
            );
        }
    }
    measure(
        global,
        plot,
        |world, ctx| ngauge::experiment::coll::run(world, &job, spec, ctx),
        hint,
    )
}

/// The command line's hint for a warning of `coll` (and `simulate --measure`).
pub fn hint(w: &CollWarning) -> Option<String> {
    match w {
        CollWarning::Setup(s) => setup_hint(s),
        CollWarning::FewValid { .. } => {
            Some("raise --max-rounds, or try --scheme barrier on a loaded machine".into())
        }
        CollWarning::SyncedOver { .. } | CollWarning::Params(_) => None,
        CollWarning::PredictTransport { .. } => {
            Some("measure the parameters with loggp -t on the same transport".into())
        }
        CollWarning::SizeSkipped { .. } => {
            Some("use --segment for a broadcast, or a transport without the limit".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: `coll --op allreduce --algo mpi` measures its default sizes
    /// instead of refusing 1, 2 and 4 bytes; other defaults stay 1-64K.
    #[test]
    fn issue_37_mpi_reductions_default_to_multiples_of_8() {
        let mpi = ["mpi".to_string()];
        let ours = ["binomial".to_string(), "mpi".to_string()];
        let d = default_sizes(Collective::Allreduce, &mpi);
        assert_eq!(d.0.first(), Some(&8));
        assert_eq!(d.0.len(), 14, "8 B to 64 KiB, powers of two");
        assert!(d.0.iter().all(|s| s % 8 == 0));
        assert_eq!(default_sizes(Collective::Allreduce, &ours).0.len(), 14);
        assert_eq!(default_sizes(Collective::Bcast, &mpi).0.len(), 17);
        assert_eq!(default_sizes(Collective::Allreduce, &[]).0.len(), 17);
    }
}
