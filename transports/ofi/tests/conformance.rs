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
