//! Collective algorithms written once, as schedules, for two engines: the
//! [`exec::Executor`] runs a rank's [`Schedule`] over any
//! [`ngauge_transport::Transport`], and the LogGP simulator (`src/sim`) is to run the
//! same values.
//!
//! # Design decisions
//!
//! **A schedule is data, generated per rank.** [`CollSpec::schedule`] is a pure
//! function of (algorithm, rank, np, size, segment, root): a rank's ordered sends,
//! receives and local steps, each with the steps it waits for
//! ([`schedule`] states the rules every engine honours). Nothing about the other
//! ranks is materialized, so placing one rank of a job of 2^20 ranks costs
//! O(log np) for the trees and memory proportional to that rank's own steps.
//!
//! **Open MPI's algorithms, as Open MPI runs them.** Each generator follows the
//! code of Open MPI's `coll/base` (which `coll/tuned` selects from), including what
//! the algorithm waits for: the tree broadcast's two receives in flight, the
//! split-binary broadcast's blocking sends, the gather's blocking receives. That is
//! what makes a schedule worth simulating against measurements of Open MPI, and
//! what the implementation-derived models of Nuriyev's thesis
//! (`nuriyev-model-based-collective-selection`, chapter 4) describe. Each module
//! cites the section.
//!
//! **Dependencies, not phases.** A step waits for named earlier steps only, so an
//! engine posts a nonblocking operation as soon as its inputs are ready; blocking
//! calls in the original become a chain of dependencies.
//!
//! Algorithms: broadcast [`bcast`] (linear, binomial, chain, binary, split-binary,
//! k-chain), gather [`gather`] (linear, binomial), scatter [`scatter`] (linear,
//! binomial), allgather [`allgather`] (ring, recursive doubling, Bruck), allreduce
//! [`allreduce`] (recursive doubling, ring), reduce and reduce-scatter [`reduce`]
//! (binomial, in-order binary; ring, recursive halving), barrier, all-to-all and
//! all-to-all-v [`exchange`] (dissemination, pairwise; pairwise, linear, over the
//! count matrix of [`counts`]).
//! [`check`] fills buffers with known data and verifies the result; the tests prove
//! properties of schedules (matching, hazards, progress) without a transport
//! (`tests_analysis.rs`).
//! [`op`] wraps a schedule, or a transport's own collective ([`native`]: MPI's), as
//! one [`CollOp`] the late-arrival and nonblocking patterns time alike.

pub mod allgather;
pub mod allreduce;
pub mod bcast;
pub mod check;
pub mod counts;
pub mod exchange;
pub mod exec;
pub mod gather;
pub mod native;
pub mod op;
pub mod reduce;
pub mod scatter;
pub mod schedule;
pub mod topo;

#[cfg(test)]
#[path = "tests_analysis.rs"]
mod analysis;
#[cfg(test)]
mod tests;

pub use counts::Counts;
pub use exec::{CollBuffers, Executor, Interrupts, Uninterrupted};
pub use native::NativeOp;
pub use op::{CollOp, Scheduled};
pub use schedule::{Action, Buf, Kind, Schedule, Slice, Step, StepId};

use ngauge_transport::{Rank, TransportError};
use schedule::Builder;
use std::fmt;
use std::str::FromStr;

/// The collective operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// One root's message to every rank.
    Bcast,
    /// Every rank's block to one root.
    Gather,
    /// The element-wise sum of every rank's vector, on every rank.
    Allreduce,
    /// No rank leaves before every rank has entered.
    Barrier,
    /// Block `j` of rank `i` to block `i` of rank `j`.
    Alltoall,
    /// The element-wise sum of every rank's vector, on one root.
    Reduce,
    /// Every rank's block to every rank.
    Allgather,
    /// Block `r` of the element-wise sum of every rank's blocks, on rank `r`.
    ReduceScatter,
    /// Block `r` of one root's blocks to rank `r`.
    Scatter,
    /// The all-to-all with a length per pair ([`Counts`]).
    Alltoallv,
}

impl Collective {
    /// Every collective.
    pub const ALL: [Collective; 10] = [
        Collective::Bcast,
        Collective::Gather,
        Collective::Allreduce,
        Collective::Barrier,
        Collective::Alltoall,
        Collective::Reduce,
        Collective::Allgather,
        Collective::ReduceScatter,
        Collective::Scatter,
        Collective::Alltoallv,
    ];

