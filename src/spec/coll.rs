//! [`CollCmdSpec`]: what `ngauge coll` measures (one collective timed with the
//! window, barrier or loop scheme: Hoefler et al., "Accurately measuring
//! collective operations", sec. 3; Hunold & Carpen-Amarie, Algorithm 1), as the
//! command line and a suite's `coll` table fill it; [`WindowColl`]: the one
//! collective `late` and `nbc` time in windows (their `coll` table).
//!
//! The fields are the flags of `ngauge coll` with `-` written `_`; the clock
//! synchronization flags (`--sync`, `--fitpoints`, `--exchanges`,
//! `--estimator`) are fields of the same table. Output files (`--plot`) stay on
//! the command line. [`CollCmdSpec::validate`] checks what the spec alone
//! decides; [`CollCmdSpec::validate_for_job`] what depends on the job's
//! transports and size.

use super::{SizeList, SpecError};
use crate::coll::{Algorithm, Collective, Counts};
use crate::job::TransportName;
use crate::patterns::coll::Scheme;
use crate::sync::{self, Estimator, SyncOptions};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;

/// Which root the rooted collectives use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum RootChoice {
    /// One rank for every call.
    Rank(usize),
    /// Call `i` uses root `i % np` (always `"rotate"`).
    Rotate(Rotate),
}

/// The word `rotate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Rotate {
    /// Root `i % np` for call `i`.
    Rotate,
}

impl std::fmt::Display for RootChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootChoice::Rank(r) => write!(f, "{r}"),
            RootChoice::Rotate(_) => f.write_str("rotate"),
        }
    }
}

/// Largest segment of a pipelined broadcast, bytes.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 30;

/// The parameters of a collective measurement (the flags of `ngauge coll`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollCmdSpec {
    /// The collective: `bcast`, `gather`, `allreduce`, `barrier`, `alltoall`,
    /// `reduce`, `allgather`, `reduce_scatter`, `scatter`.
    #[serde(serialize_with = "op_name", deserialize_with = "by_name")]
    pub op: Collective,
    /// Implementations: ngauge's schedules by name (`binomial`, `kchain:4`),
    /// `all` (every one of `op`), `mpi` (the MPI library's own); empty: the
    /// usual one of `op`.
    pub algo: Vec<String>,
    /// Segment size of the pipelined broadcasts, bytes (0: one segment); a
    /// number or a size such as `"8K"`.
    #[serde(deserialize_with = "segment")]
    pub segment: usize,
    /// The root of bcast and gather: a rank, or `"rotate"`.
    #[serde(deserialize_with = "root")]
    pub root: RootChoice,
    /// How calls are timed: `window`, `barrier` or `loop`.
    #[serde(serialize_with = "scheme_name", deserialize_with = "by_name")]
    pub scheme: Scheme,
    /// Bytes per rank (ignored for a barrier).
    pub sizes: SizeList,
    /// Valid calls wanted per point (the loop scheme: calls in the loop).
    pub reps: u64,
    /// Untimed calls first (their data checked).
    pub warmup: u64,
    /// Rounds of `reps` calls at most (the window scheme).
    pub max_rounds: u64,
    /// Skip the data check of the warm-up calls.
    pub no_check: bool,
    /// Open MPI's forced algorithm for `algo = ["mpi"]`.
    pub mpi_algo: Option<u32>,
    /// The count matrix of `alltoallv`, in units of the size: `uniform`,
    /// `random:SEED` or a file of `np` rows of `np` counts, CSV or JSON
    /// ([`crate::coll::counts`]).
    pub counts: String,
    /// Report every rank's local time of every valid call.
    pub per_rank: bool,
    /// Keep every valid call's run-time in the records (`samples.runtime_us`),
    /// for the statistics across launches (`ngauge run` sets it).
    pub samples: bool,
    /// LogGP parameters (`loggp --params-out`) to predict every point from.
    pub predict: Option<PathBuf>,
    /// Clock synchronization of the window scheme.
    pub sync: sync::Algorithm,
    /// Fit points per drift model (jk, hca).
    pub fitpoints: u32,
    /// Ping-pongs per fit point (jk, hca); absent: the algorithm's default.
    pub exchanges: Option<u32>,
    /// Offset estimator; absent: the algorithm's own.
    pub estimator: Option<Estimator>,
}

