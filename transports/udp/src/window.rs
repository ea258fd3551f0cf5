//! The send window: the messages sent to one peer that it has not acknowledged,
//! kept so that they can be sent again, by reference to the caller's buffer and
//! copied only when those bytes are about to change.
//!
//! There are no acknowledgement datagrams (they would double the packets of a
//! ping-pong and sit in its timed region). Acknowledgements come for free: every
//! datagram's header carries the low byte of how many messages its sender has
//! delivered from us ([`crate::wire::Header::ack`]), and a request to send again
//! (`NACK`) or a `BYE` carries the whole count. In a request/answer pattern the
//! answer acknowledges the request, so the window holds the messages of one flight.
//!
//! An 8-bit acknowledgement is read relative to the last one: a step forward of
//! 1 to 127 is taken, anything else (a stale datagram, or 128 or more messages
//! delivered since the last acknowledgement we read) is ignored, so the window is
//! not trimmed past what the peer has delivered unless a datagram arrives more
//! than 128 acknowledged messages late. Acknowledgements are read only from
//! datagrams that are fresh: delivered in order, or a probe (built when sent).

use ngauge_transport::{BufferId, BufferPool, Region, TransportError};
use std::collections::VecDeque;

/// Messages kept per peer at most; a peer that lost a message older than the last
/// `WINDOW` it was sent cannot get it back (its receive times out).
pub(crate) const WINDOW: usize = 1024;
/// Copies kept for reuse, so that a copy allocates only when a larger one comes.
const SPARE_COPIES: usize = 8;

/// Whether sequence number `a` comes before `b` (both wrap).
pub(crate) fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[derive(Debug)]
struct Entry {
    seq: u32,
    region: Region,
    /// The payload, once the bytes behind `region` were about to change.
    copy: Option<Vec<u8>>,
}

/// The unacknowledged messages to one peer, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SendWindow {
    entries: VecDeque<Entry>,
    /// Every message before this one was delivered at the peer.
    acked: u32,
    /// How many entries without a copy refer to each buffer, by buffer id (so that
    /// [`SendWindow::preserve`] looks at nothing when a region is elsewhere, in
    /// one look-up).
    referenced: Vec<u32>,
    spare: Vec<Vec<u8>>,
}

