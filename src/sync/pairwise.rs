//! Pairwise clock offset: ping-pongs of timer stamps between an *initiator* (the rank
//! whose clock is being modelled) and a *responder* (its reference).
//!
//! One exchange: the initiator reads `sent`, sends a ping, the responder answers with
//! its own reading `peer`, the initiator reads `received`. The responder's reading lies
//! somewhere in `[sent, received]` of the initiator's time, so the initiator's offset
//! `local - peer` lies in `[sent - peer, received - peer]`, and the midpoint estimate
//! `sent + rtt/2 - peer` errs by at most `rtt/2` (by the delay asymmetry, in practice).
//! Three estimators build on it:
//!
//! - [`min_rtt`]: Hoefler et al. (accurately measuring collectives, sec. 3.1; Netgauge's
//!   `Compute_Offset`, Hunold & Carpen-Amarie Algorithm 12): keep the exchange with the
//!   smallest round-trip time and stop after `N` consecutive exchanges that do not beat
//!   it; `N = 100` is the paper's choice (error below 10% of the minimal RTT, about 180
//!   exchanges).
//! - [`bracket_or_min_rtt`]: SKaMPI's estimator (Hunold & Carpen-Amarie Algorithm 7,
//!   `SKaMPI_PingPong`): intersect the intervals of 100 exchanges into
//!   `[td_min, td_max]` and take its middle. When the bounds cross, it falls back to
//!   min-RTT in the same measurement and the synchronizations count it, where SKaMPI
//!   would take the middle of an empty interval.
//! - [`fit_point`]/[`learn_model`]: Jones & Koenig's fit points (Algorithm 15,
//!   `Learn_Model`; Algorithm 4, `Learn_Model_HCA`): the median offset of
//!   `n_exchanges` exchanges is one point, a line through `n_fitpts` points is the
//!   drift model. One deliberate change: each exchange's offset is corrected by its
//!   own half round trip (the midpoint), not by a mean RTT measured beforehand
//!   (Algorithm 17), which the paper itself names a possible source of error.
//!
//! The wire protocol carries one `u64` per message, little endian: the initiator sends
//! [`PING`] for each exchange and [`DONE`] at the end of a measurement; the responder
//! answers each ping with its reading. So [`respond`] serves any estimator without
//! knowing how many exchanges it will make.

use super::model::{delta, offset_by, ClockModel};
use super::{Effort, SyncError};
use crate::clock::{Clock, Ticks};
use crate::model::lsq::fit_line;
use ngauge_transport::{BufferId, Rank, Transport};

/// Initiator to responder: answer with your reading.
pub const PING: u64 = 0;
/// Initiator to responder: this measurement is over.
pub const DONE: u64 = 1;

/// Defaults from the papers.
pub mod defaults {
    /// Hoefler's `N`: consecutive exchanges without a smaller RTT before stopping.
    pub const STOP_AFTER: usize = 100;
    /// A cap on one min-RTT measurement, in exchanges (Hoefler expects ~180 for N=100).
    pub const MAX_EXCHANGES: usize = 20_000;
    /// SKaMPI's `n_pingpongs`.
    pub const SKAMPI_PINGPONGS: usize = 100;
    /// Jones & Koenig / HCA `n_fitpts` (Hunold & Carpen-Amarie, Appendix C.5/C.6).
    pub const FITPOINTS: usize = 1000;
    /// HCA `n_exchanges` (Appendix C.5/C.6).
    pub const EXCHANGES: usize = 100;
    /// Jones & Koenig `n_exchanges`: 100, as for HCA. Hunold & Carpen-Amarie's own
    /// JK runs with window-based starts used 20 (Appendix C.13, Fig. 15; C.15,
    /// Fig. 17), which is five times faster (JK's root serves every rank's
    /// ping-pongs one after the other, so at 100 the sync takes close to a minute at
    /// 4-8 ranks), but the fit points then span a fifth of the time and the slope is
    /// less certain: measured at 4 ranks on 2 shared cores, drift errors of 0.1-3
    /// ppm instead of 0.01, i.e. up to 19 us off 5 s after the sync instead of
    /// 0.2 us. Accuracy is what jk is for; `--exchanges 20` buys the speed.
    pub const JK_EXCHANGES: usize = 100;
}

/// A transport buffer for the sync messages: an 8-byte send slot, an 8-byte receive
/// slot, and room for model lists after them.
#[derive(Debug)]
pub struct Wire {
    buffer: BufferId,
    capacity: usize,
}