impl Default for CollCmdSpec {
    fn default() -> Self {
        CollCmdSpec {
            op: Collective::Bcast,
            algo: Vec::new(),
            segment: 0,
            root: RootChoice::Rank(0),
            scheme: Scheme::Window,
            sizes: SizeList(crate::sizes::parse_sizes("1-64K").expect("a valid spec")),
            reps: 100,
            warmup: 10,
            max_rounds: 5,
            no_check: false,
            mpi_algo: None,
            counts: "uniform".into(),
            per_rank: false,
            samples: false,
            predict: None,
            sync: sync::Algorithm::Hca,
            fitpoints: 1000,
            exchanges: None,
            estimator: None,
        }
    }
}

/// One implementation a spec names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollImpl {
    /// One of ngauge's schedules, over any transport.
    Ours(Algorithm),
    /// The MPI library's own collective (the MPI transport only).
    Mpi,
}

impl CollImpl {
    /// The `algo` name (`recursive-doubling`, `kchain:4`, `mpi`).
    pub fn name(&self) -> String {
        match self {
            CollImpl::Ours(a) => a.to_string(),
            CollImpl::Mpi => "mpi".into(),
        }
    }

    /// The schedule of `op` it runs, or stands for (MPI's own: our usual one, for
    /// its sizes and checks).
    pub fn algorithm(&self, op: Collective) -> Algorithm {
        match self {
            CollImpl::Ours(a) => *a,
            CollImpl::Mpi => default_algorithm(op),
        }
    }
}

/// The usual algorithm of each operation: the trees Open MPI's tuned component
/// picks for small messages, and the only barrier and all-to-all we have.
pub fn default_algorithm(op: Collective) -> Algorithm {
    match op {
        Collective::Bcast => Algorithm::BcastBinomial,
        Collective::Gather => Algorithm::GatherBinomial,
        Collective::Allreduce => Algorithm::AllreduceRecursiveDoubling,
        Collective::Barrier => Algorithm::BarrierDissemination,
        Collective::Alltoall => Algorithm::AlltoallPairwise,
        Collective::Reduce => Algorithm::ReduceBinomial,
        Collective::Allgather => Algorithm::AllgatherRecursiveDoubling,
        Collective::ReduceScatter => Algorithm::ReduceScatterRecursiveHalving,
        Collective::Scatter => Algorithm::ScatterBinomial,
        Collective::Alltoallv => Algorithm::AlltoallvPairwise {
            counts: Counts::Uniform,
        },
    }
}

/// The clock synchronization of the window starts, from a spec's four sync fields.
fn sync_options(
    sync: sync::Algorithm,
    fitpoints: u32,
    exchanges: Option<u32>,
    estimator: Option<Estimator>,
) -> SyncOptions {
    let spec = super::SyncSpec {
        sync,
        fitpoints,
        exchanges,
        estimator,
        ..super::SyncSpec::default()
    };
    spec.options()
}

/// Checks the counts of calls and the segment every collective spec has, and the
/// clock synchronization of the window starts (`None`: no window scheme).
fn check_timing(
    (reps, warmup, max_rounds): (u64, u64, u64),
    segment: usize,
    sync: Option<SyncOptions>,
) -> Result<(), SpecError> {
    SpecError::range("reps", reps, 1, 1_000_000)?;
    SpecError::range("warmup", warmup, 1, 1_000_000)?;
    SpecError::range("max_rounds", max_rounds, 1, 1000)?;
    if segment as u64 > MAX_SEGMENT_BYTES {
        let why = format!("{segment} bytes is larger than 1G");
        return Err(SpecError::new("segment", why));
    }
    match sync.map(|s| s.validate()) {
        Some(Err(e)) => Err(SpecError::new("sync", e.to_string())),
        _ => Ok(()),
    }
}

