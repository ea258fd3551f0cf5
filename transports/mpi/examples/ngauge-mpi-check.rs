//! Self-test of the MPI backend (an example of the crate, so that only tests build
//! the conformance suite it runs), run under a real MPI launcher by the crate's
//! integration tests (`tests/mpirun.rs`) with 2 and 4 ranks: the transport
//! contract (`ngauge_transport::conformance`, printed as `conformance:` lines) and
//! what is MPI's own (truncation, holds until a request is retired, the native
//! loop, collectives, the control plane).
//!
//! ```text
//! mpirun -np 4 ngauge-mpi-check            every check
//! ngauge-mpi-check --require-launcher      fails outside mpirun (tests the error)
//! mpirun -np 2 ngauge-mpi-check --pingpong SIZE REPS WARMUP [native]
//!                                          the backend's ping-pong, timed like
//!                                          benches/c/mpi_pingpong.c (for
//!                                          benchmarks, not a test); `native`: the
//!                                          transport's own loop (x86-64)
//! ```
//!
//! Each check moves data whose every byte is known (a function of size, rank and
//! iteration) and compares it on arrival. Rank 0 prints `PASS name` per check; any
//! rank that sees a failure prints `FAIL rank R: name: why` and exits with status 1.

use ngauge_mpi::{Datatype, Mpi, MpiControl, MpiOptions, MpiTransport, ReduceOp};
use ngauge_transport::{
    conformance, Control, NativeRole, Rank, RequestId, Transport, TransportError, TscRead, WaitMode,
};
use std::sync::Arc;

type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn e<E: std::fmt::Display>(err: E) -> String {
    err.to_string()
}

/// The byte at `i` of message `iter` of `size` bytes sent by `from`.
fn pattern(from: Rank, size: usize, iter: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ from.wrapping_mul(7) ^ size ^ iter.wrapping_mul(13)) as u8
}

fn fill(buf: &mut [u8], from: Rank, size: usize, iter: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(from, size, iter, i);
    }
}

fn verify(buf: &[u8], from: Rank, size: usize, iter: usize) -> Check {
    for (i, &b) in buf.iter().enumerate() {
        ensure!(
            b == pattern(from, size, iter, i),
            "byte {i} of a {size}-byte message {iter} from rank {from} is {b}, expected {}",
            pattern(from, size, iter, i)
        );
    }
    Ok(())
}

/// A message longer than the posted receive fails it as MPI's truncation, naming
/// the peer (the shorter one and bad arguments are the conformance suite's); then
/// [`busy`].
fn errors(t: &mut MpiTransport) -> Check {
    let buf = t.alloc_buffer(64).map_err(e)?;
    match t.rank() {
        0 => t.send(1, buf.prefix(10)).map_err(e)?,
        1 => match t.recv(0, buf.prefix(5)) {
            Err(err @ TransportError::Io { peer: 0, .. }) => ensure!(
                err.to_string().contains("longer than the 5 bytes"),
                "truncation error says: {err}"
            ),
            other => return Err(format!("long message: expected truncation, got {other:?}")),
        },
        _ => {}
    }
    t.free_buffer(buf).map_err(e)?;
    busy(t)
}

