//! [`SimulateSpec`]: what `ngauge simulate` asks of the simulator, as a plain serde
//! value that the command line and a suite file fill alike, and [`run`], which
//! answers it with one [`Prediction`] per (size, algorithm, segment).
//!
//! Field names are snake_case with their unit, as in [`crate::job::JobSpec`];
//! algorithms are spelled as on the command line (`binomial`, `kchain:4`); unknown
//! fields are rejected. The network is either a parameter file
//! ([`crate::sim::params`]) or one LogGP parameter set given inline.
//!
//! With several algorithms (or none named: every algorithm of the operation) and
//! several segment sizes, [`run`] ranks them per message size by predicted time:
//! the model-based selection of Nuriyev's thesis (`nuriyev-model-based-collective-
//! selection`, ch. 4-5), here with the discrete-event LogGP simulation of the very
//! schedules `ngauge coll` executes as the model of each algorithm instead of a
//! closed form fitted per algorithm.

use crate::coll::{Algorithm, CollError, CollSpec, Collective};
use crate::sim::collective;
use crate::sim::engine::{Options, SimError, Span};
use crate::sim::net::{LogGp, Network};
use crate::sim::params::{self, Loaded, ParamsError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Most ranks a simulation may have (`2^26`; memory is what limits it, see
/// `docs/simulation.md` for bytes per rank).
pub const MAX_NP: usize = 1 << 26;

/// One LogGP parameter set, inline (one protocol range for every size).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LogGpSpec {
    /// Wire latency `L`, us (LogGP's `L`, not `PRTT(1,0,1)/2`).
    #[serde(rename = "L_us")]
    pub l_us: f64,
    /// Send overhead `o_s`, us.
    pub o_s_us: f64,
    /// Receive overhead `o_r`, us.
    pub o_r_us: f64,
    /// Gap `g`, us.
    pub g_us: f64,
    /// Gap per byte `G`, us per byte.
    #[serde(rename = "G_us_per_byte")]
    pub big_g_us_per_byte: f64,
    /// Whether sends wait for the receiver (rendezvous) instead of completing
    /// locally (eager, the default).
    #[serde(default)]
    pub rendezvous: bool,
}

/// Where the network's parameters come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum NetworkSpec {
    /// A file `ngauge loggp --params-out` wrote.
    ParamsFile(PathBuf),
    /// One parameter set.
    Loggp(LogGpSpec),
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SimulateSpec {
    /// The operation: `bcast`, `gather`, `allreduce`, `barrier`, `alltoall`.
    pub op: String,
    /// Algorithms of `op` (`binomial`, `kchain:4`, ...); empty: every one.
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Segment sizes tried for the pipelined algorithms (0: one segment); empty:
    /// `[0]`. Algorithms that do not segment run once, with 0.
    #[serde(default)]
    pub segments_bytes: Vec<u64>,
    /// Ranks.
    pub np: usize,
    /// Message sizes (bytes per rank, as in `ngauge coll`).
    pub sizes_bytes: Vec<u64>,
    /// Root of a broadcast or gather.
    #[serde(default)]
    pub root: usize,
    /// The parameters.
    pub network: NetworkSpec,
    /// Keep the gap between receptions on a rank's interface (LogP's gap holds on
    /// the receiving side too); default true.
    #[serde(default = "yes")]
    pub receive_gap: bool,
    /// Report every rank's completion time.
    #[serde(default)]
    pub per_rank: bool,
    /// Also simulate this many calls back to back, with the same root and with the
    /// root rotating, and report the per-call time a loop benchmark would (the
    /// loop-scheme error of the LogGP paper, sec. 4.2).
    #[serde(default)]
    pub loop_calls: Option<u32>,
}

fn yes() -> bool {
    true
}

/// Why a spec cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Unknown operation or algorithm, bad root, too many segments.
    #[error(transparent)]
    Coll(#[from] CollError),
    /// The parameter file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The parameter file is malformed.
    #[error("{path}: {error}")]
    Params {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: ParamsError,
    },
    /// A LogGP parameter given inline is negative, not finite or too large
    /// ([`crate::model::params::out_of_domain`]).
    #[error("LogGP parameter {detail}")]
    BadParameter {
        /// `L_us`, `o_s_us`, ...
        name: &'static str,
        /// What was given.
        value: f64,
        /// What is wrong with it, naming both.
        detail: String,
    },
    /// No sizes.
    #[error("no message sizes to simulate")]
    NoSizes,
    /// `np` out of range.
    #[error("np must be between 1 and {MAX_NP}, not {np}")]
    BadNp {
        /// What was given.
        np: usize,
    },
    /// The simulation would hold more memory than this process can have.
    #[error(
        "simulating {np} ranks needs about {} MiB, more than the {} MiB this process \
         can have (MemAvailable, ulimit -v): simulate fewer ranks",
        need_bytes >> 20,
        available_bytes >> 20
    )]
    NoMemory {
        /// The ranks asked for.
        np: usize,
        /// The estimate ([`state_bytes`]).
        need_bytes: u64,
        /// What the process may still allocate.
        available_bytes: u64,
    },
    /// Parameters so large that a call's simulated time could leave the engine's
    /// range (`u64` picoseconds).
    #[error(
        "the LogGP parameters at {size_bytes} bytes could make a call of {algo} longer \
         than {} days, the simulator's range: give parameters in us, not in ps or s",
        u64::MAX / 86_400_000_000_000_000 / 2
    )]
    OutOfRange {
        /// The algorithm simulated.
        algo: String,
        /// The message size.
        size_bytes: u64,
    },
    /// A size does not fit the machine's address space.
    #[error("message size {size_bytes} bytes is too large")]
    SizeTooLarge {
        /// What was given.
        size_bytes: u64,
    },
    /// The simulation failed (a schedule error; never expected of ngauge's own).
    #[error(transparent)]
    Sim(#[from] SimError),
}

