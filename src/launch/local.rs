//! The local launcher: `ngauge --np N COMMAND` with no launcher around it starts N
//! copies of the current executable on this host, one per core.
//!
//! Each child gets `NGAUGE_RANK`, `NGAUGE_SIZE`, `NGAUGE_RENDEZVOUS`,
//! `NGAUGE_JOB_TOKEN` (random per job), `NGAUGE_LAUNCHER=local` and `NGAUGE_CORE` (the
//! core it pins itself to; ranks wrap around the allowed cores, with a warning, when
//! they outnumber them). Rank 0 is started first, listens on `--bind`/`--rendezvous`
//! (default `127.0.0.1:0`) and announces the address it got on stderr; then the others
//! are started with that address.
//!
//! Output: rank 0's stdout and stderr go to ours; the others' stderr only with
//! `--verbose` (prefixed with the rank), and otherwise the tail of a failing rank's
//! stderr when rank 0 did not explain the failure itself. When a rank fails, the
//! others get [`GRACE`] to notice (the control channel tells them) and report; then
//! the launcher kills what is left. It exits with the worst status of all ranks.

/// The number of distinct cores the local launcher spread its ranks over, passed to
/// every rank: a pinned rank sees only its own core, and a launcher started under
/// `taskset` or in a cpuset has fewer cores than the host.
pub const JOB_CORES_VAR: &str = "NGAUGE_JOB_CORES";

/// Cores the ranks on this host may share: what the local launcher spread them over
/// (it may itself run under `taskset` or in a cpuset), else the host's online CPUs
/// (a pinned rank's own affinity shows only its core).
///
/// Reads [`JOB_CORES_VAR`] from the process environment: the local launcher passes
/// the count to its ranks that way (a launching need).
pub fn job_cores() -> usize {
    std::env::var(JOB_CORES_VAR)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(host_cores)
}

/// Cores of this host (online CPUs), not just the ones this pinned rank may use.
fn host_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::clock::parse_cpu_list(s.trim()))
        .map_or_else(crate::clock::available_cores, |cpus| cpus.len().max(1))
}

/// Set for rank 0 when the launcher's own stderr is a terminal: rank 0's stderr is a
/// pipe to the launcher, which forwards it byte for byte once the rank has
/// announced itself, so a progress display still reaches the user's terminal.
pub const STDERR_TTY_VAR: &str = "NGAUGE_STDERR_TTY";

/// Whether progress may be drawn on stderr: it is a terminal, or the local launcher
/// forwards it to one. Reads [`STDERR_TTY_VAR`] from the process environment (a
/// launching need).
pub fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() || std::env::var_os(STDERR_TTY_VAR).is_some_and(|v| v == "1")
}

use super::error::LaunchError;
use super::LaunchOptions;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the surviving ranks get to report after one failed.
pub const GRACE: Duration = Duration::from_secs(3);
/// The line with which rank 0 announces its rendezvous address on stderr.
pub const ANNOUNCE: &str = "NGAUGE-RENDEZVOUS-ADDRESS ";
/// Lines of a quiet rank's stderr kept to show if it fails.
const TAIL_LINES: usize = 20;

/// A random job token (128 bits from the kernel).
pub fn random_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !ok {
        // No /dev/urandom: time and pid are unique enough to keep jobs apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (t ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// In a rank started by the local launcher: die with the launcher. A launcher
/// killed with SIGKILL cannot stop its ranks, so each asks the kernel to kill it when
/// the launcher goes (`PR_SET_PDEATHSIG`), and exits if the launcher is already gone.
/// Reads `NGAUGE_LAUNCHER_PID` from the process environment (a launching need).
pub fn die_with_launcher() {
    let Some(launcher) = std::env::var("NGAUGE_LAUNCHER_PID")
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return;
    };
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    if parent != Some(launcher) {
        eprintln!("ngauge: the local launcher (pid {launcher}) is gone; exiting");
        std::process::exit(1);
    }
}

