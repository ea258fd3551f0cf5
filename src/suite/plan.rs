//! The plan of a suite run: which experiment each launch runs when (Hunold &
//! Carpen-Amarie, sec. 6.1, Algorithm 5: `n` launches, each running the list of
//! experiments in a freshly shuffled order).
//!
//! Launch `k` shuffles with the seed `launch_seed(seed, k)`, so the whole plan
//! follows from the suite's `seed` and is recorded in the run directory before the
//! first experiment starts; `--resume` reads it back rather than drawing again.

use crate::patterns::order::shuffled;
use serde::{Deserialize, Serialize};

/// The plan, as `plan.json` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The suite file as given on the command line.
    pub suite: String,
    /// The suite's seed.
    pub seed: u64,
    /// The experiments, in the order the suite lists them.
    pub experiments: Vec<String>,
    /// Per launch: its seed and its order of experiments.
    pub launches: Vec<LaunchPlan>,
}

/// One launch of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPlan {
    /// The launch, from 0.
    pub launch: usize,
    /// The seed its order was shuffled with.
    pub seed: u64,
    /// The experiments in the order this launch runs them.
    pub order: Vec<String>,
}

/// The seed of launch `k`: the suite's seed and `k` mixed by SplitMix64's
/// finaliser, so that neighbouring seeds and launches give unrelated orders.
pub fn launch_seed(seed: u64, launch: usize) -> u64 {
    crate::rng::finalize(seed ^ (launch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

impl Plan {
    /// The plan of `launches` launches of `experiments` from `seed`.
    pub fn new(suite: &str, seed: u64, experiments: &[String], launches: usize) -> Plan {
        let indices: Vec<usize> = (0..experiments.len()).collect();
        Plan {
            suite: suite.to_string(),
            seed,
            experiments: experiments.to_vec(),
            launches: (0..launches)
                .map(|launch| {
                    let seed = launch_seed(seed, launch);
                    LaunchPlan {
                        launch,
                        seed,
                        order: shuffled(&indices, seed)
                            .into_iter()
                            .map(|i| experiments[i].clone())
                            .collect(),
                    }
                })
                .collect(),
        }
    }

    /// Every (launch, experiment) in the order they run: launch by launch, each in
    /// its shuffled order.
    pub fn runs(&self) -> impl Iterator<Item = (usize, &str)> {
        self.launches
            .iter()
            .flat_map(|l| l.order.iter().map(move |e| (l.launch, e.as_str())))
    }

    /// Number of runs in the plan.
    pub fn len(&self) -> usize {
        self.launches.len() * self.experiments.len()
    }

    /// Whether the plan runs nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("e{i}")).collect()
    }

    #[test]
    fn every_launch_runs_every_experiment_once_in_its_own_order() {
        let plan = Plan::new("s.toml", 42, &names(6), 5);
        assert_eq!(plan.len(), 30);
        for l in &plan.launches {
            let mut o = l.order.clone();
            o.sort();
            assert_eq!(o, names(6));
        }
        let distinct: std::collections::BTreeSet<_> =
            plan.launches.iter().map(|l| l.order.clone()).collect();
        assert!(distinct.len() >= 4, "5 launches of 6! orders: {distinct:?}");
        let runs: Vec<_> = plan.runs().collect();
        assert_eq!(runs.len(), 30);
        assert_eq!(runs[6].0, 1);
        assert_eq!(runs[6].1, plan.launches[1].order[0]);
    }

    #[test]
    fn the_seed_fixes_the_plan_and_survives_json() {
        let a = Plan::new("s.toml", 7, &names(4), 3);
        assert_eq!(a, Plan::new("s.toml", 7, &names(4), 3));
        assert_ne!(
            a.launches.iter().map(|l| l.seed).collect::<Vec<_>>(),
            Plan::new("s.toml", 8, &names(4), 3)
                .launches
                .iter()
                .map(|l| l.seed)
                .collect::<Vec<_>>()
        );
        let back: Plan = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        assert_ne!(launch_seed(0, 0), launch_seed(0, 1));
        assert_ne!(launch_seed(0, 1), launch_seed(1, 0));
    }
}