/// Refuses a root that is no rank of a job of `np` ranks (when known).
fn check_root(root: usize, np: Option<usize>) -> Result<(), SpecError> {
    match np {
        Some(np) if root >= np => Err(SpecError::new(
            "root",
            format!("{root} is not a rank of a job of {np} ranks"),
        )),
        _ => Ok(()),
    }
}

/// Refuses sizes MPI's own reductions cannot run: they sum 8-byte words
/// (`MPI_INT64_T`, [`crate::coll::native`]); our schedules take any size.
fn check_mpi_sizes(op: Collective, sizes: &[u64]) -> Result<(), SpecError> {
    match sizes.iter().find(|s| *s % 8 != 0) {
        Some(s) if op.is_reduction() => Err(SpecError::new(
            "sizes",
            format!("MPI's {op} sums 8-byte words, and {s} bytes is not a multiple of 8"),
        )),
        _ => Ok(()),
    }
}

impl CollCmdSpec {
    /// The clock synchronization's options.
    pub fn sync_options(&self) -> SyncOptions {
        sync_options(self.sync, self.fitpoints, self.exchanges, self.estimator)
    }

    /// The sizes measured: the spec's, or one of 0 bytes for a barrier.
    pub fn sizes_bytes(&self) -> Vec<usize> {
        if self.op == Collective::Barrier {
            return vec![0];
        }
        self.sizes.0.iter().map(|&s| s as usize).collect()
    }

    /// The parameter file of `predict`, read.
    ///
    /// # Errors
    /// A file that cannot be read or is no parameter file (field `predict`).
    pub fn load_predict(&self) -> Result<Option<crate::sim::params::Loaded>, SpecError> {
        let Some(path) = &self.predict else {
            return Ok(None);
        };
        let bad = |m: String| SpecError::new("predict", m);
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
        crate::sim::params::parse(&text)
            .map(Some)
            .map_err(|e| bad(format!("{}: {e}", path.display())))
    }

    /// The count matrix `counts` names (a file is read once per process).
    ///
    /// # Errors
    /// A bad seed, an unreadable file or one that is no square matrix (field
    /// `counts`).
    pub fn counts(&self) -> Result<Counts, SpecError> {
        Counts::parse(&self.counts).map_err(|e| SpecError::new("counts", e))
    }

    /// The implementations `algo` names, in order, without repeats (empty `algo`:
    /// the usual one of `op`).
    ///
    /// # Errors
    /// A name that is no algorithm of `op`.
    pub fn implementations(&self) -> Result<Vec<CollImpl>, SpecError> {
        let names: Vec<&str> = if self.algo.is_empty() {
            vec![default_algorithm(self.op).base_name()]
        } else {
            self.algo.iter().map(|s| s.trim()).collect()
        };
        let mut out: Vec<CollImpl> = Vec::new();
        for name in names {
            let these = match name {
                "mpi" => vec![CollImpl::Mpi],
                "all" => self
                    .op
                    .algorithms()
                    .into_iter()
                    .map(CollImpl::Ours)
                    .collect(),
                _ => vec![Algorithm::parse(self.op, name)
                    .map(CollImpl::Ours)
                    .map_err(|e| SpecError::new("algo", e.to_string()))?],
            };
            for imp in these {
                if !out.contains(&imp) {
                    out.push(imp);
                }
            }
        }
        Ok(out)
    }

