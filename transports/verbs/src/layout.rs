//! Where things live: work-request ids, registered buffer sizes, the control-slot
//! area of the write path, and region bounds.
//!
//! Every work request carries a 64-bit `wr_id` that comes back in its completion;
//! ours says what the request was ([`WrKind`]) and which request or slot it
//! belongs to. The message QPs share one registered area of small slots, a block
//! per peer: `recv_depth` receive slots of `recv_bytes` each (eager messages,
//! advertisements and credit messages land there; RDMA writes with immediate consume
//! one receive request each) followed by `send_depth` slots of [`SLOT_BYTES`] from
//! which advertisements are sent. [`Credits`] keeps senders within the receive slots
//! the peer has posted.

use ngauge_transport::{Region, TransportError};
use std::time::{Duration, Instant};

/// What a work request was posted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrKind {
    /// A data send or RDMA write of request `index`.
    DataSend,
    /// A receive posted straight into the region of request `index` (send path).
    DataRecv,
    /// A receive into control slot `index` (write path).
    SlotRecv,
    /// An advertisement sent from control slot `index` (write path).
    SlotSend,
}

const KIND_SHIFT: u32 = 62;
const INDEX_MASK: u64 = (1 << KIND_SHIFT) - 1;

/// Packs kind and index into a `wr_id`. Indices use the low 62 bits.
pub fn wr_id(kind: WrKind, index: u64) -> u64 {
    let k = match kind {
        WrKind::DataSend => 0,
        WrKind::DataRecv => 1,
        WrKind::SlotRecv => 2,
        WrKind::SlotSend => 3,
    };
    (k << KIND_SHIFT) | (index & INDEX_MASK)
}

/// Inverse of [`wr_id`].
pub fn split_wr_id(id: u64) -> (WrKind, u64) {
    let kind = match id >> KIND_SHIFT {
        0 => WrKind::DataSend,
        1 => WrKind::DataRecv,
        2 => WrKind::SlotRecv,
        _ => WrKind::SlotSend,
    };
    (kind, id & INDEX_MASK)
}

/// Alignment of registered buffers: a page, so that registration pins whole pages
/// a buffer does not share with the heap.
pub const BUFFER_ALIGN: usize = 4096;

/// Bytes to allocate for a buffer of `len` bytes: at least one (a zero-length
/// memory registration is refused by some providers), rounded up to the page.
pub fn alloc_bytes(len: usize) -> Option<usize> {
    let len = len.max(1);
    len.checked_add(BUFFER_ALIGN - 1)
        .map(|n| n / BUFFER_ALIGN * BUFFER_ALIGN)
}

/// Size of one advertisement slot (an advertisement is 20 bytes).
pub const SLOT_BYTES: usize = 32;

/// Largest message the send path delivers eagerly (into a pre-posted receive slot,
/// copied out on arrival); larger ones go to a receive posted before its
/// advertisement (rendezvous), on the bulk QP.
pub const EAGER_BYTES: usize = 4096;

/// The control-slot area of the write path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLayout {
    /// Ranks in the job (one block of slots per rank; our own block is unused).
    pub ranks: usize,
    /// Receive slots per peer.
    pub recv_depth: usize,
    /// Bytes per receive slot (a multiple of [`SLOT_BYTES`]).
    pub recv_bytes: usize,
    /// Send slots per peer.
    pub send_depth: usize,
}

impl SlotLayout {
    /// Slots per peer block.
    pub fn per_peer(&self) -> usize {
        self.recv_depth + self.send_depth
    }

    /// Bytes of one peer's block.
    fn block_bytes(&self) -> usize {
        self.recv_depth * self.recv_bytes + self.send_depth * SLOT_BYTES
    }

    /// Total bytes of the area.
    pub fn bytes(&self) -> usize {
        self.ranks * self.block_bytes()
    }

    /// Capacity of a slot in bytes.
    pub fn slot_bytes(&self, slot: usize) -> usize {
        match self.owner(slot) {
            Some((_, true)) => self.recv_bytes,
            _ => SLOT_BYTES,
        }
    }

    /// Global index of receive slot `i` of `peer`.
    pub fn recv_slot(&self, peer: usize, i: usize) -> usize {
        debug_assert!(i < self.recv_depth);
        peer * self.per_peer() + i
    }

    /// Global index of send slot `i` of `peer`.
    pub fn send_slot(&self, peer: usize, i: usize) -> usize {
        debug_assert!(i < self.send_depth);
        peer * self.per_peer() + self.recv_depth + i
    }

    /// Which peer a global slot index belongs to, and whether it is a receive slot.
    pub fn owner(&self, slot: usize) -> Option<(usize, bool)> {
        let peer = slot / self.per_peer();
        (peer < self.ranks).then(|| (peer, slot % self.per_peer() < self.recv_depth))
    }

    /// Which receive slot of `peer` the global index `slot` is, if it is one:
    /// [`SlotLayout::owner`] for one peer, without a division.
    pub fn recv_index(&self, peer: usize, slot: usize) -> Option<usize> {
        let i = slot.checked_sub(peer * self.per_peer())?;
        (peer < self.ranks && i < self.recv_depth).then_some(i)
    }

    /// Byte offset of receive slot `i` of `peer`: [`SlotLayout::offset`] of
    /// [`SlotLayout::recv_slot`], without a division.
    pub fn recv_offset(&self, peer: usize, i: usize) -> usize {
        debug_assert!(i < self.recv_depth);
        peer * self.block_bytes() + i * self.recv_bytes
    }

    /// Byte offset of a slot in the area.
    pub fn offset(&self, slot: usize) -> usize {
        let (peer, i) = (slot / self.per_peer(), slot % self.per_peer());
        let base = peer * self.block_bytes();
        if i < self.recv_depth {
            base + i * self.recv_bytes
        } else {
            base + self.recv_depth * self.recv_bytes + (i - self.recv_depth) * SLOT_BYTES
        }
    }
}

/// The byte range of `region` in a buffer of `capacity` bytes, or the error that
/// names it.
pub fn region_range(
    region: Region,
    capacity: usize,
) -> Result<std::ops::Range<usize>, TransportError> {
    match region.offset.checked_add(region.len) {
        Some(end) if end <= capacity => Ok(region.offset..end),
        _ => Err(TransportError::RegionOutOfBounds {
            transport: "verbs",
            buffer: region.buffer,
            offset: region.offset,
            len: region.len,
            capacity,
        }),
    }
}

