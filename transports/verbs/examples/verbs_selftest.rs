//! Two ranks (threads, with the in-process control channel) on one verbs device,
//! each data path in each wait mode: the transport contract every transport keeps
//! (`ngauge_transport::conformance`), then ping-pong with data checks over sizes
//! 1 B .. 1 MiB, plus a nonblocking exchange through `wait_all`, a flood of four times the
//! queue depth of messages in flight each way (isends first, then the irecvs: flow
//! control must hold the sends back), an eager-only flood in which the send path
//! must return credits in credit messages, eager messages held before their receives
//! while a rendezvous message goes the other way, requests on a region that
//! overlaps a pending receive (refused), blocking sends too large to go inline
//! whose buffer is reused as soon as they return (staged sends), and size
//! mismatches that must be reported as such. Prints the median half round trip per size. Queue depth 8, so that the
//! flood exceeds it. Used inside the soft-RoCE VM (`scripts/rxe-vm`,
//! `tests/verbs_vm.rs`).
//!
//! usage: verbs_selftest [--device NAME] [--gid-index N] [--iters N] [--max BYTES]
//!                       [--timeout SECONDS]

use ngauge_transport::{conformance, inproc, BufferId, Control, Transport, TransportError};
use ngauge_verbs::{VerbsOp, VerbsOptions, WaitMode};
use std::time::Instant;

fn pattern(size: usize, round: usize, from: usize) -> impl Iterator<Item = u8> {
    (0..size).map(move |i| (i.wrapping_mul(31) ^ round.wrapping_mul(7) ^ (from * 101)) as u8)
}

/// Queue depth of the self test: small, so that the flood exceeds it four times.
const DEPTH: u32 = 8;

fn failed(reason: String) -> TransportError {
    TransportError::Setup {
        transport: "verbs",
        reason,
    }
}

/// Message `i` of the flood: alternately eager and rendezvous-sized on the send path.
fn flood_len(i: usize) -> usize {
    if i.is_multiple_of(2) {
        64
    } else {
        8192
    }
}

/// A flood: `counts[r]` messages from rank `r`, message `i` of `len(i)` bytes at
/// `i * stride`, all isends before any irecv, then one wait_all; the data is
/// checked. `tag` keeps the patterns of different floods apart.
fn flood(
    t: &mut dyn Transport,
    sbuf: BufferId,
    rbuf: BufferId,
    counts: [usize; 2],
    stride: usize,
    len: fn(usize) -> usize,
    tag: usize,
) -> Result<(), TransportError> {
    let (me, peer) = (t.rank(), 1 - t.rank());
    for i in 0..counts[me] {
        t.buffer_mut(sbuf)?[i * stride..i * stride + len(i)]
            .copy_from_slice(&pattern(len(i), tag + i, me).collect::<Vec<_>>());
    }
    let mut reqs = Vec::new();
    for i in 0..counts[me] {
        reqs.push(t.isend(peer, sbuf.region(i * stride, len(i)))?);
    }
    for i in 0..counts[peer] {
        reqs.push(t.irecv(peer, rbuf.region(i * stride, len(i)))?);
    }
    t.wait_all(&reqs)?;
    let got = t.buffer(rbuf)?;
    for i in 0..counts[peer] {
        if !got[i * stride..i * stride + len(i)]
            .iter()
            .copied()
            .eq(pattern(len(i), tag + i, peer))
        {
            return Err(failed(format!(
                "flood {tag}: data check failed at message {i}"
            )));
        }
    }
    Ok(())
}

/// This rank's count of credit messages sent so far.
fn credit_messages(t: &dyn Transport) -> u64 {
    t.counters()
        .entries
        .iter()
        .find(|e| e.0 == "credit_messages")
        .map_or(0, |e| e.1)
}

/// An eager-only flood (second review of the credits, finding 3): rank 0 sends
/// `5 * DEPTH` messages of 64 bytes, rank 1 `DEPTH / 2`, sends posted first, so
/// that senders run out of credits on eager messages. Rank 1's few messages all go
/// before it has received anything (they can return at most what it owed before),
/// so the credits rank 0 needs for the rest come back in credit messages: on the
/// send path rank 1 must have sent some. Returns the credit messages this rank
/// sent during the flood.
fn eager_flood(
    t: &mut dyn Transport,
    sbuf: BufferId,
    rbuf: BufferId,
) -> Result<u64, TransportError> {
    let before = credit_messages(t);
    let counts = [5 * DEPTH as usize, DEPTH as usize / 2];
    flood(t, sbuf, rbuf, counts, 64, |_| 64, 4000)?;
    Ok(credit_messages(t) - before)
}

