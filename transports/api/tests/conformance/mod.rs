//! The contract of [`Transport`] as one suite every transport runs (feature
//! `conformance`): a new transport gets it by writing one factory of connected
//! ranks, as smoltcp tests every socket against the same wire fixtures.
//!
//! Every check is written once, for one rank of a job: each rank runs the same
//! function with its own transport and a [`Control`] plane to agree on when to
//! go on (the data plane is what is checked). Threads run a job of in-process,
//! socket or device transports ([`run_threads`], with [`connect_each`] or
//! [`ready`] as the factory); a launcher runs one rank per process
//! ([`run_rank`], MPI). Each check gets a fresh transport, so that one that
//! drops its transport or leaves a receive pending spoils nothing else.
//!
//! What is checked: every size from 0 bytes to the largest message, intact, in
//! both wait modes; receives from one peer matched in the order of its sends;
//! simultaneous exchanges of every pair, and ones far larger than any socket
//! buffer; a blocking call that progresses a queued `isend`; the errors a bad
//! peer, request, region or size gets, and the sizes a transport that checks them
//! reports; the bytes a pending receive holds refused to every other use; a
//! silent peer reported after the timeout (where the transport has one, and what
//! a timeout leaves pending) and a peer that dropped its transport reported as
//! closed, each failed request forgotten and its bytes given back. [`Profile`]
//! says which of these a transport promises; [`Capabilities`](crate::Capabilities)
//! says the rest (size limit, size checks, order).
//!
//! A new transport's crate runs it in one test, as `ngauge-tcp` does:
//!
//! ```text
//! conformance::run_threads(&profile, |s| {
//!     let opts = TcpOptions { wait: s.wait, timeout: s.timeout, ..TcpOptions::default() };
//!     conformance::connect_each(s.ranks, move |c| TcpTransport::connect(c, LOOPBACK, &opts))
//! })
//! .assert_passed();
//! ```
//!
//! Test code: it lives beside the crate's tests and is compiled only for tests
//! and with the feature.

mod checks;

use crate::inproc;
use crate::{Control, Transport, TransportError, WaitMode};
use std::fmt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the suite asks of one job's transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// Ranks in the job.
    pub ranks: usize,
    /// The wait mode to build them with.
    pub wait: WaitMode,
    /// The peer timeout to build them with (where they have one).
    pub timeout: Duration,
}

/// What a transport promises beyond what every transport keeps, and how to run
/// the suite on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The wait modes it is run in.
    pub modes: Vec<WaitMode>,
    /// The peer timeout of every job but the timeout checks'.
    pub timeout: Duration,
    /// `Some(t)`: a silent peer is reported with [`TransportError::Timeout`] after
    /// the timeout the transport was built with, `t` in the timeout checks;
    /// `None`: the transport waits as long as the peer lives (in-process,
    /// simulated, MPI).
    pub short_timeout: Option<Duration>,
    /// A timeout fails only the call that waited: pending requests keep their
    /// bytes and may be waited for again, a blocking receive takes its own
    /// request back (TCP, UDP). Otherwise it breaks the connection to that peer
    /// and fails its requests (verbs).
    pub timeouts_keep_requests: bool,
    /// A peer that dropped its transport is reported as
    /// [`TransportError::PeerClosed`] (not under MPI, where a lost rank ends the
    /// job).
    pub reports_closed_peers: bool,
}

/// One check of the contract.
pub struct Check {
    /// What it checks, as reports name it.
    pub name: &'static str,
    /// The job size under [`run_threads`].
    pub ranks: usize,
    /// The fewest ranks it runs with under a launcher ([`run_rank`]); ranks
    /// beyond those it uses take part in its control-plane calls only.
    pub fewest: usize,
    needs: Needs,
    body: fn(Box<dyn Transport>, &mut dyn Control) -> Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    Nothing,
    Timeout,
    KeptRequests,
    ClosedPeer,
}

