//! Limits named before a job starts: the open descriptors a rank of a job of p ranks
//! needs (`RLIMIT_NOFILE`) and the tasks the local launcher starts
//! (`RLIMIT_NPROC`, `kernel.pid_max`).
//!
//! A job that runs out of descriptors halfway fails far from the cause (a listener
//! drops ranks that are waiting, a connect fails); here the soft limit is raised to
//! the hard one where that suffices, and otherwise the job is refused with one line
//! that says what it needs.

use super::error::LaunchError;

/// Descriptors a process uses whatever the job size: standard streams, pipes, the
/// listeners, the liveness links, transports' own, and room for strangers at a
/// listener.
const BASE_DESCRIPTORS: u64 = 48;

/// Tasks (processes and threads) per rank of a local job: the rank's main,
/// liveness, signal and TCP data-listener threads, and the launcher's waiter and
/// stderr forwarder.
const TASKS_PER_RANK: u64 = 7;

/// Open descriptors one process of a job of `np` ranks may hold at once: one per
/// other rank (rank 0's rendezvous connections until the control tree forms, then
/// every rank's data connections: the TCP transport connects the pairs that talk,
/// all of them at worst; the local
/// launcher's pipes) and the ones any rank has.
pub fn descriptors_needed(np: usize) -> u64 {
    np as u64 + BASE_DESCRIPTORS
}

/// Raises the soft descriptor limit to the hard one (a flood of connections at a
/// listener must not exhaust it first) and checks it holds what a process of a job
/// of `np` ranks needs.
pub fn check_descriptors(np: usize) -> Result<(), LaunchError> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let need = descriptors_needed(np);
    let mut lim = getrlimit(Resource::Nofile);
    let hard = lim.maximum.unwrap_or(u64::MAX);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
    let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if soft >= need {
        return Ok(());
    }
    Err(LaunchError::Limit(format!(
        "a job of {np} ranks needs about {need} open files per process, the limit is {soft} \
         (hard limit {hard}): raise it (ulimit -n {need}) or start fewer ranks"
    )))
}

/// Checks that the local launcher can start `np` ranks: the tasks they and their
/// threads take fit under this user's `RLIMIT_NPROC` (soft raised to hard; root is
/// exempt) and the host's `kernel.pid_max`, counting the tasks already running.
pub fn check_tasks(np: usize) -> Result<(), LaunchError> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let need = TASKS_PER_RANK * np as u64 + 16;
    let running = system_tasks();
    if let Some(pid_max) = read_u64("/proc/sys/kernel/pid_max") {
        let room = pid_max.saturating_sub(running);
        if room < need {
            return Err(LaunchError::Limit(format!(
                "{np} local ranks need about {need} tasks (processes and threads); this host \
                 has room for {room} (kernel.pid_max {pid_max}, {running} running): start \
                 fewer ranks"
            )));
        }
    }
    if rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let mut lim = getrlimit(Resource::Nproc);
    let hard = lim.maximum.unwrap_or(u64::MAX);
    lim.current = lim.maximum;
    let _ = setrlimit(Resource::Nproc, lim);
    let Some(soft) = getrlimit(Resource::Nproc).current else {
        return Ok(());
    };
    let mine = user_tasks();
    if soft.saturating_sub(mine) >= need {
        return Ok(());
    }
    Err(LaunchError::Limit(format!(
        "{np} local ranks need about {need} tasks (processes and threads); this user may run \
         {soft} (hard limit {hard}) and runs {mine}: raise it (ulimit -u {}) or start fewer \
         ranks",
        mine + need
    )))
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Tasks on the host: the total in `/proc/loadavg` ("running/total").
fn system_tasks() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok())
        .unwrap_or(0)
}

/// Tasks of this process's real user (what `RLIMIT_NPROC` counts).
fn user_tasks() -> u64 {
    let uid = rustix::process::getuid().as_raw().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
        };
        if field("Uid:") == Some(uid.as_str()) {
            total += field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_grow_with_the_job() {
        assert_eq!(descriptors_needed(8), 56);
        assert!(descriptors_needed(4096) > 4096);
        // This process runs under a real limit that holds a small job.
        check_descriptors(2).unwrap();
        assert!(system_tasks() > 0);
    }

    #[test]
    fn an_impossible_job_names_the_limit() {
        let e = check_descriptors(1 << 40).unwrap_err().to_string();
        assert!(e.contains("open files") && e.contains("ulimit -n"), "{e}");
        let e = check_tasks(1 << 40).unwrap_err().to_string();
        assert!(e.contains("tasks"), "{e}");
    }

    /// A limit too low for the job is refused before it starts, as bad input is
    /// (exit status 2).
    #[test]
    fn a_refusal_is_a_usage_error() {
        assert!(check_descriptors(1 << 40).unwrap_err().is_usage());
        assert!(check_tasks(1 << 40).unwrap_err().is_usage());
    }
}