const SEND_SLOT: usize = 0;
const RECV_SLOT: usize = 8;
const BULK: usize = 16;

impl Wire {
    /// Allocates the buffer (outside any timed region) with room for `bulk_bytes` of
    /// model lists.
    pub fn new<T: Transport + ?Sized>(t: &mut T, bulk_bytes: usize) -> Result<Self, SyncError> {
        let capacity = BULK + bulk_bytes;
        Ok(Wire {
            buffer: t.alloc_buffer(capacity)?,
            capacity,
        })
    }

    /// Returns the buffer to the transport.
    pub fn free<T: Transport + ?Sized>(self, t: &mut T) -> Result<(), SyncError> {
        t.free_buffer(self.buffer)?;
        Ok(())
    }

    fn put<T: Transport + ?Sized>(&self, t: &mut T, value: u64) -> Result<(), SyncError> {
        t.buffer_mut(self.buffer)?[SEND_SLOT..SEND_SLOT + 8].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    fn take<T: Transport + ?Sized>(&self, t: &T) -> Result<u64, SyncError> {
        let bytes = &t.buffer(self.buffer)?[RECV_SLOT..RECV_SLOT + 8];
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// Sends one `u64`.
    pub fn send_u64<T: Transport + ?Sized>(
        &self,
        t: &mut T,
        peer: Rank,
        value: u64,
    ) -> Result<(), SyncError> {
        self.put(t, value)?;
        t.send(peer, self.buffer.region(SEND_SLOT, 8))?;
        Ok(())
    }

    /// Sends `bytes` (at most the bulk capacity) as one message.
    pub fn send_bytes<T: Transport + ?Sized>(
        &self,
        t: &mut T,
        peer: Rank,
        bytes: &[u8],
    ) -> Result<(), SyncError> {
        self.check_bulk(bytes.len())?;
        t.buffer_mut(self.buffer)?[BULK..BULK + bytes.len()].copy_from_slice(bytes);
        t.send(peer, self.buffer.region(BULK, bytes.len()))?;
        Ok(())
    }

    /// Receives one message of exactly `len` bytes.
    pub fn recv_bytes<T: Transport + ?Sized>(
        &self,
        t: &mut T,
        peer: Rank,
        len: usize,
    ) -> Result<Vec<u8>, SyncError> {
        self.check_bulk(len)?;
        t.recv(peer, self.buffer.region(BULK, len))?;
        Ok(t.buffer(self.buffer)?[BULK..BULK + len].to_vec())
    }

    fn check_bulk(&self, len: usize) -> Result<(), SyncError> {
        if BULK + len > self.capacity {
            return Err(SyncError::Internal(format!(
                "sync message of {len} bytes exceeds the {} bytes reserved",
                self.capacity - BULK
            )));
        }
        Ok(())
    }
}

/// One ping-pong as the initiator saw it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Exchange {
    /// Initiator's reading before sending the ping.
    pub sent: Ticks,
    /// Initiator's reading after receiving the answer.
    pub received: Ticks,
    /// The responder's reading in its answer.
    pub peer: Ticks,
}

impl Exchange {
    /// Round-trip time in the initiator's ticks.
    pub fn rtt(&self) -> u64 {
        self.received.since(self.sent)
    }

    /// The initiator's reading halfway through the exchange.
    pub fn midpoint(&self) -> Ticks {
        offset_by(self.sent, self.rtt() as f64 / 2.0)
    }

    /// `local - peer` at the midpoint, in ticks (Algorithm 12, line 11:
    /// `s_time + rtt/2 - tremote`).
    pub fn offset(&self) -> f64 {
        delta(self.sent, self.peer) + self.rtt() as f64 / 2.0
    }
}

/// Initiator side of one exchange (the ping value must be in the send slot).
#[inline]
fn exchange<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
) -> Result<Exchange, SyncError> {
    let sent = clock.now();
    t.send(peer, wire.buffer.region(SEND_SLOT, 8))?;
    t.recv(peer, wire.buffer.region(RECV_SLOT, 8))?;
    let received = clock.now();
    Ok(Exchange {
        sent,
        received,
        peer: Ticks(wire.take(t)?),
    })
}

/// Runs `count` exchanges (or until `keep_going` says stop), then sends [`DONE`].
fn exchanges<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    mut keep_going: impl FnMut(&Exchange) -> bool,
) -> Result<(), SyncError> {
    wire.put(t, PING)?;
    loop {
        let e = exchange(clock, t, wire, peer)?;
        if !keep_going(&e) {
            break;
        }
    }
    wire.send_u64(t, peer, DONE)
}

