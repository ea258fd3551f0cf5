//! The shared transport contract (`ngauge_transport::conformance`) over the RDM
//! providers every Linux host has: `shm`, `tcp;ofi_rxm`, `udp;ofi_rxd` and
//! `sockets`, each with both data paths and in both wait modes, and `shm` with
//! plain (untagged) messages.

use ngauge_ofi::{OfiOp, OfiOptions};
use ngauge_transport::conformance::{self, Profile};
use ngauge_transport::WaitMode;
use std::time::Duration;

fn profile(op: OfiOp, goodbyes: bool) -> Profile {
    Profile {
        modes: vec![WaitMode::Poll, WaitMode::Block],
        timeout: Duration::from_secs(10),
        short_timeout: Some(Duration::from_millis(300)),
        // The write path cannot take back a region it advertised: a timeout
        // breaks the exchange with that peer instead.
        timeouts_keep_requests: op == OfiOp::Send,
        // Goodbyes are tagged messages, and `shm` sends none to a thread of its
        // own process (see `say_goodbye`).
        reports_closed_peers: goodbyes,
    }
}

fn run(provider: &str, op: OfiOp, plain: bool) {
    let report = conformance::run_threads(&profile(op, !plain && provider != "shm"), |s| {
        let o = OfiOptions {
            provider: Some(provider.to_string()),
            op,
            wait: s.wait,
            timeout: s.timeout,
            plain_messages: plain,
        };
        conformance::connect_each(s.ranks, move |c| ngauge_ofi::open(c, &o))
    });
    eprintln!("{provider} {op:?} plain={plain}:\n{report}");
    report.assert_passed();
}

#[test]
fn shm_send() {
    run("shm", OfiOp::Send, false);
}

#[test]
fn shm_write() {
    run("shm", OfiOp::Write, false);
}

#[test]
fn shm_plain_messages() {
    run("shm", OfiOp::Send, true);
}

#[test]
fn tcp_rxm_send() {
    run("tcp;ofi_rxm", OfiOp::Send, false);
}

#[test]
fn tcp_rxm_write() {
    run("tcp;ofi_rxm", OfiOp::Write, false);
}

#[test]
fn udp_rxd_send() {
    run("udp;ofi_rxd", OfiOp::Send, false);
}

#[test]
fn udp_rxd_write() {
    run("udp;ofi_rxd", OfiOp::Write, false);
}

#[test]
fn sockets_send() {
    run("sockets", OfiOp::Send, false);
}

#[test]
fn sockets_write() {
    run("sockets", OfiOp::Write, false);
}

/// Beyond the contract, `tcp;ofi_rxm`'s own rule: after a message longer than the
/// receive posted for it, that peer's next receive fails at once naming the
/// cause (the provider may have lost the connection's stream), and `settle`
/// returns on both ranks instead of waiting for a hello that may never come.
#[test]
fn tcp_rxm_a_truncated_message_ends_receiving_from_that_peer_and_says_so() {
    let o = OfiOptions {
        provider: Some("tcp;ofi_rxm".into()),
        op: OfiOp::Send,
        wait: WaitMode::Poll,
        timeout: Duration::from_secs(10),
        plain_messages: false,
    };
    let ranks = conformance::connect_each(2, move |c| ngauge_ofi::open(c, &o));
    let threads: Vec<_> = ranks
        .into_iter()
        .enumerate()
        .map(|(rank, open)| {
            std::thread::spawn(move || -> Result<(), String> {
                let (mut t, mut c) = open().map_err(|e| e.to_string())?;
                let buf = t.alloc_buffer(10).map_err(|e| e.to_string())?;
                if rank == 0 {
                    t.send(1, buf.prefix(10)).map_err(|e| e.to_string())?;
                } else {
                    let long = t.recv(0, buf.prefix(5));
                    assert!(long.is_err(), "10 B into a receive of 5: {long:?}");
                    let started = std::time::Instant::now();
                    let next = t.recv(0, buf.prefix(10));
                    let why = format!("{next:?}");
                    assert!(why.contains("no longer arrive"), "{why}");
                    assert!(started.elapsed() < Duration::from_secs(1), "{why}");
                }
                let settled = std::time::Instant::now();
                t.settle()
                    .map_err(|e| format!("rank {rank}: settle: {e}"))?;
                assert!(settled.elapsed() < Duration::from_secs(5), "rank {rank}");
                c.barrier().map_err(|e| e.to_string())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic").expect("rank ended well");
    }
}