/// The largest message this transport sends: 2^31 - 1 bytes, since lengths travel
/// in the 31 low bits of an immediate ([`write_imm`]); `max_msg_sz` of current
/// devices is 2^31, which would wrap to length 0 there.
pub const MAX_MSG_BYTES: u32 = 0x7fff_ffff;

/// The message size limit to use for a port whose `max_msg_sz` is `max_msg_sz`.
pub fn max_message(max_msg_sz: u32) -> u32 {
    max_msg_sz.clamp(1, MAX_MSG_BYTES)
}

/// A verbs message is at most `max_msg_bytes` (see [`max_message`]); lengths travel
/// as u32.
pub fn check_len(len: usize, max_msg_bytes: u32) -> Result<u32, TransportError> {
    if len > max_msg_bytes as usize {
        return Err(TransportError::TooLarge {
            transport: "verbs",
            len_bytes: len,
            max_bytes: max_msg_bytes as usize,
        });
    }
    Ok(len as u32)
}

/// Immediate data of a write: the message length, with the top bit set when the
/// sender refused to write because the advertised length differed (the receiver
/// then reports the mismatch too instead of waiting forever).
pub fn write_imm(len: u32, mismatch: bool) -> u32 {
    (len & 0x7fff_ffff) | if mismatch { 0x8000_0000 } else { 0 }
}

/// Inverse of [`write_imm`]: (length, mismatch).
pub fn split_write_imm(imm: u32) -> (u32, bool) {
    (imm & 0x7fff_ffff, imm & 0x8000_0000 != 0)
}

/// What a send with immediate data on the message QP carries (the immediate says
/// which, see [`msg_imm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// An eager message of up to [`EAGER_BYTES`] bytes.
    Eager,
    /// A receive advertisement ([`crate::wire::Advert`]).
    Advert,
    /// Nothing but returned credits (no payload).
    Credit,
}

/// Credits one message can return (14 bits of its immediate).
pub const MAX_CREDITS_PER_MSG: u32 = (1 << 14) - 1;

/// Immediate data of a send on the message QP: kind in bits 31..30, credits
/// returned in bits 29..16, the eager length in bits 15..0 (0 for the others).
pub fn msg_imm(kind: MsgKind, credits: u32, len: u32) -> u32 {
    debug_assert!(credits <= MAX_CREDITS_PER_MSG && len <= 0xffff);
    let k = match kind {
        MsgKind::Eager => 0,
        MsgKind::Advert => 1,
        MsgKind::Credit => 2,
    };
    (k << 30) | ((credits & MAX_CREDITS_PER_MSG) << 16) | (len & 0xffff)
}

/// Inverse of [`msg_imm`]: (kind, credits, length); `None` for an unknown kind.
pub fn split_msg_imm(imm: u32) -> Option<(MsgKind, u32, u32)> {
    let kind = match imm >> 30 {
        0 => MsgKind::Eager,
        1 => MsgKind::Advert,
        2 => MsgKind::Credit,
        _ => return None,
    };
    Some((kind, (imm >> 16) & MAX_CREDITS_PER_MSG, imm & 0xffff))
}

/// Send credits of one connection's message QP, both directions.
///
/// Every message on the message QP (eager message, advertisement, RDMA write with
/// immediate, credit message) consumes one receive the peer has posted. A sender
/// may send only with a credit, that is, a receive of the peer's known to be
/// posted and unused: it starts with the peer's receive depth and gets credits
/// back as the peer re-posts its receives (carried in the immediate of the peer's
/// eager messages and advertisements, or in a credit message once half the depth
/// is owed). The last credit is kept for credit messages, so two ranks that have
/// both used up their credits can still return each other's: data never takes
/// it. A sender without credit keeps its message queued; the receive queue never
/// runs empty, so there are no receiver-not-ready retries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Credits {
    /// Receives of the peer's we may still consume.
    pub available: u32,
    /// Receives we have re-posted for the peer and not yet told it about.
    pub owed: u32,
    /// Owed credits that are worth a message of their own.
    pub threshold: u32,
}

impl Credits {
    /// A connection to a peer that posted `peer_depth` receives; ours are
    /// `own_depth`.
    pub fn new(peer_depth: u32, own_depth: u32) -> Credits {
        Credits {
            available: peer_depth,
            owed: 0,
            threshold: (own_depth / 2).max(1),
        }
    }

    /// Whether a data message (eager, advertisement, write) may be sent.
    pub fn can_send_data(&self) -> bool {
        self.available >= 2
    }

    /// Whether a credit message is due and may be sent.
    pub fn credit_due(&self) -> bool {
        self.owed >= self.threshold && self.available >= 1
    }

    /// Consumes one credit for a message; with `carries` the message returns owed
    /// credits too: their number (for its immediate).
    pub fn consume(&mut self, carries: bool) -> u32 {
        debug_assert!(self.available >= 1);
        self.available -= 1;
        if carries {
            let n = self.owed.min(MAX_CREDITS_PER_MSG);
            self.owed -= n;
            n
        } else {
            0
        }
    }

    /// The peer returned `n` credits.
    pub fn granted(&mut self, n: u32) {
        self.available = self.available.saturating_add(n);
    }

    /// We re-posted one receive for the peer.
    pub fn reposted(&mut self) {
        self.owed += 1;
    }
}

/// Whether a send of `len` bytes goes inline (copied into the work request by the
/// CPU, no DMA read of the buffer, so the buffer is free when the post returns).
pub fn goes_inline(len: usize, max_inline: u32) -> bool {
    len > 0 && len <= max_inline as usize
}

/// Work requests that can be outstanding per peer and queue depth: `depth` sends
/// (both QPs together), `depth` slot receives and `depth` bulk receives.
pub const WRS_PER_DEPTH: usize = 3;

/// Completion-queue entries for `peers` connections of `depth`: room for every
/// work request that can be outstanding (an overrun CQ is a fatal error).
pub fn cq_entries(depth: u32, peers: usize) -> usize {
    WRS_PER_DEPTH * depth as usize * peers + 16
}

