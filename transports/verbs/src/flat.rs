//! When the flat path of a blocking small message applies (the device side is
//! `device/flat.rs`): the rule, kept apart from the device so that it is tested
//! on known data.
//!
//! The flat path is the blocking `send`/`recv` of a message that goes in one
//! inline work request (send) or is found in one receive slot or ring slot
//! (recv), with nothing else of that peer's in flight that it could overtake or
//! that could need the general machinery: it posts, or spins on the ring flag
//! (write-poll) or the completion queue (send), and delivers inline, without a
//! request, the generic completion dispatch or the wait's bookkeeping, the way
//! `ib_write_lat`/`ib_send_lat` loop. Everything else is handed over, unchanged,
//! to the direct path (`device/direct.rs`) and from there to the generic one:
//! the flat path changes no state before it posts or takes a message, so the
//! path it hands over to starts as if it had been called first.

/// Bytes of the largest message the flat send copies next to its trailer into
/// the prepared work request's staging area (write-poll: one gather entry
/// instead of two; the provider's inline copy loop runs once). A cache line.
pub const STAGE_BYTES: usize = 64;

/// What a peer has in flight that the flat path must not pass (each `true`
/// hands the call over).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// The connection broke (the general path reports it).
    pub broken: bool,
    /// Requests of ours wait in the peer's queues (a message must not overtake
    /// them; a receive's advertisement may be what the peer waits for).
    pub queued: bool,
    /// Posted receives wait for a message (the next message is theirs).
    pub waiting_recvs: bool,
    /// Messages arrived before their receive and wait as copies (the next
    /// message to deliver is the oldest copy, not what lands next).
    pub held: bool,
}

/// What a flat send needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendGate {
    /// What the peer has in flight (only `broken` and `queued` matter to a send).
    pub pending: Pending,
    /// The region is valid and no pending request holds any part of its buffer.
    pub region_idle: bool,
    /// Message bytes.
    pub len: usize,
    /// Largest message the flat send takes on this path: the eager slot size
    /// (send), [`STAGE_BYTES`] (write-poll).
    pub max_len: usize,
    /// Bytes the inline work request carries: the message (send), the message
    /// and its trailer (write-poll).
    pub inline_bytes: usize,
    /// The device's granted `max_inline_data`.
    pub max_inline: u32,
    /// The send queue has room for one more.
    pub queue_room: bool,
    /// Flow control lets the message go: a send credit (send), a free slot in
    /// the peer's ring as far as we know (write-poll).
    pub peer_room: bool,
    /// The next send must be signaled whatever its kind (the flush at drop).
    pub signal_next: bool,
}

/// Whether the flat send applies.
pub fn send_applies(g: &SendGate) -> bool {
    !g.pending.broken
        && !g.pending.queued
        && g.region_idle
        && g.len <= g.max_len
        && g.inline_bytes > 0
        && g.inline_bytes <= g.max_inline as usize
        && g.queue_room
        && g.peer_room
        && !g.signal_next
}

/// What a flat receive needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvGate {
    /// What the peer has in flight.
    pub pending: Pending,
    /// The region is valid and no pending request holds any part of its buffer.
    pub region_idle: bool,
    /// Message bytes.
    pub len: usize,
    /// Largest message that lands in a slot on this path: the eager slot size
    /// (send), the ring slot's payload (write-poll).
    pub max_len: usize,
    /// The transport polls (a blocking wait sleeps on the completion channel:
    /// the direct path's wait does that).
    pub polling: bool,
}

/// Whether the flat receive applies.
pub fn recv_applies(g: &RecvGate) -> bool {
    let p = g.pending;
    !p.broken
        && !p.queued
        && !p.waiting_recvs
        && !p.held
        && g.region_idle
        && g.len <= g.max_len
        && g.polling
}

