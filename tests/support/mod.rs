//! What several integration tests need: waiting for a child process with a time
//! limit while reading its pipes, and skipping a test where the user sees it.
// Each test crate uses a part of this module.
#![allow(dead_code)]

#[cfg(feature = "mpi")]
pub mod mpi;

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Held by the tests that load the host for long (the soft-RoCE VM) or whose
/// figures need it (a switch located to the byte, a shaped link's bandwidth): in
/// the one integration test binary, no two of them run at once, so each shares
/// the host with at most one light test (libtest's two threads).
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    // A heavy test that failed leaves the lock poisoned; the next still runs.
    HEAVY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The name libtest gives the test `test` of the module whose `module_path!()` is
/// `module`: the path without the crate's name (`udp_loss::forge_datagrams`), for
/// running one test of this binary again with `--exact`.
pub fn test_path(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    }
}

/// How long to wait for the pipes to close once the child has exited in time (its
/// own children may still be writing) and once it has been killed (an MPI
/// launcher's ranks may survive it and hold the pipes open for good).
const GRACE_AFTER_EXIT: Duration = Duration::from_secs(10);
const GRACE_AFTER_KILL: Duration = Duration::from_secs(2);

/// Waits up to `limit` for `child` to exit, reading its piped stdout and stderr
/// meanwhile: a child that writes more than a pipe holds (64 KiB) would otherwise
/// block forever on a parent that reads only after the exit. `Ok` with everything
/// it wrote when it exited in time; `Err` with what it wrote until it was killed.
pub fn output_within(child: Child, limit: Duration) -> Result<Output, Output> {
    match wait_reading(child, limit, None) {
        (out, Ended::InTime) => Ok(out),
        (out, _) => Err(out),
    }
}

/// Starts `cmd` with stdin closed and stdout and stderr piped, for
/// [`output_within`] and [`aborting_job_within`].
pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()))
}