/// The smallest queue depth the transport runs with (flow control keeps one of
/// the peer's receives for credit messages).
pub const MIN_QUEUE_DEPTH: u32 = 4;

/// The queue depth to use: the wish (at least [`MIN_QUEUE_DEPTH`]), within the
/// device's work-request limit and small enough that [`cq_entries`] fits the
/// device's CQ limit; an error naming the limits when they leave less than
/// [`MIN_QUEUE_DEPTH`].
pub fn queue_depth(wish: u32, max_qp_wr: u32, max_cqe: usize, peers: usize) -> Result<u32, String> {
    let by_cq = max_cqe.saturating_sub(16) / (WRS_PER_DEPTH * peers.max(1));
    let limit = max_qp_wr.min(u32::try_from(by_cq).unwrap_or(u32::MAX));
    if limit < MIN_QUEUE_DEPTH {
        return Err(format!(
            "the device leaves a queue depth of {limit} for {peers} peer(s) (max_qp_wr \
             {max_qp_wr}, max_cqe {max_cqe}: {WRS_PER_DEPTH} completions per depth and \
             peer); ngauge needs at least {MIN_QUEUE_DEPTH}: run fewer ranks per device"
        ));
    }
    Ok(wish.max(MIN_QUEUE_DEPTH).min(limit))
}

/// Sends on one message QP that may go unsignaled between two signaled ones
/// (selective signalling, as perftest's `cq_mod`): the completion of a signaled
/// send retires it and every unsignaled send posted before it (one QP's sends
/// complete in order), so the send queue is accounted for while only one send in
/// `signal_every` writes a completion. Half the depth, so that a full queue always
/// has a signaled send in flight; at most 64.
pub fn signal_every(depth: u32) -> u32 {
    (depth / 2).clamp(1, 64)
}

/// Receive slots re-posted together in one `ibv_post_recv` chain (perftest posts
/// its receives in batches too). An eighth of the depth: the slots a batch holds
/// back plus the owed credits that trigger a credit message stay below the depth
/// ([`Credits`] keeps one receive for credit messages), so flow control cannot
/// stall on a batch that is not yet full.
pub fn repost_batch(depth: u32) -> usize {
    (depth as usize / 8).max(1)
}

/// Staging slots per peer of the blocking send's eager bounce buffers: an eager
/// (send path) or ring (write-poll path) message that does not go inline is
/// copied into the next slot and posted from there, unsignaled under the
/// selective signalling, so that the blocking send returns at once, as MPI
/// libraries do with eager bounce buffers (`device/direct.rs`). Bounded per peer
/// (`STAGE_SLOTS` x [`STAGE_SLOT_BYTES`]), whatever the queue depth.
pub const STAGE_SLOTS: usize = 16;

/// Bytes of one staging slot: the largest eager or ring message, then (write-poll
/// path) its trailer, so that the message and its trailer leave in one gather
/// entry. A multiple of 8: every slot's trailer is 8-byte aligned.
pub const STAGE_SLOT_BYTES: usize = EAGER_BYTES + TRAILER_BYTES;

/// Bytes of the staging area of a job of `ranks` (a block per rank; our own is
/// unused).
pub fn stage_bytes(ranks: usize) -> usize {
    ranks * STAGE_SLOTS * STAGE_SLOT_BYTES
}

/// Offset of staging slot `slot` of `peer` in the staging area.
pub fn stage_offset(peer: usize, slot: usize) -> usize {
    (peer * STAGE_SLOTS + slot) * STAGE_SLOT_BYTES
}

/// The staging slots of one peer: which slot the next staged send uses, whether
/// the device may still be reading it, and whether the send must be signaled.
///
/// Sends on one message QP are numbered from 1 as they are posted (all kinds:
/// inline, staged, credits, advertisements); the sends retired so far are always
/// the first `retired` ones, since one QP's sends complete in order and a
/// signaled completion retires the unsignaled sends before it
/// ([`signal_every`]). A slot may be written again once the send that last read
/// it is among them. The last staged send of each half of the slots is signaled
/// whatever the selective signalling says: so the last reader of every slot is
/// covered by a signaled send posted before the slot comes round again, and a
/// poll of the completion queue can free it (a QP that signals only one send in
/// 64 would otherwise leave all slots in use until an unrelated signaled send).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageSlots {
    /// Staged sends so far.
    staged: u64,
    /// Per slot, the number of the send that last read it (0: never used).
    last_reader: [u64; STAGE_SLOTS],
}

impl Default for StageSlots {
    fn default() -> StageSlots {
        StageSlots {
            staged: 0,
            last_reader: [0; STAGE_SLOTS],
        }
    }
}

impl StageSlots {
    /// The slot the next staged send uses.
    pub fn next(&self) -> usize {
        (self.staged % STAGE_SLOTS as u64) as usize
    }

    /// Whether the next slot may be written: the send that last read it is one
    /// of the first `retired` sends of the QP.
    pub fn next_free(&self, retired: u64) -> bool {
        self.last_reader[self.next()] <= retired
    }

    /// Whether the next staged send must be signaled (the last of its half of
    /// the slots).
    pub fn must_signal(&self) -> bool {
        (self.staged + 1).is_multiple_of(STAGE_SLOTS as u64 / 2)
    }

    /// The next slot was posted from, by send number `post` of the QP.
    pub fn used(&mut self, post: u64) {
        let slot = self.next();
        self.last_reader[slot] = post;
        self.staged += 1;
    }
}

/// The landing ring of the `write-poll` path ([`crate::wire::VerbsOp::WritePoll`]),
/// the way `ib_write_lat` measures: the sender RDMA-writes (no immediate, so no
/// completion at the receiver) a message of up to [`EAGER_BYTES`] into the next
/// slot of a ring the receiver registered for it, right-aligned so that a
/// [`Trailer`] ends the slot; the receiver polls the last byte of the slot (the
/// trailer's flag) until it shows the slot's next use, then copies the message out.
///
/// Every rank registers one area with a block per rank of the job. The block of
/// peer `p` holds `depth` slots of [`RING_SLOT_BYTES`] into which `p` writes its
/// messages; the credit word into which `p` writes how many of *our* messages it
/// has consumed ([`RingLayout::credit_word`]), for when no message of its own
/// carries that back; then what only we read and write: `depth` trailer staging
/// entries for our messages to `p` and the source of our credit word writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Ranks in the job (one block per rank; our own is unused).
    pub ranks: usize,
    /// Slots per peer: a power of two, so that the slot and the flag of a
    /// sequence number are a mask and a shift, not divisions (the receiver
    /// computes them on every poll; a 64-bit division is a helper call under
    /// qemu's TCG and tens of cycles on hardware).
    pub depth: usize,
}

