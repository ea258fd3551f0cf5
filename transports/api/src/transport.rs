//! The data plane: the [`Transport`] trait and its handle types.

use crate::error::TransportError;
use crate::pool::Buffers;

pub use crate::handle::{BufferId, Rank, Region, RequestId};

/// How a transport waits for an operation to complete.
///
/// Spelled `poll` and `block` everywhere: `Display`, `FromStr` and (feature `serde`)
/// serde and JSON Schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)
)]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum WaitMode {
    /// Spin on nonblocking calls: lowest latency, but burns the core.
    Poll,
    /// Sleep in the kernel (or completion channel) until the operation can proceed:
    /// needed when ranks outnumber cores.
    Block,
}

impl WaitMode {
    /// `"poll"` or `"block"`, as on the command line and in result metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitMode::Poll => "poll",
            WaitMode::Block => "block",
        }
    }
}

impl std::fmt::Display for WaitMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A name that is neither `poll` nor `block`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown wait mode {0:?} (expected one of: poll, block)")]
pub struct UnknownWaitMode(pub String);

impl std::str::FromStr for WaitMode {
    type Err = UnknownWaitMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "poll" => Ok(WaitMode::Poll),
            "block" => Ok(WaitMode::Block),
            other => Err(UnknownWaitMode(other.to_string())),
        }
    }
}

/// What a transport guarantees and requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Messages are never lost.
    pub reliable: bool,
    /// Messages between one pair of ranks arrive in the order they were sent.
    pub ordered: bool,
    /// Largest message, in bytes, if limited (UDP: the datagram limit).
    pub max_message_bytes: Option<usize>,
    /// The transport may cut a message into several wire units (TCP segments,
    /// fragments); patterns that study protocol switches note it.
    pub may_split: bool,
    /// Messages must live in memory registered with the device (verbs).
    pub needs_registered_memory: bool,
    /// The transport checks that a received message has the posted size.
    pub checks_message_size: bool,
}

/// Event counters a transport keeps (UDP: lost, duplicated, reordered and
/// out-of-order datagrams, retransmissions, requests to send again). Reported with
/// every result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `(name, value)` pairs, names in snake_case with their unit
    /// (`lost_datagrams`, `retransmissions`).
    pub entries: Vec<(&'static str, u64)>,
}

impl Counters {
    /// What was counted since `before` (an earlier reading of the same transport):
    /// each entry minus its value in `before` (0 when `before` lacks it, as a
    /// counter that appears with its first event). A pattern reads the counters
    /// before and after a measurement and reports the difference.
    pub fn since(&self, before: &Counters) -> Counters {
        let entries = self
            .entries
            .iter()
            .map(|&(name, value)| {
                let old = before
                    .entries
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |e| e.1);
                (name, value.saturating_sub(old))
            })
            .collect();
        Counters { entries }
    }
}

/// How a native loop reads the time-stamp counter: as the job's clock does, so
/// that its ticks are that clock's (`ngauge --timer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TscRead {
    /// `rdtscp; lfence`: the reading waits for every earlier instruction, and no
    /// later one starts before it (the house timer).
    Rdtscp,
    /// A plain `rdtsc`: cheaper, but the CPU may move it across the operation it
    /// brackets (what `ucx_perftest` and Netgauge read).
    Rdtsc,
}

/// This rank's part in [`Transport::native_round_trips`].
#[derive(Debug)]
pub enum NativeRole<'a> {
    /// Sends first. Runs `warmup` untimed round trips, then one timed round trip per
    /// entry of `ticks` and stores in it the raw time-stamp counter difference
    /// `t1 - t0` around the send and the receive, both read with `read`.
    Initiator {
        /// Untimed round trips before the timed ones.
        warmup: usize,
        /// One slot per timed round trip, filled with its duration in TSC ticks.
        ticks: &'a mut [u64],
        /// The instruction that reads the counter.
        read: TscRead,
    },
    /// Receives first and answers, `round_trips` times (the initiator's warmup plus
    /// its timed round trips).
    Responder {
        /// Round trips to answer.
        round_trips: usize,
    },
}