/// Runs `cmd`, an MPI launcher whose job must abort, with ranks running
/// `rank_program` ([`aborting_job_within`]): a job still running after `limit`
/// fails the test with what it wrote, a launcher that outlives its ranks in its
/// own teardown does not.
pub fn run_aborting_job(mut cmd: Command, rank_program: &str, limit: Duration) -> Output {
    let child = spawn_piped(&mut cmd);
    aborting_job_within(child, rank_program, limit).unwrap_or_else(|out| {
        panic!(
            "{cmd:?} hung for {limit:?}; stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// How long an MPI launcher may outlive the last rank of its job.
const LAUNCHER_TEARDOWN_GRACE: Duration = Duration::from_secs(10);

/// [`output_within`] for an MPI launcher whose job must abort, with ranks running
/// `rank_program`. Open MPI 4.1's `mpirun` (Debian's, on PMIx 4.2) sometimes fails
/// in its own teardown after `MPI_Abort`: the show_help message of the aborting
/// rank arrives cut ("ORTE_ERROR_LOG: Data unpack would read past end of buffer"),
/// and `mpirun` then may segfault in `PMIx_server_finalize` or hang. Once ranks
/// have been seen and none is alive any more, the launcher has
/// [`LAUNCHER_TEARDOWN_GRACE`] to exit and is then killed: `Ok` with what it
/// forwarded, since the job did end, and a line on the process's stdout where the
/// user sees it (as [`skip`] prints). A rank still alive at `limit` is a hung job:
/// `Err`.
pub fn aborting_job_within(
    child: Child,
    rank_program: &str,
    limit: Duration,
) -> Result<Output, Output> {
    match wait_reading(child, limit, Some(rank_program)) {
        (out, Ended::InTime) => Ok(out),
        (out, Ended::LauncherOutlivedRanks) => {
            let _ = writeln!(
                std::io::stdout().lock(),
                "\nthe launcher of {rank_program} outlived its ranks by {LAUNCHER_TEARDOWN_GRACE:?} \
                 and was killed (docs/findings/2026-12-01-mpirun-teardown-after-abort.md)"
            );
            Ok(out)
        }
        (out, Ended::Killed) => Err(out),
    }
}

/// How [`wait_reading`] stopped waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    InTime,
    /// Killed [`LAUNCHER_TEARDOWN_GRACE`] after the last rank of its job ended.
    LauncherOutlivedRanks,
    /// Killed at the limit.
    Killed,
}

/// Waits for `child` as [`output_within`] does; with `rank_program`, also kills a
/// launcher that outlives the ranks of its job (its descendants running
/// `rank_program`) by [`LAUNCHER_TEARDOWN_GRACE`].
fn wait_reading(mut child: Child, limit: Duration, rank_program: Option<&str>) -> (Output, Ended) {
    let stdout = Drain::start(child.stdout.take());
    let stderr = Drain::start(child.stderr.take());
    let began = Instant::now();
    let mut ranks_seen = false;
    let mut ranks_gone_at: Option<Instant> = None;
    let (status, ended) = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break (status, Ended::InTime);
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            break (
                child.wait().expect("wait for the killed child"),
                Ended::Killed,
            );
        }
        if let Some(program) = rank_program {
            let alive = live_descendants_running(child.id(), program);
            ranks_seen |= alive > 0;
            if ranks_seen && alive == 0 {
                let gone_at = *ranks_gone_at.get_or_insert_with(Instant::now);
                if gone_at.elapsed() > LAUNCHER_TEARDOWN_GRACE {
                    let _ = child.kill();
                    let status = child.wait().expect("wait for the killed launcher");
                    break (status, Ended::LauncherOutlivedRanks);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let grace = if ended == Ended::InTime {
        GRACE_AFTER_EXIT
    } else {
        GRACE_AFTER_KILL
    };
    let out = Output {
        status,
        stdout: stdout.finish(grace),
        stderr: stderr.finish(grace),
    };
    (out, ended)
}

/// How many descendants of process `root` run `program` (its file name, as the
/// kernel keeps it: 15 bytes at most) and have not exited (zombies do not count).
fn live_descendants_running(root: u32, program: &str) -> usize {
    let comm: String = program.chars().take(15).collect();
    let processes: Vec<ProcStat> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|stat| ProcStat::parse(&stat))
        .collect();
    let mut tree = vec![root];
    let mut live = 0;
    while let Some(parent) = tree.pop() {
        for p in processes.iter().filter(|p| p.ppid == parent) {
            tree.push(p.pid);
            if p.comm == comm && p.state != 'Z' {
                live += 1;
            }
        }
    }
    live
}

/// The fields of `/proc/PID/stat` a process tree needs.
#[derive(Debug, PartialEq, Eq)]
struct ProcStat {
    pid: u32,
    comm: String,
    state: char,
    ppid: u32,
}

impl ProcStat {
    /// `pid (comm) state ppid ...`; `comm` may hold spaces and parentheses, so it
    /// ends at the last `)`.
    fn parse(stat: &str) -> Option<ProcStat> {
        let (pid, rest) = stat.split_once(" (")?;
        let (comm, rest) = rest.rsplit_once(") ")?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some(ProcStat {
            pid: pid.trim().parse().ok()?,
            comm: comm.to_string(),
            state,
            ppid,
        })
    }
}

/// What a skipped test lacks, which decides whether `CI=true` lets it skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lack {
    /// Something `scripts/test` installs (a Debian package, a tool, a service it
    /// starts): under `CI=true` the test fails instead of skipping, since a skip
    /// there hides a broken setup.
    Installed,
    /// The same, and the test also fails when the environment variable holds `1`
    /// (`scripts/test` sets `NGAUGE_REQUIRE_VM` once the VM's packages are there).
    InstalledOrRequired(&'static str),
    /// Something no install gives (root, a machine without an RDMA device, the MPI
    /// flavour this run does not use): a skip even under `CI=true`.
    Host,
}

/// The line a skipped test prints: `<test>: SKIPPED (<reason>)`.
pub fn skip_line(test: &str, reason: &str) -> String {
    format!("{test}: SKIPPED ({reason})")
}

/// Whether a skip for want of `lack` must fail the test instead, given the
/// environment variable lookup `var`.
pub fn skip_is_failure(lack: Lack, var: impl Fn(&str) -> Option<String>) -> bool {
    let is_1 = |name: &str, want: &str| var(name).is_some_and(|v| v == want);
    match lack {
        Lack::Host => false,
        Lack::Installed => is_1("CI", "true"),
        Lack::InstalledOrRequired(required) => is_1("CI", "true") || is_1(required, "1"),
    }
}

/// Skips the calling test visibly: prints [`skip_line`] straight to the process's
/// stdout, where `cargo test` shows it beside the test's `ok` (libtest captures
/// `print!` and `eprint!`, not this), or panics with it when [`skip_is_failure`].
/// The test returns right after, or leaves out only the part the reason names.
pub fn skip(test: &str, lack: Lack, reason: impl std::fmt::Display) {
    let line = skip_line(test, &reason.to_string());
    if skip_is_failure(lack, |name| std::env::var(name).ok()) {
        panic!("{line}: not allowed here (CI=true, or a NGAUGE_REQUIRE_* variable is 1)");
    }
    let _ = writeln!(std::io::stdout().lock(), "\n{line}");
}

/// A thread that reads a pipe to its end into a shared buffer.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    closed: mpsc::Receiver<()>,
}

impl Drain {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = mpsc::channel();
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                loop {
                    match pipe.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            let _ = closed_tx.send(());
        });
        Drain { bytes, closed }
    }

    /// What was read once the pipe closed, or after `grace` if it stays open.
    fn finish(self, grace: Duration) -> Vec<u8> {
        let _ = self.closed.recv_timeout(grace);
        std::mem::take(&mut *self.bytes.lock().unwrap())
    }
}