/// Responder side of any estimator: answers pings from `peer` with this rank's
/// reading until [`DONE`]. Returns the number of exchanges served.
pub fn respond<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
) -> Result<usize, SyncError> {
    let mut served = 0;
    loop {
        t.recv(peer, wire.buffer.region(RECV_SLOT, 8))?;
        match wire.take(t)? {
            PING => {
                let now = clock.now();
                wire.send_u64(t, peer, now.0)?;
                served += 1;
            }
            DONE => return Ok(served),
            other => {
                return Err(SyncError::Protocol {
                    peer,
                    detail: format!("expected a ping or done, got {other}"),
                })
            }
        }
    }
}

/// Result of [`min_rtt`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MinRtt {
    /// The exchange with the smallest round trip.
    pub best: Exchange,
    /// Exchanges made.
    pub exchanges: usize,
}

/// The state of a min-RTT measurement in progress.
#[derive(Default)]
struct MinRttState {
    best: Option<Exchange>,
    count: usize,
    since_best: usize,
}

impl MinRttState {
    /// Takes one exchange; whether to go on.
    fn step(&mut self, e: &Exchange, stop_after: usize, max_exchanges: usize) -> bool {
        self.count += 1;
        if self.best.is_none_or(|b| e.rtt() < b.rtt()) {
            self.best = Some(*e);
            self.since_best = 0;
        } else {
            self.since_best += 1;
        }
        self.since_best < stop_after && self.count < max_exchanges
    }

    fn result(self) -> MinRtt {
        MinRtt {
            best: self.best.expect("at least one exchange"),
            exchanges: self.count,
        }
    }
}

/// Hoefler's estimator (sec. 3.1): exchange until `stop_after` consecutive exchanges
/// do not beat the smallest RTT seen (or `max_exchanges` were made); keep the exchange
/// with the smallest RTT.
pub fn min_rtt<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    stop_after: usize,
    max_exchanges: usize,
) -> Result<MinRtt, SyncError> {
    let mut state = MinRttState::default();
    exchanges(clock, t, wire, peer, |e| {
        state.step(e, stop_after, max_exchanges)
    })?;
    Ok(state.result())
}

/// Result of [`bracket_or_min_rtt`]: the interval of the initiator's offset `local - peer`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Bracket {
    /// Largest lower bound, `max(sent - peer)` (SKaMPI's `-td_max`).
    pub low: f64,
    /// Smallest upper bound, `min(received - peer)` (SKaMPI's `-td_min`).
    pub high: f64,
    /// The initiator's reading in the middle of the measurement.
    pub at: Ticks,
    /// Exchanges made.
    pub exchanges: usize,
}

impl Bracket {
    /// SKaMPI's estimate: the middle of the interval (Algorithm 7, line 20).
    pub fn offset(&self) -> f64 {
        (self.low + self.high) / 2.0
    }
}

/// SKaMPI's estimator (Algorithm 7): `pingpongs` exchanges, intersecting the
/// interval each one gives for the offset; when the bounds cross (drift or a clock jump during the
/// measurement: no offset lies in the "interval", and its middle means nothing) the
/// same measurement goes on with a fresh [`min_rtt`] of `stop_after` /
/// `max_exchanges`, whose result is returned too. The responder sees one measurement
/// either way.
pub fn bracket_or_min_rtt<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    pingpongs: usize,
    stop_after: usize,
    max_exchanges: usize,
) -> Result<(Bracket, Option<MinRtt>), SyncError> {
    bracket_then(
        clock,
        t,
        wire,
        peer,
        pingpongs,
        Some((stop_after, max_exchanges)),
    )
}

fn bracket_then<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    pingpongs: usize,
    fallback: Option<(usize, usize)>,
) -> Result<(Bracket, Option<MinRtt>), SyncError> {
    let (mut low, mut high) = (f64::NEG_INFINITY, f64::INFINITY);
    let (mut first, mut last) = (None, Ticks(0));
    let mut count = 0;
    let mut min_rtt: Option<MinRttState> = None;
    exchanges(clock, t, wire, peer, |e| {
        if let (Some(state), Some((stop_after, max_exchanges))) = (&mut min_rtt, fallback) {
            return state.step(e, stop_after, max_exchanges);
        }
        count += 1;
        low = low.max(delta(e.sent, e.peer));
        high = high.min(delta(e.received, e.peer));
        first.get_or_insert(e.sent);
        last = e.received;
        if count < pingpongs.max(1) {
            return true;
        }
        if low > high && fallback.is_some() {
            min_rtt = Some(MinRttState::default());
            return true;
        }
        false
    })?;
    let first = first.expect("at least one exchange");
    Ok((
        Bracket {
            low,
            high,
            at: offset_by(first, delta(last, first) / 2.0),
            exchanges: count,
        },
        min_rtt.map(MinRttState::result),
    ))
}