impl Check {
    /// Why `profile` on a job of `size` ranks cannot take this check, if so.
    fn skip(&self, profile: &Profile, size: usize) -> Option<&'static str> {
        match self.needs {
            _ if size < self.fewest => Some("more ranks"),
            Needs::Timeout | Needs::KeptRequests if profile.short_timeout.is_none() => {
                Some("a timeout")
            }
            Needs::KeptRequests if !profile.timeouts_keep_requests => {
                Some("requests kept after a timeout")
            }
            Needs::ClosedPeer if !profile.reports_closed_peers => Some("closed peers reported"),
            _ => None,
        }
    }

    fn setup(&self, profile: &Profile, ranks: usize, wait: WaitMode) -> Setup {
        let timeout = match (self.needs, profile.short_timeout) {
            (Needs::Timeout | Needs::KeptRequests, Some(t)) => t,
            _ => profile.timeout,
        };
        Setup {
            ranks,
            wait,
            timeout,
        }
    }
}

/// Every check, in the order the runners take them.
pub fn checks() -> &'static [Check] {
    checks::ALL
}

/// Why a check ended early on one rank.
#[derive(Debug)]
enum Stop {
    /// What it saw.
    Failed(String),
    /// The transport does not promise what it checks (its
    /// [`Capabilities`](crate::Capabilities)).
    Skipped(String),
}

impl From<TransportError> for Stop {
    fn from(e: TransportError) -> Self {
        Stop::Failed(e.to_string())
    }
}

impl From<crate::ControlError> for Stop {
    fn from(e: crate::ControlError) -> Self {
        Stop::Failed(format!("control plane: {e}"))
    }
}

type Verdict = Result<(), Stop>;

/// How a check went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every rank passed it.
    Passed,
    /// The transport does not promise what it checks: what it would need.
    Skipped(String),
    /// What each failing rank saw.
    Failed(String),
}

/// How one check went in one wait mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The check's name.
    pub check: &'static str,
    /// The wait mode.
    pub wait: WaitMode,
    /// Passed, skipped or failed.
    pub status: Status,
    /// How long it took.
    pub took: Duration,
}

/// The outcomes of a run, one line each when printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// In the order run.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        !self
            .outcomes
            .iter()
            .any(|o| matches!(o.status, Status::Failed(_)))
    }

    /// The checks that ran and passed.
    pub fn passes(&self) -> usize {
        let passed = |o: &&Outcome| o.status == Status::Passed;
        self.outcomes.iter().filter(passed).count()
    }

    /// # Panics
    /// With the whole report, when a check failed.
    pub fn assert_passed(&self) {
        assert!(self.passed(), "transport conformance failed:\n{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in &self.outcomes {
            let (check, wait, took) = (o.check, o.wait, o.took.as_secs_f64());
            match &o.status {
                Status::Passed => writeln!(f, "PASS {check} ({wait}, {took:.2} s)")?,
                Status::Skipped(what) => writeln!(f, "SKIP {check} ({wait}): needs {what}")?,
                Status::Failed(why) => writeln!(f, "FAIL {check} ({wait}, {took:.2} s): {why}")?,
            }
        }
        Ok(())
    }
}

/// One rank's transport and control plane, made on that rank's thread.
pub type Opener = Box<dyn FnOnce() -> Opened + Send>;

/// Openers for a transport every rank connects together over an in-process
/// control plane (`connect` is collective, as `TcpTransport::connect`).
pub fn connect_each<T, F>(ranks: usize, connect: F) -> Vec<Opener>
where
    T: Transport + 'static,
    F: Fn(&mut dyn Control) -> Result<T, TransportError> + Clone + Send + 'static,
{
    inproc::world(ranks)
        .into_iter()
        .map(|(_, mut control)| {
            let connect = connect.clone();
            Box::new(move || boxed(connect(&mut control)?, control)) as Opener
        })
        .collect()
}

/// Openers for a job built whole (in-process, simulated): each rank's
/// transport and control plane as they are.
pub fn ready<T, C>(ranks: Vec<(T, C)>) -> Vec<Opener>
where
    T: Transport + Send + 'static,
    C: Control + Send + 'static,
{
    ranks
        .into_iter()
        .map(|(t, c)| Box::new(move || boxed(t, c)) as Opener)
        .collect()
}

type Opened = Result<(Box<dyn Transport>, Box<dyn Control>), TransportError>;

fn boxed(t: impl Transport + 'static, c: impl Control + 'static) -> Opened {
    Ok((Box::new(t), Box::new(c)))
}