/// `native_round_trips` in poll mode (x86-64): rank 0 against every other rank, data
/// intact in both directions and every timed round trip recorded; the same buffer
/// for both directions; the checks `send` and `recv` make (peer, bounds, busy
/// buffers) refused before MPI sees anything; and a received size other than the
/// posted one an error on either side, as in `recv`. In block mode (and off
/// x86-64) the transport has no native loop: `None`, and nothing was sent.
fn native(t: &mut MpiTransport) -> Check {
    let (me, n) = (t.rank(), t.size());
    let sbuf = t.alloc_buffer(1 << 20).map_err(e)?;
    let rbuf = t.alloc_buffer(1 << 20).map_err(e)?;
    if t.wait_mode() == WaitMode::Block || !cfg!(target_arch = "x86_64") {
        let r = t.native_round_trips(
            1 - me.min(1),
            sbuf.prefix(1),
            rbuf.prefix(1),
            NativeRole::Responder { round_trips: 1 },
        );
        ensure!(
            r.is_none(),
            "a native loop without poll mode on x86-64: {r:?}"
        );
        t.free_buffer(sbuf).map_err(e)?;
        return t.free_buffer(rbuf).map_err(e);
    }
    let (warmup, reps) = (3usize, 5usize);
    let sizes = [0usize, 1, 7, 4096, 65536, 1 << 20];
    // Every size with each reading of the counter (`--timer`).
    let runs = sizes
        .iter()
        .flat_map(|&s| [(s, TscRead::Rdtscp), (s, TscRead::Rdtsc)]);
    for (size, read) in runs {
        for peer in 1..n {
            if me != 0 && me != peer {
                continue;
            }
            let other = if me == 0 { peer } else { 0 };
            fill(&mut t.buffer_mut(sbuf).map_err(e)?[..size], me, size, 0);
            t.buffer_mut(rbuf).map_err(e)?[..size].fill(0xa5);
            let mut ticks = vec![0u64; reps];
            let role = if me == 0 {
                NativeRole::Initiator {
                    warmup,
                    ticks: &mut ticks,
                    read,
                }
            } else {
                NativeRole::Responder {
                    round_trips: warmup + reps,
                }
            };
            let r = t.native_round_trips(other, sbuf.prefix(size), rbuf.prefix(size), role);
            ensure!(
                matches!(r, Some(Ok(()))),
                "{size} B with rank {other}, {read:?}: {r:?}"
            );
            verify(&t.buffer(rbuf).map_err(e)?[..size], other, size, 0)?;
            ensure!(
                me != 0 || ticks.iter().all(|&t| t > 0),
                "{size} B: a timed round trip of 0 ticks: {ticks:?}"
            );
        }
    }
    if me > 1 {
        t.free_buffer(sbuf).map_err(e)?;
        return t.free_buffer(rbuf).map_err(e);
    }
    let other = 1 - me;
    // One buffer for both directions, as the C ping-pong uses.
    let one = sbuf.prefix(64);
    fill(&mut t.buffer_mut(sbuf).map_err(e)?[..64], me, 64, 1);
    let mut ticks = [0u64; 2];
    let role = if me == 0 {
        NativeRole::Initiator {
            warmup: 0,
            ticks: &mut ticks,
            read: TscRead::Rdtscp,
        }
    } else {
        NativeRole::Responder { round_trips: 2 }
    };
    let r = t.native_round_trips(other, one, one, role);
    ensure!(matches!(r, Some(Ok(()))), "one buffer for both: {r:?}");
    // Rank 0's message bounces back to it unchanged.
    verify(&t.buffer(sbuf).map_err(e)?[..64], 0, 64, 1)?;

    let responder = || NativeRole::Responder { round_trips: 1 };
    let r = t.native_round_trips(me, one, one, responder());
    ensure!(
        matches!(r, Some(Err(TransportError::NoSuchPeer { .. }))),
        "a loop with oneself: {r:?}"
    );
    let r = t.native_round_trips(other, sbuf.region((1 << 20) - 4, 8), one, responder());
    ensure!(
        matches!(r, Some(Err(TransportError::RegionOutOfBounds { .. }))),
        "a send region past the buffer's end: {r:?}"
    );
    // A pending receive makes its bytes busy for both directions of the loop.
    let pending = t.irecv(other, rbuf.prefix(8)).map_err(e)?;
    let r = t.native_round_trips(other, one, rbuf.region(4, 8), responder());
    ensure!(
        matches!(r, Some(Err(TransportError::BufferBusy { .. }))),
        "a receive into bytes a pending receive writes: {r:?}"
    );
    let r = t.native_round_trips(other, rbuf.prefix(1), one, responder());
    ensure!(
        matches!(r, Some(Err(TransportError::BufferBusy { .. }))),
        "a send from bytes a pending receive writes: {r:?}"
    );
    t.send(other, sbuf.prefix(8)).map_err(e)?;
    t.wait(pending).map_err(e)?;

    // Sizes: a short answer fails the initiator, a short or a long message the
    // responder, each naming the peer and both lengths as `recv` does.
    if me == 0 {
        let mut ticks = [0u64; 1];
        let role = NativeRole::Initiator {
            warmup: 0,
            ticks: &mut ticks,
            read: TscRead::Rdtscp,
        };
        match t.native_round_trips(1, sbuf.prefix(10), rbuf.prefix(20), role) {
            Some(Err(TransportError::SizeMismatch {
                peer: 1,
                expected_bytes: 20,
                got_bytes: 10,
                ..
            })) => {}
            other => {
                return Err(format!(
                    "short answer: expected SizeMismatch, got {other:?}"
                ))
            }
        }
        t.send(1, sbuf.prefix(10)).map_err(e)?;
        t.send(1, sbuf.prefix(10)).map_err(e)?;
    } else {
        let r = t.native_round_trips(0, sbuf.prefix(10), rbuf.prefix(10), responder());
        ensure!(
            matches!(r, Some(Ok(()))),
            "answering a 10-byte message: {r:?}"
        );
        match t.native_round_trips(0, sbuf.prefix(20), rbuf.prefix(20), responder()) {
            Some(Err(TransportError::SizeMismatch {
                peer: 0,
                expected_bytes: 20,
                got_bytes: 10,
                ..
            })) => {}
            other => {
                return Err(format!(
                    "short message: expected SizeMismatch, got {other:?}"
                ))
            }
        }
        match t.native_round_trips(0, sbuf.prefix(5), rbuf.prefix(5), responder()) {
            Some(Err(err @ TransportError::Io { peer: 0, .. })) => ensure!(
                err.to_string().contains("longer than the 5 bytes"),
                "truncation error says: {err}"
            ),
            other => return Err(format!("long message: expected truncation, got {other:?}")),
        }
    }
    t.free_buffer(sbuf).map_err(e)?;
    t.free_buffer(rbuf).map_err(e)
}