    /// Lowercase name, as on the command line and in Open MPI's
    /// `coll_tuned_<name>_algorithm`: `bcast`, `gather`, `reduce_scatter`, ...
    pub fn name(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Gather => "gather",
            Collective::Allreduce => "allreduce",
            Collective::Barrier => "barrier",
            Collective::Alltoall => "alltoall",
            Collective::Reduce => "reduce",
            Collective::Allgather => "allgather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Scatter => "scatter",
            Collective::Alltoallv => "alltoallv",
        }
    }

    /// Whether the operation has a root.
    pub fn is_rooted(self) -> bool {
        use Collective::*;
        matches!(self, Bcast | Gather | Reduce | Scatter)
    }

    /// Whether it sums vectors (MPI's own sums 8-byte words).
    pub fn is_reduction(self) -> bool {
        use Collective::*;
        matches!(self, Allreduce | Reduce | ReduceScatter)
    }

    /// The algorithms implemented for it (k-chain with Open MPI's default of 4
    /// chains).
    pub fn algorithms(self) -> Vec<Algorithm> {
        use Algorithm::*;
        match self {
            Collective::Bcast => vec![
                BcastLinear,
                BcastBinomial,
                BcastChain,
                BcastBinary,
                BcastSplitBinary,
                BcastKChain {
                    chains: DEFAULT_CHAINS,
                },
            ],
            Collective::Gather => vec![GatherLinear, GatherBinomial],
            Collective::Allreduce => vec![AllreduceRecursiveDoubling, AllreduceRing],
            Collective::Barrier => vec![BarrierDissemination],
            Collective::Alltoall => vec![AlltoallPairwise],
            Collective::Reduce => vec![ReduceBinomial, ReduceInOrderBinary],
            Collective::Allgather => {
                vec![AllgatherRing, AllgatherRecursiveDoubling, AllgatherBruck]
            }
            Collective::ReduceScatter => vec![ReduceScatterRing, ReduceScatterRecursiveHalving],
            Collective::Scatter => vec![ScatterLinear, ScatterBinomial],
            Collective::Alltoallv => {
                let counts = Counts::Uniform;
                vec![AlltoallvPairwise { counts }, AlltoallvLinear { counts }]
            }
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collective {
    type Err = CollError;
    fn from_str(s: &str) -> Result<Collective, CollError> {
        Collective::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| CollError::UnknownCollective { name: s.into() })
    }
}

/// Open MPI's default number of chains for the k-chain broadcast
/// (`coll_tuned_bcast_chain_fanout`; Nuriyev sec. 4.2.1.6: "K = 4").
pub const DEFAULT_CHAINS: usize = 4;

/// Most segments one operation may be cut into (a guard against a 1-byte segment of
/// a gigabyte message, which would be a billion steps).
pub const MAX_SEGMENTS: usize = 1 << 22;

/// A collective algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Broadcast: the root sends to every rank ([`bcast`]).
    BcastLinear,
    /// Broadcast: pipelined over the binomial tree.
    BcastBinomial,
    /// Broadcast: pipelined over one chain.
    BcastChain,
    /// Broadcast: pipelined over the binary tree.
    BcastBinary,
    /// Broadcast: halves down the two subtrees of the binary tree, then swapped.
    BcastSplitBinary,
    /// Broadcast: pipelined over `chains` chains hanging off the root.
    BcastKChain {
        /// Number of chains (at least 1).
        chains: usize,
    },
    /// Gather: the root receives from every rank in turn ([`gather`]).
    GatherLinear,
    /// Gather: up the in-order binomial tree.
    GatherBinomial,
    /// Allreduce: recursive doubling with the non-power-of-two fold ([`allreduce`]).
    AllreduceRecursiveDoubling,
    /// Allreduce: ring reduce-scatter, then ring allgather.
    AllreduceRing,
    /// Barrier: dissemination ([`exchange`]).
    BarrierDissemination,
    /// All-to-all: pairwise exchange.
    AlltoallPairwise,
    /// Reduce: up the in-order binomial tree ([`reduce`]).
    ReduceBinomial,
    /// Reduce: up the in-order binary tree rooted at the last rank.
    ReduceInOrderBinary,
    /// Allgather: ring ([`allgather`]).
    AllgatherRing,
    /// Allgather: recursive doubling (Bruck's when `np` is no power of two).
    AllgatherRecursiveDoubling,
    /// Allgather: Bruck's concatenation.
    AllgatherBruck,
    /// Reduce-scatter: ring ([`reduce`]).
    ReduceScatterRing,
    /// Reduce-scatter: recursive halving with the non-power-of-two fold.
    ReduceScatterRecursiveHalving,
    /// Scatter: the root sends to every rank in turn ([`scatter`]).
    ScatterLinear,
    /// Scatter: down the in-order binomial tree.
    ScatterBinomial,
    /// All-to-all-v: pairwise exchange ([`exchange`]).
    AlltoallvPairwise {
        /// The count matrix.
        counts: Counts,
    },
    /// All-to-all-v: every receive and send posted at once.
    AlltoallvLinear {
        /// The count matrix.
        counts: Counts,
    },
}