    /// Rejects what no run of the spec can do, whatever the job: unknown
    /// algorithms, counts out of range, a segment over 1 GiB, empty messages,
    /// `mpi_algo` without `mpi`, sync options that cannot run.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        let window = self.scheme == Scheme::Window;
        let counts = (self.reps, self.warmup, self.max_rounds);
        check_timing(counts, self.segment, window.then(|| self.sync_options()))?;
        if let Some(n) = self.mpi_algo {
            SpecError::range("mpi_algo", n, 0, 64)?;
        }
        let imps = self.implementations()?;
        if self.op != Collective::Alltoallv && self.counts != "uniform" {
            let why = "only alltoallv takes a count matrix; add --op alltoallv";
            return Err(SpecError::new("counts", why));
        }
        self.counts()?;
        if self.op != Collective::Barrier && self.sizes.0.contains(&0) {
            return Err(SpecError::new(
                "sizes",
                format!("{} carries no data at 0 bytes per rank", self.op),
            ));
        }
        if self.mpi_algo.is_some() && !imps.contains(&CollImpl::Mpi) {
            return Err(SpecError::new(
                "mpi_algo",
                "forces Open MPI's algorithm of the `mpi` implementation; add mpi to algo",
            ));
        }
        Ok(())
    }

    /// Rejects what a job of `np` ranks (when known) over `transports` cannot run:
    /// a root that is no rank, MPI's own collective without the MPI transport,
    /// MPI's allreduce of sizes that are not 8-byte words.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate_for_job(
        &self,
        transports: &[TransportName],
        np: Option<usize>,
    ) -> Result<(), SpecError> {
        if let RootChoice::Rank(r) = self.root {
            check_root(r, np)?;
        }
        if let Some(np) = np {
            (self.counts()?.check_np(np)).map_err(|e| SpecError::new("counts", e))?;
        }
        let imps = self.implementations()?;
        if imps.contains(&CollImpl::Mpi) {
            if !transports.contains(&TransportName::Mpi) {
                return Err(SpecError::new("algo", MPI_ONLY));
            }
            check_mpi_sizes(self.op, &self.sizes.0)?;
        }
        Ok(())
    }
}

/// Why `mpi` needs the MPI transport.
const MPI_ONLY: &str = "`mpi` (MPI's own collectives) runs on the MPI transport only; add \
                        -t mpi (under mpirun, with a build that has the `mpi` feature)";

/// One collective timed in windows on synchronized clocks, over one transport: what
/// `late` and `nbc` measure around (their `coll` table; the flags of `ngauge late`
/// and `ngauge nbc` that are not the command's own).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WindowColl {
    /// The collective: `bcast`, `gather`, `allreduce`, `barrier`, `alltoall`,
    /// `reduce`, `allgather`, `reduce_scatter`, `scatter`.
    #[serde(serialize_with = "op_name", deserialize_with = "by_name")]
    pub op: Collective,
    /// Its implementation: one of ngauge's schedules (`binomial`, `kchain:4`), or
    /// `mpi` (MPI's own, the MPI transport only); absent: `mpi` on the MPI
    /// transport, else the usual one of `op`.
    pub algo: Option<String>,
    /// Segment size of the pipelined broadcasts, bytes (0: one segment).
    #[serde(deserialize_with = "segment")]
    pub segment: usize,
    /// The root of bcast and gather.
    pub root: usize,
    /// Valid calls wanted per measurement point.
    pub reps: u64,
    /// Untimed calls first (their data checked, the slowest sizing the window).
    pub warmup: u64,
    /// Rounds of `reps` calls at most.
    pub max_rounds: u64,
    /// Skip the data check of the warm-up calls.
    pub no_check: bool,
    /// Clock synchronization of the window starts.
    pub sync: sync::Algorithm,
    /// Fit points per drift model (jk, hca).
    pub fitpoints: u32,
    /// Ping-pongs per fit point (jk, hca); absent: the algorithm's default.
    pub exchanges: Option<u32>,
    /// Offset estimator; absent: the algorithm's own.
    pub estimator: Option<Estimator>,
}