fn is_busy<T>(r: Result<T, TransportError>) -> bool {
    matches!(r, Err(TransportError::BufferBusy { .. }))
}

/// Operations on bytes a pending operation uses are refused with `BufferBusy`
/// before MPI sees them: a receive (blocking or not, point-to-point or collective)
/// into bytes a pending send reads, and any use of bytes a pending receive writes.
fn busy(t: &mut MpiTransport) -> Check {
    let me = t.rank();
    let buf = t.alloc_buffer(64).map_err(e)?;
    match me {
        0 => {
            fill(&mut t.buffer_mut(buf).map_err(e)?[..16], 0, 16, 0);
            let sending = t.isend(1, buf.prefix(16)).map_err(e)?;
            ensure!(
                is_busy(t.recv(1, buf.region(8, 16))),
                "a blocking receive into a buffer a pending send reads was accepted"
            );
            ensure!(
                is_busy(t.irecv(1, buf.region(0, 1))),
                "a receive into a buffer a pending send reads was accepted"
            );
            ensure!(
                is_busy(t.bcast(0, buf.prefix(8))),
                "a broadcast into a buffer a pending send reads was accepted"
            );
            // Another send of the same bytes, and a receive into other bytes, are fine.
            let again = t.isend(1, buf.prefix(16)).map_err(e)?;
            let answer = t.irecv(1, buf.region(32, 16)).map_err(e)?;
            t.wait_all(&[sending, again, answer]).map_err(e)?;
            verify(&t.buffer(buf).map_err(e)?[32..48], 1, 16, 0)?;
        }
        1 => {
            let receiving = t.irecv(0, buf.prefix(16)).map_err(e)?;
            ensure!(
                is_busy(t.send(0, buf.region(15, 1))),
                "a blocking send from a buffer a pending receive writes was accepted"
            );
            ensure!(
                is_busy(t.isend(0, buf.prefix(1))),
                "a send from a buffer a pending receive writes was accepted"
            );
            ensure!(
                is_busy(t.recv(0, buf.region(4, 4))),
                "a second receive into the same bytes was accepted"
            );
            let second = t.irecv(0, buf.region(16, 16)).map_err(e)?;
            t.wait_all(&[receiving, second]).map_err(e)?;
            verify(&t.buffer(buf).map_err(e)?[..16], 0, 16, 0)?;
            verify(&t.buffer(buf).map_err(e)?[16..32], 0, 16, 0)?;
            fill(&mut t.buffer_mut(buf).map_err(e)?[..16], 1, 16, 0);
            t.send(0, buf.prefix(16)).map_err(e)?;
        }
        _ => {}
    }
    t.free_buffer(buf).map_err(e)
}

