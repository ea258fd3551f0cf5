//! Issue 33: `Transport::native_stream` over UCX on two threads: the receiver's
//! slots hold the sender's bytes, a region out of bounds is refused before
//! anything is sent, and block mode keeps the generic run (`None`), as
//! `native_round_trips` does; a native ping-pong whose peer leaves fails naming
//! it; a native ping-pong carries the bytes and times every round trip with
//! either reading of the counter (`--timer`).
#![cfg(feature = "ucp")]

use ngauge_transport::{
    conformance, NativeRole, Region, Transport, TransportError, TscRead, WaitMode,
};
use ngauge_ucx::{UcxOp, UcxOptions};
use std::time::Duration;

const SIZE: usize = 3;
const WINDOW: usize = 4;

/// Runs `rank` on each of two connected ranks in `wait` mode.
fn pair(wait: WaitMode, rank: fn(&mut dyn Transport)) {
    let o = UcxOptions {
        tls: Some("posix,self".into()),
        op: UcxOp::Send,
        wait,
        timeout: Duration::from_secs(10),
        ..UcxOptions::default()
    };
    let threads: Vec<_> = conformance::connect_each(2, move |c| ngauge_ucx::open(c, &o))
        .into_iter()
        .map(|open| {
            std::thread::spawn(move || {
                let (mut t, _control) = open().unwrap();
                rank(&mut *t);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_native_stream_fills_every_slot_and_refuses_what_is_out_of_bounds() {
    pair(WaitMode::Poll, |t| {
        let (sender, peer) = (t.rank() == 0, 1 - t.rank());
        let sbuf = t.alloc_buffer(SIZE).unwrap();
        let rbuf = t.alloc_buffer(SIZE * WINDOW).unwrap();
        t.buffer_mut(sbuf).unwrap().copy_from_slice(b"abc");
        let (send, recv) = if sender {
            (sbuf.prefix(SIZE), rbuf.prefix(1))
        } else {
            (sbuf.prefix(1), rbuf.prefix(SIZE))
        };
        // Past the buffer's end: refused before anything is sent.
        let beyond = Region {
            offset: SIZE * WINDOW,
            ..recv
        };
        let refused = t.native_stream(peer, send, beyond, WINDOW, 10, sender);
        assert!(matches!(refused, Some(Err(_))), "{refused:?}");
        let ran = t.native_stream(peer, send, recv, WINDOW, 10, sender);
        assert!(matches!(ran, Some(Ok(()))), "{ran:?}");
        if !sender {
            assert_eq!(t.buffer(rbuf).unwrap(), b"abcabcabcabc");
        }
    });
}

#[test]
fn block_mode_keeps_the_generic_stream() {
    pair(WaitMode::Block, |t| {
        let b = t.alloc_buffer(SIZE * WINDOW).unwrap();
        let peer = 1 - t.rank();
        let ran = t.native_stream(peer, b.prefix(1), b.prefix(SIZE), WINDOW, 10, t.rank() == 0);
        assert!(ran.is_none());
    });
}

/// The peer's goodbye is checked only every few dozen rounds of progress: a
/// responder that leaves after fewer round trips than the initiator's still
/// ends the initiator's loop with the error naming it (the goodbye, not the
/// timeout).
#[test]
fn a_native_ping_pong_whose_peer_leaves_fails_naming_it() {
    pair(WaitMode::Poll, |t| {
        let b = t.alloc_buffer(1).unwrap();
        let (r, peer) = (b.prefix(1), 1 - t.rank());
        if t.rank() == 0 {
            let mut ticks = vec![0u64; 20];
            let role = NativeRole::Initiator {
                warmup: 5,
                ticks: &mut ticks,
                read: TscRead::Rdtscp,
            };
            // `None` only without rdtscp, on both ranks alike.
            let Some(ran) = t.native_round_trips(peer, r, r, role) else {
                return;
            };
            match ran {
                Err(TransportError::PeerClosed { peer: 1, .. }) => {}
                other => panic!("expected the peer's goodbye, got {other:?}"),
            }
        } else {
            let role = NativeRole::Responder { round_trips: 10 };
            if let Some(ran) = t.native_round_trips(peer, r, r, role) {
                assert!(ran.is_ok(), "{ran:?}");
            }
        }
    });
}

/// Both readings of the counter (`TscRead`) time every round trip (no slot left
/// at 0) and the bytes arrive; the reading is the initiator's alone.
#[test]
fn a_native_ping_pong_times_every_round_trip_with_either_reading() {
    pair(WaitMode::Poll, |t| {
        let sbuf = t.alloc_buffer(SIZE).unwrap();
        let rbuf = t.alloc_buffer(SIZE).unwrap();
        let peer = 1 - t.rank();
        let mine = if t.rank() == 0 { b"abc" } else { b"xyz" };
        t.buffer_mut(sbuf).unwrap().copy_from_slice(mine);
        for read in [TscRead::Rdtscp, TscRead::Rdtsc] {
            t.buffer_mut(rbuf).unwrap().fill(0);
            let (s, r) = (sbuf.prefix(SIZE), rbuf.prefix(SIZE));
            let mut ticks = vec![0u64; 50];
            let role = if t.rank() == 0 {
                NativeRole::Initiator {
                    warmup: 5,
                    ticks: &mut ticks,
                    read,
                }
            } else {
                NativeRole::Responder { round_trips: 55 }
            };
            // `None` only without rdtscp, on both ranks alike.
            let Some(ran) = t.native_round_trips(peer, s, r, role) else {
                return;
            };
            assert!(ran.is_ok(), "{read:?}: {ran:?}");
            let theirs: &[u8] = if t.rank() == 0 { b"xyz" } else { b"abc" };
            assert_eq!(t.buffer(rbuf).unwrap(), theirs, "{read:?}");
            if t.rank() == 0 {
                assert!(ticks.iter().all(|&n| n > 0), "{read:?}: {ticks:?}");
            }
        }
    });
}