/// Eager messages that arrive before their receives must not hold up the peer
/// (second review of the credits, finding 1): rank 0 isends `DEPTH - 1` eager
/// messages, irecvs a rendezvous-sized message and waits for all of them (on the
/// send path for the sends first); rank 1
/// isends that message, waits for it, and only then irecvs the eager ones. Had the
/// early messages kept their receive slots until their irecvs, rank 0 would be left
/// with one credit, could not advertise its receive, and both would time out. MPI's
/// progress rule says rank 1's send completes.
fn held_eager(
    t: &mut dyn Transport,
    op: VerbsOp,
    sbuf: BufferId,
    rbuf: BufferId,
) -> Result<(), TransportError> {
    let (me, peer) = (t.rank(), 1 - t.rank());
    let (n, small, big) = (DEPTH as usize - 1, 64, 8192);
    // the eager messages go from rank 0 to rank 1
    let expected = |i: usize| pattern(small, 3000 + i, 0).collect::<Vec<_>>();
    if me == 0 {
        for i in 0..n {
            t.buffer_mut(sbuf)?[i * small..(i + 1) * small].copy_from_slice(&expected(i));
        }
        let mut sends = Vec::new();
        for i in 0..n {
            sends.push(t.isend(peer, sbuf.region(i * small, small))?);
        }
        // On the send path the messages complete once they are in rank 1's slots;
        // waiting for that first makes sure they took their credits before the
        // advertisement below wants one (queued sends would let it go first).
        if op == VerbsOp::Send {
            t.wait_all(&sends)?;
            sends.clear();
        }
        sends.push(t.irecv(peer, rbuf.prefix(big))?);
        t.wait_all(&sends)?;
        if !t.buffer(rbuf)?[..big]
            .iter()
            .copied()
            .eq(pattern(big, 3000, peer))
        {
            return Err(failed("held eager: data check failed (rendezvous)".into()));
        }
    } else {
        t.buffer_mut(sbuf)?[..big].copy_from_slice(&pattern(big, 3000, me).collect::<Vec<_>>());
        let s = t.isend(peer, sbuf.prefix(big))?;
        t.wait(s)?;
        let mut reqs = Vec::new();
        for i in 0..n {
            reqs.push(t.irecv(peer, rbuf.region(i * small, small))?);
        }
        t.wait_all(&reqs)?;
        let got = t.buffer(rbuf)?;
        for i in 0..n {
            if got[i * small..(i + 1) * small] != expected(i)[..] {
                return Err(failed(format!(
                    "held eager: data check failed at message {i}"
                )));
            }
        }
    }
    Ok(())
}

/// A receive has the bytes of its region to itself, sends share theirs (second
/// review of the credits, finding 2): requests overlapping a pending receive are
/// refused with BufferBusy, overlapping sends and adjacent regions are not.
fn holds(t: &mut dyn Transport, sbuf: BufferId, rbuf: BufferId) -> Result<(), TransportError> {
    let peer = 1 - t.rank();
    let r = t.irecv(peer, rbuf.region(0, 64))?;
    for (what, refused) in [
        ("a send from", t.isend(peer, rbuf.region(32, 64))),
        ("a receive into", t.irecv(peer, rbuf.region(63, 8192))),
    ] {
        if !matches!(refused, Err(TransportError::BufferBusy { .. })) {
            return Err(failed(format!(
                "{what} a region overlapping a pending receive: expected BufferBusy, \
                 got {refused:?}"
            )));
        }
    }
    let s1 = t.isend(peer, sbuf.region(0, 64))?;
    let s2 = t.isend(peer, sbuf.region(0, 64))?;
    let r2 = t.irecv(peer, rbuf.region(64, 64))?;
    t.wait_all(&[r, s1, s2, r2])
}