/// Exit code of a finished child: its code, or 128 + signal.
fn code_of(status: &ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

struct Rank {
    pid: rustix::process::Pid,
    done: bool,
}

/// Runs the job; returns the worst exit status of its ranks. Starts the ranks with
/// this process's own executable and arguments (read from the process: a launching
/// need) and passes each its place in the job through the environment.
pub fn run(opts: &LaunchOptions) -> Result<i32, LaunchError> {
    let np = opts.np.max(1);
    super::limits::check_tasks(np)?;
    let signals = super::signals::install_launcher()
        .map_err(LaunchError::io("installing the SIGINT/SIGTERM handler"))?;
    let exe = std::env::current_exe().map_err(LaunchError::io("finding the ngauge executable"))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let token = opts.job_token.clone().unwrap_or_else(random_token);
    let mut cores = crate::clock::allowed_cores();
    if cores.is_empty() {
        cores = (0..crate::clock::available_cores()).collect();
    }
    // Said before any rank starts, for every command (info and the self-tests run
    // no binding check); the measuring commands' binding check then names the
    // ranks that share each core.
    if np > cores.len() {
        eprintln!(
            "ngauge: warning: {np} ranks on {} cores: ranks share cores (wrapping around); \
             figures measure the scheduler too",
            cores.len()
        );
    }
    let listen = opts
        .bind
        .clone()
        .or_else(|| opts.rendezvous.clone())
        .unwrap_or_else(|| "127.0.0.1:0".into());

    let command = |rank: usize, rendezvous: &str| {
        let mut c = Command::new(&exe);
        c.args(&args)
            .env("NGAUGE_RANK", rank.to_string())
            .env("NGAUGE_SIZE", np.to_string())
            .env("NGAUGE_LAUNCHER", "local")
            .env("NGAUGE_JOB_TOKEN", &token)
            .env("NGAUGE_RENDEZVOUS", rendezvous)
            .env("NGAUGE_CORE", cores[rank % cores.len()].to_string())
            .env(JOB_CORES_VAR, cores.len().to_string())
            .env("NGAUGE_LAUNCHER_PID", std::process::id().to_string())
            .env_remove("NGAUGE_ANNOUNCE")
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let spawn_err = |rank: usize| LaunchError::io(format!("starting rank {rank}"));

    // Rank 0 first: it tells us where it listens.
    let mut zero = command(0, &listen);
    zero.env("NGAUGE_ANNOUNCE", "1");
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        zero.env(STDERR_TTY_VAR, "1");
    }
    let mut zero = zero
        .stdout(Stdio::inherit())
        .spawn()
        .map_err(spawn_err(0))?;
    signals.add(rustix::process::Pid::from_child(&zero));
    let (addr_tx, addr_rx) = mpsc::channel::<String>();
    let zero_err = zero.stderr.take().expect("piped");
    let zero_said: std::sync::Arc<std::sync::Mutex<Vec<u8>>> = Default::default();
    let zero_said_w = zero_said.clone();
    let forward_zero = thread(move || {
        let mut reader = BufReader::new(zero_err);
        let mut line = String::new();
        // Line by line until rank 0 announces its address, then byte for byte, so
        // that a progress line redrawn with '\r' is not held back until a newline.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(addr) = line.trim_end().strip_prefix(ANNOUNCE) {
                let _ = addr_tx.send(addr.trim().to_string());
                break;
            }
            eprint!("{line}");
        }
        let _ = std::io::copy(
            &mut reader,
            &mut Kept {
                out: std::io::stderr(),
                kept: zero_said_w,
            },
        );
    });
    let forward_zero = match forward_zero {
        Ok(t) => t,
        Err(e) => {
            let _ = zero.kill();
            let _ = zero.wait();
            return Err(e);
        }
    };
    let announced = match addr_rx.recv_timeout(opts.timeout) {
        Ok(addr) => addr,
        Err(_) => {
            // Rank 0 failed before listening (its stderr said why) or hangs.
            let _ = zero.kill();
            let status = zero.wait().map_err(spawn_err(0))?;
            let _ = forward_zero.join();
            let code = code_of(&status);
            return Ok(if code == 0 { 1 } else { code });
        }
    };
    // Others connect to 127.0.0.1 when rank 0 listens on all interfaces.
    let connect_to = match announced.parse::<std::net::SocketAddr>() {
        Ok(mut a) if a.ip().is_unspecified() => {
            a.set_ip(if a.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
            a.to_string()
        }
        _ => announced,
    };

    let mut children: Vec<Child> = vec![zero];
    let mut forwarders = vec![forward_zero];
    let tails: Vec<std::sync::Arc<std::sync::Mutex<VecDeque<String>>>> =
        (0..np).map(|_| Default::default()).collect();
    for (rank, tail) in tails.iter().enumerate().skip(1) {
        let mut c = command(rank, &connect_to);
        c.stdout(if opts.verbose {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        let mut child = match c.spawn() {
            Ok(child) => child,
            Err(e) => {
                for mut ch in children {
                    let _ = ch.kill();
                    let _ = ch.wait();
                }
                return Err(spawn_err(rank)(e));
            }
        };
        signals.add(rustix::process::Pid::from_child(&child));
        let err = child.stderr.take().expect("piped");
        let verbose = opts.verbose;
        let tail = tail.clone();
        let forwarder = thread(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if verbose {
                    let mut e = std::io::stderr().lock();
                    let _ = writeln!(e, "[rank {rank}] {line}");
                } else {
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
        children.push(child);
        match forwarder {
            Ok(t) => forwarders.push(t),
            Err(e) => {
                for mut ch in children {
                    let _ = ch.kill();
                    let _ = ch.wait();
                }
                return Err(e);
            }
        }
    }

    // One waiter thread per child: the main thread blocks on the channel.
    let (done_tx, done_rx) = mpsc::channel::<(usize, std::io::Result<ExitStatus>)>();
    let mut ranks: Vec<Rank> = (children.iter())
        .map(|child| Rank {
            pid: rustix::process::Pid::from_child(child),
            done: false,
        })
        .collect();
    for (rank, mut child) in children.into_iter().enumerate() {
        let tx = done_tx.clone();
        if let Err(e) = thread(move || {
            let _ = tx.send((rank, child.wait()));
        }) {
            for r in &ranks {
                let _ = rustix::process::kill_process(r.pid, rustix::process::Signal::KILL);
            }
            return Err(e);
        }
    }
    drop(done_tx);

    let mut codes: Vec<Option<i32>> = vec![None; np];
    let mut killed = vec![false; np];
    let mut first_failure: Option<usize> = None;
    let mut first_exit: Option<usize> = None;
    // When the ranks still running are stopped: GRACE after a failure; after a rank
    // finished cleanly, the others get the job's timeout on top (a rank stopped
    // with SIGSTOP after its last word would otherwise keep the job forever).
    let mut kill_at: Option<Instant> = None;
    let mut reaping = false;
    let mut left = np;
    while left > 0 {
        let msg = match kill_at {
            None => done_rx.recv().ok(),
            Some(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                match done_rx.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) if !reaping => {
                        for (r, rk) in ranks.iter().enumerate() {
                            if !rk.done && !killed[r] {
                                killed[r] = true;
                                let _ = rustix::process::kill_process(
                                    rk.pid,
                                    rustix::process::Signal::KILL,
                                );
                            }
                        }
                        // Now wait for them to be reaped.
                        reaping = true;
                        kill_at = None;
                        continue;
                    }
                    Err(_) => None,
                }
            }
        };
        let Some((rank, status)) = msg else { break };
        ranks[rank].done = true;
        left -= 1;
        let code = match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = s.signal() {
                    if !killed[rank] {
                        eprintln!(
                            "ngauge: rank {rank} was killed by signal {sig} ({})",
                            super::signals::signal_name(sig)
                        );
                    }
                }
                code_of(&s)
            }
            Err(e) => {
                eprintln!("ngauge: waiting for rank {rank} failed: {e}");
                1
            }
        };
        codes[rank] = Some(code);
        first_exit.get_or_insert(rank);
        let allowed = if code != 0 {
            first_failure.get_or_insert(rank);
            GRACE
        } else {
            GRACE + opts.timeout
        };
        if !reaping {
            let at = Instant::now() + allowed;
            kill_at = Some(kill_at.map_or(at, |k| k.min(at)));
        }
    }
    for f in forwarders {
        let _ = f.join();
    }
    let stopped: Vec<usize> = (0..np).filter(|&r| killed[r]).collect();
    if !stopped.is_empty() {
        match first_failure {
            Some(r) => eprintln!(
                "ngauge: stopped ranks {stopped:?}: still running {GRACE:?} after rank {r} failed"
            ),
            None => eprintln!(
                "ngauge: stopped ranks {stopped:?}: still running {:?} after rank {} finished \
                 (stopped with SIGSTOP, or hung?)",
                GRACE + opts.timeout,
                first_exit.unwrap_or(0)
            ),
        }
    }
    let signal = signals.received();
    if signal != 0 {
        eprintln!(
            "ngauge: interrupted by {}: stopped all {np} ranks",
            super::signals::signal_name(signal)
        );
        return Ok(128 + signal);
    }
    // Rank 0 explains failures itself unless it exited cleanly or by a signal.
    let zero_explained = matches!(codes[0], Some(c) if c != 0 && c < 128);
    if !opts.verbose {
        // A failed rank's stderr tail; when rank 0 explained the failure, only the
        // rank's own errors it lacks (it may only have seen the connection close).
        let said = String::from_utf8_lossy(&zero_said.lock().unwrap_or_else(|p| p.into_inner()))
            .into_owned();
        for rank in 1..np {
            if matches!(codes[rank], Some(c) if c != 0) && !killed[rank] {
                let t = tails[rank].lock().unwrap_or_else(|p| p.into_inner());
                let lines = if zero_explained {
                    unexplained_errors(&said, rank, t.iter())
                } else {
                    t.iter().collect()
                };
                for line in lines {
                    eprintln!("[rank {rank}] {line}");
                }
            }
        }
    }
    Ok(worst_status(&codes, &killed))
}

