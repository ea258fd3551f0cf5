//! The traditional analytic models of collective algorithms under Hockney's
//! point-to-point model `T(m) = alpha + beta m`: the formulas Nuriyev's thesis
//! collects in its tables 3.2 to 3.7 (`nuriyev-model-based-collective-selection.txt`,
//! sec. 3.2) and uses as the baseline that model-based selection must beat.
//!
//! These formulas describe an algorithm's high-level shape (so many rounds of so
//! many bytes), not Open MPI's code; the thesis's point (sec. 3.3) is that they are
//! not accurate enough to select algorithms with. `ngauge coll --predict` prints
//! them beside the LogGP simulation of the real schedule and reports which of the
//! two selects better against measurement.
//!
//! `alpha` and `beta` are taken from the same LogGP parameters the simulator uses:
//! one message of `m` bytes costs `o_s + L + (m-1)G + o_r` in LogGP, so
//! `alpha = o_s + L + o_r` and `beta = G` of the range the transferred piece's size
//! falls in ([`Hockney::of`]). The thesis fits them per algorithm by a robust
//! regression instead (sec. 5.2.2): [`terms`] gives each formula's coefficients of
//! `alpha` and `beta`, and [`fit`] solves the system of an algorithm's measured
//! sizes with Huber's regressor.

use crate::coll::{Algorithm, CollSpec};
use crate::model::loggp::Hockney;
use crate::sim::net::Network;

impl Hockney {
    /// The parameters of a message of `bytes` on `net`: `alpha = o_s -
    /// send_overlap + L + o_r - recv_overlap` (what the receiver waits for), `beta =
    /// G + 2O` of its protocol range.
    pub fn of(net: &Network, bytes: u64) -> Hockney {
        let p = net.at(bytes.max(1));
        let waited = p.os_ps - p.send_overlap_ps + p.l_ps + p.or_ps - p.recv_overlap_ps;
        Hockney {
            alpha_us: waited as f64 * 1e-6,
            beta_us_per_byte: (p.big_g_fs + 2 * p.big_o_fs) as f64 * 1e-9,
        }
    }

    /// `alpha + beta m`: one message of `m` bytes.
    pub fn p2p_us(&self, m: f64) -> f64 {
        self.alpha_us + self.beta_us_per_byte * m
    }
}

/// `ceil(log2 x)` for `x >= 1`.
fn ceil_log2(x: usize) -> f64 {
    f64::from(usize::BITS - x.max(1).saturating_sub(1).leading_zeros())
}

/// `floor(log2 x)` for `x >= 1`.
fn floor_log2(x: usize) -> f64 {
    f64::from(usize::BITS - 1 - x.max(1).leading_zeros())
}

/// Hockney's prediction of one call of `spec` on `net`, microseconds (0 for one
/// rank or an empty message). The formula of each algorithm, with `P` ranks, `m`
/// bytes, `n_s` segments of `m_s` bytes:
///
/// | algorithm | formula (thesis table) |
/// |---|---|
/// | bcast linear | `(P-1)(a + b m)` (3.2) |
/// | bcast chain | `(P + n_s - 2)(a + b m_s)` (3.2; the table writes `m`, the pipeline moves `m_s`) |
/// | bcast k-chain | not in the thesis; ours: `(n_s K + ceil((P-1)/K) - 1)(a + b m_s)`, the root sending each segment to its `K` chains one after the other, the last segment then going down the longest chain (`K = 1` gives the chain's) |
/// | bcast binary | `2 (ceil(log2(P+1)) + n_s - 2)(a + b m_s)` (3.2) |
/// | bcast split-binary | `2 (floor(log2 P) + n_s/2 - 1)(a + b m_s) + a + b m/2` (3.2) |
/// | bcast binomial | `ceil(log2 P) n_s (a + b m_s)` (3.2) |
/// | gather linear | `(P-1)(a + b m)` (3.3, without synchronisation) |
/// | gather binomial | `log2 P a + P b m` (3.3) |
/// | allreduce recursive doubling | `log2 P (a + b m)`, `(floor(log2 P) + 2)(a + b m)` when `P` is not a power of two (3.7, no reduction cost) |
/// | allreduce ring | `2 (P-1)(a + b ceil(m/P))` (3.7, no reduction cost) |
/// | barrier dissemination | `ceil(log2 P) a` (3.6, Bruck) |
/// | alltoall pairwise | `(P-1)(a + b m)` (3.5) |
/// | alltoallv pairwise, linear | ours: the all-to-all's of the mean block, `m` times the mean count of a pair of distinct ranks |
/// | reduce binomial | `ceil(log2 P)(a + b m)` (3.4, no reduction cost) |
/// | reduce in-order binary | ours: `2 (ceil(log2(P+1)) - 1)(a + b m)`, two children per level served one after the other |
/// | scatter linear, binomial | as the gather's |
/// | allgather ring | `(P-1)(a + b m)` |
/// | allgather recursive doubling, Bruck | `ceil(log2 P) a + (P-1) b m` |
/// | reduce-scatter ring | `(P-1)(a + b m)` (no reduction cost) |
/// | reduce-scatter recursive halving | `log2 P a + (P-1) b m`; ours when `P` is not a power of two: `(floor(log2 P) + 2) a + 2P b m` |
///
/// `a`, `b` are [`Hockney::of`] the size of the pieces each formula moves.
pub fn predict_us(spec: &CollSpec, net: &Network) -> f64 {
    predict_with(spec, &|bytes| Hockney::of(net, bytes))
}