impl Algorithm {
    /// The operation it implements.
    pub fn collective(self) -> Collective {
        use Algorithm::*;
        match self {
            BcastLinear
            | BcastBinomial
            | BcastChain
            | BcastBinary
            | BcastSplitBinary
            | BcastKChain { .. } => Collective::Bcast,
            GatherLinear | GatherBinomial => Collective::Gather,
            AllreduceRecursiveDoubling | AllreduceRing => Collective::Allreduce,
            BarrierDissemination => Collective::Barrier,
            AlltoallPairwise => Collective::Alltoall,
            ReduceBinomial | ReduceInOrderBinary => Collective::Reduce,
            AllgatherRing | AllgatherRecursiveDoubling | AllgatherBruck => Collective::Allgather,
            ReduceScatterRing | ReduceScatterRecursiveHalving => Collective::ReduceScatter,
            ScatterLinear | ScatterBinomial => Collective::Scatter,
            AlltoallvPairwise { .. } | AlltoallvLinear { .. } => Collective::Alltoallv,
        }
    }

    /// Whether a segment size changes it (the pipelined broadcasts).
    pub fn is_segmented(self) -> bool {
        use Algorithm::*;
        matches!(
            self,
            BcastBinomial | BcastChain | BcastBinary | BcastSplitBinary | BcastKChain { .. }
        )
    }

    /// Name without parameters, as on the command line: `linear`, `binomial`,
    /// `chain`, `binary`, `split-binary`, `kchain`, `recursive-doubling`, `ring`,
    /// `dissemination`, `pairwise`, `in-order-binary`, `bruck`,
    /// `recursive-halving`.
    pub fn base_name(self) -> &'static str {
        use Algorithm::*;
        match self {
            BcastLinear | GatherLinear | ScatterLinear | AlltoallvLinear { .. } => "linear",
            BcastBinomial | GatherBinomial | ReduceBinomial | ScatterBinomial => "binomial",
            BcastChain => "chain",
            BcastBinary => "binary",
            BcastSplitBinary => "split-binary",
            BcastKChain { .. } => "kchain",
            AllreduceRecursiveDoubling | AllgatherRecursiveDoubling => "recursive-doubling",
            AllreduceRing | AllgatherRing | ReduceScatterRing => "ring",
            ReduceInOrderBinary => "in-order-binary",
            AllgatherBruck => "bruck",
            ReduceScatterRecursiveHalving => "recursive-halving",
            BarrierDissemination => "dissemination",
            AlltoallPairwise | AlltoallvPairwise { .. } => "pairwise",
        }
    }

    /// The count matrix of an all-to-all-v, [`Counts::Uniform`] for the
    /// all-to-all (`None` for the others).
    pub fn counts(self) -> Option<Counts> {
        match self {
            Algorithm::AlltoallPairwise => Some(Counts::Uniform),
            Algorithm::AlltoallvPairwise { counts } | Algorithm::AlltoallvLinear { counts } => {
                Some(counts)
            }
            _ => None,
        }
    }

    /// The algorithm with `counts` (an all-to-all-v's; the others unchanged).
    pub fn with_counts(self, counts: Counts) -> Algorithm {
        match self {
            Algorithm::AlltoallvPairwise { .. } => Algorithm::AlltoallvPairwise { counts },
            Algorithm::AlltoallvLinear { .. } => Algorithm::AlltoallvLinear { counts },
            a => a,
        }
    }

    /// Parses `name` as an algorithm of `collective`: a [`Algorithm::base_name`], and
    /// for the k-chain optionally `kchain:K` (default [`DEFAULT_CHAINS`]).
    pub fn parse(collective: Collective, name: &str) -> Result<Algorithm, CollError> {
        let (base, param) = match name.split_once(':') {
            Some((b, p)) => (b, Some(p)),
            None => (name, None),
        };
        let unknown = || CollError::UnknownAlgorithm {
            collective,
            name: name.into(),
            known: collective
                .algorithms()
                .iter()
                .map(|a| a.base_name())
                .collect::<Vec<_>>()
                .join(", "),
        };
        let found = collective
            .algorithms()
            .into_iter()
            .find(|a| a.base_name() == base)
            .ok_or_else(unknown)?;
        match (found, param) {
            (Algorithm::BcastKChain { .. }, Some(p)) => {
                let chains = p
                    .parse()
                    .map_err(|_| CollError::BadChains { value: p.into() })?;
                if chains == 0 {
                    return Err(CollError::BadChains { value: p.into() });
                }
                Ok(Algorithm::BcastKChain { chains })
            }
            (a, None) => Ok(a),
            (_, Some(_)) => Err(unknown()),
        }
    }
}