impl SpecError {
    /// Whether the error is the user's input (the spec or its parameter file), not
    /// a fault of the simulator.
    pub fn is_input(&self) -> bool {
        !matches!(self, SpecError::Sim(_))
    }
}

impl NetworkSpec {
    /// The network, and what the reader assumed.
    pub fn load(&self) -> Result<Loaded, SpecError> {
        match self {
            NetworkSpec::ParamsFile(path) => {
                let text = std::fs::read_to_string(path).map_err(|error| SpecError::Read {
                    path: path.clone(),
                    error,
                })?;
                params::parse(&text).map_err(|error| SpecError::Params {
                    path: path.clone(),
                    error,
                })
            }
            NetworkSpec::Loggp(p) => {
                let named = [
                    ("L_us", p.l_us),
                    ("o_s_us", p.o_s_us),
                    ("o_r_us", p.o_r_us),
                    ("g_us", p.g_us),
                    ("G_us_per_byte", p.big_g_us_per_byte),
                ];
                let bad = named.iter().find_map(|&(name, value)| {
                    let detail = crate::model::params::out_of_domain(name, value)?;
                    Some(SpecError::BadParameter {
                        name,
                        value,
                        detail,
                    })
                });
                if let Some(e) = bad {
                    return Err(e);
                }
                Ok(Loaded {
                    transport: String::new(),
                    network: Network::uniform(LogGp::from_us(
                        p.l_us,
                        p.o_s_us,
                        p.o_r_us,
                        p.g_us,
                        p.big_g_us_per_byte,
                        p.rendezvous,
                    )),
                    warnings: Vec::new(),
                    ranges_bytes: Vec::new(),
                })
            }
        }
    }
}

/// One simulated collective call.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Prediction {
    /// The operation.
    pub op: String,
    /// The algorithm, as on the command line.
    pub algo: String,
    /// Segment size (0: one segment; always 0 for algorithms that do not segment).
    pub segment: u64,
    /// Message size, bytes per rank.
    pub size: u64,
    /// Ranks.
    pub np: usize,
    /// From the common start to the last rank's completion, us.
    pub predicted_us: f64,
    /// A rank that completes last (the lowest such).
    pub slowest_rank: usize,
    /// Every rank's completion, us (absent unless asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_us: Option<Vec<f64>>,
    /// Place among the candidates of this size by predicted time, from 1 (ties
    /// share a place).
    pub place: usize,
    /// With `loop_calls`: the slowest rank's completion of the last of that many
    /// back-to-back calls over their number, us (what a loop benchmark reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub looped_us: Option<f64>,
    /// The same with the root rotating (change-root), us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotated_us: Option<f64>,
    /// Events the engine handled.
    pub events: u64,
    /// Messages sent.
    pub messages: u64,
    /// Most bytes of rank state alive at once.
    pub peak_state_bytes: usize,
    /// Wall-clock seconds the simulation took.
    pub elapsed_s: f64,
}

