//! Whether the measured ranks have cores of their own: the binding check.
//!
//! Hunold and Carpen-Amarie ("MPI benchmarking revisited", sec. 3.4 and 5.5) pin
//! every process to a core of its own and count pinning among the factors a
//! measurement depends on. A timed rank that shares its core with another measured
//! rank waits for it to be descheduled, so its times include the other's run time
//! and the context switches; a rank that may run on several cores can migrate in the
//! middle of a timed region, or land on a core a pinned rank relies on. Launchers
//! bind when asked, and some bind badly when told to start more ranks than cores:
//! Slurm 22.05 with `srun --overcommit --cpu-bind=cores` puts every task of a
//! one-node step on core 0 (issue 20).
//!
//! [`check`] is a pure function of where each measured rank runs (host and the one
//! core it is pinned to, if any: [`crate::clock::pinned_core`]) and the launcher
//! that started them; the launcher only chooses the hint
//! ([`BindingWarning::hint`]), since the remedy is the launcher's own binding
//! option. Cores are per host: core 0 of one node and core 0 of another are two
//! cores.

use super::env::LauncherKind;
use super::frame::Peer;

/// Where one measured rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement<'a> {
    /// The rank.
    pub rank: usize,
    /// Its host name.
    pub host: &'a str,
    /// The core it is pinned to; `None` when it may run on more than one.
    pub core: Option<usize>,
}

/// The placements of a job from its peer table (rank 0's, after the rendezvous)
/// and each rank's core (indexed by rank, as gathered at rank 0). Ranks missing from
/// either list are left out.
pub fn placements<'a>(peers: &'a [Peer], cores: &[Option<usize>]) -> Vec<Placement<'a>> {
    peers
        .iter()
        .filter_map(|p| {
            cores.get(p.rank).map(|&core| Placement {
                rank: p.rank,
                host: &p.host,
                core,
            })
        })
        .collect()
}

/// A binding problem among ranks measured together.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BindingWarning {
    /// Two or more measured ranks are pinned to the same core of one host.
    #[error(
        "{} share core {core} on {host}: each one's times include the others' run time \
         and context switches",
        ranks_phrase(.ranks)
    )]
    SharedCore {
        /// The host.
        host: String,
        /// The core.
        core: usize,
        /// The ranks pinned to it, ascending.
        ranks: Vec<usize>,
        /// Who started them (chooses the hint).
        launcher: LauncherKind,
    },
    /// Some measured ranks are pinned to one core, others are not.
    #[error(
        "{} may run on several cores while {} {} pinned: {} can migrate during a timed \
         region and land on a pinned rank's core",
        ranks_phrase(.unpinned),
        ranks_phrase(.pinned),
        if .pinned.len() == 1 { "is" } else { "are" },
        if .unpinned.len() == 1 { "it" } else { "they" },
    )]
    PartlyPinned {
        /// Ranks that may run on more than one core, ascending.
        unpinned: Vec<usize>,
        /// Ranks pinned to one core, ascending.
        pinned: Vec<usize>,
        /// Who started them (chooses the hint).
        launcher: LauncherKind,
    },
}