impl fmt::Display for Algorithm {
    /// [`Algorithm::base_name`], with `:K` for the k-chain (what
    /// [`Algorithm::parse`] reads back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::BcastKChain { chains } => write!(f, "kchain:{chains}"),
            a => f.write_str(a.base_name()),
        }
    }
}

/// One collective call: everything a rank's schedule is a function of, besides the
/// rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollSpec {
    /// The algorithm (and so the operation).
    pub algorithm: Algorithm,
    /// Ranks in the job.
    pub np: usize,
    /// Bytes per rank: the broadcast message, each rank's gather, scatter and
    /// allgather block, the (all)reduce vector, each all-to-all block, each block of
    /// the reduce-scatter's result, the unit of the all-to-all-v's counts (ignored
    /// by the barrier).
    pub size_bytes: usize,
    /// Segment size of the pipelined broadcasts; 0 (or at least `size_bytes`) is one
    /// segment (ignored by the others).
    pub segment_bytes: usize,
    /// The root of a broadcast, gather, scatter or reduce (ignored by the others).
    pub root: Rank,
}

impl CollSpec {
    /// Checks the parameters: at least one rank, the root a rank of the job, at
    /// least one chain, at most [`MAX_SEGMENTS`] segments, a count matrix of `np`
    /// rows.
    pub fn validate(&self) -> Result<(), CollError> {
        if self.np == 0 {
            return Err(CollError::NoRanks);
        }
        if self.root >= self.np {
            return Err(CollError::RootOutOfRange {
                root: self.root,
                np: self.np,
            });
        }
        if let Some(c) = self.algorithm.counts() {
            c.check_np(self.np)
                .map_err(|what| CollError::Unsupported { what })?;
        }
        if let Algorithm::BcastKChain { chains: 0 } = self.algorithm {
            return Err(CollError::BadChains { value: "0".into() });
        }
        if self.algorithm.is_segmented() && self.segment_bytes > 0 {
            let segments = self.size_bytes.div_ceil(self.segment_bytes);
            if segments > MAX_SEGMENTS {
                return Err(CollError::TooManySegments {
                    size_bytes: self.size_bytes,
                    segment_bytes: self.segment_bytes,
                    segments,
                });
            }
        }
        Ok(())
    }

    /// Rank `rank`'s schedule.
    pub fn schedule(&self, rank: Rank) -> Result<Schedule, CollError> {
        self.validate()?;
        if rank >= self.np {
            return Err(CollError::RankOutOfRange { rank, np: self.np });
        }
        let CollSpec {
            np,
            size_bytes: size,
            segment_bytes: segment,
            root,
            ..
        } = *self;
        let mut b = Builder::new(rank, np);
        b.need(Buf::Data, size);
        use Algorithm::*;
        match self.algorithm {
            BcastLinear => bcast::linear(&mut b, rank, np, root, size),
            BcastBinomial => bcast::tree(&mut b, &topo::binomial(rank, root, np), 0, size, segment),
            BcastChain => bcast::tree(&mut b, &topo::chain(1, rank, root, np), 0, size, segment),
            BcastBinary => bcast::tree(&mut b, &topo::kary(2, rank, root, np), 0, size, segment),
            BcastSplitBinary => bcast::split_binary(&mut b, rank, np, root, size, segment),
            BcastKChain { chains } => {
                let t = topo::chain(chains, rank, root, np);
                bcast::tree(&mut b, &t, 0, size, segment)
            }
            GatherLinear => gather::linear(&mut b, rank, np, root, size),
            GatherBinomial => gather::binomial(&mut b, rank, np, root, size),
            AllreduceRecursiveDoubling => allreduce::recursive_doubling(&mut b, rank, np, size),
            AllreduceRing => allreduce::ring(&mut b, rank, np, size),
            BarrierDissemination => exchange::dissemination(&mut b, rank, np),
            AlltoallPairwise => {
                exchange::pairwise(&mut b, rank, np, (&Counts::Uniform, size), false)
            }
            AlltoallvPairwise { counts } => {
                exchange::pairwise(&mut b, rank, np, (&counts, size), true)
            }
            AlltoallvLinear { counts } => exchange::linear(&mut b, rank, np, &counts, size),
            ReduceBinomial => reduce::binomial(&mut b, rank, np, root, size),
            ReduceInOrderBinary => reduce::in_order_binary(&mut b, rank, np, root, size),
            AllgatherRing => allgather::ring(&mut b, rank, np, size),
            AllgatherRecursiveDoubling => allgather::recursive_doubling(&mut b, rank, np, size),
            AllgatherBruck => allgather::bruck(&mut b, rank, np, size),
            ReduceScatterRing => reduce::scatter_ring(&mut b, rank, np, size),
            ReduceScatterRecursiveHalving => {
                reduce::scatter_recursive_halving(&mut b, rank, np, size)
            }
            ScatterLinear => scatter::linear(&mut b, rank, np, root, size),
            ScatterBinomial => scatter::binomial(&mut b, rank, np, root, size),
        }
        Ok(b.finish())
    }
}

