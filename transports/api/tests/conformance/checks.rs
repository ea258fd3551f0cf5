//! The checks, each run by every rank of a job with its own transport (see the
//! module above). Rank 0 and 1 (and 2) act; ranks beyond a check's take part in
//! its control-plane calls only.

use super::{Check, Needs, Stop, Verdict};
use crate::{Control, Rank, RequestId, Transport, TransportError};

/// `function: ranks [from fewest] [needs what]`, the check named after its
/// function: it runs on `ranks` threads, under a launcher on `fewest` or more.
macro_rules! table {
    ($($body:ident: $ranks:literal $(from $fewest:literal)? $(needs $needs:ident)?),* $(,)?) => {
        &[$(Check {
            name: stringify!($body),
            ranks: $ranks,
            fewest: table!(@fewest $ranks $($fewest)?),
            needs: table!(@needs $($needs)?),
            body: $body,
        }),*]
    };
    (@fewest $ranks:literal) => { $ranks };
    (@fewest $ranks:literal $fewest:literal) => { $fewest };
    (@needs) => { Needs::Nothing };
    (@needs $needs:ident) => { Needs::$needs };
}

pub(super) static ALL: &[Check] = table![
    pingpong_every_size_intact: 2,
    receives_match_sends_in_order: 2,
    every_pair_exchanges_at_once: 3 from 2,
    large_exchange_progresses_both_ways: 2,
    blocking_call_progresses_queued_isend: 2,
    bad_peers_requests_regions_and_buffers: 2,
    sizes_beyond_the_limit_or_posted: 2,
    pending_receives_hold_their_bytes: 3,
    silent_peer_times_out: 2 needs Timeout,
    a_timeout_fails_only_the_waiting_call: 2 needs KeptRequests,
    closed_peer_is_named: 2 needs ClosedPeer,
];

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(Stop::Failed(format!($($fmt)*)));
        }
    };
}

/// Known bytes: a function of position and `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn busy<T>(r: Result<T, TransportError>) -> bool {
    matches!(r, Err(TransportError::BufferBusy { .. }))
}

/// `settle` (what an unreliable transport needs before the control plane
/// waits), then a barrier.
fn barrier(t: &mut dyn Transport, c: &mut dyn Control) -> Verdict {
    t.settle()?;
    Ok(c.barrier()?)
}

/// The largest message, or `bytes` when that is smaller.
fn at_most(t: &dyn Transport, bytes: usize) -> usize {
    t.capabilities()
        .max_message_bytes
        .map_or(bytes, |m| m.min(bytes))
}

/// Rank 0 against every other rank in turn, 3 round trips per size from 0 bytes
/// to the largest message (1 MiB when unlimited), every message checked on
/// arrival; then `settle`.
fn pingpong_every_size_intact(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let (me, n) = (t.rank(), t.size());
    let max = t.capabilities().max_message_bytes;
    let mut sizes: Vec<usize> = [0, 1, 7, 1000, 4096, 32768, 65536, 1 << 20]
        .into_iter()
        .filter(|&s| max.is_none_or(|m| s <= m))
        .collect();
    sizes.extend(max.filter(|&m| m < 1 << 20));
    let top = *sizes.last().expect("sizes");
    let (sbuf, rbuf) = (t.alloc_buffer(top)?, t.alloc_buffer(top)?);
    for &size in &sizes {
        for peer in 1..n {
            for round in 0..3 {
                let seed = |from: Rank| (from * 100 + round * 7 + size) as u8;
                let (other, first) = match me {
                    0 => (peer, true),
                    _ if me == peer => (0, false),
                    _ => continue,
                };
                if first {
                    t.buffer_mut(sbuf)?[..size].copy_from_slice(&pattern(size, seed(me)));
                    t.send(other, sbuf.prefix(size))?;
                }
                t.recv(other, rbuf.prefix(size))?;
                ensure!(
                    t.buffer(rbuf)?[..size] == pattern(size, seed(other)),
                    "round {round} of {size} B from rank {other}: bytes damaged"
                );
                if !first {
                    t.buffer_mut(sbuf)?[..size].copy_from_slice(&pattern(size, seed(me)));
                    t.send(other, sbuf.prefix(size))?;
                }
            }
        }
    }
    t.free_buffer(sbuf)?;
    t.free_buffer(rbuf)?;
    barrier(t.as_mut(), c)
}

