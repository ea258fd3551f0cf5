//! SIGINT and SIGTERM: stop every rank, keep what finished, say where it is.
//!
//! A rank ([`install_rank`]) receives the signals on a thread of its own
//! (`signal-hook`'s iterator, so nothing runs in signal-handler context), says how
//! many finished points the output stream holds and where (the stream is flushed
//! and synced after every record, so nothing finished is lost by exiting now), and
//! exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM).
//!
//! The local launcher ([`install_launcher`]) forwards the signal to every rank it
//! started (a `kill` of the launcher alone reaches no rank otherwise; a Ctrl-C
//! reaches them all anyway, and a second copy changes nothing), waits for them as
//! usual, and exits with the same status.

use rustix::process::{kill_process, Pid, Signal};
use signal_hook::consts::{SIGABRT, SIGINT, SIGKILL, SIGSEGV, SIGTERM};
use signal_hook::iterator::Signals;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

static OUTPUT: Mutex<Option<PathBuf>> = Mutex::new(None);
static RECORDS: AtomicU64 = AtomicU64::new(0);
/// The signal a rank received (0: none), set inside the handler itself, so that it
/// is set before any of the rank's threads runs on after the signal arrived.
static PENDING: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
static RANK: AtomicUsize = AtomicUsize::new(0);
static EXITING: AtomicBool = AtomicBool::new(false);

/// Notes the stream that finished points go to (what a signal's message names).
pub fn note_output(path: &Path) {
    *OUTPUT.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.to_path_buf());
    RECORDS.store(0, Ordering::Relaxed);
}

/// Counts one record written to that stream.
pub fn note_record() {
    RECORDS.fetch_add(1, Ordering::Relaxed);
}

/// `SIGINT`, `SIGTERM`, and the other signals that end a rank (`SIGKILL`, ...).
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGABRT => "SIGABRT",
        SIGKILL => "SIGKILL",
        SIGSEGV => "SIGSEGV",
        _ => "a signal",
    }
}

/// What a rank says when a signal stops it.
pub fn interrupted_message(rank: usize, signal: i32) -> String {
    let output = OUTPUT.lock().unwrap_or_else(|p| p.into_inner()).clone();
    message(
        rank,
        signal,
        output.as_deref(),
        RECORDS.load(Ordering::Relaxed),
    )
}

fn message(rank: usize, signal: i32, output: Option<&Path>, records: u64) -> String {
    let kept = match output {
        Some(path) => format!(
            "{records} finished record(s) are in {} (flushed as they finished)",
            path.display()
        ),
        None => "no output stream was open: nothing was saved".to_string(),
    };
    format!(
        "ngauge: rank {rank} interrupted by {}: {kept}",
        signal_name(signal)
    )
}

/// In a rank: on SIGINT/SIGTERM, print [`interrupted_message`] (rank 0, or any rank
/// with an output stream) and exit with 128 + the signal.
pub fn install_rank(rank: usize) -> std::io::Result<()> {
    RANK.store(rank, Ordering::Relaxed);
    let pending = PENDING.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_usize(signal, Arc::clone(pending), signal as usize)?;
    }
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("ngauge-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                exit_interrupted(rank, signal);
            }
        })?;
    Ok(())
}

/// The signal this rank received, if any.
pub fn interrupted() -> Option<i32> {
    let signal = PENDING.get()?.load(Ordering::SeqCst);
    (signal != 0).then_some(signal as i32)
}

/// For a rank whose work failed: if a signal came first, the failure is its
/// consequence (the launcher forwards a signal to every rank, and a peer that
/// exited first closes its connections), so the rank says what a signal makes it
/// say and exits as the signal does, instead of reporting the lost peer.
pub fn exit_if_interrupted() {
    if let Some(signal) = interrupted() {
        exit_interrupted(RANK.load(Ordering::Relaxed), signal);
    }
}

/// Says [`interrupted_message`] (rank 0, or a rank with an output stream) and exits
/// with 128 + `signal`; only the first caller does, a second one waits for the exit.
fn exit_interrupted(rank: usize, signal: i32) -> ! {
    if EXITING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    let has_output = OUTPUT.lock().map(|o| o.is_some()).unwrap_or(false);
    if rank == 0 || has_output {
        eprintln!("{}", interrupted_message(rank, signal));
    }
    std::process::exit(128 + signal)
}

/// The local launcher's side: the ranks' pids (filled as they start) and the signal
/// received, if any.
#[derive(Clone, Debug, Default)]
pub struct LauncherSignals {
    pids: Arc<Mutex<Vec<Pid>>>,
    received: Arc<AtomicI32>,
}

impl LauncherSignals {
    /// Adds a rank to forward signals to.
    pub fn add(&self, pid: Pid) {
        self.pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pid);
    }

    /// The signal received (0: none).
    pub fn received(&self) -> i32 {
        self.received.load(Ordering::Relaxed)
    }
}

/// In the local launcher: forwards SIGINT/SIGTERM to every rank added.
pub fn install_launcher() -> std::io::Result<LauncherSignals> {
    let state = LauncherSignals::default();
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let shared = state.clone();
    std::thread::Builder::new()
        .name("ngauge-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                shared.received.store(signal, Ordering::Relaxed);
                let sig = if signal == SIGINT {
                    Signal::INT
                } else {
                    Signal::TERM
                };
                for &pid in shared.pids.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                    let _ = kill_process(pid, sig);
                }
            }
        })?;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_stream_and_its_records() {
        assert!(message(0, SIGINT, None, 0).contains("nothing was saved"));
        let m = message(0, SIGTERM, Some(Path::new("/tmp/x.jsonl")), 2);
        assert!(
            m.contains("SIGTERM") && m.contains("2 finished") && m.contains("/tmp/x.jsonl"),
            "{m}"
        );
    }
}