/// What can go wrong building, running or checking a collective.
#[derive(Debug, thiserror::Error)]
pub enum CollError {
    /// `np` was 0.
    #[error("a collective needs at least one rank")]
    NoRanks,
    /// The root is not a rank of the job.
    #[error("root {root} is not a rank of a job of {np} ranks")]
    RootOutOfRange {
        /// The root asked for.
        root: Rank,
        /// Ranks in the job.
        np: usize,
    },
    /// A schedule was asked for a rank outside the job.
    #[error("rank {rank} is not a rank of a job of {np} ranks")]
    RankOutOfRange {
        /// The rank asked for.
        rank: Rank,
        /// Ranks in the job.
        np: usize,
    },
    /// The k-chain's number of chains is not a positive integer.
    #[error("the k-chain broadcast needs a positive number of chains, not `{value}`")]
    BadChains {
        /// What was given.
        value: String,
    },
    /// The segment is too small for the message.
    #[error(
        "{size_bytes} bytes in segments of {segment_bytes} bytes are {segments} segments, \
         more than {MAX_SEGMENTS}; use larger segments"
    )]
    TooManySegments {
        /// Message size.
        size_bytes: usize,
        /// Segment size.
        segment_bytes: usize,
        /// Segments that would make.
        segments: usize,
    },
    /// No such collective.
    #[error(
        "unknown collective `{name}` (known: bcast, gather, allreduce, barrier, alltoall, \
         reduce, allgather, reduce_scatter, scatter, alltoallv)"
    )]
    UnknownCollective {
        /// What was given.
        name: String,
    },
    /// No such algorithm for the collective.
    #[error("unknown {collective} algorithm `{name}` (known: {known})")]
    UnknownAlgorithm {
        /// The collective.
        collective: Collective,
        /// What was given.
        name: String,
        /// The algorithms it has.
        known: String,
    },
    /// The schedule was built for another rank or job than the transport's.
    #[error("a schedule for rank {schedule_rank} of {schedule_np} run on rank {rank} of {np}")]
    WrongRank {
        /// The schedule's rank.
        schedule_rank: Rank,
        /// The schedule's job size.
        schedule_np: usize,
        /// The transport's rank.
        rank: Rank,
        /// The transport's job size.
        np: usize,
    },
    /// Steps remain but none is in flight and none can start: the schedule is wrong.
    #[error("rank {rank}: {left} of {total} steps cannot start (schedule error)")]
    Stalled {
        /// The rank.
        rank: Rank,
        /// Steps not finished.
        left: usize,
        /// All steps.
        total: usize,
    },
    /// The implementation cannot do what was asked (MPI's allreduce on a size that
    /// is not whole words, noise injected into an opaque library call).
    #[error("{what}")]
    Unsupported {
        /// What and why.
        what: String,
    },
    /// A transport's own collective asked of one that has none.
    #[error("the {transport} transport has no collectives of its own")]
    NoNativeCollectives {
        /// The transport's name.
        transport: &'static str,
    },
    /// `test` or `wait` before `start`.
    #[error("the collective was not started")]
    NotStarted,
    /// A buffer is shorter than the schedule needs.
    #[error("the {buf} buffer holds {got} bytes, the schedule needs {need}")]
    BufferTooSmall {
        /// Which buffer (`data`, `out`, `tmp0`, `tmp1`).
        buf: &'static str,
        /// Its length.
        got: usize,
        /// What the schedule needs.
        need: usize,
    },
    /// The data after the operation is not what it must be.
    #[error(transparent)]
    Data(#[from] check::DataError),
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
}