/// Checks the binding of ranks measured together: one [`BindingWarning::SharedCore`]
/// per (host, core) that two or more of them are pinned to, and one
/// [`BindingWarning::PartlyPinned`] when some are pinned and some are not. Nothing
/// when every rank has a core of its own, or when no rank is pinned (the timer's
/// own check reports an unpinned process).
pub fn check(ranks: &[Placement<'_>], launcher: LauncherKind) -> Vec<BindingWarning> {
    let mut by_core: Vec<(&str, usize, Vec<usize>)> = Vec::new();
    for r in ranks {
        let Some(core) = r.core else { continue };
        match by_core
            .iter_mut()
            .find(|(host, c, _)| *host == r.host && *c == core)
        {
            Some((_, _, sharing)) => sharing.push(r.rank),
            None => by_core.push((r.host, core, vec![r.rank])),
        }
    }
    by_core.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut warnings: Vec<BindingWarning> = by_core
        .into_iter()
        .filter(|(_, _, sharing)| sharing.len() > 1)
        .map(|(host, core, mut ranks)| {
            ranks.sort_unstable();
            BindingWarning::SharedCore {
                host: host.to_string(),
                core,
                ranks,
                launcher,
            }
        })
        .collect();
    let sorted = |pinned: bool| {
        let mut v: Vec<usize> = ranks
            .iter()
            .filter(|r| r.core.is_some() == pinned)
            .map(|r| r.rank)
            .collect();
        v.sort_unstable();
        v
    };
    let (pinned, unpinned) = (sorted(true), sorted(false));
    if !pinned.is_empty() && !unpinned.is_empty() {
        warnings.push(BindingWarning::PartlyPinned {
            unpinned,
            pinned,
            launcher,
        });
    }
    warnings
}

/// [`check`] for each group of ranks measured together (ranks listed; `cores`
/// indexed by rank, as [`crate::launch::World::gather_pinning`] gathers them at
/// rank 0).
pub fn check_groups(
    peers: &[Peer],
    cores: &[Option<usize>],
    launcher: LauncherKind,
    groups: impl IntoIterator<Item = Vec<usize>>,
) -> Vec<BindingWarning> {
    let placed = placements(peers, cores);
    groups
        .into_iter()
        .flat_map(|group| {
            let members: Vec<_> = placed
                .iter()
                .filter(|p| group.contains(&p.rank))
                .cloned()
                .collect();
            check(&members, launcher)
        })
        .collect()
}

impl BindingWarning {
    /// What to do about it with the launcher that started the ranks: its option
    /// that gives every rank a core of its own.
    pub fn hint(&self) -> &'static str {
        let (launcher, shared) = match self {
            BindingWarning::SharedCore { launcher, .. } => (*launcher, true),
            BindingWarning::PartlyPinned { launcher, .. } => (*launcher, false),
        };
        match (launcher, shared) {
            (LauncherKind::Slurm, true) => {
                "give each task a core of its own: `srun --cpu-bind=cores` with no more \
                 tasks per node than allocated cores (not `--overcommit`)"
            }
            (LauncherKind::Slurm, false) => "pin every task: `srun --cpu-bind=cores`",
            (LauncherKind::OpenMpi, true) => {
                "give each rank a core of its own: `mpirun --bind-to core` with no more \
                 ranks per host than cores"
            }
            (LauncherKind::OpenMpi, false) => "pin every rank: `mpirun --bind-to core`",
            (LauncherKind::Hydra, true) => {
                "give each rank a core of its own: `mpiexec -bind-to core` with no more \
                 ranks per host than cores"
            }
            (LauncherKind::Hydra, false) => "pin every rank: `mpiexec -bind-to core`",
            (LauncherKind::Local, _) => {
                "start no more ranks than this host has cores (the local launcher pins \
                 rank i to the i-th allowed core, wrapping around)"
            }
            (LauncherKind::Pmix, _) => {
                "give each rank a core of its own with the launcher's binding option \
                 (`srun --cpu-bind=cores`, `mpirun --bind-to core`)"
            }
            (LauncherKind::Manual, _) => {
                "pin each rank to a core of its own, e.g. `taskset -c CORE` in front of \
                 each command"
            }
        }
    }
}

/// Ranks a warning names; the rest it counts (a job of 512 ranks on 2 cores
/// would list 256 on each).
const NAMED_RANKS: usize = 4;