/// One of Jones & Koenig's fit points: `local - peer` at a local reading.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FitPoint {
    /// The initiator's reading (midpoint of the chosen exchange).
    pub local: Ticks,
    /// `local - peer` there, in ticks.
    pub offset: f64,
}

/// One fit point (Algorithm 15, lines 17-27): `n_exchanges` exchanges, the one with
/// the median offset.
pub fn fit_point<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    n_exchanges: usize,
) -> Result<FitPoint, SyncError> {
    let n = n_exchanges.max(1);
    let mut seen: Vec<Exchange> = Vec::with_capacity(n);
    exchanges(clock, t, wire, peer, |e| {
        seen.push(*e);
        seen.len() < n
    })?;
    // The lower median is an actual exchange, so its reading is the point's x
    // (Algorithm 15, line 25: the index whose difference equals the median).
    let median = crate::stats::lower_median_by(&seen, |a, b| a.offset().total_cmp(&b.offset()))
        .expect("at least one exchange");
    Ok(FitPoint {
        local: median.midpoint(),
        offset: median.offset(),
    })
}

/// The largest rate difference a fitted drift between two clocks may claim: 1100
/// ppm. NTP bounds one clock's frequency error by 500 ppm (RFC 5905 `MAXFREQ`; the
/// Linux kernel bounds its frequency correction alike), and two clocks off by that
/// much in opposite directions differ by up to 1000.5 ppm as a slope of
/// `local - peer` against local time (`(a - b) / (1 + a)`); the tenth above that is
/// room for the fit's own noise. A quartz oscillator is within tens of ppm; a fit
/// that claims more measured its noise over too short a span, not a clock.
pub const MAX_PLAUSIBLE_DRIFT: f64 = 1100e-6;

/// Two-sided confidence at which a fitted drift must differ from zero to be kept.
pub const DRIFT_CONFIDENCE: f64 = 0.99;

/// Why a fitted drift was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DriftRejection {
    /// The slope does not differ from zero at [`DRIFT_CONFIDENCE`] (Student's t on
    /// its standard error): the fit points' noise hides any drift over their span.
    Unresolved,
    /// The slope differs from zero, but by more than [`MAX_PLAUSIBLE_DRIFT`].
    Implausible,
}

/// A fitted drift that was not kept, and what the fit saw.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DroppedDrift {
    /// The fitted slope of `local - peer` against local time.
    pub fitted: f64,
    /// Its standard error.
    pub stderr: f64,
    /// Local ticks from the first to the last fit point.
    pub span_ticks: u64,
    /// Fit points.
    pub points: usize,
    /// Why it was dropped.
    pub reason: DriftRejection,
    /// The rank the fit was against (rank 0 for `jk`, a tree neighbour for `hca`).
    pub peer: Rank,
}

/// A pairwise drift model and, when the fit's slope was not kept, what it was.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriftFit {
    /// The model: the fitted line, or the points' median offset without drift.
    pub model: ClockModel,
    /// The slope the model does not use, if any.
    pub dropped: Option<DroppedDrift>,
}