/// Runs a collective in its blocking form, or starts its nonblocking form and
/// waits for it.
fn coll(
    t: &mut MpiTransport,
    nonblocking: bool,
    blocking: impl FnOnce(&mut MpiTransport) -> Result<(), TransportError>,
    start: impl FnOnce(&mut MpiTransport) -> Result<RequestId, TransportError>,
) -> Check {
    if nonblocking {
        let req = start(t).map_err(e)?;
        t.wait(req).map_err(e)
    } else {
        blocking(t).map_err(e)
    }
}

/// MPI's collectives, blocking and nonblocking, on data whose result is known.
fn collectives(t: &mut MpiTransport) -> Check {
    let (me, n) = (t.rank(), t.size());
    let root = n - 1;
    for nb in [false, true] {
        coll(t, nb, |t| t.barrier(), |t| t.ibarrier())?;

        // Bcast of 1000 bytes from the last rank.
        let b = t.alloc_buffer(1000).map_err(e)?;
        if me == root {
            fill(t.buffer_mut(b).map_err(e)?, root, 1000, 1);
        }
        let data = b.prefix(1000);
        coll(t, nb, |t| t.bcast(root, data), |t| t.ibcast(root, data))?;
        verify(t.buffer(b).map_err(e)?, root, 1000, 1)?;

        // Reduce (sum of i64) to the root, allreduce (max of f64).
        let k = 5usize;
        let send = t.alloc_buffer(8 * k).map_err(e)?;
        let recv = t.alloc_buffer(8 * k).map_err(e)?;
        let (s, r) = (send.prefix(8 * k), recv.prefix(8 * k));
        for (j, chunk) in t
            .buffer_mut(send)
            .map_err(e)?
            .chunks_exact_mut(8)
            .enumerate()
        {
            chunk.copy_from_slice(&(((me + 1) * (j + 1)) as i64).to_le_bytes());
        }
        let (dtype, op) = (Datatype::I64, ReduceOp::Sum);
        coll(
            t,
            nb,
            |t| t.reduce(root, s, r, dtype, op),
            |t| t.ireduce(root, s, r, dtype, op),
        )?;
        if me == root {
            let total: usize = (1..=n).sum();
            for (j, chunk) in t.buffer(recv).map_err(e)?.chunks_exact(8).enumerate() {
                let got = i64::from_le_bytes(chunk.try_into().unwrap());
                ensure!(
                    got == (total * (j + 1)) as i64,
                    "reduce element {j} is {got}"
                );
            }
        }
        for (j, chunk) in t
            .buffer_mut(send)
            .map_err(e)?
            .chunks_exact_mut(8)
            .enumerate()
        {
            chunk.copy_from_slice(&((me as f64) * 1.5 - j as f64).to_le_bytes());
        }
        let (dtype, op) = (Datatype::F64, ReduceOp::Max);
        coll(
            t,
            nb,
            |t| t.allreduce(s, r, dtype, op),
            |t| t.iallreduce(s, r, dtype, op),
        )?;
        for (j, chunk) in t.buffer(recv).map_err(e)?.chunks_exact(8).enumerate() {
            let got = f64::from_le_bytes(chunk.try_into().unwrap());
            ensure!(
                got == ((n - 1) as f64) * 1.5 - j as f64,
                "allreduce element {j} is {got}"
            );
        }
        ensure!(
            t.allreduce(send.prefix(7), recv.prefix(7), Datatype::F64, ReduceOp::Sum)
                .is_err(),
            "7 bytes accepted as f64 elements"
        );
        ensure!(
            t.allreduce(
                send.prefix(8),
                send.region(4, 8),
                Datatype::F64,
                ReduceOp::Sum
            )
            .is_err(),
            "overlapping send and receive regions accepted"
        );

        // Gather to rank 0, allgather, alltoall: 3 bytes per rank.
        let m = 3;
        let mine = t.alloc_buffer(m * n).map_err(e)?;
        let all = t.alloc_buffer(m * n).map_err(e)?;
        let (one, every, out) = (mine.prefix(m), all.prefix(m * n), mine.prefix(m * n));
        fill(&mut t.buffer_mut(mine).map_err(e)?[..m], me, m, 0);
        coll(
            t,
            nb,
            |t| t.gather(0, one, every),
            |t| t.igather(0, one, every),
        )?;
        if me == 0 {
            for from in 0..n {
                verify(&t.buffer(all).map_err(e)?[from * m..][..m], from, m, 0)?;
            }
        }
        t.buffer_mut(all).map_err(e)?.fill(0);
        coll(
            t,
            nb,
            |t| t.allgather(one, every),
            |t| t.iallgather(one, every),
        )?;
        for from in 0..n {
            verify(&t.buffer(all).map_err(e)?[from * m..][..m], from, m, 0)?;
        }
        for to in 0..n {
            fill(
                &mut t.buffer_mut(mine).map_err(e)?[to * m..][..m],
                me,
                m,
                to,
            );
        }
        coll(
            t,
            nb,
            |t| t.alltoall(out, every),
            |t| t.ialltoall(out, every),
        )?;
        for from in 0..n {
            verify(&t.buffer(all).map_err(e)?[from * m..][..m], from, m, me)?;
        }
        for buf in [b, send, recv, mine, all] {
            t.free_buffer(buf).map_err(e)?;
        }
    }
    Ok(())
}

