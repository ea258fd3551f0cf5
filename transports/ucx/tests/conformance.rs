//! The transport contract (`ngauge_transport::conformance`) over every UCX
//! transport list this machine offers without a device (shared memory, CMA,
//! TCP on loopback), both wait modes, both data paths where they apply (the
//! put path runs in poll mode only). Ranks are threads, each with its own UCP
//! context and worker, connected through the in-process control plane.
#![cfg(feature = "ucp")]

use ngauge_transport::{conformance, WaitMode};
use ngauge_ucx::{UcxOp, UcxOptions};
use std::time::Duration;

fn contract(tls: &str, op: UcxOp, modes: Vec<WaitMode>) {
    let profile = conformance::Profile {
        modes,
        timeout: Duration::from_secs(10),
        short_timeout: Some(Duration::from_millis(500)),
        // A receive that times out stays pending (UCX can take it back); a
        // send that does breaks the connection (it cannot).
        timeouts_keep_requests: true,
        reports_closed_peers: true,
    };
    let report = conformance::run_threads(&profile, |s| {
        let o = UcxOptions {
            tls: Some(tls.to_string()),
            op,
            wait: s.wait,
            timeout: s.timeout,
            ..UcxOptions::default()
        };
        conformance::connect_each(s.ranks, move |c| ngauge_ucx::open(c, &o))
    });
    println!("{tls} {}:\n{report}", op.as_str());
    report.assert_passed();
}

const BOTH: fn() -> Vec<WaitMode> = || vec![WaitMode::Poll, WaitMode::Block];

#[test]
fn keeps_the_transport_contract_over_posix() {
    contract("posix,self", UcxOp::Send, BOTH());
}

#[test]
fn keeps_the_transport_contract_over_sysv() {
    contract("sysv,self", UcxOp::Send, BOTH());
}

#[test]
fn keeps_the_transport_contract_over_cma() {
    // CMA carries no active messages: shared memory carries the eager
    // messages and rendezvous' control, CMA the rendezvous data.
    contract("posix,cma,self", UcxOp::Send, BOTH());
}

#[test]
fn keeps_the_transport_contract_over_tcp() {
    contract("tcp", UcxOp::Send, BOTH());
}

#[test]
fn keeps_the_transport_contract_with_puts_over_posix() {
    contract("posix,self", UcxOp::Put, vec![WaitMode::Poll]);
}

#[test]
fn keeps_the_transport_contract_with_puts_over_tcp() {
    contract("tcp", UcxOp::Put, vec![WaitMode::Poll]);
}