/// The candidates of a spec: its algorithms, each with each segment size when it
/// segments.
pub fn candidates(spec: &SimulateSpec) -> Result<Vec<(Algorithm, u64)>, SpecError> {
    let op: Collective = spec.op.parse()?;
    let algorithms = if spec.algorithms.is_empty() {
        op.algorithms()
    } else {
        spec.algorithms
            .iter()
            .map(|a| Algorithm::parse(op, a))
            .collect::<Result<_, _>>()?
    };
    let segments = if spec.segments_bytes.is_empty() {
        vec![0]
    } else {
        spec.segments_bytes.clone()
    };
    let mut out = Vec::new();
    for a in algorithms {
        if a.is_segmented() {
            out.extend(segments.iter().map(|&s| (a, s)));
        } else {
            out.push((a, 0));
        }
    }
    out.dedup();
    Ok(out)
}

/// Checks `spec` without simulating: the operation, algorithms, np, sizes and root.
pub fn validate(spec: &SimulateSpec) -> Result<Vec<(Algorithm, u64)>, SpecError> {
    if spec.np == 0 || spec.np > MAX_NP {
        return Err(SpecError::BadNp { np: spec.np });
    }
    let need_bytes = state_bytes(spec);
    match ngauge_transport::available_memory_bytes() {
        Some(available_bytes) if need_bytes > available_bytes => {
            return Err(SpecError::NoMemory {
                np: spec.np,
                need_bytes,
                available_bytes,
            })
        }
        _ => {}
    }
    if spec.sizes_bytes.is_empty() {
        return Err(SpecError::NoSizes);
    }
    let candidates = candidates(spec)?;
    for &size in &spec.sizes_bytes {
        let size_bytes =
            usize::try_from(size).map_err(|_| SpecError::SizeTooLarge { size_bytes: size })?;
        for &(algorithm, segment) in &candidates {
            coll_spec(spec, algorithm, size_bytes, segment).validate()?;
        }
    }
    Ok(candidates)
}

/// Address space a simulation of `spec` takes whatever its algorithm, an estimate
/// from below: the engine's bookkeeping and event queue, 60 bytes per rank (the
/// binomial broadcast of 2^26 ranks: 45 bytes resident, 60 with the vectors'
/// doubling, `docs/simulation.md`), and with `per_rank` each rank's completion
/// time, in the prediction and as JSON text.
pub fn state_bytes(spec: &SimulateSpec) -> u64 {
    let per_rank = if spec.per_rank { 60 + 32 } else { 60 };
    spec.np as u64 * per_rank
}