/// One call of a transport's own collective ([`Transport::native_collective`],
/// [`Transport::start_native_collective`]). `size` below is the bytes per rank; `np`
/// the job size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeCollective {
    /// No rank leaves before every rank has entered.
    Barrier,
    /// `data` (`size` bytes on every rank) from `root` to every rank.
    Bcast {
        /// The sending rank.
        root: Rank,
        /// The message; written on every rank but the root.
        data: Region,
    },
    /// Every rank's `send` (`size` bytes) lands at `rank * size` in `recv` on
    /// `root` (`np * size` bytes there; ignored elsewhere).
    Gather {
        /// The receiving rank.
        root: Rank,
        /// This rank's block.
        send: Region,
        /// The blocks of every rank, on the root.
        recv: Region,
    },
    /// `recv` = the sum over ranks of `send`, as little-endian `u64` words with
    /// wrapping addition (`size` a multiple of 8), on every rank.
    Allreduce {
        /// This rank's vector.
        send: Region,
        /// The sum.
        recv: Region,
    },
    /// Block `j` of `send` (`np` blocks of `size` bytes) goes to rank `j` and
    /// arrives there as block `rank` of `recv` (the same length).
    Alltoall {
        /// The blocks sent.
        send: Region,
        /// The blocks received.
        recv: Region,
    },
    /// `recv` on `root` = the sum over ranks of `send`, as for `Allreduce`.
    Reduce {
        /// The receiving rank.
        root: Rank,
        /// This rank's vector.
        send: Region,
        /// The sum, on the root.
        recv: Region,
    },
    /// Every rank's `send` (`size` bytes) lands at `rank * size` in every rank's
    /// `recv` (`np * size` bytes).
    Allgather {
        /// This rank's block.
        send: Region,
        /// Every rank's block.
        recv: Region,
    },
    /// `recv` (`size` bytes) = the sum over ranks of block `rank` of `send` (`np`
    /// blocks), as `u64` words for `Allreduce` (`MPI_Reduce_scatter_block`).
    ReduceScatter {
        /// This rank's `np` blocks.
        send: Region,
        /// Its block of the sum.
        recv: Region,
    },
    /// The all-to-all with a length per pair: `layout` holds MPI's four arrays of
    /// `np` native-endian `i32` byte counts, one after the other (`sendcounts`,
    /// `sdispls` into `send`, `recvcounts`, `rdispls` into `recv`). They live in a
    /// buffer of the transport, so that the call stays `Copy` and they outlive a
    /// nonblocking call; the caller leaves them alone until it completes.
    Alltoallv {
        /// The blocks sent.
        send: Region,
        /// The blocks received.
        recv: Region,
        /// The counts and displacements.
        layout: Region,
    },
    /// Block `r` of `send` on `root` (`np` blocks of `size` bytes) lands in rank
    /// `r`'s `recv`.
    Scatter {
        /// The sending rank.
        root: Rank,
        /// The blocks, on the root.
        send: Region,
        /// This rank's block.
        recv: Region,
    },
}

/// Point-to-point messaging between the ranks of a job.
///
/// All operations move a whole message of `region.len` bytes; the receiver posts the
/// exact size it expects (see the crate docs). A transport instance is connected to
/// every other rank of the job when it is constructed.
///
/// Nonblocking operations (`isend`, `irecv`) mark their buffer busy until `test`
/// reports completion or `wait` returns; reading or writing a busy buffer fails with
/// [`TransportError::BufferBusy`].
pub trait Transport {
    /// Short lowercase name: `tcp`, `udp`, `verbs`, `mpi`, `inproc`.
    fn name(&self) -> &'static str;
    /// This process's rank.
    fn rank(&self) -> Rank;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Guarantees and requirements.
    fn capabilities(&self) -> Capabilities;
    /// How this instance waits.
    fn wait_mode(&self) -> WaitMode;