/// The formula's terms of `spec`: `[number of alpha terms, bytes times beta]`, so
/// that one `alpha`, `beta` for every message size predicts
/// `terms[0] alpha + terms[1] beta`. These are the unknowns' coefficients of the
/// linear system Nuriyev's thesis solves, per algorithm, for its
/// algorithm-specific `alpha` and `beta` (sec. 5.2.2), see [`fit`].
pub fn terms(spec: &CollSpec) -> [f64; 2] {
    let unit = |alpha_us, beta_us_per_byte| {
        predict_with(spec, &|_| Hockney {
            alpha_us,
            beta_us_per_byte,
        })
    };
    [unit(1.0, 0.0), unit(0.0, 1.0)]
}

/// Algorithm-specific Hockney parameters fitted to measured times.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FittedHockney {
    /// The fitted latency, microseconds.
    pub alpha_us: f64,
    /// The fitted reciprocal bandwidth, microseconds per byte.
    pub beta_us_per_byte: f64,
}

impl FittedHockney {
    /// The prediction of a call whose formula has `terms` ([`terms`]), us.
    pub fn predict_us(&self, terms: [f64; 2]) -> f64 {
        terms[0] * self.alpha_us + terms[1] * self.beta_us_per_byte
    }
}

/// Nuriyev's algorithm-specific Hockney parameters (sec. 5.2.2): the measured
/// times `(terms, us)` of one algorithm at several sizes form a linear system in
/// `alpha` and `beta`, solved by Huber's robust regression
/// ([`crate::stats::huber`]). `None` when the system does not determine both (fewer
/// than two sizes, no bytes moved, terms proportional).
pub fn fit(points: &[([f64; 2], f64)]) -> Option<FittedHockney> {
    let f = crate::stats::huber::fit(points)?;
    Some(FittedHockney {
        alpha_us: f.coef[0],
        beta_us_per_byte: f.coef[1],
    })
}

