//! The network model: LogGP message timing (Hoefler, Schneider, Lumsdaine, "LogGP
//! in theory and practice", sec. 2 for the parameters, sec. 4.1 for their use in a
//! simulation), per protocol range of message sizes, with optional per-message
//! latency noise.
//!
//! One message of `s` bytes from `a` to `b` (all times in picoseconds):
//!
//! - the send call charges `o_s + (s-1)O` to `a`'s CPU (`O`: LogGOPS's CPU
//!   overhead per byte, 0 in plain LogGP); where the message leaves before the call
//!   returns (TCP over loopback delivers it in the sender's call), the last
//!   `send_overlap` of `o_s` comes after the message left ([`LogGp::send_cpu_ps`]);
//! - `a`'s network interface puts the first byte on the wire when the call is over
//!   and the interface is free ([`Nic::inject`]); the last byte follows `(s-1)G`
//!   later; the interface is busy for `g + (s-1)G` from the first byte, so
//!   back-to-back messages leave `g + (s-1)G` apart (eq. 2, `G_all`);
//! - the last byte arrives `L` after it left;
//! - `b`'s interface takes messages in `g + (s-1)G` apart as well
//!   ([`Nic::accept`]; LogP's `g` holds for receptions too, which binds when several
//!   senders target one rank);
//! - the receive call ends `o_r + (s-1)O` after the later of its call and the
//!   arrival; where the measured `o_r` holds part of the transfer (over loopback
//!   the receiver's copy is the transfer), a receive that is waiting runs the
//!   first `recv_overlap` of it before the last byte is in
//!   ([`LogGp::recv_start`]).
//!
//! A rendezvous protocol ([`LogGp::rendezvous`]) first sends a request-to-send and
//! waits for the receiver's clear-to-send (each takes `L`, no overhead, no gap, as
//! an RDMA handshake); the data leaves when it arrives.
//!
//! The threaded test world adds latency noise (`tests_transport.rs`).

use crate::sim::time::Ps;

/// One protocol's LogGP parameters, in picoseconds (`G` in femtoseconds per byte:
/// loopback TCP moves a byte in about 0.3 ps, which whole picoseconds would round to
/// nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogGp {
    /// `L`: wire latency of the last byte.
    pub l_ps: u64,
    /// `o_s`: CPU overhead of a send.
    pub os_ps: u64,
    /// `o_r`: CPU overhead of a receive.
    pub or_ps: u64,
    /// `g`: gap between consecutive messages on a network interface.
    pub g_ps: u64,
    /// `G`: gap per byte, in femtoseconds (1000 fs = 1 ps).
    pub big_g_fs: u64,
    /// Whether a send waits for the receiver (rendezvous) rather than returning
    /// after `o_s` (eager).
    pub rendezvous: bool,
    /// The end of `o_s` that an eager send spends after its message left, at most
    /// `o_s`: the receiver does not wait for it.
    pub send_overlap_ps: u64,
    /// `O`: CPU overhead per byte at each end (LogGOPS), in femtoseconds.
    pub big_o_fs: u64,
    /// The start of `o_r` that a waiting receive runs before its message's last
    /// byte is in, at most `o_r`.
    pub recv_overlap_ps: u64,
}

impl LogGp {
    /// `(s-1)G`: from the first byte on the wire to the last (0 for `s = 0`), rounded
    /// to the nearest picosecond (exact when `G` is a whole number of picoseconds).
    pub fn transfer_ps(&self, size: u64) -> u64 {
        let fs = u128::from(size.saturating_sub(1)) * u128::from(self.big_g_fs);
        ((fs + 500) / 1000) as u64
    }

    /// Parameters given in microseconds (`G` in microseconds per byte), rounded to
    /// the nearest picosecond (femtosecond for `G`); negative values count as 0.
    pub fn from_us(
        l: f64,
        os: f64,
        or: f64,
        g: f64,
        big_g_per_byte: f64,
        rendezvous: bool,
    ) -> Self {
        let ps = |us: f64| (us.max(0.0) * 1e6).round() as u64;
        LogGp {
            l_ps: ps(l),
            os_ps: ps(os),
            or_ps: ps(or),
            g_ps: ps(g),
            big_g_fs: (big_g_per_byte.max(0.0) * 1e9).round() as u64,
            rendezvous,
            send_overlap_ps: 0,
            recv_overlap_ps: 0,
            big_o_fs: 0,
        }
    }

    /// These parameters with a send overlap (us, at most `o_s`), a receive
    /// overlap (us, at most `o_r`) and a CPU overhead per byte `O` (us per byte) at
    /// each end; negative values count as 0.
    pub fn with_cpu_costs(
        self,
        send_overlap_us: f64,
        recv_overlap_us: f64,
        big_o_per_byte: f64,
    ) -> Self {
        let ps = |us: f64| (us.max(0.0) * 1e6).round() as u64;
        LogGp {
            send_overlap_ps: ps(send_overlap_us).min(self.os_ps),
            recv_overlap_ps: ps(recv_overlap_us).min(self.or_ps),
            big_o_fs: (big_o_per_byte.max(0.0) * 1e9).round() as u64,
            ..self
        }
    }