/// Bytes of a trailer: length (u32), consumed count (u16), reserved, flag.
pub const TRAILER_BYTES: usize = 8;
/// Bytes of one ring slot: the largest ring message and its trailer.
pub const RING_SLOT_BYTES: usize = EAGER_BYTES + TRAILER_BYTES;
/// Most slots a ring has per peer.
pub const MAX_RING_DEPTH: usize = 64;

impl RingLayout {
    /// The ring of a job of `ranks` with queue depth `depth`: the largest power
    /// of two up to `depth` and [`MAX_RING_DEPTH`] slots per peer.
    pub fn new(ranks: usize, depth: u32) -> RingLayout {
        let depth = (depth as usize).clamp(1, MAX_RING_DEPTH);
        RingLayout {
            ranks,
            depth: 1 << depth.ilog2(),
        }
    }

    /// `seq` modulo the depth.
    fn index(&self, seq: u64) -> usize {
        seq as usize & (self.depth - 1)
    }

    fn block_bytes(&self) -> usize {
        self.depth * RING_SLOT_BYTES + 8 + self.depth * TRAILER_BYTES + 8
    }

    /// Bytes of the whole area.
    pub fn bytes(&self) -> usize {
        self.ranks * self.block_bytes()
    }

    /// Offset of slot `seq % depth` of `peer`'s block (peer: the sender).
    pub fn slot(&self, peer: usize, seq: u64) -> usize {
        peer * self.block_bytes() + self.index(seq) * RING_SLOT_BYTES
    }

    /// Offset at which a message of `len` bytes starts in the slot at `slot`, so
    /// that its trailer ends the slot.
    pub fn data_at(slot: usize, len: usize) -> usize {
        slot + RING_SLOT_BYTES - TRAILER_BYTES - len
    }

    /// Offset of the trailer in the slot at `slot`.
    pub fn trailer_at(slot: usize) -> usize {
        slot + RING_SLOT_BYTES - TRAILER_BYTES
    }

    /// Offset of the flag byte (the slot's last byte) that message `seq` of
    /// `peer` sets: what the receiver polls.
    pub fn flag_at(&self, peer: usize, seq: u64) -> usize {
        Self::trailer_at(self.slot(peer, seq)) + TRAILER_BYTES - 1
    }

    /// Offset of the credit word of `peer`'s block: `peer` writes there, as a
    /// cumulative u64, how many of our messages it has consumed.
    pub fn credit_word(&self, peer: usize) -> usize {
        peer * self.block_bytes() + self.depth * RING_SLOT_BYTES
    }

    /// Offset of the trailer staging entry for our message `seq` to `peer`.
    pub fn staging(&self, peer: usize, seq: u64) -> usize {
        self.credit_word(peer) + 8 + self.index(seq) * TRAILER_BYTES
    }

    /// Offset of the 8 bytes from which our credit word writes to `peer` go.
    pub fn credit_source(&self, peer: usize) -> usize {
        self.credit_word(peer) + 8 + self.depth * TRAILER_BYTES
    }

    /// The flag byte that marks use number `seq / depth` of its slot: never 0 (the
    /// ring starts zeroed) and different from the previous use of the same slot.
    pub fn flag(&self, seq: u64) -> u8 {
        ((seq >> self.depth.trailing_zeros()) % 255) as u8 + 1
    }
}

/// What ends a ring message: its length, how many of the receiver's messages the
/// sender has consumed (mod 2^16, cumulative: credits ride on data), and the flag
/// ([`RingLayout::flag`]) in the last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// Message length in bytes.
    pub len: u32,
    /// Messages consumed from the peer so far, mod 2^16.
    pub consumed: u16,
    /// The slot-use flag.
    pub flag: u8,
}

impl Trailer {
    /// `len:u32, consumed:u16, 0, flag`, little endian.
    pub fn encode(&self) -> [u8; TRAILER_BYTES] {
        let mut b = [0u8; TRAILER_BYTES];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..6].copy_from_slice(&self.consumed.to_le_bytes());
        b[7] = self.flag;
        b
    }

    /// [`Trailer::encode`] as one little-endian word (what an inline write
    /// gathers from memory of its own, without a staging entry).
    pub fn word(&self) -> u64 {
        u64::from_le_bytes(self.encode())
    }

    /// Inverse of [`Trailer::word`].
    pub fn from_word(word: u64) -> Trailer {
        Trailer::decode(&word.to_le_bytes())
    }

    /// Inverse of [`Trailer::encode`].
    pub fn decode(b: &[u8; TRAILER_BYTES]) -> Trailer {
        Trailer {
            len: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            consumed: u16::from_le_bytes(b[4..6].try_into().expect("2 bytes")),
            flag: b[7],
        }
    }
}

/// The cumulative count a 16-bit `consumed` report stands for, given the count
/// `known` so far and `sent`, the messages sent: the truth lies in
/// `known..=sent`, at most [`MAX_RING_DEPTH`] apart. A report outside that window
/// is older than what is known (a trailer read after a later credit word) and
/// changes nothing.
pub fn widen_consumed(known: u64, sent: u64, consumed: u16) -> u64 {
    let delta = u64::from(consumed.wrapping_sub(known as u16));
    if delta <= sent.saturating_sub(known) {
        known + delta
    } else {
        known
    }
}

/// When a wait that began at `started` last saw progress from `peer`: its last
/// completion, or the start of the wait if that is later.
fn progress_mark(peer: usize, last_progress: &[Instant], started: Instant) -> Instant {
    last_progress.get(peer).map_or(started, |&t| t.max(started))
}