/// Receiver posts `recv_len`, sender sends `send_len`: the receiver must get
/// SizeMismatch, and so must the sender unless the message went eagerly on the send
/// path (an eager send completes without hearing from the receiver).
fn mismatch(
    t: &mut dyn Transport,
    op: VerbsOp,
    sbuf: BufferId,
    rbuf: BufferId,
    recv_len: usize,
    send_len: usize,
) -> Result<(), TransportError> {
    let (me, peer) = (t.rank(), 1 - t.rank());
    let r = if me == 0 {
        t.irecv(peer, rbuf.prefix(recv_len))
    } else {
        t.isend(peer, sbuf.prefix(send_len))
    }?;
    // the write path tells the sender; eager and ring messages complete without
    // hearing from the receiver
    let sender_learns = op == VerbsOp::Write || send_len > ngauge_verbs::layout::EAGER_BYTES;
    match t.wait(r) {
        Err(TransportError::SizeMismatch { .. }) => Ok(()),
        Ok(()) if me == 1 && !sender_learns => Ok(()),
        other => Err(failed(format!(
            "rank {me}: {recv_len}-byte receive of a {send_len}-byte message: \
             expected SizeMismatch, got {other:?}"
        ))),
    }
}

/// The direct path of the blocking `send` and `recv` (transports/verbs/src/device/
/// direct.rs): three blocking sends that land before their blocking receives (the
/// first is copied in by the completion handler, the others wait as copies), then
/// a blocking receive behind a pending `irecv` (it must take the generic path and
/// the second message), then a blocking receive of 8 bytes for a 16-byte message.
fn direct(
    t: &mut dyn Transport,
    op: VerbsOp,
    sbuf: BufferId,
    rbuf: BufferId,
) -> Result<(), TransportError> {
    let (me, peer) = (t.rank(), 1 - t.rank());
    let len = 24;
    let msg = |i: usize| pattern(len, 5000 + i, 0).collect::<Vec<_>>();
    if me == 0 {
        for i in 0..5 {
            t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(i));
            t.send(peer, sbuf.prefix(len))?;
        }
    } else {
        // let the first three land before any receive is posted
        std::thread::sleep(std::time::Duration::from_millis(200));
        for i in 0..3 {
            t.recv(peer, rbuf.prefix(len))?;
            if t.buffer(rbuf)?[..len] != msg(i)[..] {
                return Err(failed(format!("direct: data check failed at message {i}")));
            }
        }
        let first = t.irecv(peer, rbuf.region(0, len))?;
        t.recv(peer, sbuf.prefix(len))?;
        t.wait(first)?;
        if t.buffer(rbuf)?[..len] != msg(3)[..] || t.buffer(sbuf)?[..len] != msg(4)[..] {
            return Err(failed(
                "direct: a blocking receive behind a pending irecv took the wrong message".into(),
            ));
        }
    }
    if op == VerbsOp::Write {
        // the write path has no direct path, and its sender learns of a mismatch
        return Ok(());
    }
    if me == 0 {
        match t.recv(peer, rbuf.prefix(8)) {
            Err(TransportError::SizeMismatch { .. }) => Ok(()),
            other => Err(failed(format!(
                "direct: an 8-byte receive of a 16-byte message: expected SizeMismatch, \
                 got {other:?}"
            ))),
        }
    } else {
        t.send(peer, sbuf.prefix(16))
    }
}