/// A writer that forwards to `out` and keeps the last [`KEPT_BYTES`] written.
struct Kept<W> {
    out: W,
    kept: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

const KEPT_BYTES: usize = 16 << 10;

impl<W: Write> Write for Kept<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        k.extend_from_slice(&buf[..n]);
        if k.len() > KEPT_BYTES {
            let cut = k.len() - KEPT_BYTES;
            k.drain(..cut);
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The error lines of rank `rank`'s stderr tail that rank 0's stderr (`zero`) does
/// not already carry, when rank 0 named that rank: rank 0 saw, say, "rank 1 closed
/// the connection", and rank 1's "cannot fit a drift model" explains why.
fn unexplained_errors<'a>(
    zero: &str,
    rank: usize,
    tail: impl Iterator<Item = &'a String>,
) -> Vec<&'a String> {
    let named = format!("rank {rank} ");
    let zero_errors: Vec<&str> = zero.lines().filter(|l| l.contains("error:")).collect();
    if !zero_errors.iter().any(|l| l.contains(&named)) {
        return Vec::new();
    }
    let prefix = format!("rank {rank}: ");
    tail.filter(|line| {
        let Some(own) = line.split_once("error: ").map(|(_, e)| e) else {
            return false;
        };
        let own = own.strip_prefix(&prefix).unwrap_or(own);
        !zero_errors.iter().any(|z| z.contains(own))
    })
    .collect()
}