/// Four queued `isend`s and a blocking `send` behind them arrive in that order
/// into four `irecv`s completed by `test`, and a blocking `recv` after them
/// (transports that keep the order: [`Capabilities::ordered`]).
///
/// [`Capabilities::ordered`]: crate::Capabilities::ordered
fn receives_match_sends_in_order(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    if !t.capabilities().ordered {
        return Err(Stop::Skipped("messages kept in order".into()));
    }
    let buf = t.alloc_buffer(40)?;
    let tail = t.alloc_buffer(1)?;
    if t.rank() == 0 {
        for i in 0..4u8 {
            t.buffer_mut(buf)?[i as usize * 10..][..10].fill(i + 1);
        }
        let ids = (0..4)
            .map(|i| t.isend(1, buf.region(i * 10, 10)))
            .collect::<Result<Vec<_>, _>>()?;
        // A blocking send behind queued ones must go after them.
        t.buffer_mut(tail)?[0] = 9;
        t.send(1, tail.prefix(1))?;
        t.wait_all(&ids)?;
    } else if t.rank() == 1 {
        let ids = (0..4)
            .map(|i| t.irecv(0, buf.region(i * 10, 10)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut done = [false; 4];
        while done.iter().any(|d| !d) {
            for (i, id) in ids.iter().enumerate() {
                if !done[i] && t.test(*id)? {
                    done[i] = true;
                }
            }
        }
        t.recv(0, tail.prefix(1))?;
        let mut got = t.buffer(buf)?.to_vec();
        got.push(t.buffer(tail)?[0]);
        let mut expected: Vec<u8> = (1..=4u8).flat_map(|i| [i; 10]).collect();
        expected.push(9);
        ensure!(got == expected, "arrived out of order: {got:?}");
    }
    barrier(t.as_mut(), c)
}

/// Every rank sends to and receives from every other rank at once, into
/// disjoint regions of one buffer (busy while receives are pending): receives
/// posted first or sends first, small messages and large ones, completed by
/// `wait_all` or by polling `test`; a completed request is unknown afterwards.
fn every_pair_exchanges_at_once(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let (me, n) = (t.rank(), t.size());
    let large = at_most(t.as_ref(), 200_000);
    for (round, (size, sends_first, by_test)) in [
        (3, false, false),
        (large, false, true),
        (3, true, false),
        (large, true, true),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = |from: Rank, to: Rank| (from * 16 + to + round * 64) as u8;
        let out = t.alloc_buffer(size * n)?;
        let inb = t.alloc_buffer(size * n)?;
        for peer in 0..n {
            t.buffer_mut(out)?[peer * size..][..size]
                .copy_from_slice(&pattern(size, seed(me, peer)));
        }
        let peers = || (0..n).filter(move |&p| p != me);
        let mut requests = Vec::new();
        let post_receives = |t: &mut dyn Transport, requests: &mut Vec<RequestId>| {
            for peer in peers() {
                requests.push(t.irecv(peer, inb.region(peer * size, size))?);
            }
            Ok::<_, TransportError>(())
        };
        if sends_first {
            for peer in peers() {
                requests.push(t.isend(peer, out.region(peer * size, size))?);
            }
            post_receives(t.as_mut(), &mut requests)?;
        } else {
            post_receives(t.as_mut(), &mut requests)?;
            ensure!(
                busy(t.buffer(inb)),
                "a buffer with pending receives is readable"
            );
            // Nothing arrives before every rank has checked.
            c.barrier()?;
            for peer in peers() {
                requests.push(t.isend(peer, out.region(peer * size, size))?);
            }
        }
        if by_test {
            let mut left = requests.clone();
            while !left.is_empty() {
                let mut still = Vec::new();
                for r in left {
                    if !t.test(r)? {
                        still.push(r);
                    }
                }
                left = still;
            }
        } else {
            t.wait_all(&requests)?;
        }
        ensure!(
            matches!(
                t.wait(requests[0]),
                Err(TransportError::UnknownRequest { .. })
            ),
            "a completed request was accepted again"
        );
        for peer in peers() {
            ensure!(
                t.buffer(inb)?[peer * size..][..size] == pattern(size, seed(peer, me)),
                "round {round}: {size} B from rank {peer} damaged"
            );
        }
        t.free_buffer(out)?;
        t.free_buffer(inb)?;
        barrier(t.as_mut(), c)?;
    }
    Ok(())
}

/// Ranks 0 and 1 both post a receive and a send of 8 MiB (or the largest
/// message) and wait for both: only progressing them together completes it
/// where sends wait for the receiver (full socket buffers, rendezvous).
fn large_exchange_progresses_both_ways(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let me = t.rank();
    let len = at_most(t.as_ref(), 8 << 20);
    let (sbuf, rbuf) = (t.alloc_buffer(len)?, t.alloc_buffer(len)?);
    if me < 2 {
        let peer = 1 - me;
        t.buffer_mut(sbuf)?.copy_from_slice(&pattern(len, me as u8));
        let r = t.irecv(peer, rbuf.prefix(len))?;
        ensure!(
            busy(t.buffer(rbuf)),
            "a buffer with a pending receive is readable"
        );
        c.barrier()?;
        let s = t.isend(peer, sbuf.prefix(len))?;
        t.wait_all(&[s, r])?;
        ensure!(
            t.buffer(rbuf)? == pattern(len, peer as u8),
            "{len} B from rank {peer} damaged"
        );
    } else {
        c.barrier()?;
    }
    barrier(t.as_mut(), c)
}

/// Rank 0 `isend(1); recv(1); wait` against rank 1 `recv(0); send(0)`: the
/// blocking receive on rank 0 must progress the queued send, or both ranks wait
/// for each other until the timeout. 1 byte, and 4 MiB (or the largest message).
fn blocking_call_progresses_queued_isend(
    mut t: Box<dyn Transport>,
    c: &mut dyn Control,
) -> Verdict {
    let me = t.rank();
    for len in [1, at_most(t.as_ref(), 4 << 20)] {
        let (sbuf, rbuf) = (t.alloc_buffer(len)?, t.alloc_buffer(len)?);
        t.buffer_mut(sbuf)?.copy_from_slice(&pattern(len, me as u8));
        if me == 0 {
            let s = t.isend(1, sbuf.prefix(len))?;
            t.recv(1, rbuf.prefix(len))?;
            t.wait(s)?;
        } else if me == 1 {
            t.recv(0, rbuf.prefix(len))?;
            t.send(0, sbuf.prefix(len))?;
        }
        if me < 2 {
            ensure!(
                t.buffer(rbuf)? == pattern(len, 1 - me as u8),
                "{len} B from rank {} damaged",
                1 - me
            );
        }
        t.free_buffer(sbuf)?;
        t.free_buffer(rbuf)?;
    }
    barrier(t.as_mut(), c)
}

/// Errors that need no peer: this rank or one outside the job, an unknown
/// request, a region past its buffer's end, a freed buffer; and a new buffer is
/// zeroed and keeps what is written into it.
fn bad_peers_requests_regions_and_buffers(
    mut t: Box<dyn Transport>,
    c: &mut dyn Control,
) -> Verdict {
    let (me, n) = (t.rank(), t.size());
    let peer = usize::from(me == 0);
    let buf = t.alloc_buffer(8)?;
    ensure!(t.buffer(buf)? == [0; 8], "a new buffer is not zeroed");
    t.buffer_mut(buf)?.copy_from_slice(&pattern(8, 5));
    ensure!(
        t.buffer(buf)? == pattern(8, 5),
        "a buffer lost what was written"
    );
    let no_peer =
        |r: Result<(), TransportError>| matches!(r, Err(TransportError::NoSuchPeer { .. }));
    ensure!(
        no_peer(t.send(me, buf.prefix(1))),
        "a send to this rank was accepted"
    );
    ensure!(
        no_peer(t.send(n + 3, buf.prefix(1))),
        "a send outside the job was accepted"
    );
    ensure!(
        no_peer(t.irecv(n, buf.prefix(1)).map(drop)),
        "a receive from outside the job was accepted"
    );
    for r in [t.test(RequestId(999)).map(drop), t.wait(RequestId(999))] {
        ensure!(
            matches!(r, Err(TransportError::UnknownRequest { .. })),
            "an unknown request was accepted: {r:?}"
        );
    }
    let out =
        |r: Result<(), TransportError>| matches!(r, Err(TransportError::RegionOutOfBounds { .. }));
    ensure!(
        out(t.send(peer, buf.region(4, 8))),
        "a send past the buffer's end was accepted"
    );
    ensure!(
        out(t.irecv(peer, buf.region(usize::MAX, 2)).map(drop)),
        "a receive past the buffer's end was accepted"
    );
    let other = t.alloc_buffer(8)?;
    ensure!(other != buf, "two live buffers share an id");
    t.free_buffer(buf)?;
    let unknown =
        |r: Result<(), TransportError>| matches!(r, Err(TransportError::UnknownBuffer { .. }));
    ensure!(
        unknown(t.buffer(buf).map(drop)),
        "a freed buffer is readable"
    );
    ensure!(unknown(t.free_buffer(buf)), "a buffer was freed twice");
    t.free_buffer(other)?;
    barrier(t.as_mut(), c)
}

/// A message above the transport's limit is refused naming both sizes (where
/// the limit is below 64 MiB); where
/// the transport checks sizes, a message shorter than the posted receive fails it
/// (blocking or pending) naming the sender and both sizes, the failed receive is
/// forgotten and its bytes given back, and a longer one fails too.
fn sizes_beyond_the_limit_or_posted(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let me = t.rank();
    let caps = t.capabilities();
    // A limit is checked where a buffer beyond it is cheap (UDP's, not MPI's 2 GiB).
    let limit = caps.max_message_bytes.filter(|&m| m < 64 << 20);
    if limit.is_none() && !caps.checks_message_size {
        return Err(Stop::Skipped("a size limit or size checks".into()));
    }
    if let (Some(max), true) = (limit, me < 2) {
        let buf = t.alloc_buffer(max + 1)?;
        let err = t.send(1 - me, buf.prefix(max + 1));
        let said = format!("{} bytes exceeds the limit of {max} bytes", max + 1);
        ensure!(
            matches!(&err, Err(e @ TransportError::TooLarge { .. }) if e.to_string().contains(&said)),
            "a message of {} B: {err:?}",
            max + 1
        );
        t.free_buffer(buf)?;
    }
    if caps.checks_message_size {
        let buf = t.alloc_buffer(20)?;
        if me == 0 {
            // A sender that learns of the receiver's size may fail as well.
            for _ in 0..3 {
                match t.send(1, buf.prefix(10)) {
                    Ok(()) | Err(TransportError::SizeMismatch { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        } else if me == 1 {
            let blocking = t.recv(0, buf.prefix(20));
            let said = "rank 0 sent 10 bytes where 20 were posted";
            ensure!(
                matches!(&blocking, Err(e @ TransportError::SizeMismatch { peer: 0, expected_bytes: 20, got_bytes: 10, .. }) if e.to_string().contains(said)),
                "10 B into a blocking receive of 20: {blocking:?}"
            );
            let id = t.irecv(0, buf.prefix(20))?;
            let pending = t.wait(id);
            ensure!(
                matches!(pending, Err(TransportError::SizeMismatch { peer: 0, .. })),
                "10 B into a pending receive of 20: {pending:?}"
            );
            ensure!(
                matches!(t.test(id), Err(TransportError::UnknownRequest { .. })),
                "a failed receive was not forgotten"
            );
            ensure!(t.buffer(buf).is_ok(), "a failed receive kept its bytes");
            let long = t.recv(0, buf.prefix(5));
            ensure!(
                long.as_ref().is_err_and(|e| e.peer() == Some(0)),
                "10 B into a receive of 5: {long:?}"
            );
        }
        t.free_buffer(buf)?;
    }
    barrier(t.as_mut(), c)
}

/// A pending receive holds exactly its bytes: no other receive (pending or
/// blocking, from any peer) and no send may touch them, nor may the buffer be
/// read or freed, while disjoint regions of the same buffer stay usable. Ranks
/// 1 and 2 send only once rank 0 has checked.
fn pending_receives_hold_their_bytes(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let me = t.rank();
    let buf = t.alloc_buffer(32)?;
    if me == 0 {
        let r2 = t.irecv(2, buf.region(0, 8))?;
        let refused = [
            // Overlapping pending receives, from another peer or the same one.
            ("a receive from rank 1", busy(t.irecv(1, buf.region(4, 8)))),
            ("a receive from rank 2", busy(t.irecv(2, buf.region(7, 1)))),
            // A blocking receive from a peer with nothing pending.
            ("a blocking receive", busy(t.recv(1, buf.region(4, 4)))),
            // Sends from them, blocking or not.
            ("a blocking send", busy(t.send(1, buf.region(7, 2)))),
            ("a send", busy(t.isend(1, buf.region(0, 1)))),
        ];
        for (what, was) in refused {
            ensure!(was, "{what} on bytes a pending receive writes was accepted");
        }
        // Disjoint regions of the same buffer are accepted.
        let r1 = t.irecv(1, buf.region(8, 8))?;
        ensure!(
            busy(t.buffer(buf)),
            "a buffer with pending receives is readable"
        );
        ensure!(
            busy(t.free_buffer(buf)),
            "a buffer with pending receives was freed"
        );
        barrier(t.as_mut(), c)?;
        // Not before: a send may wait for its receive to be posted (rendezvous).
        t.send(1, buf.region(16, 1))?;
        t.wait_all(&[r1, r2])?;
        // Completed receives released their holds.
        let bytes = t.buffer(buf)?;
        ensure!(
            bytes[..8] == pattern(8, 2)[..] && bytes[8..16] == pattern(8, 1)[..],
            "the receives into disjoint regions got {bytes:?}"
        );
    } else {
        barrier(t.as_mut(), c)?;
        if me < 3 {
            t.buffer_mut(buf)?.copy_from_slice(&pattern(32, me as u8));
            t.send(0, buf.prefix(8))?;
        }
        if me == 1 {
            t.recv(0, buf.region(16, 1))?;
        }
    }
    t.free_buffer(buf)?;
    barrier(t.as_mut(), c)
}

/// Rank 1 stays connected but silent: rank 0's blocking receive fails with a
/// timeout naming it.
fn silent_peer_times_out(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    if t.rank() == 0 {
        let buf = t.alloc_buffer(8)?;
        let blocking = t.recv(1, buf.prefix(8));
        ensure!(timed_out(&blocking), "a blocking receive: {blocking:?}");
    }
    // The transport stays as it is: no settle.
    Ok(c.barrier()?)
}

/// Where a timeout fails only the call that waited: a pending receive from a
/// silent peer times out and may be waited for again; a blocking receive queued
/// behind it times out and takes its request back, while the pending one keeps
/// its bytes.
fn a_timeout_fails_only_the_waiting_call(
    mut t: Box<dyn Transport>,
    c: &mut dyn Control,
) -> Verdict {
    if t.rank() == 0 {
        let buf = t.alloc_buffer(16)?;
        let id = t.irecv(1, buf.prefix(8))?;
        let pending = t.wait(id);
        ensure!(timed_out(&pending), "a pending receive: {pending:?}");
        let again = t.wait(id);
        ensure!(
            timed_out(&again),
            "the pending receive waited for again: {again:?}"
        );
        let behind = t.recv(1, buf.region(8, 8));
        ensure!(
            timed_out(&behind),
            "a receive behind a pending one: {behind:?}"
        );
        ensure!(
            t.irecv(1, buf.region(8, 8)).is_ok(),
            "the timed-out receive kept its bytes"
        );
        ensure!(
            busy(t.irecv(1, buf.region(0, 1))) && busy(t.send(1, buf.region(8, 1))),
            "a timeout released a pending receive's bytes"
        );
    }
    Ok(c.barrier()?)
}

/// A timeout naming rank 1.
fn timed_out(r: &Result<(), TransportError>) -> bool {
    matches!(r, Err(e @ TransportError::Timeout { peer: 1, .. })
        if e.to_string().contains("rank 1 did not answer"))
}

/// Rank 1 drops its transport: rank 0's receive, blocking or pending, fails
/// naming it as closed, the failed request is forgotten and its bytes given
/// back; a send to it fails naming it (or, where messages may be lost, the
/// receive after it does).
fn closed_peer_is_named(mut t: Box<dyn Transport>, c: &mut dyn Control) -> Verdict {
    let me = t.rank();
    if me == 1 {
        c.barrier()?;
        drop(t);
        return Ok(c.barrier()?);
    }
    let rbuf = t.alloc_buffer(8)?;
    c.barrier()?;
    if me == 0 {
        let blocking = t.recv(1, rbuf.prefix(8));
        ensure!(
            matches!(&blocking, Err(e @ TransportError::PeerClosed { peer: 1, op: "recv", .. })
                if e.to_string().contains("rank 1 closed")),
            "a receive from a rank that closed: {blocking:?}"
        );
    }
    c.barrier()?;
    if me != 0 {
        return Ok(());
    }
    let r = t.irecv(1, rbuf.prefix(8))?;
    let pending = t.wait(r);
    ensure!(
        matches!(pending, Err(TransportError::PeerClosed { peer: 1, .. })),
        "a pending receive from a rank that closed: {pending:?}"
    );
    ensure!(
        matches!(t.test(r), Err(TransportError::UnknownRequest { .. })),
        "a failed receive was not forgotten"
    );
    t.free_buffer(rbuf)?;

    let len = at_most(t.as_ref(), 4 << 20);
    let sbuf = t.alloc_buffer(len)?;
    let sent = match t.isend(1, sbuf.prefix(len)) {
        Err(e) => Err(e),
        Ok(s) => t.wait(s),
    };
    let named = |r: &Result<(), TransportError>| {
        matches!(r, Err(e @ TransportError::PeerClosed { peer: 1, .. })
            if e.to_string().contains("rank 1 closed"))
    };
    if t.capabilities().reliable || sent.is_err() {
        ensure!(named(&sent), "a send to a rank that closed: {sent:?}");
    } else {
        let after = t.recv(1, sbuf.prefix(8));
        ensure!(
            named(&after),
            "a receive after a send to a rank that closed: {after:?}"
        );
    }
    Ok(t.free_buffer(sbuf)?)
}
