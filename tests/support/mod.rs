//! What several integration tests need: waiting for a child process with a time
//! limit while reading its pipes.

#[cfg(feature = "mpi")]
pub mod mpi;

use std::io::Read;
use std::process::{Child, Output};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long to wait for the pipes to close once the child has exited in time (its
/// own children may still be writing) and once it has been killed (an MPI
/// launcher's ranks may survive it and hold the pipes open for good).
const GRACE_AFTER_EXIT: Duration = Duration::from_secs(10);
const GRACE_AFTER_KILL: Duration = Duration::from_secs(2);

/// Waits up to `limit` for `child` to exit, reading its piped stdout and stderr
/// meanwhile: a child that writes more than a pipe holds (64 KiB) would otherwise
/// block forever on a parent that reads only after the exit. `Ok` with everything
/// it wrote when it exited in time; `Err` with what it wrote until it was killed.
pub fn output_within(mut child: Child, limit: Duration) -> Result<Output, Output> {
    let stdout = Drain::start(child.stdout.take());
    let stderr = Drain::start(child.stderr.take());
    let began = Instant::now();
    let (status, in_time) = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break (status, true);
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            break (child.wait().expect("wait for the killed child"), false);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let grace = if in_time {
        GRACE_AFTER_EXIT
    } else {
        GRACE_AFTER_KILL
    };
    let out = Output {
        status,
        stdout: stdout.finish(grace),
        stderr: stderr.finish(grace),
    };
    if in_time {
        Ok(out)
    } else {
        Err(out)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh")
    }

    #[test]
    fn more_than_a_pipe_holds_is_read_while_waiting() {
        let child = sh("head -c 1048576 /dev/zero; head -c 1048577 /dev/zero >&2");
        let out = output_within(child, Duration::from_secs(60)).expect("in time");
        assert!(out.status.success());
        assert_eq!(
            (out.stdout.len(), out.stderr.len()),
            (1 << 20, (1 << 20) + 1)
        );
    }

    #[test]
    fn a_child_past_the_limit_is_killed_even_if_its_children_hold_the_pipes() {
        let began = Instant::now();
        let child = sh("echo started; sleep 30 & sleep 30");
        let out = output_within(child, Duration::from_millis(500)).expect_err("killed");
        assert!(!out.status.success());
        assert_eq!(out.stdout, b"started\n");
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{:?}",
            began.elapsed()
        );
    }
}
