//! Issue 12: a job opened from a plain spec, with the library alone (no command
//! line): two ranks started by hand on loopback (as two threads of this test), a
//! TCP transport opened over them from a `JobSpec`, one message each way.

use ngauge::job::{self, Job, JobSpec, TransportName, WaitPolicy};
use ngauge::launch::{LaunchOptions, Started};
use std::time::Duration;

/// A port nobody listens on now (rank 0 binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_two_rank_tcp_job_opens_from_a_spec() {
    // The spec a suite file would give, read the way a suite reads it.
    let spec: JobSpec =
        serde_json::from_str(r#"{"transports": ["tcp"], "wait": "block", "timeout_s": 20}"#)
            .unwrap();
    let rendezvous = format!("127.0.0.1:{}", free_port());
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let spec = spec.clone();
            let opts = LaunchOptions {
                rank: Some(rank),
                size: Some(2),
                rendezvous: Some(rendezvous.clone()),
                job_token: Some("issue-12-job-spec-token".into()),
                timeout: Duration::from_secs(20),
                ..LaunchOptions::default()
            };
            std::thread::spawn(move || {
                let Started::Rank(mut world) = job::start(&spec, &opts).unwrap() else {
                    panic!("rank {rank} became a launcher")
                };
                let mut job = Job::open(&spec, &mut world, |_, _| {}).unwrap();
                assert_eq!(job.transports.len(), 1);
                let opened = &mut job.transports[0];
                assert_eq!(opened.name, TransportName::Tcp);
                assert_eq!(opened.wait.as_str(), "block");
                let t = opened.transport.as_mut();
                let buf = t.alloc_buffer(64).unwrap();
                let peer = 1 - rank;
                if rank == 0 {
                    t.buffer_mut(buf).unwrap()[..5].copy_from_slice(b"hello");
                    t.send(peer, buf.prefix(5)).unwrap();
                    t.recv(peer, buf.prefix(3)).unwrap();
                } else {
                    t.recv(peer, buf.prefix(5)).unwrap();
                    assert_eq!(&t.buffer(buf).unwrap()[..5], b"hello");
                    t.buffer_mut(buf).unwrap()[..3].copy_from_slice(b"ack");
                    t.send(peer, buf.prefix(3)).unwrap();
                }
                let got = t.buffer(buf).unwrap()[..3].to_vec();
                drop(job);
                world.finish().unwrap();
                got
            })
        })
        .collect();
    let got: Vec<Vec<u8>> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got[0], b"ack");
}

#[test]
fn a_spec_that_cannot_work_is_the_users_input() {
    let spec = JobSpec {
        transports: vec![TransportName::Udp, TransportName::Udp],
        wait: WaitPolicy::Poll,
        ..JobSpec::default()
    };
    let e = spec.validate().unwrap_err();
    assert!(e.is_input());
    assert_eq!(e.to_string(), "udp is listed twice");
}
