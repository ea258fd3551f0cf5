//! Reading and writing whole frames on a blocking TCP stream, with a deadline.
//!
//! Every read blocks in the kernel (`SO_RCVTIMEO` set to the time left), never spins.

use super::frame::{self, FrameError, Kind, HEADER_LEN};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The peer closed the connection (or it was reset).
    #[error("connection closed")]
    Closed,
    /// Nothing (or not all of a frame) arrived before the deadline.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// Any other socket error.
    #[error("{0}")]
    Io(std::io::Error),
    /// The bytes are not a valid frame.
    #[error("{0}")]
    Frame(FrameError),
}

fn read_all(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    waited: Duration,
) -> Result<(), WireError> {
    let mut done = 0;
    while done < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WireError::TimedOut(waited));
        }
        stream.set_read_timeout(Some(left)).map_err(WireError::Io)?;
        match stream.read(&mut buf[done..]) {
            Ok(0) => return Err(WireError::Closed),
            Ok(n) => done += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(WireError::TimedOut(waited))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                ) =>
            {
                return Err(WireError::Closed)
            }
            Err(e) => return Err(WireError::Io(e)),
        }
    }
    Ok(())
}

/// Reads one frame, waiting at most `timeout` for all of it.
pub fn read_frame(
    stream: &mut TcpStream,
    max_payload: usize,
    timeout: Duration,
) -> Result<(Kind, Vec<u8>), WireError> {
    let deadline = Instant::now() + timeout;
    let mut head = [0u8; HEADER_LEN];
    read_all(stream, &mut head, deadline, timeout)?;
    let header = frame::decode_header(&head, max_payload).map_err(WireError::Frame)?;
    let mut payload = vec![0u8; header.len];
    read_all(stream, &mut payload, deadline, timeout)?;
    Ok((header.kind, payload))
}

/// Writes one frame, waiting at most `timeout` for the kernel to take it.
pub fn write_frame(
    stream: &mut TcpStream,
    kind: Kind,
    payload: &[u8],
    timeout: Duration,
) -> Result<(), WireError> {
    stream
        .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(WireError::Io)?;
    match stream.write_all(&frame::encode(kind, payload)) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(WireError::TimedOut(timeout))
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
            ) =>
        {
            Err(WireError::Closed)
        }
        Err(e) => Err(WireError::Io(e)),
    }
}

/// Blocks until at least one of `fds` is readable (data, end of stream or error) or
/// `timeout` passes; returns which are. Interrupted waits are retried.
pub fn wait_readable<F: std::os::fd::AsFd>(
    fds: &[F],
    timeout: Duration,
) -> std::io::Result<Vec<bool>> {
    use rustix::event::{poll, PollFd, PollFlags};
    let deadline = Instant::now() + timeout;
    loop {
        let mut polls: Vec<PollFd<'_>> = fds
            .iter()
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        let spec = rustix::event::Timespec::try_from(left).unwrap_or(rustix::event::Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        match poll(&mut polls, Some(&spec)) {
            Ok(_) => return Ok(polls.iter().map(|p| !p.revents().is_empty()).collect()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