/// Whether the message that landed is the one the flat receive takes itself:
/// of the posted length (a mismatch is handed over, and the general path
/// consumes it and reports it), and well formed.
pub fn takes_landed(posted_len: usize, landed_len: usize) -> bool {
    posted_len == landed_len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_gate() -> SendGate {
        SendGate {
            pending: Pending::default(),
            region_idle: true,
            len: 1,
            max_len: STAGE_BYTES,
            inline_bytes: 9,
            max_inline: 64,
            queue_room: true,
            peer_room: true,
            signal_next: false,
        }
    }

    fn recv_gate() -> RecvGate {
        RecvGate {
            pending: Pending::default(),
            region_idle: true,
            len: 1,
            max_len: 4096,
            polling: true,
        }
    }

    #[test]
    fn a_quiet_peer_and_a_small_idle_message_take_the_flat_send() {
        assert!(send_applies(&send_gate()));
        let g = SendGate {
            len: STAGE_BYTES,
            inline_bytes: STAGE_BYTES + 8,
            max_inline: 72,
            ..send_gate()
        };
        assert!(send_applies(&g));
    }

    #[test]
    fn every_reason_hands_the_send_over() {
        let cases: [(&str, SendGate); 10] = [
            (
                "broken",
                SendGate {
                    pending: Pending {
                        broken: true,
                        ..Pending::default()
                    },
                    ..send_gate()
                },
            ),
            (
                "queued",
                SendGate {
                    pending: Pending {
                        queued: true,
                        ..Pending::default()
                    },
                    ..send_gate()
                },
            ),
            (
                "held buffer",
                SendGate {
                    region_idle: false,
                    ..send_gate()
                },
            ),
            (
                "too long",
                SendGate {
                    len: STAGE_BYTES + 1,
                    ..send_gate()
                },
            ),
            (
                "empty inline",
                SendGate {
                    len: 0,
                    inline_bytes: 0,
                    ..send_gate()
                },
            ),
            (
                "not inline",
                SendGate {
                    inline_bytes: 65,
                    ..send_gate()
                },
            ),
            (
                "queue full",
                SendGate {
                    queue_room: false,
                    ..send_gate()
                },
            ),
            (
                "no credit or ring room",
                SendGate {
                    peer_room: false,
                    ..send_gate()
                },
            ),
            (
                "flush",
                SendGate {
                    signal_next: true,
                    ..send_gate()
                },
            ),
            (
                "no inline at all",
                SendGate {
                    max_inline: 0,
                    ..send_gate()
                },
            ),
        ];
        for (why, g) in cases {
            assert!(!send_applies(&g), "{why}: the flat send must hand over");
        }
    }

    #[test]
    fn pending_receives_or_held_messages_do_not_stop_a_send() {
        let g = SendGate {
            pending: Pending {
                waiting_recvs: true,
                held: true,
                ..Pending::default()
            },
            ..send_gate()
        };
        assert!(send_applies(&g));
    }

    #[test]
    fn every_reason_hands_the_receive_over() {
        assert!(recv_applies(&recv_gate()));
        assert!(recv_applies(&RecvGate {
            len: 4096,
            ..recv_gate()
        }));
        let pending = |f: fn(&mut Pending)| {
            let mut p = Pending::default();
            f(&mut p);
            RecvGate {
                pending: p,
                ..recv_gate()
            }
        };
        let cases: [(&str, RecvGate); 7] = [
            ("broken", pending(|p| p.broken = true)),
            ("queued", pending(|p| p.queued = true)),
            ("a receive waits", pending(|p| p.waiting_recvs = true)),
            ("a message is held", pending(|p| p.held = true)),
            (
                "held buffer",
                RecvGate {
                    region_idle: false,
                    ..recv_gate()
                },
            ),
            (
                "too long for a slot",
                RecvGate {
                    len: 4097,
                    ..recv_gate()
                },
            ),
            (
                "blocking wait",
                RecvGate {
                    polling: false,
                    ..recv_gate()
                },
            ),
        ];
        for (why, g) in cases {
            assert!(!recv_applies(&g), "{why}: the flat receive must hand over");
        }
    }

    #[test]
    fn a_landed_message_of_another_length_is_handed_over() {
        assert!(takes_landed(1, 1));
        assert!(!takes_landed(8, 16));
        assert!(!takes_landed(16, 8));
    }
}