/// [`predict_us`] with the parameters of a message of `bytes` from `params`.
fn predict_with(spec: &CollSpec, params: &dyn Fn(u64) -> Hockney) -> f64 {
    let p = spec.np;
    let m = spec.size_bytes;
    if p <= 1 || (m == 0 && spec.algorithm != Algorithm::BarrierDissemination) {
        return 0.0;
    }
    let pf = p as f64;
    let mf = m as f64;
    let seg = if spec.segment_bytes == 0 || spec.segment_bytes >= m {
        m
    } else {
        spec.segment_bytes
    };
    let n_s = m.div_ceil(seg.max(1)) as f64;
    let whole = params(m as u64);
    let piece = params(seg as u64);
    let t_seg = piece.p2p_us(seg as f64);
    match spec.algorithm {
        Algorithm::BcastLinear => (pf - 1.0) * whole.p2p_us(mf),
        Algorithm::BcastChain => (pf + n_s - 2.0) * t_seg,
        Algorithm::BcastKChain { chains } => {
            let k = chains.clamp(1, p - 1);
            let depth = (p - 1).div_ceil(k) as f64;
            (n_s * k as f64 + depth - 1.0) * t_seg
        }
        Algorithm::BcastBinary => 2.0 * (ceil_log2(p + 1) + n_s - 2.0) * t_seg,
        Algorithm::BcastSplitBinary => {
            let half = params(m.div_ceil(2) as u64);
            2.0 * (floor_log2(p) + n_s / 2.0 - 1.0) * t_seg + half.p2p_us(mf / 2.0)
        }
        Algorithm::BcastBinomial => ceil_log2(p) * n_s * t_seg,
        Algorithm::GatherLinear | Algorithm::ScatterLinear => (pf - 1.0) * whole.p2p_us(mf),
        Algorithm::GatherBinomial | Algorithm::ScatterBinomial => {
            pf.log2() * whole.alpha_us + pf * whole.beta_us_per_byte * mf
        }
        Algorithm::ReduceBinomial => ceil_log2(p) * whole.p2p_us(mf),
        Algorithm::ReduceInOrderBinary => 2.0 * (ceil_log2(p + 1) - 1.0) * whole.p2p_us(mf),
        Algorithm::AllgatherRing | Algorithm::ReduceScatterRing => (pf - 1.0) * whole.p2p_us(mf),
        Algorithm::AllgatherRecursiveDoubling | Algorithm::AllgatherBruck => {
            ceil_log2(p) * whole.alpha_us + (pf - 1.0) * whole.beta_us_per_byte * mf
        }
        Algorithm::ReduceScatterRecursiveHalving if p.is_power_of_two() => {
            pf.log2() * whole.alpha_us + (pf - 1.0) * whole.beta_us_per_byte * mf
        }
        Algorithm::ReduceScatterRecursiveHalving => {
            (floor_log2(p) + 2.0) * whole.alpha_us + 2.0 * pf * whole.beta_us_per_byte * mf
        }
        Algorithm::AllreduceRecursiveDoubling => {
            let rounds = if p.is_power_of_two() {
                pf.log2()
            } else {
                floor_log2(p) + 2.0
            };
            rounds * whole.p2p_us(mf)
        }
        Algorithm::AllreduceRing => {
            let block = m.div_ceil(p);
            2.0 * (pf - 1.0) * params(block as u64).p2p_us(block as f64)
        }
        Algorithm::BarrierDissemination => ceil_log2(p) * params(1).alpha_us,
        Algorithm::AlltoallPairwise => (pf - 1.0) * whole.p2p_us(mf),
        Algorithm::AlltoallvPairwise { counts } | Algorithm::AlltoallvLinear { counts } => {
            let mean = counts.mean_off_diagonal(p) * mf;
            (pf - 1.0) * params(mean.round() as u64).p2p_us(mean)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::counts::CountMatrix;
    use crate::coll::{Collective, Counts};
    use crate::sim::net::LogGp;
    use crate::sim::tests_engine::spec;

    /// a = o_s + L + o_r = 1 + 5 + 1 = 7 us, b = 0.001 us/B.
    fn net() -> Network {
        Network::new(vec![(1, LogGp::from_us(5.0, 1.0, 1.0, 2.0, 0.001, false))]).unwrap()
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn terms_reproduce_the_formula_and_the_fit_recovers_its_parameters() {
        let n = net();
        let algos = [
            Algorithm::BcastLinear,
            Algorithm::BcastChain,
            Algorithm::BcastBinomial,
            Algorithm::BcastSplitBinary,
            Algorithm::GatherBinomial,
            Algorithm::AllreduceRing,
        ];
        for algo in algos {
            // Sizes below the segment make alpha and beta separable for the
            // segmented algorithms (above it every call moves 1000 B per alpha).
            let points: Vec<([f64; 2], f64)> = [100, 500, 4000, 64000]
                .iter()
                .map(|&m| {
                    let s = spec(algo, 7, m, 1000);
                    let t = terms(&s);
                    close(t[0] * 7.0 + t[1] * 0.001, predict_us(&s, &n));
                    (t, predict_us(&s, &n))
                })
                .collect();
            let f = fit(&points).unwrap_or_else(|| panic!("{algo:?}"));
            assert!((f.alpha_us - 7.0).abs() < 1e-6, "{algo:?} {f:?}");
            assert!((f.beta_us_per_byte - 0.001).abs() < 1e-9, "{algo:?} {f:?}");
        }
        // A barrier moves no bytes: beta is not determined.
        let barrier: Vec<_> = [2, 4, 8]
            .iter()
            .map(|&p| {
                let s = spec(Algorithm::BarrierDissemination, p, 0, 0);
                (terms(&s), predict_us(&s, &n))
            })
            .collect();
        assert_eq!(fit(&barrier), None);
    }

    #[test]
    fn parameters_are_the_loggp_message_cost() {
        let h = Hockney::of(&net(), 1000);
        close(h.alpha_us, 7.0);
        close(h.beta_us_per_byte, 0.001);
        close(h.p2p_us(1000.0), 8.0);
    }

    #[test]
    fn broadcast_formulas_of_table_3_2() {
        let n = net();
        // 8 ranks, 4000 B in 4 segments of 1000 B: a + b m_s = 8 us.
        close(
            predict_us(&spec(Algorithm::BcastLinear, 8, 4000, 1000), &n),
            7.0 * 11.0,
        );
        close(
            predict_us(&spec(Algorithm::BcastChain, 8, 4000, 1000), &n),
            10.0 * 8.0,
        );
        close(
            predict_us(&spec(Algorithm::BcastBinomial, 8, 4000, 1000), &n),
            3.0 * 4.0 * 8.0,
        );
        // ceil(log2 9) = 4: 2 (4 + 4 - 2) 8.
        close(
            predict_us(&spec(Algorithm::BcastBinary, 8, 4000, 1000), &n),
            96.0,
        );
        // 2 (3 + 2 - 1) 8 + 7 + 2.
        close(
            predict_us(&spec(Algorithm::BcastSplitBinary, 8, 4000, 1000), &n),
            73.0,
        );
        // 4 chains over 7 ranks, the longest 2 deep: (4 * 4 + 2 - 1) 8.
        let kchain = Algorithm::BcastKChain { chains: 4 };
        close(predict_us(&spec(kchain, 8, 4000, 1000), &n), 136.0);
        // One chain is the chain.
        let one = Algorithm::BcastKChain { chains: 1 };
        close(
            predict_us(&spec(one, 8, 4000, 1000), &n),
            predict_us(&spec(Algorithm::BcastChain, 8, 4000, 1000), &n),
        );
        // No segment: one segment of the whole message.
        close(
            predict_us(&spec(Algorithm::BcastBinomial, 8, 4000, 0), &n),
            3.0 * 11.0,
        );
    }

    #[test]
    fn other_operations_and_degenerate_jobs() {
        let n = net();
        close(
            predict_us(&spec(Algorithm::BarrierDissemination, 5, 0, 0), &n),
            21.0,
        );
        close(
            predict_us(&spec(Algorithm::AlltoallPairwise, 4, 1000, 0), &n),
            24.0,
        );
        close(
            predict_us(&spec(Algorithm::AllreduceRecursiveDoubling, 4, 1000, 0), &n),
            16.0,
        );
        close(
            predict_us(&spec(Algorithm::AllreduceRecursiveDoubling, 6, 1000, 0), &n),
            32.0,
        );
        close(
            predict_us(&spec(Algorithm::AllreduceRing, 4, 1000, 0), &n),
            6.0 * 7.25,
        );
        close(
            predict_us(&spec(Algorithm::GatherLinear, 3, 1000, 0), &n),
            16.0,
        );
        close(
            predict_us(&spec(Algorithm::GatherBinomial, 4, 1000, 0), &n),
            14.0 + 4.0,
        );
        close(
            predict_us(&spec(Algorithm::BcastBinomial, 1, 1000, 0), &n),
            0.0,
        );
    }

    #[test]
    fn alltoallv_is_the_alltoall_of_the_mean_block() {
        let n = net();
        let alltoall = predict_us(&spec(Algorithm::AlltoallPairwise, 4, 1000, 0), &n);
        for counts in [Counts::Uniform, Counts::Random { seed: 3 }] {
            for a in Collective::Alltoallv.algorithms() {
                let got = predict_us(&spec(a.with_counts(counts), 4, 1000, 0), &n);
                close(got, alltoall);
            }
        }
        let m = CountMatrix {
            path: "m".into(),
            np: 2,
            counts: vec![9, 3, 1, 9],
        };
        let two = Counts::Given(Box::leak(Box::new(m)));
        let a = Algorithm::AlltoallvLinear { counts: two };
        close(predict_us(&spec(a, 2, 1000, 0), &n), 7.0 + 2.0);
    }
}
