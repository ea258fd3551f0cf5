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
//! silent peer reported after the timeout (where the transport has one) and a
//! peer that dropped its transport reported as closed, each failed request
//! forgotten and its bytes given back. [`Profile`] says which of these a
//! transport promises; [`Capabilities`](crate::Capabilities) says the rest
//! (size limit, size checks, order).
//!
//! Test code: it lives beside the crate's tests and is compiled only for tests
//! and with the feature.

mod checks;

use crate::inproc;
use crate::{Control, Transport, TransportError, WaitMode};
use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

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
    /// A peer that dropped its transport is reported as
    /// [`TransportError::PeerClosed`] (not under MPI, where a lost rank ends the
    /// job).
    pub reports_closed_peers: bool,
}

/// One check of the contract.
pub struct Check {
    /// What it checks, as reports name it.
    pub name: &'static str,
    /// The ranks it uses: the job size under [`run_threads`]; under a launcher
    /// with more, the others take part in its control-plane calls only.
    pub ranks: usize,
    needs: Needs,
    body: fn(Box<dyn Transport>, &mut dyn Control) -> Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    Nothing,
    Timeout,
    ClosedPeer,
}

impl Check {
    /// Why `profile` on a job of `size` ranks cannot take this check, if so.
    fn skip(&self, profile: &Profile, size: usize) -> Option<&'static str> {
        match self.needs {
            _ if size < self.ranks => Some("more ranks"),
            Needs::Timeout if profile.short_timeout.is_none() => Some("a timeout"),
            Needs::ClosedPeer if !profile.reports_closed_peers => Some("closed peers reported"),
            _ => None,
        }
    }

    fn setup(&self, profile: &Profile, ranks: usize, wait: WaitMode) -> Setup {
        let timeout = match (self.needs, profile.short_timeout) {
            (Needs::Timeout, Some(t)) => t,
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

/// A failed check on one rank: what it saw.
#[derive(Debug)]
pub struct Failure(pub String);

impl From<TransportError> for Failure {
    fn from(e: TransportError) -> Self {
        Failure(e.to_string())
    }
}

impl From<crate::ControlError> for Failure {
    fn from(e: crate::ControlError) -> Self {
        Failure(format!("control plane: {e}"))
    }
}

type Verdict = Result<(), Failure>;

/// How one check went in one wait mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The check's name.
    pub check: &'static str,
    /// The wait mode.
    pub wait: WaitMode,
    /// `Ok(None)`: passed; `Ok(Some(what))`: skipped, the transport lacks `what`;
    /// `Err`: what each failing rank saw.
    pub result: Result<Option<&'static str>, String>,
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
        self.outcomes.iter().all(|o| o.result.is_ok())
    }

    /// The checks that ran and passed.
    pub fn passes(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.result == Ok(None))
            .count()
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
            match &o.result {
                Ok(None) => writeln!(f, "PASS {} ({})", o.check, o.wait)?,
                Ok(Some(what)) => writeln!(f, "SKIP {} ({}): needs {what}", o.check, o.wait)?,
                Err(why) => writeln!(f, "FAIL {} ({}): {why}", o.check, o.wait)?,
            }
        }
        Ok(())
    }
}

/// One rank's transport and control plane, made on that rank's thread.
pub type Opener =
    Box<dyn FnOnce() -> Result<(Box<dyn Transport>, Box<dyn Control>), TransportError> + Send>;

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
            let result = match check.skip(profile, check.ranks) {
                Some(what) => Ok(Some(what)),
                None => run_job(
                    check,
                    job(&check.setup(profile, check.ranks, wait)),
                    profile,
                )
                .map(|()| None),
            };
            report.outcomes.push(Outcome {
                check: check.name,
                wait,
                result,
            });
        }
    }
    report
}

fn run_job(check: &Check, openers: Vec<Opener>, profile: &Profile) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let ranks = openers.len();
    for (rank, open) in openers.into_iter().enumerate() {
        let (tx, body) = (tx.clone(), check.body);
        std::thread::Builder::new()
            .name(format!("{}-{rank}", check.name))
            .spawn(move || {
                let run = move || match open() {
                    Ok((t, mut control)) => body(t, control.as_mut()).map_err(|f| f.0),
                    Err(e) => Err(format!("opening the transport: {e}")),
                };
                let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                    .unwrap_or_else(|panic| Err(panic_text(&*panic)));
                let _ = tx.send((rank, verdict));
            })
            .expect("a thread per rank");
    }
    let deadline = std::time::Instant::now() + 6 * profile.timeout;
    let mut verdicts: Vec<Option<Result<(), String>>> = vec![None; ranks];
    while verdicts.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((rank, verdict)) => verdicts[rank] = Some(verdict),
            Err(_) => break,
        }
    }
    agree(
        verdicts.into_iter().map(|v| {
            v.unwrap_or_else(|| Err(format!("did not end within {:?}", 6 * profile.timeout)))
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

/// One verdict from every rank's: `Err` naming each rank that failed.
fn agree(verdicts: impl Iterator<Item = Result<(), String>>) -> Result<(), String> {
    let failed: Vec<String> = verdicts
        .enumerate()
        .filter_map(|(rank, v)| v.err().map(|why| format!("rank {rank}: {why}")))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
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
    open: &mut dyn FnMut(&Setup) -> Result<Box<dyn Transport>, TransportError>,
) -> Report {
    let size = control.size();
    let mut report = Report::default();
    for &wait in &profile.modes {
        for check in checks() {
            let result = match check.skip(profile, size) {
                Some(what) => Ok(Some(what)),
                None => {
                    let mine = match open(&check.setup(profile, size, wait)) {
                        Ok(t) => (check.body)(t, control).map_err(|f| f.0),
                        Err(e) => Err(format!("opening the transport: {e}")),
                    };
                    // An empty message is a pass.
                    let bytes = mine
                        .err()
                        .map_or(Vec::new(), |why| format!("!{why}").into());
                    match control.allgather(&bytes) {
                        Ok(all) => agree(all.into_iter().map(|b| match b.split_first() {
                            None => Ok(()),
                            Some((_, why)) => Err(String::from_utf8_lossy(why).into_owned()),
                        }))
                        .map(|()| None),
                        Err(e) => Err(format!("control plane: {e}")),
                    }
                }
            };
            report.outcomes.push(Outcome {
                check: check.name,
                wait,
                result,
            });
        }
    }
    report
}