    /// `(s-1)O` of a message of `size` bytes, ps.
    fn per_byte_cpu_ps(&self, size: u64) -> u64 {
        let fs = u128::from(size.saturating_sub(1)) * u128::from(self.big_o_fs);
        ((fs + 500) / 1000) as u64
    }

    /// A send's CPU cost, `o_s + (s-1)O`, split at the moment its message leaves:
    /// `(before, after)`. A rendezvous send leaves only on the receiver's answer,
    /// so all of it comes before.
    pub fn send_cpu_ps(&self, size: u64) -> (u64, u64) {
        let whole = self.os_ps + self.per_byte_cpu_ps(size);
        let after = if self.rendezvous {
            0
        } else {
            self.send_overlap_ps
        };
        (whole - after, after)
    }

    /// A receive's CPU cost, `o_r + (s-1)O`: it runs from [`LogGp::recv_start`].
    pub fn recv_cpu_ps(&self, size: u64) -> u64 {
        self.or_ps + self.per_byte_cpu_ps(size)
    }

    /// When a receive that waits from `waiting` for a message whose last byte is
    /// in at `arrival` starts its CPU work: `recv_overlap` before the arrival, not
    /// before the wait. It then ends at least `o_r - recv_overlap` after the
    /// arrival, never before it.
    pub fn recv_start(&self, waiting: Ps, arrival: Ps) -> Ps {
        waiting.max(Ps(arrival.0.saturating_sub(self.recv_overlap_ps)))
    }

    /// How long a network interface stays busy with one message: `g + (s-1)G`.
    pub fn busy_ps(&self, size: u64) -> u64 {
        self.g_ps + self.transfer_ps(size)
    }
}

/// Why a network description cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// No protocol at all.
    #[error("the network has no protocol range")]
    Empty,
    /// The first range must start at 1 byte.
    #[error("the first protocol range starts at {from} bytes, not at 1")]
    FirstNotOne {
        /// Where it starts.
        from: u64,
    },
    /// Ranges out of order.
    #[error("protocol range starting at {from} bytes does not follow the one at {previous}")]
    NotAscending {
        /// The range's start.
        from: u64,
        /// The previous range's start.
        previous: u64,
    },
}

/// The network of a virtual world: LogGP parameters by message size (and, in the
/// threaded test world, latency noise and a disturbance that varies in time).
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    protocols: Vec<(u64, LogGp)>,
    #[cfg(test)]
    pub(crate) noise: Option<crate::sim::Noise>,
    #[cfg(test)]
    pub(crate) shift: Option<crate::sim::TimeShift>,
}

impl Network {
    /// `(first size, parameters)` of each protocol, ascending, the first from 1 byte.
    ///
    /// # Errors
    /// [`NetError`] when the ranges are empty, do not start at 1, or are not
    /// strictly ascending.
    pub fn new(protocols: Vec<(u64, LogGp)>) -> Result<Self, NetError> {
        match protocols.first() {
            None => return Err(NetError::Empty),
            Some(&(from, _)) if from != 1 => return Err(NetError::FirstNotOne { from }),
            _ => {}
        }
        if let Some(w) = protocols.windows(2).find(|w| w[1].0 <= w[0].0) {
            return Err(NetError::NotAscending {
                from: w[1].0,
                previous: w[0].0,
            });
        }
        Ok(Network {
            protocols,
            #[cfg(test)]
            noise: None,
            #[cfg(test)]
            shift: None,
        })
    }

    /// One protocol for every size.
    pub fn uniform(p: LogGp) -> Self {
        Network {
            protocols: vec![(1, p)],
            #[cfg(test)]
            noise: None,
            #[cfg(test)]
            shift: None,
        }
    }

    /// The protocol ranges.
    pub fn protocols(&self) -> &[(u64, LogGp)] {
        &self.protocols
    }

    /// The protocol used for messages of `size` bytes (a 0-byte message uses the
    /// first).
    pub fn at(&self, size: u64) -> LogGp {
        self.protocols
            .iter()
            .rev()
            .find(|(from, _)| size >= *from)
            .map_or(self.protocols[0].1, |&(_, p)| p)
    }
}

/// A rank's network interface: when it can next put a message on the wire and
/// when it can next take one in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Nic {
    /// The interface can start sending again at this time.
    pub send_free: Ps,
    /// The interface can start receiving again at this time.
    pub recv_free: Ps,
}

