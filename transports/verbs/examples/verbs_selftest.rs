//! Two ranks (threads, with the in-process control channel) on one verbs device:
//! ping-pong with data checks over sizes 1 B .. 1 MiB, both data paths and both wait
//! modes, plus a nonblocking exchange through `wait_all`. Prints the median half
//! round trip per size. Used inside the soft-RoCE VM (`scripts/rxe-vm`).
//!
//! usage: verbs_selftest [--device NAME] [--gid-index N] [--iters N] [--max BYTES]

use ngauge_transport::{inproc, Control, Transport, TransportError};
use ngauge_verbs::{VerbsOp, VerbsOptions, WaitMode};
use std::time::Instant;

fn pattern(size: usize, round: usize, from: usize) -> impl Iterator<Item = u8> {
    (0..size).map(move |i| (i.wrapping_mul(31) ^ round.wrapping_mul(7) ^ (from * 101)) as u8)
}

fn rank_main(
    control: &mut dyn Control,
    opts: &VerbsOptions,
    iters: usize,
    max: usize,
) -> Result<Vec<(usize, f64)>, TransportError> {
    let mut t = ngauge_verbs::open(control, opts)?;
    let me = t.rank();
    let peer = 1 - me;
    let sbuf = t.alloc_buffer(max)?;
    let rbuf = t.alloc_buffer(max)?;
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
    // a size mismatch is reported, not hung on
    let r = if me == 0 {
        t.irecv(peer, rbuf.prefix(8))
    } else {
        t.isend(peer, sbuf.prefix(16))
    }?;
    match t.wait(r) {
        Err(TransportError::SizeMismatch { .. }) | Err(TransportError::Io { .. }) => {}
        // an inline send is complete when posted; the receiver sees the mismatch
        Ok(()) if me == 1 && opts.op == VerbsOp::Send => {}
        other => {
            return Err(TransportError::Setup {
                transport: "verbs",
                reason: format!("size mismatch not reported: {other:?}"),
            })
        }
    }
    Ok(out)
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
    let base = VerbsOptions {
        device: arg("--device"),
        gid_index: arg("--gid-index").map(|v| v.parse().expect("--gid-index N")),
        ..VerbsOptions::default()
    };
    println!(
        "probe: {:?}",
        ngauge_verbs::probe(base.device.as_deref(), 1)
    );
    let mut failed = false;
    for op in [VerbsOp::Send, VerbsOp::Write] {
        for wait in [WaitMode::Poll, WaitMode::Block] {
            let opts = VerbsOptions {
                op,
                wait,
                ..base.clone()
            };
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
            match &results[0] {
                Ok(points) => {
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