impl Default for WindowColl {
    fn default() -> Self {
        let c = CollCmdSpec::default();
        WindowColl {
            op: Collective::Allreduce,
            algo: None,
            segment: 0,
            root: 0,
            reps: c.reps,
            warmup: c.warmup,
            max_rounds: c.max_rounds,
            no_check: false,
            sync: c.sync,
            fitpoints: c.fitpoints,
            exchanges: None,
            estimator: None,
        }
    }
}

impl WindowColl {
    /// Its fields, as a suite's `coll` table names them.
    pub const FIELDS: &'static str =
        "op algo segment root reps warmup max_rounds no_check sync fitpoints exchanges estimator";

    /// The clock synchronization's options.
    pub fn sync_options(&self) -> SyncOptions {
        sync_options(self.sync, self.fitpoints, self.exchanges, self.estimator)
    }

    /// The implementation `algo` names on `transport`.
    ///
    /// # Errors
    /// An unknown algorithm, or `mpi` off the MPI transport (field `algo`).
    pub fn implementation(&self, transport: TransportName) -> Result<CollImpl, SpecError> {
        let mpi = transport == TransportName::Mpi;
        match self.algo.as_deref().map(str::trim) {
            None | Some("mpi") if mpi => Ok(CollImpl::Mpi),
            None => Ok(CollImpl::Ours(default_algorithm(self.op))),
            Some("mpi") => Err(SpecError::new("algo", MPI_ONLY)),
            Some(name) => Algorithm::parse(self.op, name)
                .map(CollImpl::Ours)
                .map_err(|e| SpecError::new("algo", e.to_string())),
        }
    }

    /// Rejects counts out of range, a segment over 1 GiB, an algorithm `op` does
    /// not have, sync options that cannot run.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        let counts = (self.reps, self.warmup, self.max_rounds);
        check_timing(counts, self.segment, Some(self.sync_options()))?;
        self.implementation(TransportName::Mpi).map(drop)
    }

    /// Rejects what a job over `transports` (of `np` ranks, when known) cannot run
    /// at `sizes`: several transports, `mpi` off the MPI transport, MPI's
    /// allreduce of sizes that are not 8-byte words, a root that is no rank.
    /// Returns the transport and the implementation.
    ///
    /// # Errors
    /// The first field that is wrong (`transport` for the job's transports).
    pub fn validate_for_job(
        &self,
        transports: &[TransportName],
        np: Option<usize>,
        sizes: &[u64],
    ) -> Result<(TransportName, CollImpl), SpecError> {
        let [transport] = transports else {
            return Err(SpecError::new(
                "transport",
                "the window timing measures one transport at a time; give one",
            ));
        };
        let imp = self.implementation(*transport)?;
        if imp == CollImpl::Mpi {
            check_mpi_sizes(self.op, sizes)?;
        }
        check_root(self.root, np).map(|_| (*transport, imp))
    }
}

fn op_name<S: Serializer>(v: &Collective, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

fn scheme_name<S: Serializer>(v: &Scheme, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

/// A value written as its `Display` text.
pub(super) fn display<T: fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// A value read from its name (`FromStr`).
pub(super) fn by_name<'de, T, D>(d: D) -> Result<T, D::Error>
where
    T: std::str::FromStr,
    T::Err: fmt::Display,
    D: Deserializer<'de>,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(de::Error::custom)
}

/// A segment size: a number of bytes, or a size with a K/M/G suffix.
fn segment<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = usize;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a segment size in bytes, such as 8192 or \"8K\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
            usize::try_from(v).map_err(E::custom)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<usize, E> {
            usize::try_from(v).map_err(|_| E::custom(format!("{v} is not a size in bytes")))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<usize, E> {
            if s.trim() == "0" {
                return Ok(0);
            }
            crate::sizes::parse_size(s)
                .map_err(E::custom)
                .and_then(|b| usize::try_from(b).map_err(E::custom))
        }
    }
    d.deserialize_any(V)
}