impl SendWindow {
    /// Keeps message `seq` (the next one) sent from `region`; the oldest goes when
    /// the window is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, seq: u32, region: Region) {
        if self.entries.len() == WINDOW {
            self.drop_oldest();
        }
        self.count(region.buffer, 1);
        self.entries.push_back(Entry {
            seq,
            region,
            copy: None,
        });
    }

    #[cold]
    fn drop_oldest(&mut self) {
        let old = self.entries.pop_front().expect("full window");
        self.retire(old);
    }

    /// The peer has delivered every message before `upto` (a `NACK` or `BYE`).
    /// Ignored when it is not ahead of what is known or beyond `next_seq`.
    #[inline(always)]
    pub(crate) fn ack(&mut self, upto: u32, next_seq: u32) {
        if before(self.acked, upto) && !before(next_seq, upto) {
            self.acked = upto;
            while let Some(e) = self.entries.front() {
                if !before(e.seq, upto) {
                    break;
                }
                let e = self.entries.pop_front().expect("front");
                self.retire(e);
            }
        }
    }

    /// The low byte of the peer's delivered count, from a datagram delivered in
    /// order (see the module docs).
    #[inline(always)]
    pub(crate) fn ack_low_byte(&mut self, low: u8, next_seq: u32) {
        let step = low.wrapping_sub(self.acked as u8);
        if step > 0 && step < 128 {
            self.ack(self.acked.wrapping_add(u32::from(step)), next_seq);
        }
    }

    /// Every message before this one was delivered at the peer.
    pub(crate) fn acked(&self) -> u32 {
        self.acked
    }

    /// Messages kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Position of the first kept message not before `seq`.
    pub(crate) fn position(&self, seq: u32) -> usize {
        self.entries
            .iter()
            .position(|e| !before(e.seq, seq))
            .unwrap_or(self.entries.len())
    }

    /// Sequence number of the message at `index`.
    pub(crate) fn seq(&self, index: usize) -> u32 {
        self.entries[index].seq
    }

    /// The payload of the message at `index`.
    pub(crate) fn payload<'a>(
        &'a self,
        index: usize,
        pool: &'a BufferPool,
    ) -> Result<&'a [u8], TransportError> {
        let e = &self.entries[index];
        match &e.copy {
            Some(copy) => Ok(copy),
            None => pool.region(e.region),
        }
    }

    /// Copies every kept message whose bytes `region` overlaps (they are about to
    /// change: a receive into them, `buffer_mut`, `free_buffer`).
    #[inline]
    pub(crate) fn preserve(
        &mut self,
        region: Region,
        pool: &BufferPool,
    ) -> Result<(), TransportError> {
        if self
            .referenced
            .get(region.buffer.0 as usize)
            .is_some_and(|&n| n > 0)
        {
            self.copy_overlapping(region, pool)?;
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn copy_overlapping(
        &mut self,
        region: Region,
        pool: &BufferPool,
    ) -> Result<(), TransportError> {
        for i in 0..self.entries.len() {
            let e = &self.entries[i];
            if e.copy.is_none() && overlap(e.region, region) {
                let mut copy = self.spare.pop().unwrap_or_default();
                copy.clear();
                copy.extend_from_slice(pool.region(e.region)?);
                let buffer = e.region.buffer;
                self.entries[i].copy = Some(copy);
                self.count(buffer, -1);
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn retire(&mut self, e: Entry) {
        match e.copy {
            Some(copy) => self.keep_spare(copy),
            None => self.count(e.region.buffer, -1),
        }
    }

    #[cold]
    fn keep_spare(&mut self, copy: Vec<u8>) {
        if self.spare.len() < SPARE_COPIES {
            self.spare.push(copy);
        }
    }

    /// Adds `by` to the count of entries without a copy that refer to `buffer`.
    #[inline(always)]
    fn count(&mut self, buffer: BufferId, by: i32) {
        match self.referenced.get_mut(buffer.0 as usize) {
            Some(n) => *n = n.wrapping_add_signed(by),
            None => self.count_new(buffer, by),
        }
    }

    /// [`SendWindow::count`] for a buffer id beyond the counts so far.
    #[cold]
    fn count_new(&mut self, buffer: BufferId, by: i32) {
        if by > 0 {
            self.referenced.resize(buffer.0 as usize + 1, 0);
            self.referenced[buffer.0 as usize] = by as u32;
        }
    }
}

fn overlap(a: Region, b: Region) -> bool {
    a.buffer == b.buffer && a.offset < b.offset + b.len && b.offset < a.offset + a.len
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge_transport::Buffers;

    fn pool_with(bytes: &[u8]) -> (BufferPool, BufferId) {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(bytes.len());
        pool.get_mut(b).unwrap().copy_from_slice(bytes);
        (pool, b)
    }

    /// The buffers counted with a count above 0.
    fn live(w: &SendWindow) -> Vec<(BufferId, u32)> {
        (0..w.referenced.len() as u32)
            .map(BufferId)
            .zip(w.referenced.iter().copied())
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    fn seqs(w: &SendWindow) -> Vec<u32> {
        (0..w.len()).map(|i| w.seq(i)).collect()
    }

    #[test]
    fn acks_trim_what_the_peer_delivered_and_never_more() {
        let (_, b) = pool_with(&[0; 8]);
        let mut w = SendWindow::default();
        for seq in 0..5 {
            w.push(seq, b.prefix(8));
        }
        w.ack(2, 5);
        assert_eq!(seqs(&w), [2, 3, 4]);
        // Stale or impossible acknowledgements change nothing.
        w.ack(1, 5);
        w.ack(9, 5);
        assert_eq!((w.acked(), seqs(&w)), (2, vec![2, 3, 4]));
        w.ack(5, 5);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn low_byte_acks_step_forward_by_less_than_128_only() {
        let (_, b) = pool_with(&[0; 8]);
        let mut w = SendWindow::default();
        for seq in 250..300u32 {
            w.push(seq, b.prefix(8));
        }
        w.ack(250, 300);
        // 260 = 0x104: its low byte 4 is 10 ahead of 250 (0xfa), across the wrap.
        w.ack_low_byte(4, 300);
        assert_eq!(w.acked(), 260);
        assert_eq!(w.seq(0), 260);
        // A stale byte (behind) and a jump of 128 or more are ignored.
        w.ack_low_byte(0xfb, 300);
        w.ack_low_byte(4u8.wrapping_add(128), 300);
        assert_eq!(w.acked(), 260);
        // Never beyond what was sent.
        w.ack_low_byte(60, 300);
        assert_eq!(w.acked(), 260);
        w.ack_low_byte(44, 300);
        assert_eq!((w.acked(), w.len()), (300, 0));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let (_, b) = pool_with(&[0; 8]);
        let mut w = SendWindow {
            acked: u32::MAX - 1,
            ..SendWindow::default()
        };
        for seq in [u32::MAX - 1, u32::MAX, 0, 1] {
            w.push(seq, b.prefix(8));
        }
        assert_eq!(w.position(0), 2);
        w.ack(0, 2);
        assert_eq!(seqs(&w), [0, 1]);
    }

    #[test]
    fn a_full_window_drops_its_oldest() {
        let (_, b) = pool_with(&[0; 8]);
        let mut w = SendWindow::default();
        for seq in 0..WINDOW as u32 + 3 {
            w.push(seq, b.prefix(8));
        }
        assert_eq!(w.len(), WINDOW);
        assert_eq!(w.seq(0), 3);
        assert_eq!(w.position(1), 0);
    }

    #[test]
    fn overwritten_bytes_are_copied_first_and_others_are_not() {
        let (mut pool, b) = pool_with(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let other = pool.alloc(8);
        let mut w = SendWindow::default();
        w.push(0, b.prefix(4));
        w.push(
            1,
            Region {
                buffer: b,
                offset: 4,
                len: 4,
            },
        );
        // Elsewhere: nothing copied.
        w.preserve(other.prefix(8), &pool).unwrap();
        assert_eq!(live(&w), [(b, 2)]);
        // The second half only.
        w.preserve(
            Region {
                buffer: b,
                offset: 6,
                len: 1,
            },
            &pool,
        )
        .unwrap();
        pool.get_mut(b).unwrap().fill(0);
        assert_eq!(w.payload(0, &pool).unwrap(), [0, 0, 0, 0]);
        assert_eq!(w.payload(1, &pool).unwrap(), [5, 6, 7, 8]);
        assert_eq!(live(&w), [(b, 1)]);
        // Acknowledged entries give their references and copies back.
        w.ack(2, 2);
        assert!(live(&w).is_empty());
        assert_eq!(w.spare.len(), 1);
    }

    #[test]
    fn counts_follow_the_entries_without_a_copy_per_buffer() {
        let (mut pool, a) = pool_with(&[1, 2, 3, 4]);
        let b = pool.alloc(4);
        assert_eq!((a.0, b.0), (0, 1));
        let mut w = SendWindow::default();
        // A ping-pong: one message from `b` at a time, acknowledged before the next.
        for seq in 0..3 {
            w.push(seq, b.prefix(4));
            w.ack(seq + 1, seq + 1);
        }
        assert_eq!(w.referenced, [0, 0]);
        // A receive into `b` finds nothing to copy.
        w.preserve(b.prefix(4), &pool).unwrap();
        assert_eq!(w.spare.len(), 0);
        w.push(3, b.prefix(4));
        w.push(4, a.prefix(2));
        assert_eq!(live(&w), [(a, 1), (b, 1)]);
        // Overwriting `a` copies the message from `a` only, and counts it off.
        w.preserve(a.prefix(1), &pool).unwrap();
        pool.get_mut(a).unwrap().fill(9);
        assert_eq!(w.payload(1, &pool).unwrap(), [1, 2]);
        assert_eq!(live(&w), [(b, 1)]);
        // A buffer id never counted before is no reason to copy anything.
        w.preserve(BufferId(7).prefix(1), &pool).unwrap();
        assert_eq!(live(&w), [(b, 1)]);
    }
}