/// Runs every check in every mode of `profile` on jobs of threads, one per rank,
/// each job made by `job`. A check whose ranks have not all ended after six peer
/// timeouts fails as hung (its threads are left behind).
pub fn run_threads(profile: &Profile, job: impl Fn(&Setup) -> Vec<Opener>) -> Report {
    let mut report = Report::default();
    for &wait in &profile.modes {
        for check in checks() {
            let start = Instant::now();
            let status = match check.skip(profile, check.ranks) {
                Some(what) => Status::Skipped(what.into()),
                None => run_job(
                    check,
                    job(&check.setup(profile, check.ranks, wait)),
                    profile,
                ),
            };
            report.outcomes.push(Outcome {
                check: check.name,
                wait,
                status,
                took: start.elapsed(),
            });
        }
    }
    report
}

fn run_job(check: &Check, openers: Vec<Opener>, profile: &Profile) -> Status {
    let (tx, rx) = mpsc::channel();
    let ranks = openers.len();
    for (rank, open) in openers.into_iter().enumerate() {
        let (tx, body) = (tx.clone(), check.body);
        std::thread::Builder::new()
            .name(format!("{}-{rank}", check.name))
            .spawn(move || {
                let run = move || match open() {
                    Ok((t, mut control)) => body(t, control.as_mut()),
                    Err(e) => Err(Stop::Failed(format!("opening the transport: {e}"))),
                };
                let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                    .unwrap_or_else(|panic| Err(Stop::Failed(panic_text(&*panic))));
                let _ = tx.send((rank, verdict));
            })
            .expect("a thread per rank");
    }
    let limit = 6 * profile.timeout;
    let deadline = Instant::now() + limit;
    let mut verdicts: Vec<Option<Verdict>> = (0..ranks).map(|_| None).collect();
    while verdicts.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((rank, verdict)) => verdicts[rank] = Some(verdict),
            Err(_) => break,
        }
    }
    agree(
        verdicts.into_iter().map(|v| {
            v.unwrap_or_else(|| Err(Stop::Failed(format!("did not end within {limit:?}"))))
        }),
    )
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned());
    format!("panicked: {}", text.unwrap_or_default())
}

/// One status from every rank's verdict: failed if one failed (naming each
/// that did), else skipped if one skipped.
fn agree(verdicts: impl Iterator<Item = Verdict>) -> Status {
    let (mut failed, mut skipped) = (Vec::new(), None);
    for (rank, verdict) in verdicts.enumerate() {
        match verdict {
            Ok(()) => {}
            Err(Stop::Skipped(what)) => skipped = Some(what),
            Err(Stop::Failed(why)) => failed.push(format!("rank {rank}: {why}")),
        }
    }
    match (failed.is_empty(), skipped) {
        (false, _) => Status::Failed(failed.join("; ")),
        (true, Some(what)) => Status::Skipped(what),
        (true, None) => Status::Passed,
    }
}

/// Runs every check this job can take, on this rank of a job a launcher started
/// (one rank per process, as under `mpirun`): `open` makes this rank's
/// transport (collectively: every rank calls it together). Every rank calls
/// this together, with the same profile, and gets the same report: the ranks
/// agree on each check's verdict over `control` before the next one starts.
pub fn run_rank(
    profile: &Profile,
    control: &mut dyn Control,
    mut open: impl FnMut(&Setup) -> Result<Box<dyn Transport>, TransportError>,
) -> Report {
    let size = control.size();
    let mut report = Report::default();
    for &wait in &profile.modes {
        for check in checks() {
            let start = Instant::now();
            let status = match check.skip(profile, size) {
                Some(what) => Status::Skipped(what.into()),
                None => {
                    let mine = match open(&check.setup(profile, size, wait)) {
                        Ok(t) => (check.body)(t, control),
                        Err(e) => Err(Stop::Failed(format!("opening the transport: {e}"))),
                    };
                    // Agreed over the control plane: "" passed, "?what", "!why".
                    let word = match mine {
                        Ok(()) => String::new(),
                        Err(Stop::Skipped(what)) => format!("?{what}"),
                        Err(Stop::Failed(why)) => format!("!{why}"),
                    };
                    match control.allgather(word.as_bytes()) {
                        Ok(all) => agree(all.iter().map(|w| match w.split_first() {
                            None => Ok(()),
                            Some((b'?', what)) => Err(Stop::Skipped(text(what))),
                            Some((_, why)) => Err(Stop::Failed(text(why))),
                        })),
                        Err(e) => Status::Failed(format!("control plane: {e}")),
                    }
                }
            };
            report.outcomes.push(Outcome {
                check: check.name,
                wait,
                status,
                took: start.elapsed(),
            });
        }
    }
    report
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