/// The flat path's hand-over (transports/verbs/src/device/flat.rs): a generic
/// wait takes the first of three messages and holds the other two as copies;
/// then a fourth message lands, and the blocking receives that follow must
/// deliver the held ones first (a flat receive that ignored them would take the
/// fourth from its slot or ring); then a blocking send behind more `isend`s
/// than the peer has room for must not overtake the queued ones.
fn flat_hand_over(
    t: &mut dyn Transport,
    op: VerbsOp,
    sbuf: BufferId,
    rbuf: BufferId,
) -> Result<(), TransportError> {
    if op == VerbsOp::Write {
        // no flat path; a send waits for the receiver's advertisement, so the
        // messages cannot land before their receives
        return Ok(());
    }
    let (me, peer) = (t.rank(), 1 - t.rank());
    let len = 16;
    let msg = |i: usize| pattern(len, 7000 + i, 0).collect::<Vec<_>>();
    let token = sbuf.region(len, 1);
    if me == 0 {
        for i in 0..3 {
            t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(i));
            t.send(peer, sbuf.prefix(len))?;
        }
        t.recv(peer, rbuf.prefix(1))?;
        t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(3));
        t.send(peer, sbuf.prefix(len))?;
    } else {
        // let the three land, then take the first through a generic wait
        std::thread::sleep(std::time::Duration::from_millis(200));
        let first = t.irecv(peer, rbuf.prefix(len))?;
        t.wait(first)?;
        if t.buffer(rbuf)?[..len] != msg(0)[..] {
            return Err(failed(
                "flat hand-over: data check failed at message 0".into(),
            ));
        }
        t.send(peer, token)?;
        // let the fourth land before the blocking receives
        std::thread::sleep(std::time::Duration::from_millis(200));
        for i in 1..4 {
            t.recv(peer, rbuf.prefix(len))?;
            if t.buffer(rbuf)?[..len] != msg(i)[..] {
                return Err(failed(format!(
                    "flat hand-over: a blocking receive after held messages took the \
                     wrong message at {i}"
                )));
            }
        }
    }
    // a blocking send behind more isends than the peer has room for (some
    // wait in the queue): it must not overtake them
    let n = DEPTH as usize + 1;
    let queued = |i: usize| pattern(len, 7100 + i, 0).collect::<Vec<_>>();
    if me == 0 {
        for i in 0..n {
            t.buffer_mut(sbuf)?[i * len..(i + 1) * len].copy_from_slice(&queued(i));
        }
        let mut sends = Vec::new();
        for i in 0..n {
            sends.push(t.isend(peer, sbuf.region(i * len, len))?);
        }
        t.buffer_mut(rbuf)?[..len].copy_from_slice(&queued(n));
        t.send(peer, rbuf.prefix(len))?;
        t.wait_all(&sends)?;
    } else {
        std::thread::sleep(std::time::Duration::from_millis(100));
        for i in 0..=n {
            t.recv(peer, rbuf.prefix(len))?;
            if t.buffer(rbuf)?[..len] != queued(i)[..] {
                return Err(failed(format!(
                    "flat hand-over: a blocking send behind queued ones: wrong message at {i}"
                )));
            }
        }
    }
    Ok(())
}
/// The staged sends of the blocking `send` (transports/verbs/src/device/
/// direct.rs): messages too large to go inline (1 KiB and 4 KiB), sent back to
/// back with the buffer rewritten as soon as each `send` returns, more of them
/// than the 16 staging slots, to a receiver that starts late (at queue depth 8
/// flow control holds sends back after about 7, which then take the request
/// path: the slots' reuse rule is tested on known data in layout.rs, not here);
/// then a ping-pong of them. Every message must arrive as it was when its send
/// returned (a missing copy would deliver the rewritten buffer). Returns this
/// rank's `staged_sends` during the test.
fn staged(t: &mut dyn Transport, sbuf: BufferId, rbuf: BufferId) -> Result<u64, TransportError> {
    let (me, peer) = (t.rank(), 1 - t.rank());
    let before = counter(t, "staged_sends");
    let n = 3 * 16 + 5;
    for len in [1024, 4096] {
        let msg = |i: usize| pattern(len, 9000 + i, 0).collect::<Vec<_>>();
        let check = |t: &dyn Transport, i: usize, what: &str| -> Result<(), TransportError> {
            if t.buffer(rbuf)?[..len] != msg(i)[..] {
                return Err(failed(format!(
                    "staged: {what}: data check failed at message {i} of {len} B"
                )));
            }
            Ok(())
        };
        if me == 0 {
            for i in 0..n {
                t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(i));
                t.send(peer, sbuf.prefix(len))?;
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(100));
            for i in 0..n {
                t.recv(peer, rbuf.prefix(len))?;
                check(t, i, "back to back")?;
            }
        }
        for i in n..2 * n {
            if me == 0 {
                t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(i));
                t.send(peer, sbuf.prefix(len))?;
                // the buffer may be reused at once: what went is what was there
                t.buffer_mut(sbuf)?[..len].fill(0xee);
                t.recv(peer, rbuf.prefix(len))?;
                check(t, i + n, "ping-pong")?;
            } else {
                t.recv(peer, rbuf.prefix(len))?;
                check(t, i, "ping-pong")?;
                t.buffer_mut(sbuf)?[..len].copy_from_slice(&msg(i + n));
                t.send(peer, sbuf.prefix(len))?;
                t.buffer_mut(sbuf)?[..len].fill(0xee);
            }
        }
    }
    Ok(counter(t, "staged_sends") - before)
}

fn counter(t: &dyn Transport, name: &str) -> u64 {
    t.counters()
        .entries
        .iter()
        .find(|e| e.0 == name)
        .map_or(0, |e| e.1)
}