/// Fits the drift model through fit points (Algorithm 15, line 28, `Linear_Fit`): the
/// line `local - peer = offset + drift * (local - anchor)`, anchored at the mean of
/// the points' readings, where the regression intercept is best determined.
///
/// One addition to the papers, which keep any slope the regression returns: the
/// slope is kept only when it is resolved, that is when `|slope| >= t * stderr`
/// (Student's t at [`DRIFT_CONFIDENCE`], `n - 2` degrees of freedom; with 2 points
/// there is no error estimate and nothing is resolved) and `|slope| <=`
/// [`MAX_PLAUSIBLE_DRIFT`]. Otherwise the model has no drift and the points'
/// median offset, which one disturbed point cannot move far. Why: a slope is
/// extrapolated over the whole measurement that follows, so a slope within its own
/// error adds error as often as it removes it. The test is strict (a slope of 1-3
/// standard errors, which a real drift between hosts on a short fit can have, is
/// dropped and its error left in the model) because the report names every
/// dropped slope, with its error and the fit's span, and more fit points resolve
/// it; a kept slope that is noise says nothing. A fit over a few milliseconds on a loaded
/// host (10 points of 2 exchanges) returned 25 000 ppm between two ranks sharing a
/// TSC; a second later that model was 25 ms off, and window-based starts built on it
/// invalidated every call or waited past the peers' timeout.
pub fn fit_model(points: &[FitPoint]) -> Option<DriftFit> {
    let first = points.first()?.local;
    let xs: Vec<f64> = points.iter().map(|p| delta(p.local, first)).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.offset).collect();
    let line = fit_line(&xs, &ys)?;
    let mean_x = xs.iter().sum::<f64>() / xs.len() as f64;
    let anchor = offset_by(first, mean_x);
    let reason = drift_rejection(line.slope, line.slope_stderr, points.len());
    let Some(reason) = reason else {
        let x = delta(anchor, first);
        return Some(DriftFit {
            model: ClockModel {
                anchor,
                offset_ticks: line.at(x),
                drift: line.slope,
            },
            dropped: None,
        });
    };
    let last = points.iter().map(|p| p.local).max().unwrap_or(first);
    let earliest = points.iter().map(|p| p.local).min().unwrap_or(first);
    Some(DriftFit {
        model: ClockModel {
            anchor,
            offset_ticks: crate::stats::median(&ys)?,
            drift: 0.0,
        },
        dropped: Some(DroppedDrift {
            fitted: line.slope,
            stderr: line.slope_stderr,
            span_ticks: last.since(earliest),
            points: points.len(),
            reason,
            peer: 0,
        }),
    })
}

/// Why a fitted `slope` with standard error `stderr` from `points` fit points is
/// not kept, or `None` when it is (see [`fit_model`]).
pub fn drift_rejection(slope: f64, stderr: f64, points: usize) -> Option<DriftRejection> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let dof = points.saturating_sub(2);
    let t = (dof > 0)
        .then(|| StudentsT::new(0.0, 1.0, dof as f64).ok())
        .flatten()
        .map(|d| d.inverse_cdf(0.5 + DRIFT_CONFIDENCE / 2.0));
    match t {
        Some(t) if slope.abs() >= t * stderr => {
            (slope.abs() > MAX_PLAUSIBLE_DRIFT).then_some(DriftRejection::Implausible)
        }
        _ => Some(DriftRejection::Unresolved),
    }
}

/// Initiator side of a pairwise drift model (`Learn_Model_HCA`, Algorithm 4):
/// `fitpoints` fit points of `n_exchanges` exchanges each, then a line through them
/// ([`fit_model`]). The responder calls [`respond`] `fitpoints` times. Returns the
/// model of this rank's clock relative to `peer`'s and what it took (exchanges, and
/// the slope if it was dropped).
pub fn learn_model<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    fitpoints: usize,
    n_exchanges: usize,
) -> Result<(ClockModel, Effort), SyncError> {
    let points = (0..fitpoints)
        .map(|_| fit_point(clock, t, wire, peer, n_exchanges))
        .collect::<Result<Vec<_>, _>>()?;
    let fit = fit_model(&points).ok_or_else(|| SyncError::Fit {
        peer,
        detail: format!("no line through {} fit points", points.len()),
    })?;
    let mut effort = Effort::exchanges(fitpoints * n_exchanges.max(1));
    if let Some(dropped) = fit.dropped {
        effort.drifts_dropped = 1;
        effort.dropped_drift = Some(DroppedDrift { peer, ..dropped });
    }
    Ok((fit.model, effort))
}

#[cfg(test)]
impl Bracket {
    /// False when the bounds crossed (drift or a clock jump during the measurement).
    pub(crate) fn consistent(&self) -> bool {
        self.low <= self.high
    }
}