/// The job's exit status: the worst of the ranks that ended on their own (a usage
/// error's 2 is not hidden behind the 137 of ranks the launcher had to stop), or 1
/// when only stopped ranks failed.
fn worst_status(codes: &[Option<i32>], killed: &[bool]) -> i32 {
    let own = codes
        .iter()
        .zip(killed)
        .filter(|(_, &k)| !k)
        .map(|(c, _)| c.unwrap_or(1))
        .max()
        .unwrap_or(0);
    if own == 0 && killed.iter().any(|&k| k) {
        1
    } else {
        own
    }
}

/// A thread of the launcher; one that cannot start (a process or memory limit) is
/// an error, not a panic.
fn thread(f: impl FnOnce() + Send + 'static) -> Result<std::thread::JoinHandle<()>, LaunchError> {
    std::thread::Builder::new()
        .spawn(f)
        .map_err(LaunchError::io(
            "starting a thread (at a limit of `ulimit -u` or `-v`?)",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_status_prefers_what_ranks_said_themselves() {
        assert_eq!(worst_status(&[Some(0), Some(0)], &[false, false]), 0);
        assert_eq!(worst_status(&[Some(2), Some(137)], &[false, true]), 2);
        assert_eq!(worst_status(&[Some(1), Some(137)], &[false, false]), 137);
        assert_eq!(worst_status(&[Some(0), Some(137)], &[false, true]), 1);
        assert_eq!(worst_status(&[Some(0), None], &[false, false]), 1);
    }

    #[test]
    fn issue18_a_blamed_rank_s_own_error_is_shown_once() {
        let tail = [
            "ngauge: warning: something".to_string(),
            "ngauge: error: rank 1: clock sync: cannot fit a drift model against rank 0"
                .to_string(),
        ];
        let zero =
            "ngauge: error: rank 0: clock sync: tcp: rank 1 closed the connection during recv\n";
        assert_eq!(unexplained_errors(zero, 1, tail.iter()), vec![&tail[1]]);
        // Rank 0 already carries the reason (rank 1 aborted with it): nothing more.
        let zero = "ngauge: error: rank 0: lost rank 1 during barrier: failed: clock sync: cannot fit a drift model against rank 0\n";
        assert!(unexplained_errors(zero, 1, tail.iter()).is_empty());
        // Rank 0 blamed another rank: rank 1's line is an echo.
        let zero = "ngauge: error: rank 0: tcp: rank 2 closed the connection during recv\n";
        assert!(unexplained_errors(zero, 1, tail.iter()).is_empty());
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