/// Refuses parameters that could carry `c`'s simulated time out of the engine's
/// `u64` picoseconds: a sufficient bound is every message of the call (`np` per
/// segment, `np` squared for the all-to-all), one after the other, each costing
/// the dearest protocol range's `L` (three times under rendezvous), `o_s`, `o_r`,
/// `g` and `(s-1)G` for the largest block `s` (an all-to-all-v's largest count
/// times the size), within half the range. Counted in `f64`, so a sum cannot
/// wrap; parameters given in microseconds as measured stay far inside it.
fn check_range(c: &CollSpec, net: &Network) -> Result<(), SpecError> {
    let segments = match c.segment_bytes {
        0 => 1,
        s => c.size_bytes.div_ceil(s).max(1),
    };
    let np = c.np as f64;
    let per_segment = match c.algorithm.collective() {
        // Messages of up to `np` blocks count as `np` messages of one.
        Collective::Alltoall
        | Collective::Alltoallv
        | Collective::Allgather
        | Collective::ReduceScatter
        | Collective::Scatter => np * np,
        _ => 4.0 * np,
    };
    let messages = per_segment * segments as f64;
    let units = c.algorithm.counts().map_or(1, |k| k.largest(c.np).max(1));
    let block = c.size_bytes.saturating_mul(units);
    let dearest_ps = (net.protocols().iter())
        .map(|(_, p)| {
            let l = p.l_ps as f64 * if p.rendezvous { 3.0 } else { 1.0 };
            let per_byte_fs = (p.big_g_fs + 2 * p.big_o_fs) as f64;
            let transfer = block.saturating_sub(1) as f64 * per_byte_fs / 1e3;
            l + p.os_ps as f64 + p.or_ps as f64 + p.g_ps as f64 + transfer
        })
        .fold(0.0, f64::max);
    if messages * dearest_ps < u64::MAX as f64 / 2.0 {
        return Ok(());
    }
    Err(SpecError::OutOfRange {
        algo: c.algorithm.to_string(),
        size_bytes: c.size_bytes as u64,
    })
}

fn coll_spec(spec: &SimulateSpec, algorithm: Algorithm, size: usize, segment: u64) -> CollSpec {
    CollSpec {
        algorithm,
        np: spec.np,
        size_bytes: size,
        segment_bytes: usize::try_from(segment).unwrap_or(usize::MAX),
        root: spec.root,
    }
}

/// Simulates every candidate of `spec` at every size on `net`, sizes ascending and
/// within a size in the order of the candidates; [`Prediction::place`] ranks the
/// candidates of each size.
pub fn run(spec: &SimulateSpec, net: &Network) -> Result<Vec<Prediction>, SpecError> {
    let candidates = validate(spec)?;
    let mut out = Vec::new();
    for &size in &spec.sizes_bytes {
        let first = out.len();
        for &(algorithm, segment) in &candidates {
            let c = coll_spec(spec, algorithm, size as usize, segment);
            out.push(one(spec, &c, net)?);
        }
        rank_places(&mut out[first..]);
    }
    Ok(out)
}

/// One call of one candidate, with the trace when `trace` (for a timeline).
pub fn trace(spec: &SimulateSpec, net: &Network) -> Result<Vec<Span>, SpecError> {
    let candidates = validate(spec)?;
    let (algorithm, segment) = candidates[0];
    let c = coll_spec(spec, algorithm, spec.sizes_bytes[0] as usize, segment);
    check_range(&c, net)?;
    let options = Options {
        receive_gap: spec.receive_gap,
        trace: true,
        ..Options::default()
    };
    Ok(collective::run(&c, net, options)?.trace)
}

fn one(spec: &SimulateSpec, c: &CollSpec, net: &Network) -> Result<Prediction, SpecError> {
    check_range(c, net)?;
    let options = Options {
        receive_gap: spec.receive_gap,
        per_rank: spec.per_rank,
        ..Options::default()
    };
    let t0 = std::time::Instant::now();
    let out = collective::run(c, net, options)?;
    let schemes = match spec.loop_calls {
        Some(n) => Some(collective::schemes(c, net, n)?),
        None => None,
    };
    let elapsed_s = t0.elapsed().as_secs_f64();
    Ok(Prediction {
        looped_us: schemes.map(|s| s.looped.as_us()),
        rotated_us: schemes.map(|s| s.rotated.as_us()),
        op: c.algorithm.collective().name().into(),
        algo: c.algorithm.to_string(),
        segment: c.segment_bytes as u64,
        size: c.size_bytes as u64,
        np: c.np,
        predicted_us: out.makespan.as_us(),
        slowest_rank: out.slowest,
        finish_us: spec
            .per_rank
            .then(|| out.finish.iter().map(|t| t.as_us()).collect()),
        place: 0,
        events: out.stats.events,
        messages: out.stats.messages,
        peak_state_bytes: out.stats.peak_state_bytes,
        elapsed_s,
    })
}

