//! What several integration tests need: waiting for a child process with a time
//! limit while reading its pipes.

use std::io::Read;
use std::process::{Child, Output};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Waits up to `limit` for `child` to exit, reading its piped stdout and stderr
/// meanwhile: a child that writes more than a pipe holds (64 KiB) would otherwise
/// block forever on a parent that reads only after the exit. `Ok` with everything
/// it wrote when it exited in time; `Err` with what it wrote until it was killed.
pub fn output_within(mut child: Child, limit: Duration) -> Result<Output, Output> {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
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
    let out = Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    };
    if in_time {
        Ok(out)
    } else {
        Err(out)
    }
}