/// [`bracket_or_min_rtt`] without the fallback: SKaMPI's estimator as SKaMPI has it.
#[cfg(test)]
pub(crate) fn bracket<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    pingpongs: usize,
) -> Result<Bracket, SyncError> {
    Ok(bracket_then(clock, t, wire, peer, pingpongs, None)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(sent: u64, peer: u64, received: u64) -> Exchange {
        Exchange {
            sent: Ticks(sent),
            received: Ticks(received),
            peer: Ticks(peer),
        }
    }

    #[test]
    fn exchange_offset_is_taken_at_the_midpoint() {
        // Peer is 1000 ticks behind; symmetric 50-tick delays.
        let x = e(10_000, 9_050, 10_100);
        assert_eq!(x.rtt(), 100);
        assert_eq!(x.midpoint(), Ticks(10_050));
        assert_eq!(x.offset(), 1000.0);
    }

    #[test]
    fn fit_model_recovers_a_line_and_anchors_at_the_mean() {
        let points: Vec<FitPoint> = (0..10)
            .map(|i| {
                let x = 1_000_000_000_000 + i * 1_000_000;
                FitPoint {
                    local: Ticks(x),
                    offset: 500.0 + 40e-6 * (i * 1_000_000) as f64,
                }
            })
            .collect();
        let fit = fit_model(&points).unwrap();
        assert_eq!(fit.dropped, None);
        let m = fit.model;
        assert!((m.drift - 40e-6).abs() < 1e-12);
        assert_eq!(m.anchor, Ticks(1_000_000_000_000 + 4_500_000));
        assert!((m.offset_ticks - (500.0 + 40e-6 * 4.5e6)).abs() < 1e-6);
        assert_eq!(fit_model(&points[..1]), None);
    }

    fn points(n: u64, span: u64, offset: impl Fn(u64, f64) -> f64) -> Vec<FitPoint> {
        (0..n)
            .map(|i| {
                let x = i * span / (n - 1);
                FitPoint {
                    local: Ticks(1_000_000_000_000 + x),
                    offset: offset(i, x as f64),
                }
            })
            .collect()
    }

    /// The failure this rule is for: no drift, 10 points over 1 ms (2.6 M ticks)
    /// with microseconds of noise, one point disturbed by 50 us. The regression's
    /// slope is thousands of ppm; it is dropped as unresolved and the model keeps
    /// the median offset, which the disturbed point does not move.
    #[test]
    fn a_slope_within_its_noise_is_dropped_for_the_median_offset() {
        let noise = [3e3, -4e3, 2e3, -1e3, 5e3, -2e3, 1e3, -3e3, 4e3, 130e3];
        let pts = points(10, 2_600_000, |i, _| 700.0 + noise[i as usize]);
        let line = {
            let xs: Vec<f64> = pts.iter().map(|p| p.local.0 as f64).collect();
            let ys: Vec<f64> = pts.iter().map(|p| p.offset).collect();
            fit_line(&xs, &ys).unwrap()
        };
        assert!(line.slope.abs() > 1e-3, "{line:?}");
        let fit = fit_model(&pts).unwrap();
        let dropped = fit.dropped.expect("dropped");
        assert_eq!(dropped.reason, DriftRejection::Unresolved);
        assert_eq!(dropped.points, 10);
        assert_eq!(dropped.span_ticks, 2_600_000);
        assert!((dropped.fitted - line.slope).abs() < 1e-12);
        assert_eq!(fit.model.drift, 0.0);
        // Median of 700 + noise: between the 5th and 6th of the sorted noises.
        assert!(
            (fit.model.offset_ticks - (700.0 + 1.5e3)).abs() < 1e-9,
            "{fit:?}"
        );
    }

    /// A slope far above its error but beyond what a clock can drift is dropped as
    /// implausible; the same points with 40 ppm are kept.
    #[test]
    fn a_resolved_slope_beyond_1000_ppm_is_implausible() {
        let wobble = |i: u64| if i % 2 == 0 { 10.0 } else { -10.0 };
        let fast = fit_model(&points(50, 1_000_000_000, |i, x| 2e-3 * x + wobble(i))).unwrap();
        assert_eq!(
            fast.dropped.map(|d| d.reason),
            Some(DriftRejection::Implausible)
        );
        assert_eq!(fast.model.drift, 0.0);
        let slow = fit_model(&points(50, 1_000_000_000, |i, x| 40e-6 * x + wobble(i))).unwrap();
        assert_eq!(slow.dropped, None);
        assert!((slow.model.drift - 40e-6).abs() < 1e-8, "{slow:?}");
    }

    #[test]
    fn two_points_resolve_no_drift() {
        assert_eq!(
            drift_rejection(1e-4, 0.0, 2),
            Some(DriftRejection::Unresolved)
        );
        assert_eq!(drift_rejection(1e-4, 0.0, 3), None);
        // Student's t at 99 % with 8 degrees of freedom is 3.355.
        assert_eq!(
            drift_rejection(3.3e-4, 1e-4, 10),
            Some(DriftRejection::Unresolved)
        );
        assert_eq!(drift_rejection(3.4e-4, 1e-4, 10), None);
    }
}