    /// The buffers the four buffer methods below use unless overridden (a
    /// [`BufferPool`](crate::BufferPool), or registered memory); patterns call
    /// those methods, which may do more (UDP saves the messages it may send again).
    fn buffers(&self) -> &dyn Buffers;
    /// [`Transport::buffers`], mutable.
    fn buffers_mut(&mut self) -> &mut dyn Buffers;
    /// Allocates (and registers, where needed) a zeroed buffer of `len` bytes. Call
    /// this outside timed regions.
    fn alloc_buffer(&mut self, len: usize) -> Result<BufferId, TransportError> {
        self.buffers_mut().try_alloc(len)
    }
    /// Releases a buffer; fails if it is busy.
    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.buffers_mut().free(buffer)
    }
    /// Reads a buffer's bytes (fails while busy with a nonblocking receive).
    fn buffer(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.buffers().get(buffer)
    }
    /// Writes a buffer's bytes (fails while busy).
    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.buffers_mut().get_mut(buffer)
    }

    /// Sends `region` to `peer` and returns when the buffer may be reused.
    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError>;
    /// Receives one message of exactly `region.len` bytes from `peer` into `region`.
    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError>;
    /// Starts a send; the buffer is busy until the request completes.
    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError>;
    /// Starts a receive; the buffer is busy until the request completes.
    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError>;
    /// Makes progress; `true` (and the request is retired) when it has completed.
    fn test(&mut self, request: RequestId) -> Result<bool, TransportError>;
    /// Waits (per [`WaitMode`]) until the request completes, and retires it.
    fn wait(&mut self, request: RequestId) -> Result<(), TransportError>;
    /// Waits for all of `requests`, making progress on all of them together (so two
    /// ranks that exchange large messages cannot deadlock).
    ///
    /// The default, in [`WaitMode::Block`], sleeps in [`Transport::wait`] on each
    /// request in turn; in [`WaitMode::Poll`] it spins on [`Transport::test`] over all
    /// of them. Waiting in turn is deadlock-free only when sends complete without the
    /// peer's help (as in `inproc`, whose sends are buffered): a transport
    /// whose sends can block until the peer receives (a full socket buffer, a
    /// rendezvous protocol) must override this method and progress every request
    /// together.
    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        if self.wait_mode() == WaitMode::Block {
            for &request in requests {
                self.wait(request)?;
            }
            return Ok(());
        }
        let mut pending: Vec<RequestId> = requests.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for request in pending {
                if !self.test(request)? {
                    still.push(request);
                }
            }
            pending = still;
            if !pending.is_empty() {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// A timed ping-pong loop run by the transport itself, so that the timed region
    /// holds what a C benchmark's does (the library's send and receive between two
    /// counter readings) and none of this trait's per-message checks: `send` to
    /// `peer` from `send`, receive exactly `recv.len` bytes from `peer` into `recv`,
    /// repeated as `role` says (the responder receives first, then sends).
    ///
    /// The initiator reads the time-stamp counter itself, with the instruction its
    /// role names ([`TscRead`], the one ngauge's clock reads), and records raw TSC
    /// ticks. A caller may therefore use this method only when its own clock's
    /// ticks are the raw TSC (in ngauge: `Clock::tsc_read`), or the figures would be
    /// in another unit.
    ///
    /// Returns `None` when the transport has no such loop (the default) or cannot run
    /// it now (MPI in blocking wait mode, a CPU that is not x86-64 with `rdtscp`,
    /// whichever reading the initiator takes, so that both roles decide alike):
    /// then nothing was sent or received, and the caller runs its own loop of
    /// [`Transport::send`] and [`Transport::recv`]. `Some(Err(..))` reports the same
    /// errors as `send` and `recv` would (a received size other than `recv.len` is
    /// [`TransportError::SizeMismatch`]) and stops the loop where it failed.
    fn native_round_trips(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Option<Result<(), TransportError>> {
        let _ = (peer, send, recv, role);
        None
    }

    /// A stream run done by the transport itself, as [`Self::native_round_trips`]
    /// is for the ping-pong: the caller times the call. The sender (`sender`)
    /// sends `messages` messages from `send` to `peer`, at most `window` in
    /// flight, then receives the acknowledgement of exactly `recv.len` bytes into
    /// `recv`; the receiver receives `messages` messages of exactly `recv.len`
    /// bytes into `window` slots side by side from `recv` (message `i` in slot `i
    /// % window`, at `recv.offset + (i % window) * recv.len`), then sends `send`
    /// as the acknowledgement. `None` as for `native_round_trips` (the default):
    /// nothing was sent, and the caller runs its own loop.
    fn native_stream(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        window: usize,
        messages: usize,
        sender: bool,
    ) -> Option<Result<(), TransportError>> {
        let _ = (peer, send, recv, window, messages, sender);
        None
    }

    /// One call of the transport's own implementation of a collective (MPI's
    /// `MPI_Bcast`, ...), blocking, on every rank of the job: what ngauge times when
    /// it measures a library's collective with the procedure it uses for its own
    /// schedules. Every rank must make the same call.
    ///
    /// Returns `None` when the transport has no collectives of its own (the
    /// default): nothing was sent or received. See [`NativeCollective`] for the
    /// layout of the regions.
    fn native_collective(&mut self, call: NativeCollective) -> Option<Result<(), TransportError>> {
        let _ = call;
        None
    }

    /// Starts the nonblocking form of [`Transport::native_collective`] (MPI's
    /// `MPI_Ibcast`, ...): the regions stay busy until [`Transport::test`] or
    /// [`Transport::wait`] completes the returned request, like any other.
    ///
    /// Returns `None` when the transport has no collectives of its own (the
    /// default): nothing was started.
    fn start_native_collective(
        &mut self,
        call: NativeCollective,
    ) -> Option<Result<RequestId, TransportError>> {
        let _ = call;
        None
    }

    /// Event counters (empty for transports that count nothing).
    fn counters(&self) -> Counters {
        Counters::default()
    }

    /// Call on every rank before a control-plane operation that waits for other
    /// ranks (a barrier, a broadcast, an allgather) after point-to-point traffic:
    /// makes sure that what this rank sent can still reach peers that wait for it.
    ///
    /// A reliable transport has nothing to do (the default). An unreliable one
    /// recovers lost messages only while both ranks talk over it; the last message
    /// of an exchange (the final answer of a ping-pong) can be lost after its
    /// sender has moved on, and if the sender then blocks on the control channel
    /// waiting for the receiver, which waits for the lost message, the job
    /// deadlocks. The UDP transport therefore acknowledges what it received and
    /// answers its peers' requests until they have acknowledged what it sent (or
    /// stayed silent through several retransmissions). Not for timed regions.
    fn settle(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_modes_parse_what_they_print() {
        for mode in [WaitMode::Poll, WaitMode::Block] {
            assert_eq!(mode.to_string().parse::<WaitMode>(), Ok(mode));
        }
        assert_eq!(format!("{:<6}|", WaitMode::Poll), "poll  |");
        assert!("spin".parse::<WaitMode>().is_err());
    }

    #[test]
    fn counters_since_subtract_each_entry_and_keep_new_ones_whole() {
        let before = Counters {
            entries: vec![("lost_datagrams", 3), ("retransmissions", 10)],
        };
        let after = Counters {
            entries: vec![
                ("lost_datagrams", 5),
                ("retransmissions", 10),
                ("test_dropped_datagrams", 4),
            ],
        };
        assert_eq!(
            after.since(&before).entries,
            [
                ("lost_datagrams", 2),
                ("retransmissions", 0),
                ("test_dropped_datagrams", 4)
            ]
        );
        assert_eq!(Counters::default().since(&before), Counters::default());
    }

    /// Records which requests were waited on and how often `test` was called.
    struct Recorder {
        mode: WaitMode,
        tests: usize,
        waited: Vec<RequestId>,
    }

    impl Transport for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn rank(&self) -> Rank {
            0
        }
        fn size(&self) -> usize {
            1
        }
        fn capabilities(&self) -> Capabilities {
            unreachable!()
        }
        fn wait_mode(&self) -> WaitMode {
            self.mode
        }
        fn buffers(&self) -> &dyn Buffers {
            unreachable!()
        }
        fn buffers_mut(&mut self) -> &mut dyn Buffers {
            unreachable!()
        }
        fn send(&mut self, _: Rank, _: Region) -> Result<(), TransportError> {
            unreachable!()
        }
        fn recv(&mut self, _: Rank, _: Region) -> Result<(), TransportError> {
            unreachable!()
        }
        fn isend(&mut self, _: Rank, _: Region) -> Result<RequestId, TransportError> {
            unreachable!()
        }
        fn irecv(&mut self, _: Rank, _: Region) -> Result<RequestId, TransportError> {
            unreachable!()
        }
        fn test(&mut self, _: RequestId) -> Result<bool, TransportError> {
            self.tests += 1;
            Ok(self.tests > 2)
        }
        fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
            self.waited.push(request);
            Ok(())
        }
    }

    fn recorder(mode: WaitMode) -> Recorder {
        Recorder {
            mode,
            tests: 0,
            waited: Vec::new(),
        }
    }

    #[test]
    fn default_wait_all_sleeps_in_wait_when_blocking() {
        let mut t = recorder(WaitMode::Block);
        let ids = [RequestId(4), RequestId(1), RequestId(9)];
        t.wait_all(&ids).unwrap();
        assert_eq!(t.waited, ids);
        assert_eq!(t.tests, 0, "a blocking wait_all must not spin on test");
    }

    #[test]
    fn default_wait_all_tests_every_request_when_polling() {
        let mut t = recorder(WaitMode::Poll);
        t.wait_all(&[RequestId(4), RequestId(1)]).unwrap();
        assert!(t.waited.is_empty());
        assert!(t.tests >= 2);
    }
}