/// The transport contract over this device with `opts`' data path and wait mode:
/// prints each check's line and `conformance OP WAIT: ok, N checks passed` (or
/// `FAILED`); returns whether it passed.
fn conformance(opts: &VerbsOptions) -> bool {
    let profile = conformance::Profile {
        modes: vec![opts.wait],
        timeout: opts.timeout,
        // The silent peer's case waits this long once per data path and wait mode
        // (six times in the VM test): half a second, as for UCX.
        short_timeout: Some(std::time::Duration::from_millis(500)),
        // A timeout breaks the connection to that peer; a peer that dropped its
        // transport tells this side nothing (RC receives learn of no remote
        // teardown), so it shows as a timeout.
        timeouts_keep_requests: false,
        reports_closed_peers: false,
    };
    let report = conformance::run_threads(&profile, |s| {
        let o = VerbsOptions {
            wait: s.wait,
            timeout: s.timeout,
            ..opts.clone()
        };
        conformance::connect_each(s.ranks, move |c| ngauge_verbs::open(c, &o))
    });
    for line in report.to_string().lines() {
        println!("  {line}");
    }
    let verdict = match report.passed() {
        true => format!("ok, {} checks passed", report.passes()),
        false => "FAILED".to_string(),
    };
    println!(
        "conformance {} {}: {verdict}",
        opts.op.as_str(),
        opts.wait.as_str()
    );
    report.passed()
}