/// The peers of `pending` (each once, in order) without progress for `timeout` at
/// `now`, counted from a peer's last completion or from `started` if that is
/// later: only they may be blamed for a timeout.
pub fn stale_peers(
    pending: &[usize],
    last_progress: &[Instant],
    started: Instant,
    now: Instant,
    timeout: Duration,
) -> Vec<usize> {
    let mut stale = Vec::new();
    for &peer in pending {
        let mark = progress_mark(peer, last_progress, started);
        if now.saturating_duration_since(mark) >= timeout && !stale.contains(&peer) {
            stale.push(peer);
        }
    }
    stale
}

/// How long until the first of `pending` goes stale (zero if one already is).
pub fn time_left(
    pending: &[usize],
    last_progress: &[Instant],
    started: Instant,
    now: Instant,
    timeout: Duration,
) -> Duration {
    pending
        .iter()
        .map(|&p| {
            let silent = now.saturating_duration_since(progress_mark(p, last_progress, started));
            timeout.saturating_sub(silent)
        })
        .min()
        .unwrap_or(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge_transport::BufferId;

    #[test]
    fn ring_slots_end_in_their_trailer_and_blocks_do_not_overlap() {
        let r = RingLayout::new(3, 128);
        assert_eq!(r.depth, MAX_RING_DEPTH);
        let s = r.slot(1, 0);
        assert_eq!(RingLayout::data_at(s, 1) + 1, RingLayout::trailer_at(s));
        assert_eq!(RingLayout::trailer_at(s) + TRAILER_BYTES, r.slot(1, 1));
        assert_eq!(RingLayout::data_at(s, EAGER_BYTES), s);
        // slot depth wraps to slot 0; the next block starts after the source
        assert_eq!(r.slot(1, r.depth as u64), s);
        assert_eq!(
            r.credit_word(1),
            r.slot(1, r.depth as u64 - 1) + RING_SLOT_BYTES
        );
        assert_eq!(r.staging(1, 0), r.credit_word(1) + 8);
        assert_eq!(r.credit_source(1) + 8, r.slot(2, 0));
        assert_eq!(r.credit_source(2) + 8, r.bytes());
        assert_eq!(r.slot(0, 0) % 8, 0);
        assert_eq!(r.credit_word(2) % 8, 0);
    }

    #[test]
    fn ring_depths_are_powers_of_two_and_slots_cycle_through_all_of_them() {
        for (asked, got) in [(0, 1), (1, 1), (3, 2), (48, 32), (64, 64), (1000, 64)] {
            let r = RingLayout::new(2, asked);
            assert_eq!(r.depth, got, "asked for {asked}");
            let slots: std::collections::BTreeSet<usize> =
                (0..2 * got as u64).map(|seq| r.slot(1, seq)).collect();
            assert_eq!(slots.len(), got);
            assert_eq!(r.slot(1, got as u64 + 1), r.slot(1, 1));
            assert_eq!(r.staging(1, got as u64), r.staging(1, 0));
        }
    }

    #[test]
    fn ring_flags_are_never_zero_and_change_from_one_use_of_a_slot_to_the_next() {
        let r = RingLayout::new(2, 4);
        assert_eq!(r.flag(0), 1);
        assert_eq!(r.flag(3), 1);
        assert_eq!(r.flag(4), 2);
        for seq in 0..5000u64 {
            assert_ne!(r.flag(seq), 0);
            assert_ne!(r.flag(seq), r.flag(seq + r.depth as u64));
        }
    }

    #[test]
    fn trailers_roundtrip_with_the_flag_in_the_last_byte() {
        let t = Trailer {
            len: 4096,
            consumed: 65535,
            flag: 200,
        };
        let b = t.encode();
        assert_eq!(b[TRAILER_BYTES - 1], 200);
        assert_eq!(Trailer::decode(&b), t);
        // the word's bytes in memory are the encoding
        assert_eq!(t.word().to_le_bytes(), b);
        assert_eq!(t.word() >> 56, 200);
        assert_eq!(Trailer::from_word(t.word()), t);
    }

    #[test]
    fn the_polled_flag_byte_is_the_last_byte_of_its_slot() {
        let r = RingLayout::new(3, 16);
        for peer in 0..3 {
            for seq in [0, 1, 15, 16, 17, 1000] {
                let at = r.flag_at(peer, seq);
                assert_eq!(at + 1, r.slot(peer, seq) + RING_SLOT_BYTES);
                assert_eq!(
                    at,
                    RingLayout::trailer_at(r.slot(peer, seq)) + TRAILER_BYTES - 1
                );
            }
        }
        assert_eq!(r.flag_at(1, 16), r.flag_at(1, 0));
        assert_ne!(r.flag_at(1, 1), r.flag_at(2, 1));
    }

    #[test]
    fn consumed_counts_widen_across_the_16_bit_wrap() {
        assert_eq!(widen_consumed(0, 10, 7), 7);
        assert_eq!(widen_consumed(65530, 65600, 20), 65536 + 20);
        // a stale report (older than what is known) changes nothing, nor does one
        // beyond what was sent
        assert_eq!(widen_consumed(70000, 70010, 69990u64 as u16), 70000);
        assert_eq!(widen_consumed(70000, 70010, 70000u64 as u16), 70000);
        assert_eq!(widen_consumed(5, 5, 9), 5);
        assert_eq!(widen_consumed(5, 8, 8), 8);
    }

    #[test]
    fn signalling_and_repost_batches_leave_flow_control_room() {
        for depth in [MIN_QUEUE_DEPTH, 5, 8, 16, 128, 1024] {
            let every = signal_every(depth);
            assert!(every >= 1 && every <= depth / 2 + 1 && every <= 64);
            let batch = repost_batch(depth) as u32;
            let threshold = Credits::new(depth, depth).threshold;
            // held back by a batch + owed before a credit message < the depth - 1
            assert!(batch - 1 + threshold < depth - 1, "depth {depth}");
        }
        assert_eq!(repost_batch(8), 1);
        assert_eq!(repost_batch(128), 16);
    }

    #[test]
    fn wr_ids_roundtrip_every_kind() {
        for kind in [
            WrKind::DataSend,
            WrKind::DataRecv,
            WrKind::SlotRecv,
            WrKind::SlotSend,
        ] {
            for index in [0, 1, 12345, INDEX_MASK] {
                assert_eq!(split_wr_id(wr_id(kind, index)), (kind, index));
            }
        }
        assert_ne!(wr_id(WrKind::DataSend, 5), wr_id(WrKind::DataRecv, 5));
    }

    #[test]
    fn alloc_sizes_are_page_multiples_and_never_zero() {
        assert_eq!(alloc_bytes(0), Some(4096));
        assert_eq!(alloc_bytes(1), Some(4096));
        assert_eq!(alloc_bytes(4096), Some(4096));
        assert_eq!(alloc_bytes(4097), Some(8192));
        assert_eq!(alloc_bytes(usize::MAX), None);
    }

    #[test]
    fn recv_index_and_offset_agree_with_owner_and_offset() {
        let l = SlotLayout {
            ranks: 3,
            recv_depth: 4,
            recv_bytes: 64,
            send_depth: 2,
        };
        for slot in 0..3 * l.per_peer() + 2 {
            for peer in 0..4 {
                let expected = match l.owner(slot) {
                    Some((p, true)) if p == peer => Some(slot - l.recv_slot(peer, 0)),
                    _ => None,
                };
                assert_eq!(
                    l.recv_index(peer, slot),
                    expected,
                    "slot {slot} peer {peer}"
                );
                if let Some(i) = expected {
                    assert_eq!(l.recv_offset(peer, i), l.offset(slot));
                }
            }
        }
    }

    #[test]
    fn slot_layout_partitions_the_area() {
        let l = SlotLayout {
            ranks: 3,
            recv_depth: 4,
            recv_bytes: 64,
            send_depth: 2,
        };
        assert_eq!(l.bytes(), 3 * (4 * 64 + 2 * SLOT_BYTES));
        let mut seen = std::collections::HashSet::new();
        for peer in 0..3 {
            for i in 0..4 {
                let s = l.recv_slot(peer, i);
                assert_eq!(l.owner(s), Some((peer, true)));
                assert!(seen.insert(s));
            }
            for i in 0..2 {
                let s = l.send_slot(peer, i);
                assert_eq!(l.owner(s), Some((peer, false)));
                assert!(seen.insert(s));
            }
        }
        assert_eq!(seen.len(), 18);
        // slots tile the area: sorted by offset, each ends where the next begins
        let mut spans: Vec<(usize, usize)> = seen
            .iter()
            .map(|&s| (l.offset(s), l.slot_bytes(s)))
            .collect();
        spans.sort();
        assert_eq!(spans[0].0, 0);
        for w in spans.windows(2) {
            assert_eq!(w[0].0 + w[0].1, w[1].0);
        }
        let last = spans.last().unwrap();
        assert_eq!(last.0 + last.1, l.bytes());
        assert_eq!(l.slot_bytes(l.recv_slot(1, 0)), 64);
        assert_eq!(l.slot_bytes(l.send_slot(1, 0)), SLOT_BYTES);
        assert_eq!(l.owner(18), None);
    }

    #[test]
    fn regions_are_checked_without_overflow() {
        let b = BufferId(0);
        assert_eq!(region_range(b.region(2, 3), 5).unwrap(), 2..5);
        assert!(region_range(b.region(3, 3), 5).is_err());
        assert!(region_range(b.region(usize::MAX, 2), 5).is_err());
        assert_eq!(region_range(b.prefix(0), 0).unwrap(), 0..0);
    }

    #[test]
    fn queue_depth_keeps_the_cq_within_the_device_limit() {
        assert_eq!(queue_depth(128, 16384, 1 << 20, 1), Ok(128));
        assert_eq!(queue_depth(128, 64, 1 << 20, 1), Ok(64));
        assert_eq!(queue_depth(1, 64, 1 << 20, 1), Ok(MIN_QUEUE_DEPTH));
        // 4096 CQ entries for 63 peers: 3 * depth * 63 + 16 <= 4096
        let d = queue_depth(128, 16384, 4096, 63).unwrap();
        assert_eq!(d, 21);
        assert!(cq_entries(d, 63) <= 4096);
        // the CQ bound and the device's work-request limit are never exceeded: too
        // small a device is an error, not a CQ that overruns
        let err = queue_depth(128, 16384, 100, 1000).unwrap_err();
        assert!(err.contains("max_cqe 100"), "{err}");
        assert!(queue_depth(128, 3, 1 << 20, 1).is_err());
        let d = queue_depth(128, 16384, 16 + 3 * 4 * 10, 10).unwrap();
        assert_eq!((d, cq_entries(d, 10)), (4, 16 + 3 * 4 * 10));
        assert!(queue_depth(128, 16384, 16 + 3 * 4 * 10 - 1, 10).is_err());
    }

    #[test]
    fn only_peers_without_progress_are_stale() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let timeout = 5 * s;
        // rank 1 silent since before the wait, rank 2 progressed 1 s ago, rank 3
        // progressed long before the wait began
        let last = [t0, t0, t0 + 5 * s, t0];
        let started = t0 + s;
        let now = t0 + 6 * s;
        assert_eq!(
            stale_peers(&[2, 1, 3], &last, started, now, timeout),
            vec![1, 3]
        );
        assert_eq!(
            stale_peers(&[2], &last, started, now, timeout),
            Vec::<usize>::new()
        );
        assert_eq!(stale_peers(&[1, 1], &last, started, now, timeout), vec![1]);
        // rank 2 goes stale 4 s from now; rank 1 already is
        assert_eq!(time_left(&[2], &last, started, now, timeout), 4 * s);
        assert_eq!(
            time_left(&[2, 1], &last, started, now, timeout),
            Duration::ZERO
        );
        assert_eq!(time_left(&[2], &last, started, t0 + 2 * s, timeout), 5 * s);
    }

    #[test]
    fn message_immediates_roundtrip() {
        for kind in [MsgKind::Eager, MsgKind::Advert, MsgKind::Credit] {
            for credits in [0, 1, 64, MAX_CREDITS_PER_MSG] {
                for len in [0, 1, EAGER_BYTES as u32] {
                    assert_eq!(
                        split_msg_imm(msg_imm(kind, credits, len)),
                        Some((kind, credits, len))
                    );
                }
            }
        }
        assert_eq!(split_msg_imm(0xc000_0000), None);
    }

    /// Two ranks, each sending `n` messages to the other over a message QP whose
    /// receiver keeps `depth` receives posted and re-posts late, in a random order
    /// of events: no message ever finds the receive queue empty, and everything
    /// arrives (no credit deadlock). Eager messages that arrive before their
    /// receive are copied out and their slots re-posted like any other (see
    /// `held_messages_never_keep_credits` for why they may not keep them).
    #[test]
    fn credits_never_overrun_the_receive_queue_and_never_deadlock() {
        #[derive(Clone, Copy)]
        enum Msg {
            Data(u32),
            Credit(u32),
        }
        struct Side {
            credits: Credits,
            to_send: usize,
            posted: u32,
            unreposted: u32,
            received: usize,
            wire: std::collections::VecDeque<Msg>,
        }
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for depth in [2u32, 4, 5, 16] {
            for round in 0..50 {
                let n = 4 * depth as usize + round;
                let mut sides: Vec<Side> = (0..2)
                    .map(|_| Side {
                        credits: Credits::new(depth, depth),
                        to_send: n,
                        posted: depth,
                        unreposted: 0,
                        received: 0,
                        wire: Default::default(),
                    })
                    .collect();
                let mut idle = 0;
                while sides.iter().any(|s| s.received < n || !s.wire.is_empty()) {
                    idle += 1;
                    assert!(idle < 10_000, "depth {depth}: no progress (deadlock)");
                    let me = rand(2) as usize;
                    let other = 1 - me;
                    match rand(3) {
                        // send data or a credit message
                        0 => {
                            let s = &mut sides[me];
                            let msg = if s.to_send > 0 && s.credits.can_send_data() {
                                s.to_send -= 1;
                                Msg::Data(s.credits.consume(true))
                            } else if s.credits.credit_due() {
                                Msg::Credit(s.credits.consume(true))
                            } else {
                                continue;
                            };
                            s.wire.push_back(msg);
                        }
                        // the peer's device takes one message off the wire
                        1 => {
                            let Some(msg) = sides[other].wire.pop_front() else {
                                continue;
                            };
                            let s = &mut sides[me];
                            assert!(s.posted > 0, "depth {depth}: receive queue empty");
                            s.posted -= 1;
                            match msg {
                                Msg::Data(c) => {
                                    s.credits.granted(c);
                                    s.received += 1;
                                }
                                Msg::Credit(c) => s.credits.granted(c),
                            }
                            s.unreposted += 1;
                        }
                        // the receiver polls: re-posts what it has handled
                        _ => {
                            let s = &mut sides[me];
                            if s.unreposted == 0 {
                                continue;
                            }
                            s.unreposted -= 1;
                            s.posted += 1;
                            s.credits.reposted();
                        }
                    }
                    idle = 0;
                }
                for s in &sides {
                    assert_eq!((s.received, s.to_send), (n, 0));
                }
            }
        }
    }

    /// What a receiver does with an eager message that arrives before its receive.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Early {
        /// Keeps it in its slot until the receive is posted (the slot, and the
        /// sender's credit, stay taken meanwhile): the behaviour before the fix.
        KeepsSlot,
        /// Copies it out and re-posts the slot at once (the transport's behaviour).
        CopiesOut,
    }

    /// Second review of the credits, finding 1. Rank A sends eager messages to B
    /// until its credits run out (`depth - 1` of them), then must advertise a
    /// rendezvous receive (a message that takes a credit too); rank B receives
    /// nothing until its rendezvous send to A has completed, that is, until A's
    /// advertisement arrived. Returns whether both finish; every step either side
    /// can take is taken until none is left.
    fn held_eager_scenario(depth: u32, early: Early) -> bool {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum Msg {
            Eager(u32),
            Advert(u32),
            Credit(u32),
        }
        let mut a = Credits::new(depth, depth);
        let mut b = Credits::new(depth, depth);
        let eager = depth as usize - 1;
        let (mut a_sent, mut advertised) = (0, false);
        let mut to_b = std::collections::VecDeque::new();
        let mut to_a = std::collections::VecDeque::new();
        // B's side: messages in slots not yet re-posted, kept in their slots,
        // copied out; whether A's advertisement (and so B's send) got through;
        // eager messages B has received through its receives
        let (mut b_unreposted, mut b_kept, mut b_copied) = (0u32, 0u32, 0u32);
        let (mut b_advert, mut b_delivered) = (false, 0usize);
        let mut a_unreposted = 0u32;
        loop {
            let mut progressed = false;
            // A: eager messages first, then the advertisement; credits otherwise
            if a.can_send_data() && a_sent < eager {
                a_sent += 1;
                to_b.push_back(Msg::Eager(a.consume(true)));
                progressed = true;
            } else if a.can_send_data() && a_sent == eager && !advertised {
                advertised = true;
                to_b.push_back(Msg::Advert(a.consume(true)));
                progressed = true;
            } else if a.credit_due() {
                to_b.push_back(Msg::Credit(a.consume(true)));
                progressed = true;
            }
            // B sends nothing on the message QP but credit messages
            if b.credit_due() {
                to_a.push_back(Msg::Credit(b.consume(true)));
                progressed = true;
            }
            if let Some(msg) = to_b.pop_front() {
                match msg {
                    Msg::Eager(c) => {
                        b.granted(c);
                        match early {
                            Early::KeepsSlot => b_kept += 1,
                            Early::CopiesOut => {
                                b_copied += 1;
                                b_unreposted += 1;
                            }
                        }
                    }
                    Msg::Advert(c) => {
                        b.granted(c);
                        b_advert = true;
                        b_unreposted += 1;
                    }
                    Msg::Credit(c) => {
                        b.granted(c);
                        b_unreposted += 1;
                    }
                }
                progressed = true;
            }
            if let Some(Msg::Credit(c)) = to_a.pop_front() {
                a.granted(c);
                a_unreposted += 1;
                progressed = true;
            }
            // B's send completed: it posts the eager receives, which take the
            // messages out of their slots or copies
            if b_advert && (b_kept > 0 || b_copied > 0) {
                b_delivered += (b_kept + b_copied) as usize;
                b_unreposted += b_kept;
                (b_kept, b_copied) = (0, 0);
                progressed = true;
            }
            for (unreposted, credits) in [(&mut a_unreposted, &mut a), (&mut b_unreposted, &mut b)]
            {
                while *unreposted > 0 {
                    *unreposted -= 1;
                    credits.reposted();
                    progressed = true;
                }
            }
            if b_advert && b_delivered == eager {
                return true;
            }
            if !progressed {
                return false;
            }
        }
    }

    #[test]
    fn held_messages_never_keep_credits() {
        for depth in [MIN_QUEUE_DEPTH, 5, 8, 16, 128] {
            // the reviewer's deadlock: A is left with its one reserved credit, B
            // owes nothing, and waits for an advertisement that cannot come
            assert!(
                !held_eager_scenario(depth, Early::KeepsSlot),
                "depth {depth}"
            );
            assert!(
                held_eager_scenario(depth, Early::CopiesOut),
                "depth {depth}"
            );
        }
    }

    #[test]
    fn lengths_and_immediates() {
        assert_eq!(check_len(10, 1 << 31).unwrap(), 10);
        assert!(matches!(
            check_len(11, 10),
            Err(TransportError::TooLarge { len_bytes: 11, .. })
        ));
        assert_eq!(split_write_imm(write_imm(1 << 20, false)), (1 << 20, false));
        // every device's max_msg_sz of 2^31 is capped to what an immediate carries
        let max = max_message(1 << 31);
        assert_eq!(max, 0x7fff_ffff);
        assert_eq!(split_write_imm(write_imm(max, false)), (max, false));
        assert_eq!(split_write_imm(write_imm(max, true)), (max, true));
        assert!(matches!(
            check_len(1 << 31, max),
            Err(TransportError::TooLarge { .. })
        ));
        assert_eq!(max_message(4096), 4096);
        assert_eq!(max_message(0), 1);
        assert_eq!(split_write_imm(write_imm(7, true)), (7, true));
        assert!(goes_inline(1, 64));
        assert!(goes_inline(64, 64));
        assert!(!goes_inline(65, 64));
        assert!(!goes_inline(0, 64));
        assert!(!goes_inline(1, 0));
    }

    #[test]
    fn staging_slots_are_free_only_once_their_last_reader_is_retired() {
        let mut s = StageSlots::default();
        // never used: free whatever was retired
        assert_eq!(s.next(), 0);
        assert!(s.next_free(0));
        // staged sends are sends 2, 4, 6, ... of the QP (others in between)
        for i in 0..STAGE_SLOTS as u64 {
            assert_eq!(s.next(), i as usize);
            assert!(s.next_free(0), "slot {i} is used for the first time");
            s.used(2 * i + 2);
        }
        // slot 0 again: last read by send 2
        assert_eq!(s.next(), 0);
        assert!(!s.next_free(0));
        assert!(!s.next_free(1));
        assert!(s.next_free(2));
        assert!(s.next_free(40));
        s.used(40);
        // slot 1: last read by send 4, not yet by a later one
        assert_eq!(s.next(), 1);
        assert!(!s.next_free(3));
        assert!(s.next_free(4));
        s.used(41);
        // slot 0's new reader is send 40
        for post in 42..42 + STAGE_SLOTS as u64 - 2 {
            s.used(post);
        }
        assert_eq!(s.next(), 0);
        assert!(!s.next_free(39));
        assert!(s.next_free(40));
        // the area: one block of slots per rank, no overlap, 8-aligned trailers
        assert_eq!(stage_offset(0, 1), STAGE_SLOT_BYTES);
        assert_eq!(stage_offset(1, 0), STAGE_SLOTS * STAGE_SLOT_BYTES);
        assert_eq!(
            stage_offset(2, STAGE_SLOTS - 1) + STAGE_SLOT_BYTES,
            stage_bytes(3)
        );
        assert_eq!((stage_offset(1, 3) + EAGER_BYTES) % 8, 0);
        assert_eq!(stage_bytes(2), 2 * 16 * 4104);
    }

    #[test]
    fn the_last_staged_send_of_each_half_of_the_slots_is_signaled() {
        let mut s = StageSlots::default();
        let signaled: Vec<u64> = (1..=4 * STAGE_SLOTS as u64)
            .filter(|&post| {
                let signal = s.must_signal();
                s.used(post);
                signal
            })
            .collect();
        assert_eq!(signaled, [8, 16, 24, 32, 40, 48, 56, 64]);
    }

    /// A message QP under selective signalling ([`signal_every`]), as the device
    /// accounts for it: `covers` per signaled send in flight, `retired` the
    /// sends its polled completions retired.
    #[derive(Default)]
    struct Chain {
        posted: u64,
        unsignaled: u32,
        /// (send number, sends it retires) of signaled sends not yet polled.
        covers: std::collections::VecDeque<(u64, u32)>,
        retired: u64,
    }

    impl Chain {
        fn post(&mut self, every: u32, forced: bool) -> u64 {
            self.posted += 1;
            if forced || self.unsignaled + 1 >= every {
                self.covers.push_back((self.posted, self.unsignaled + 1));
                self.unsignaled = 0;
            } else {
                self.unsignaled += 1;
            }
            self.posted
        }

        /// One poll: every signaled send posted so far has completed.
        fn poll(&mut self) {
            while let Some((_, n)) = self.covers.pop_front() {
                self.retired += u64::from(n);
            }
        }
    }

    #[test]
    fn a_poll_always_frees_the_next_staging_slot_and_never_one_still_read() {
        // a deep queue signals one send in 64; other unsignaled sends (inline,
        // credits) come in between, a pseudo-random number of them
        let every = signal_every(128);
        assert_eq!(every, 64);
        let mut chain = Chain::default();
        let mut s = StageSlots::default();
        let mut x = 12345u32;
        for _ in 0..5000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            for _ in 0..(x >> 16) % 3 {
                chain.post(every, false);
            }
            if !s.next_free(chain.retired) {
                chain.poll();
                assert!(s.next_free(chain.retired), "a poll left the slot in use");
            }
            let forced = s.must_signal();
            let post = chain.post(every, forced);
            s.used(post);
        }
    }
}