/// A root: a rank, or `"rotate"`.
fn root<'de, D: Deserializer<'de>>(d: D) -> Result<RootChoice, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = RootChoice;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a rank or \"rotate\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<RootChoice, E> {
            usize::try_from(v).map(RootChoice::Rank).map_err(E::custom)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<RootChoice, E> {
            usize::try_from(v)
                .map(RootChoice::Rank)
                .map_err(|_| E::custom(format!("{v} is not a rank")))
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<RootChoice, E> {
            match s {
                "rotate" => Ok(RootChoice::Rotate(Rotate::Rotate)),
                other => Err(E::custom(format!(
                    "{other:?} is neither a rank nor \"rotate\""
                ))),
            }
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_commands_and_every_flag_has_a_field() {
        let s: CollCmdSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(s, CollCmdSpec::default());
        assert_eq!(
            (s.op, s.scheme, s.reps, s.warmup),
            (Collective::Bcast, Scheme::Window, 100, 10)
        );
        assert_eq!(s.sizes.0.first().copied(), Some(1));
        assert_eq!(s.sizes.0.last().copied(), Some(64 * 1024));
        let s: CollCmdSpec = serde_json::from_str(
            r#"{"op": "bcast", "algo": ["binomial", "chain"], "segment": "8K",
                "root": "rotate", "scheme": "loop", "sizes": "1,1K", "reps": 7,
                "warmup": 2, "max_rounds": 3, "no_check": true, "per_rank": true,
                "sync": "jk", "fitpoints": 50, "exchanges": 5, "estimator": "minrtt"}"#,
        )
        .unwrap();
        assert_eq!(s.segment, 8192);
        assert_eq!(s.root, RootChoice::Rotate(Rotate::Rotate));
        assert_eq!((s.scheme, s.reps, s.max_rounds), (Scheme::Loop, 7, 3));
        assert_eq!(s.sizes.0, [1, 1024]);
        let o = s.sync_options();
        assert_eq!(
            (o.algorithm, o.fitpoints, o.exchanges),
            (sync::Algorithm::Jk, 50, 5)
        );
        assert_eq!(
            s.implementations().unwrap(),
            [
                CollImpl::Ours(Algorithm::BcastBinomial),
                CollImpl::Ours(Algorithm::BcastChain)
            ]
        );
        assert!(s.validate().is_ok());
        // A spec survives its JSON (runs/EXP/experiment.json).
        let back: CollCmdSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let r: CollCmdSpec = serde_json::from_str(r#"{"root": 3}"#).unwrap();
        assert_eq!(r.root, RootChoice::Rank(3));
    }

    #[test]
    fn a_window_colls_fields_are_its_keys() {
        let mut w = WindowColl {
            algo: Some("ring".into()),
            exchanges: Some(3),
            estimator: Some(Estimator::MinRtt),
            ..WindowColl::default()
        };
        let keys: Vec<String> = match serde_json::to_value(&w).unwrap() {
            serde_json::Value::Object(m) => m.keys().cloned().collect(),
            v => panic!("{v}"),
        };
        assert_eq!(keys, WindowColl::FIELDS.split(' ').collect::<Vec<_>>());
        assert!(w.validate().is_ok());
        w.algo = Some("mpi".into());
        let tcp = [TransportName::Tcp];
        assert_eq!(
            w.validate_for_job(&tcp, None, &[8]).unwrap_err().field,
            "algo"
        );
        let mpi = [TransportName::Mpi];
        assert_eq!(
            w.validate_for_job(&mpi, None, &[4]).unwrap_err().field,
            "sizes"
        );
        w.algo = None;
        assert_eq!(
            w.validate_for_job(&mpi, None, &[8]).unwrap().1,
            CollImpl::Mpi
        );
        w.root = 2;
        assert_eq!(
            w.validate_for_job(&tcp, Some(2), &[8]).unwrap_err().field,
            "root"
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        for bad in [
            r#"{"op": "scatterv"}"#,
            r#"{"scheme": "fast"}"#,
            r#"{"root": "x"}"#,
            r#"{"root": -1}"#,
            r#"{"segment": "3x"}"#,
            r#"{"algos": ["binomial"]}"#,
        ] {
            assert!(serde_json::from_str::<CollCmdSpec>(bad).is_err(), "{bad}");
        }
        let field = |json: &str| {
            serde_json::from_str::<CollCmdSpec>(json)
                .unwrap()
                .validate()
                .unwrap_err()
                .field
        };
        assert_eq!(field(r#"{"algo": ["ring"]}"#), "algo");
        assert_eq!(
            field(r#"{"op": "allreduce", "algo": ["ring", "pigeon"]}"#),
            "algo"
        );
        assert_eq!(field(r#"{"reps": 0}"#), "reps");
        assert_eq!(field(r#"{"max_rounds": 1001}"#), "max_rounds");
        assert_eq!(field(r#"{"sizes": "0,1"}"#), "sizes");
        assert_eq!(field(r#"{"mpi_algo": 3}"#), "mpi_algo");
        assert_eq!(field(r#"{"segment": "2G"}"#), "segment");
        assert_eq!(field(r#"{"fitpoints": 1}"#), "sync");
        // A barrier has no sizes to check; the loop scheme no sync.
        let ok: CollCmdSpec = serde_json::from_str(
            r#"{"op": "barrier", "sizes": "0,1", "scheme": "loop", "fitpoints": 1}"#,
        )
        .unwrap();
        assert!(ok.validate().is_ok());

        let job = |json: &str, t: &[TransportName], np| {
            serde_json::from_str::<CollCmdSpec>(json)
                .unwrap()
                .validate_for_job(t, Some(np))
                .map_err(|e| e.field)
        };
        let tcp = [TransportName::Tcp];
        assert_eq!(job(r#"{"root": 2}"#, &tcp, 2), Err("root"));
        assert_eq!(job(r#"{"root": 1}"#, &tcp, 2), Ok(()));
        assert_eq!(job(r#"{"algo": ["mpi"]}"#, &tcp, 2), Err("algo"));
        let mpi = [TransportName::Mpi];
        assert_eq!(
            job(
                r#"{"op": "allreduce", "algo": ["mpi"], "sizes": "4,8"}"#,
                &mpi,
                2
            ),
            Err("sizes")
        );
        assert_eq!(
            job(
                r#"{"op": "allreduce", "algo": ["mpi"], "sizes": "8,16"}"#,
                &mpi,
                2
            ),
            Ok(())
        );
    }

    #[test]
    fn issue_39_counts_are_alltoallvs_and_fit_the_job() {
        let dir = std::env::temp_dir().join(format!("ngauge-counts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("m.csv");
        std::fs::write(&file, "0,1\n2,0\n").unwrap();
        let spec = |counts: &str| CollCmdSpec {
            op: Collective::Alltoallv,
            counts: counts.into(),
            ..CollCmdSpec::default()
        };
        let path = file.display().to_string();
        assert!(spec(&path).validate().is_ok());
        let tcp = [TransportName::Tcp];
        assert!(spec(&path).validate_for_job(&tcp, Some(2)).is_ok());
        let e = spec(&path).validate_for_job(&tcp, Some(3)).unwrap_err();
        assert_eq!(e.field, "counts");
        assert!(
            e.to_string().contains("is 2 x 2, and the job has 3 ranks"),
            "{e}"
        );
        assert_eq!(spec("random:x").validate().unwrap_err().field, "counts");
        assert_eq!(spec("no/such/file").validate().unwrap_err().field, "counts");
        let other = CollCmdSpec {
            counts: "random:1".into(),
            ..CollCmdSpec::default()
        };
        assert_eq!(other.validate().unwrap_err().field, "counts");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