fn rank_main(
    control: &mut dyn Control,
    opts: &VerbsOptions,
    iters: usize,
    max: usize,
) -> Result<(Vec<(usize, f64)>, u64), TransportError> {
    let mut t = ngauge_verbs::open(control, opts)?;
    let me = t.rank();
    let peer = 1 - me;
    let sbuf = t.alloc_buffer(max)?;
    let rbuf = t.alloc_buffer(max)?;
    let fsbuf = t.alloc_buffer(4 * DEPTH as usize * 8192)?;
    let frbuf = t.alloc_buffer(4 * DEPTH as usize * 8192)?;
    let mut out = Vec::new();
    let mut size = 1;
    while size <= max {
        let mut times = Vec::with_capacity(iters);
        for round in 0..iters {
            t.buffer_mut(sbuf)?[..size]
                .copy_from_slice(&pattern(size, round, me).collect::<Vec<_>>());
            let start = Instant::now();
            if me == 0 {
                let r = t.irecv(peer, rbuf.prefix(size))?;
                t.send(peer, sbuf.prefix(size))?;
                t.wait(r)?;
            } else {
                t.recv(peer, rbuf.prefix(size))?;
                t.send(peer, sbuf.prefix(size))?;
            }
            times.push(start.elapsed().as_secs_f64() * 1e6 / 2.0);
            let got = &t.buffer(rbuf)?[..size];
            if !got.iter().copied().eq(pattern(size, round, peer)) {
                return Err(TransportError::Setup {
                    transport: "verbs",
                    reason: format!("data check failed at size {size} round {round}"),
                });
            }
        }
        times.sort_by(f64::total_cmp);
        out.push((size, times[times.len() / 2]));
        size *= 4;
    }
    // both ranks send and receive at once: progress on both through wait_all
    let r = t.irecv(peer, rbuf.prefix(max))?;
    let s = t.isend(peer, sbuf.prefix(max))?;
    t.wait_all(&[s, r])?;
    // more messages in flight than the queue depth, both ways
    let n = 4 * DEPTH as usize;
    flood(&mut t, fsbuf, frbuf, [n, n], 8192, flood_len, 1000)?;
    if me == 0 {
        let credits = credit_messages(&t);
        println!(
            "flood {} {}: {n} messages each way at depth {DEPTH}: ok, {credits} credit messages",
            opts.op.as_str(),
            opts.wait.as_str()
        );
    }
    let eager_credits = eager_flood(&mut t, fsbuf, frbuf)?;
    held_eager(&mut t, opts.op, fsbuf, frbuf)?;
    holds(&mut t, sbuf, rbuf)?;
    direct(&mut t, opts.op, sbuf, rbuf)?;
    flat_hand_over(&mut t, opts.op, sbuf, rbuf)?;
    let staged_sends = staged(&mut t, sbuf, rbuf)?;
    // the write path has no direct path; on the others 4 KiB never goes inline
    if opts.op != VerbsOp::Write && staged_sends == 0 {
        return Err(failed(format!(
            "staged: rank {me} staged none of its blocking sends of 1 KiB and 4 KiB"
        )));
    }
    if me == 0 {
        println!(
            "staged {} {}: blocking sends of 1 KiB and 4 KiB, buffer reused at once: ok, \
             {staged_sends} staged",
            opts.op.as_str(),
            opts.wait.as_str()
        );
    }
    if me == 0 {
        println!(
            "held {} {}: {} eager messages before their receives, then a rendezvous \
             message the other way: ok; direct send and recv: ok; flat hand-over: ok",
            opts.op.as_str(),
            opts.wait.as_str(),
            DEPTH - 1
        );
    }
    // size mismatches are reported, not hung on: eager (send path) and rendezvous
    mismatch(&mut t, opts.op, sbuf, rbuf, 8, 16)?;
    if max > 8193 {
        mismatch(&mut t, opts.op, sbuf, rbuf, 8192, 8193)?;
        mismatch(&mut t, opts.op, sbuf, rbuf, 8193, 8192)?;
    }
    Ok((out, eager_credits))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let iters: usize = arg("--iters").map_or(20, |v| v.parse().expect("--iters N"));
    let max: usize = arg("--max").map_or(1 << 20, |v| v.parse().expect("--max BYTES"));
    let timeout = arg("--timeout").map_or(60, |v| v.parse().expect("--timeout SECONDS"));
    let base = VerbsOptions {
        device: arg("--device"),
        timeout: std::time::Duration::from_secs(timeout),
        queue_depth: DEPTH,
        gid_index: arg("--gid-index").map(|v| v.parse().expect("--gid-index N")),
        ..VerbsOptions::default()
    };
    println!(
        "probe: {:?}",
        ngauge_verbs::probe(base.device.as_deref(), 1)
    );
    let mut failed = false;
    for op in [VerbsOp::Send, VerbsOp::Write, VerbsOp::WritePoll] {
        for wait in [WaitMode::Poll, WaitMode::Block] {
            let opts = VerbsOptions {
                op,
                wait,
                ..base.clone()
            };
            if op == VerbsOp::WritePoll && wait == WaitMode::Block {
                // nothing to sleep on: refused by every rank, with the reason
                let results: Vec<_> = inproc::world(2)
                    .into_iter()
                    .map(|(_, mut control)| {
                        let opts = opts.clone();
                        std::thread::spawn(move || {
                            ngauge_verbs::open(&mut control, &opts).map(|_| ())
                        })
                    })
                    // every rank runs before any is joined (open is collective)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(|h| h.join().expect("rank thread"))
                    .collect();
                let refused = results.iter().all(|r| {
                    matches!(r, Err(TransportError::Setup { reason, .. })
                        if reason.contains("poll wait mode"))
                });
                println!(
                    "refused write-poll block: {}",
                    if refused {
                        "ok".to_string()
                    } else {
                        format!("FAILED {results:?}")
                    }
                );
                failed |= !refused;
                continue;
            }
            failed |= !conformance(&opts);
            let handles: Vec<_> = inproc::world(2)
                .into_iter()
                .map(|(_, mut control)| {
                    let opts = opts.clone();
                    std::thread::spawn(move || rank_main(&mut control, &opts, iters, max))
                })
                .collect();
            let results: Vec<_> = handles
                .into_iter()
                .map(|h| h.join().expect("rank thread"))
                .collect();
            if let (Ok((_, c0)), Ok((_, c1))) = (&results[0], &results[1]) {
                // only the send path has eager messages (and the write-poll
                // path ring messages, whose credits rank 1 must write back); on
                // the write path rank 0 may return its credits in its
                // advertisements
                let ok = op == VerbsOp::Write || *c1 > 0;
                println!(
                    "eager {} {}: {} + {} messages of 64 B at depth {DEPTH}: {}, credit \
                     messages sent by rank 0 {c0}, rank 1 {c1}",
                    op.as_str(),
                    wait.as_str(),
                    5 * DEPTH,
                    DEPTH / 2,
                    if ok {
                        "ok"
                    } else {
                        "FAILED (rank 1 sent none)"
                    }
                );
                failed |= !ok;
            }
            match &results[0] {
                Ok((points, _)) => {
                    let line: Vec<String> = points
                        .iter()
                        .map(|(s, us)| format!("{s}B:{us:.1}us"))
                        .collect();
                    println!(
                        "selftest {} {}: ok {}",
                        op.as_str(),
                        wait.as_str(),
                        line.join(" ")
                    );
                }
                Err(e) => {
                    println!(
                        "selftest {} {}: FAILED rank 0: {e}",
                        op.as_str(),
                        wait.as_str()
                    );
                    failed = true;
                }
            }
            if let Err(e) = &results[1] {
                println!(
                    "selftest {} {}: FAILED rank 1: {e}",
                    op.as_str(),
                    wait.as_str()
                );
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