/// Places by predicted time, ties sharing a place (1, 1, 3).
fn rank_places(rows: &mut [Prediction]) {
    let times: Vec<f64> = rows.iter().map(|r| r.predicted_us).collect();
    for r in rows.iter_mut() {
        r.place = 1 + times.iter().filter(|&&t| t < r.predicted_us).count();
    }
}

/// The best candidate of every size in `rows` (what [`run`] returned): the first
/// of place 1.
pub fn best(rows: &[Prediction]) -> Vec<&Prediction> {
    let mut out: Vec<&Prediction> = Vec::new();
    for r in rows.iter().filter(|r| r.place == 1) {
        if out.last().is_none_or(|b| b.size != r.size) {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(op: &str, algorithms: &[&str], np: usize, sizes: &[u64]) -> SimulateSpec {
        SimulateSpec {
            op: op.into(),
            algorithms: algorithms.iter().map(|a| a.to_string()).collect(),
            segments_bytes: Vec::new(),
            np,
            sizes_bytes: sizes.to_vec(),
            root: 0,
            network: NetworkSpec::Loggp(LogGpSpec {
                l_us: 5.0,
                o_s_us: 1.0,
                o_r_us: 1.0,
                g_us: 2.0,
                big_g_us_per_byte: 0.001,
                rendezvous: false,
            }),
            receive_gap: true,
            per_rank: true,
            loop_calls: None,
        }
    }

    fn net(s: &SimulateSpec) -> Network {
        s.network.load().unwrap().network
    }

    #[test]
    fn one_message_takes_o_plus_l_plus_o() {
        let s = spec("bcast", &["linear"], 2, &[1, 1001]);
        let rows = run(&s, &net(&s)).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].predicted_us, 7.0, "o + L + (1-1)G + o");
        assert_eq!(rows[0].finish_us.as_deref(), Some(&[1.0, 7.0][..]));
        assert_eq!(rows[0].slowest_rank, 1);
        assert!(
            (rows[1].predicted_us - 8.0).abs() < 1e-9,
            "+ 1000 B x 0.001 us"
        );
    }

    #[test]
    fn the_spec_reads_from_a_suite_and_refuses_unknown_fields() {
        let text = r#"{"op": "bcast", "algorithms": ["binomial", "chain"], "segments_bytes": [0, 1024],
            "np": 8, "sizes_bytes": [1, 65536],
            "network": {"loggp": {"L_us": 5, "o_s_us": 1, "o_r_us": 1, "g_us": 2, "G_us_per_byte": 0.001}}}"#;
        let s: SimulateSpec = serde_json::from_str(text).unwrap();
        assert!(s.receive_gap && !s.per_rank);
        assert_eq!(candidates(&s).unwrap().len(), 4);
        let bad = text.replace("\"np\"", "\"ranks\": 3, \"np\"");
        let e = serde_json::from_str::<SimulateSpec>(&bad).unwrap_err();
        assert!(e.to_string().contains("unknown field `ranks`"), "{e}");
        let bad = text.replace("\"g_us\"", "\"gap_us\": 1, \"g_us\"");
        assert!(serde_json::from_str::<SimulateSpec>(&bad).is_err());
    }

    #[test]
    fn every_algorithm_is_a_candidate_and_places_rank_them() {
        let mut s = spec("bcast", &[], 16, &[1, 1 << 20]);
        s.segments_bytes = vec![0, 8192];
        s.per_rank = false;
        let rows = run(&s, &net(&s)).unwrap();
        // linear once; binomial, chain, binary, split-binary, kchain:4 twice.
        assert_eq!(rows.len(), 2 * 11);
        for size_rows in rows.chunks(11) {
            let min = size_rows
                .iter()
                .map(|r| r.predicted_us)
                .fold(f64::INFINITY, f64::min);
            for r in size_rows {
                assert_eq!(r.place == 1, r.predicted_us == min, "{r:?}");
            }
        }
        let best = best(&rows);
        assert_eq!(best.len(), 2);
        // One byte: no pipelining to gain, the binomial tree's log2(16) = 4 rounds win.
        assert_eq!(best[0].algo, "binomial");
        // 1 MiB: a pipeline of 8 KiB segments beats every unsegmented tree.
        assert_eq!(best[1].segment, 8192, "{:?}", best[1]);
    }

    #[test]
    fn issue38_parameters_beyond_the_engine_s_range_are_refused() {
        let huge = LogGp::from_us(1e308, 1e308, 1e308, 1e308, 1e308, false);
        let s = spec("bcast", &["binomial"], 8, &[1]);
        let e = run(&s, &Network::uniform(huge)).unwrap_err();
        assert!(matches!(e, SpecError::OutOfRange { .. }), "{e}");
        assert!(e.is_input());
        // Measured parameters at the largest np stay in range (checked, not run).
        let c = coll_spec(
            &spec("bcast", &[], MAX_NP, &[1]),
            Algorithm::BcastBinomial,
            1 << 20,
            0,
        );
        let measured = LogGp::from_us(5.0, 1.0, 1.0, 2.0, 0.001, true);
        check_range(&c, &Network::uniform(measured)).unwrap();
    }

    /// An all-to-all-v's block is its count times the size: a matrix of huge
    /// counts is refused where the size alone would pass.
    #[test]
    fn alltoallv_is_bounded_by_its_largest_block() {
        let m = Box::leak(Box::new(crate::coll::counts::CountMatrix {
            path: "huge.csv".into(),
            np: 2,
            counts: vec![0, 1 << 50, 1, 0],
        }));
        let algorithm = Algorithm::AlltoallvPairwise {
            counts: crate::coll::Counts::Given(m),
        };
        let c = coll_spec(
            &spec("alltoallv", &[], 2, &[1 << 20]),
            algorithm,
            1 << 20,
            0,
        );
        let measured = LogGp::from_us(5.0, 1.0, 1.0, 2.0, 0.001, true);
        let e = check_range(&c, &Network::uniform(measured)).unwrap_err();
        assert!(matches!(e, SpecError::OutOfRange { .. }), "{e}");
        let uniform = algorithm.with_counts(crate::coll::Counts::Uniform);
        let c = coll_spec(&spec("alltoallv", &[], 2, &[1 << 20]), uniform, 1 << 20, 0);
        check_range(&c, &Network::uniform(measured)).unwrap();
    }

    #[test]
    fn issue38_a_simulation_larger_than_memory_is_refused_up_front() {
        let mut s = spec("bcast", &["binomial"], MAX_NP, &[1]);
        s.per_rank = false;
        assert_eq!(state_bytes(&s), 60 << 26);
        s.per_rank = true;
        let need = state_bytes(&s);
        match ngauge_transport::available_memory_bytes() {
            Some(a) if a < need => {
                let e = validate(&s).unwrap_err().to_string();
                assert!(e.contains("simulate fewer ranks"), "{e}");
            }
            _ => assert!(validate(&s).is_ok()),
        }
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        let e = |s: SimulateSpec| validate(&s).unwrap_err().to_string();
        assert_eq!(
            e(spec("bcst", &[], 2, &[1])),
            "unknown collective `bcst` (known: bcast, gather, allreduce, barrier, alltoall, \
             reduce, allgather, reduce_scatter, scatter, alltoallv)"
        );
        assert!(e(spec("bcast", &["ring"], 2, &[1])).starts_with("unknown bcast algorithm `ring`"));
        assert_eq!(
            e(spec("bcast", &[], 0, &[1])),
            format!("np must be between 1 and {MAX_NP}, not 0")
        );
        assert_eq!(
            e(spec("bcast", &[], 2, &[])),
            "no message sizes to simulate"
        );
        let mut s = spec("bcast", &[], 2, &[1]);
        s.root = 2;
        assert_eq!(e(s), "root 2 is not a rank of a job of 2 ranks");
        let mut s = spec("bcast", &[], 2, &[1]);
        s.network = NetworkSpec::Loggp(LogGpSpec {
            g_us: f64::NAN,
            ..match s.network {
                NetworkSpec::Loggp(p) => p,
                NetworkSpec::ParamsFile(_) => unreachable!(),
            }
        });
        assert!(s
            .network
            .load()
            .unwrap_err()
            .to_string()
            .starts_with("LogGP parameter g_us = NaN"));
    }
}