/// The control plane: barrier, broadcast, gather and allgather of rank-dependent
/// lengths (rank 0 contributes nothing).
fn control_plane(c: &mut MpiControl) -> Check {
    let (me, n) = (c.rank(), c.size());
    c.barrier().map_err(e)?;
    let root = 1 % n;
    let mut data = if me == root {
        b"parameters from the root".to_vec()
    } else {
        b"stale".to_vec()
    };
    c.broadcast(root, &mut data).map_err(e)?;
    ensure!(
        data == b"parameters from the root",
        "broadcast gave {data:?}"
    );
    let mut empty = Vec::new();
    c.broadcast(0, &mut empty).map_err(e)?;
    ensure!(
        empty.is_empty(),
        "empty broadcast gave {} bytes",
        empty.len()
    );
    let mine = vec![me as u8; me * 100];
    let gathered = c.gather(root, &mine).map_err(e)?;
    if me == root {
        ensure!(
            gathered.len() == n,
            "gather returned {} parts",
            gathered.len()
        );
        for (r, part) in gathered.iter().enumerate() {
            ensure!(
                *part == vec![r as u8; r * 100],
                "gathered part {r} is wrong"
            );
        }
    } else {
        ensure!(gathered.is_empty(), "a non-root got gather data");
    }
    let everyone = c.allgather(&mine).map_err(e)?;
    for (r, part) in everyone.iter().enumerate() {
        ensure!(
            *part == vec![r as u8; r * 100],
            "allgathered part {r} is wrong"
        );
    }
    ensure!(
        matches!(
            c.gather(n, &mine),
            Err(ngauge_transport::ControlError::Invalid(_))
        ),
        "a root outside the job was accepted"
    );
    Ok(())
}

fn timer(mpi: &Arc<Mpi>) -> Check {
    let tick = mpi.wtick();
    ensure!(tick > 0.0 && tick < 1e-3, "MPI_Wtick is {tick} s");
    let a = mpi.wtime();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let b = mpi.wtime();
    let advanced = b - a;
    if advanced < 0.019 {
        return Err(format!(
            "MPI_Wtime advanced {advanced} s over a 20 ms sleep"
        ));
    }
    Ok(())
}