/// "rank 3", "ranks 0 and 1", "ranks 0, 1 and 2", "ranks 0, 2, 4, 6 and 252 more".
fn ranks_phrase(ranks: &[usize]) -> String {
    let named = |r: &[usize]| {
        r.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match ranks {
        [] => "no rank".to_string(),
        [one] => format!("rank {one}"),
        _ if ranks.len() > NAMED_RANKS => format!(
            "ranks {} and {} more",
            named(&ranks[..NAMED_RANKS]),
            ranks.len() - NAMED_RANKS
        ),
        [init @ .., last] => format!("ranks {} and {last}", named(init)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LauncherKind::*;

    #[test]
    fn a_warning_names_a_few_ranks_and_counts_the_rest() {
        assert_eq!(ranks_phrase(&[0, 1, 2, 3]), "ranks 0, 1, 2 and 3");
        let halves: Vec<usize> = (0..512).step_by(2).collect();
        let w = BindingWarning::SharedCore {
            host: "vm".into(),
            core: 0,
            ranks: halves,
            launcher: Local,
        };
        let text = w.to_string();
        assert!(
            text.starts_with("ranks 0, 2, 4, 6 and 252 more share core 0 on vm"),
            "{text}"
        );
        assert!(text.len() < 200, "{text}");
    }

    fn on<'a>(host: &'a str, cores: &[Option<usize>]) -> Vec<Placement<'a>> {
        cores
            .iter()
            .enumerate()
            .map(|(rank, &core)| Placement { rank, host, core })
            .collect()
    }

    #[test]
    fn distinct_cores_and_no_pinning_at_all_are_fine() {
        assert!(check(&on("a", &[Some(0), Some(1)]), Slurm).is_empty());
        assert!(check(&on("a", &[None, None, None]), OpenMpi).is_empty());
        assert!(check(&on("a", &[Some(3)]), Local).is_empty());
        assert!(check(&[], Hydra).is_empty());
    }

    #[test]
    fn issue_20_overcommitted_srun_puts_both_measured_ranks_on_core_0() {
        // `srun -n 3 --overcommit --cpu-bind=cores` on two cores: all on core 0.
        let all = on("vm", &[Some(0), Some(0), Some(0)]);
        let w = check(&all[..2], Slurm);
        assert_eq!(
            w,
            vec![BindingWarning::SharedCore {
                host: "vm".into(),
                core: 0,
                ranks: vec![0, 1],
                launcher: Slurm,
            }]
        );
        assert_eq!(
            w[0].to_string(),
            "ranks 0 and 1 share core 0 on vm: each one's times include the others' run \
             time and context switches"
        );
        assert!(w[0].hint().contains("--cpu-bind=cores"), "{}", w[0].hint());
        assert!(w[0].hint().contains("--overcommit"), "{}", w[0].hint());
    }

    #[test]
    fn every_shared_core_is_named_once_in_core_order() {
        // Four ranks wrapped around two cores, listed out of order.
        let w = check(
            &on("h", &[Some(1), Some(0), Some(1), Some(0), Some(2)]),
            Local,
        );
        let shared: Vec<(usize, Vec<usize>)> = w
            .iter()
            .map(|w| match w {
                BindingWarning::SharedCore { core, ranks, .. } => (*core, ranks.clone()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(shared, vec![(0, vec![1, 3]), (1, vec![0, 2])]);
        let three = check(&on("h", &[Some(5), Some(5), Some(5)]), Local);
        assert!(three[0]
            .to_string()
            .starts_with("ranks 0, 1 and 2 share core 5 on h"));
    }

    #[test]
    fn the_same_core_number_on_two_hosts_is_two_cores() {
        let mut ranks = on("node1", &[Some(0)]);
        ranks.push(Placement {
            rank: 1,
            host: "node2",
            core: Some(0),
        });
        assert!(check(&ranks, Slurm).is_empty());
        ranks.push(Placement {
            rank: 2,
            host: "node2",
            core: Some(0),
        });
        assert_eq!(
            check(&ranks, Slurm),
            vec![BindingWarning::SharedCore {
                host: "node2".into(),
                core: 0,
                ranks: vec![1, 2],
                launcher: Slurm,
            }]
        );
    }

    #[test]
    fn an_unpinned_rank_among_pinned_ones_is_named() {
        let w = check(&on("h", &[Some(0), None, Some(1)]), Hydra);
        assert_eq!(
            w,
            vec![BindingWarning::PartlyPinned {
                unpinned: vec![1],
                pinned: vec![0, 2],
                launcher: Hydra,
            }]
        );
        assert_eq!(
            w[0].to_string(),
            "rank 1 may run on several cores while ranks 0 and 2 are pinned: it can \
             migrate during a timed region and land on a pinned rank's core"
        );
        assert_eq!(w[0].hint(), "pin every rank: `mpiexec -bind-to core`");
    }

    #[test]
    fn shared_and_partly_pinned_together() {
        let w = check(&on("h", &[None, Some(0), Some(0), None]), OpenMpi);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(matches!(&w[0], BindingWarning::SharedCore { ranks, .. } if ranks == &[1, 2]));
        assert!(w[1].to_string().starts_with(
            "ranks 0 and 3 may run on several cores while ranks 1 and 2 are pinned: they"
        ));
        assert!(w[0].hint().contains("mpirun --bind-to core"));
        assert!(w[1].hint().contains("mpirun --bind-to core"));
    }

    #[test]
    fn each_launcher_gets_its_own_binding_option() {
        let shared = |launcher| {
            check(&on("h", &[Some(0), Some(0)]), launcher)
                .pop()
                .expect("a warning")
        };
        assert!(shared(Slurm).hint().contains("srun --cpu-bind=cores"));
        assert!(shared(OpenMpi).hint().contains("mpirun --bind-to core"));
        assert!(shared(Hydra).hint().contains("mpiexec -bind-to core"));
        assert!(!shared(Hydra).hint().contains("--bind-to"));
        assert!(shared(Local).hint().contains("no more ranks than"));
        assert!(shared(Manual).hint().contains("taskset"));
    }

    #[test]
    fn placements_follow_the_peer_table() {
        let peer = |rank, host: &str| Peer {
            rank,
            data_addr: std::net::Ipv4Addr::LOCALHOST.into(),
            host: host.into(),
            pid: 1,
        };
        let peers = vec![peer(0, "a"), peer(1, "b"), peer(2, "b")];
        let placed = placements(&peers, &[Some(4), None]);
        assert_eq!(
            placed,
            vec![
                Placement {
                    rank: 0,
                    host: "a",
                    core: Some(4)
                },
                Placement {
                    rank: 1,
                    host: "b",
                    core: None
                },
            ]
        );
    }
}