impl Nic {
    /// A message of `size` bytes ready to leave at `ready`: returns when its first
    /// byte leaves, `max(ready, send_free)`, and keeps the interface busy for
    /// `g + (s-1)G` from then. Its last byte arrives `(s-1)G + L` after the first
    /// left.
    pub fn inject(&mut self, ready: Ps, size: u64, p: &LogGp) -> Ps {
        let start = ready.max(self.send_free);
        self.send_free = Ps(start.0 + p.busy_ps(size));
        start
    }

    /// A message whose first byte reaches this interface at `first_byte`: it is
    /// taken in from `max(first_byte, recv_free)`, which keeps the interface busy
    /// for `g + (s-1)G`; returns when its last byte is in, `(s-1)G` after that.
    pub fn accept(&mut self, first_byte: Ps, size: u64, p: &LogGp) -> Ps {
        let start = first_byte.max(self.recv_free);
        self.recv_free = Ps(start.0 + p.busy_ps(size));
        Ps(start.0 + p.transfer_ps(size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Noise, Quantum, SlowLink};

    const P: LogGp = LogGp {
        l_ps: 5_000_000,
        os_ps: 1_000_000,
        or_ps: 1_000_000,
        g_ps: 2_000_000,
        big_g_fs: 1_000_000,
        rendezvous: false,
        send_overlap_ps: 0,
        recv_overlap_ps: 0,
        big_o_fs: 0,
    };

    #[test]
    fn one_message_takes_o_l_s_minus_1_g_o() {
        // Issue 15's example: L 5, o 1, g 2, G 0.001 us/B, 1 byte: 7 us.
        let mut sender = Nic::default();
        let ready = Ps(P.os_ps);
        let start = sender.inject(ready, 1, &P);
        let arrival = Ps(start.0 + P.transfer_ps(1) + P.l_ps);
        assert_eq!((arrival.0 + P.or_ps) as f64 / 1e6, 7.0);
        // 1 KiB: + 1023 G.
        assert_eq!(P.transfer_ps(1024), 1_023_000);
    }

    #[test]
    fn back_to_back_messages_leave_g_plus_s_minus_1_g_apart() {
        let mut nic = Nic::default();
        let starts: Vec<u64> = (0..3).map(|_| nic.inject(Ps(0), 1001, &P).0).collect();
        assert_eq!(starts, vec![0, 3_000_000, 6_000_000]);
        // A message ready after the gap is not held back.
        assert_eq!(nic.inject(Ps(10_000_000), 1, &P), Ps(10_000_000));
    }

    #[test]
    fn two_senders_to_one_receiver_are_taken_in_g_apart() {
        let mut receiver = Nic::default();
        // Both first bytes arrive at 5 us; the second waits for the gap.
        assert_eq!(receiver.accept(Ps(5_000_000), 1, &P), Ps(5_000_000));
        assert_eq!(receiver.accept(Ps(5_000_000), 1, &P), Ps(7_000_000));
        assert_eq!(receiver.accept(Ps(5_000_000), 11, &P), Ps(9_010_000));
    }

    #[test]
    fn protocols_are_chosen_by_size_and_checked() {
        let big = LogGp {
            rendezvous: true,
            ..P
        };
        let net = Network::new(vec![(1, P), (65536, big)]).unwrap();
        assert!(!net.at(65535).rendezvous);
        assert!(net.at(65536).rendezvous);
        assert_eq!(net.at(0), P);
        assert_eq!(Network::new(vec![]), Err(NetError::Empty));
        assert_eq!(
            Network::new(vec![(2, P)]),
            Err(NetError::FirstNotOne { from: 2 })
        );
        assert_eq!(
            Network::new(vec![(1, P), (8, P), (8, P)]),
            Err(NetError::NotAscending {
                from: 8,
                previous: 8
            })
        );
    }

    #[test]
    fn noise_is_deterministic_one_directional_and_on_the_grid() {
        let noise = Noise {
            jitter_ns: 200.0,
            outlier_every: 7,
            outlier_ns: 30_000.0,
            seed: 1,
            slow_link: Some(SlowLink {
                from: 1,
                to: 0,
                extra_ns: 1_000.0,
            }),
            quantum: Quantum(400),
        };
        let net = Network::uniform(LogGp {
            l_ps: 20_000_000,
            ..P
        })
        .with_noise(noise);
        let p = net.at(1);
        for seq in 0..30 {
            let up = net.latency(0, 1, seq, &p);
            assert_eq!(up, net.latency(0, 1, seq, &p));
            assert_eq!(up.0 % 400, 0);
            let late = if seq % 7 == 3 { 30_000_000 } else { 0 };
            assert!(
                (20_000_000 + late..=20_200_000 + late).contains(&up.0),
                "{up:?}"
            );
            let down = net.latency(1, 0, seq, &p);
            assert!((21_000_000..=21_200_000).contains(&down.0), "{down:?}");
        }
        assert_eq!(Network::uniform(P).latency(0, 1, 3, &P), Ps(P.l_ps));
    }
}