fn identity(mpi: &Arc<Mpi>) -> Check {
    let from_env = ["OMPI_COMM_WORLD_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok());
    if let Some(rank) = from_env {
        ensure!(
            rank == mpi.rank(),
            "launcher says rank {rank}, MPI says {}",
            mpi.rank()
        );
    }
    ensure!(
        mpi.rank() < mpi.size(),
        "rank {} of {}",
        mpi.rank(),
        mpi.size()
    );
    let again = Mpi::init().map_err(e)?;
    ensure!(Arc::ptr_eq(mpi, &again), "a second init made a second MPI");
    // The library that runs is the one build.rs compiled the loaded shim against
    // (build.rs says `unknown` where the shim says `other`).
    let runtime = mpi.flavor().as_str();
    let built = ngauge_mpi::shim().flavor;
    ensure!(
        runtime == built || (built == "unknown" && runtime == "other"),
        "the shim reports {runtime} ({}), but build.rs found {built} ({})",
        mpi.library_version(),
        ngauge_mpi::shim().mpicc
    );
    Ok(())
}

fn main() {
    if std::env::args().any(|a| a == "--require-launcher") {
        match Mpi::init_under_launcher() {
            Ok(_) => println!("launcher found"),
            Err(err) => {
                eprintln!("ngauge-mpi-check: {err}");
                std::process::exit(2);
            }
        }
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--pingpong") {
        let num = |i: usize, default: usize| {
            args.get(at + i)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let native = args.get(at + 4).is_some_and(|a| a == "native");
        bench_pingpong(num(1, 1), num(2, 100_000), num(3, 10_000), native);
        return;
    }
    let mpi = match Mpi::init() {
        Ok(mpi) => mpi,
        Err(err) => {
            eprintln!("ngauge-mpi-check: {err}");
            std::process::exit(2);
        }
    };
    if args.iter().any(|a| a == "--drop-pending") {
        drop_pending(mpi);
        return;
    }
    let me = mpi.rank();
    if me == 0 {
        println!(
            "MPI {} ({}), {} ranks, thread level {}",
            mpi.library_version(),
            mpi.flavor().as_str(),
            mpi.size(),
            mpi.thread_level()
        );
    }
    let mut control = MpiControl::new(&mpi).expect("the control plane on MPI_COMM_WORLD");
    let mut failed = false;
    let mut report = |name: &str, result: Check, control: &mut MpiControl| {
        if let Err(why) = &result {
            eprintln!("FAIL rank {me}: {name}: {why}");
            failed = true;
        }
        // Agree that every rank passed before the next check starts.
        let verdicts = control
            .allgather(&[u8::from(result.is_ok())])
            .expect("control allgather");
        if me == 0 && verdicts.iter().all(|v| v == &[1]) {
            println!("PASS {name}");
        }
    };
    report("identity", identity(&mpi), &mut control);
    report("timer", timer(&mpi), &mut control);
    let result = control_plane(&mut control);
    report("control", result, &mut control);
    for wait in [WaitMode::Poll, WaitMode::Block] {
        let mut t = MpiTransport::new(&mpi, MpiOptions { wait }).expect("the MPI transport");
        let w = wait.as_str();
        report(&format!("errors-{w}"), errors(&mut t), &mut control);
        report(&format!("native-{w}"), native(&mut t), &mut control);
        report(
            &format!("collectives-{w}"),
            collectives(&mut t),
            &mut control,
        );
    }
    // The transport contract every transport keeps, a fresh transport per check.
    let profile = conformance::Profile {
        modes: vec![WaitMode::Poll, WaitMode::Block],
        timeout: std::time::Duration::from_secs(60),
        short_timeout: None,
        timeouts_keep_requests: false,
        reports_closed_peers: false,
    };
    let suite = conformance::run_rank(&profile, &mut control, |s| {
        let t = MpiTransport::new(&mpi, MpiOptions { wait: s.wait })?;
        Ok(Box::new(t) as Box<dyn Transport>)
    });
    if me == 0 {
        for line in suite.to_string().lines() {
            println!("conformance: {line}");
        }
    }
    let verdict = if suite.passed() {
        Ok(())
    } else {
        Err("see the conformance lines".to_string())
    };
    report("conformance", verdict, &mut control);
    let leaked = mpi.requests_in_flight();
    report(
        "no-leaked-requests",
        if leaked == 0 {
            Ok(())
        } else {
            Err(format!("{leaked} requests in flight"))
        },
        &mut control,
    );
    drop(control);
    drop(mpi);
    std::process::exit(i32::from(failed));
}

/// `--drop-pending` (2 ranks): rank 0 drops its transport with a receive pending,
/// then rank 1 sends the message. The transport must leak the receive buffer rather
/// than free it (memory allocated afterwards, likely at the same address, must not
/// change when MPI delivers), and the end of MPI must abort the job instead of
/// finalizing with a request in flight. Rank 0 prints `PASS drop-pending` when its
/// memory stayed intact; the job then ends with a failure status.
fn drop_pending(mpi: Arc<Mpi>) {
    const LEN: usize = 1024;
    let mut control = MpiControl::new(&mpi).expect("control plane");
    let mut t = MpiTransport::new(&mpi, MpiOptions::default()).expect("transport");
    let buf = t.alloc_buffer(LEN).expect("buffer");
    let mut fresh = Vec::new();
    if t.rank() == 0 {
        t.irecv(1, buf.prefix(LEN)).expect("irecv");
        drop(t);
        // Where the receive buffer was, if it had been freed.
        fresh = vec![0xAAu8; LEN];
        control.barrier().expect("barrier");
    } else {
        control.barrier().expect("barrier");
        fill(&mut t.buffer_mut(buf).expect("buffer")[..], 1, LEN, 0);
        t.send(0, buf.prefix(LEN)).expect("send");
        drop(t);
    }
    // Gives MPI on rank 0 time and calls to deliver the message.
    for _ in 0..50 {
        control.barrier().expect("barrier");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if mpi.rank() == 0 {
        if fresh.iter().all(|&b| b == 0xAA) {
            println!("PASS drop-pending");
        } else {
            println!("FAIL rank 0: drop-pending: MPI wrote into memory freed by the drop");
        }
        println!("requests in flight: {}", mpi.requests_in_flight());
    }
    drop(control);
    drop(mpi); // aborts the job on rank 0: its receive is still in flight
}

/// The same loop as `benches/c/mpi_pingpong.c`, through [`MpiTransport`]: every round
/// trip timed on rank 0 with `CLOCK_MONOTONIC_RAW` semantics (`Instant`), half of it
/// recorded; prints the same line.
fn bench_pingpong(bytes: usize, reps: usize, warmup: usize, native: bool) {
    let mpi = Mpi::init().expect("MPI_Init_thread");
    let mut t = MpiTransport::new(&mpi, MpiOptions::default()).expect("the MPI transport");
    let buf = t.alloc_buffer(bytes.max(4096)).expect("buffer");
    let region = buf.prefix(bytes);
    let mut half = vec![0f64; reps];
    t.barrier().expect("barrier");
    if native {
        #[cfg(target_arch = "x86_64")]
        {
            // Ticks per ns over the loop, as the C program computes them.
            let start = std::time::Instant::now();
            // SAFETY: `rdtsc` only reads the time-stamp counter.
            let tsc0 = unsafe { core::arch::x86_64::_rdtsc() };
            let mut ticks = vec![0u64; reps];
            let role = match t.rank() {
                0 => NativeRole::Initiator {
                    warmup,
                    ticks: &mut ticks,
                    read: TscRead::Rdtscp,
                },
                1 => NativeRole::Responder {
                    round_trips: warmup + reps,
                },
                _ => NativeRole::Responder { round_trips: 0 },
            };
            if t.rank() < 2 {
                let peer = 1 - t.rank();
                let r = t.native_round_trips(peer, region, region, role);
                r.expect("a native loop in poll mode").expect("native loop");
            }
            // SAFETY: as above.
            let tsc1 = unsafe { core::arch::x86_64::_rdtsc() };
            let per_ns = (tsc1 - tsc0) as f64 / start.elapsed().as_nanos() as f64;
            for (h, &t) in half.iter_mut().zip(&ticks) {
                *h = t as f64 / per_ns / 2.0;
            }
        }
    }
    for i in 0..if native { 0 } else { warmup + reps } {
        match t.rank() {
            0 => {
                let t0 = std::time::Instant::now();
                t.send(1, region).expect("send");
                t.recv(1, region).expect("recv");
                let dt = t0.elapsed();
                if i >= warmup {
                    half[i - warmup] = dt.as_nanos() as f64 / 2.0;
                }
            }
            1 => {
                t.recv(0, region).expect("recv");
                t.send(0, region).expect("send");
            }
            _ => {}
        }
    }
    if t.rank() == 0 {
        let mean = half.iter().sum::<f64>() / reps as f64;
        half.sort_by(f64::total_cmp);
        println!(
            "size {bytes} reps {reps} min_us {:.4} median_us {:.4} mean_us {:.4}",
            half[0] / 1e3,
            half[reps / 2] / 1e3,
            mean / 1e3
        );
    }
}
