//! One-sided operations for `ngauge rma` ([`OneSided`]): a window of memory on
//! every rank, registered with `FI_REMOTE_READ | FI_REMOTE_WRITE` (its address,
//! a virtual address under `FI_MR_VIRT_ADDR` or else offset 0, and its key
//! exchanged over the control channel), beside a transport opened with
//! `FI_RMA | FI_ATOMIC` on a thread-safe domain.
//!
//! Put is `fi_writemsg`, get `fi_read`, fetch-and-add `fi_fetch_atomic`
//! (`FI_SUM`, `FI_UINT64`, the old value in the result buffer), accumulate
//! `fi_atomicmsg` (`FI_SUM`, `FI_DOUBLE`) where `fi_atomicvalid` says the provider
//! has it, in chunks of the count it names, one after the other. Every operation asks for a completion, and puts and accumulates ask for
//! `FI_DELIVERY_COMPLETE` where the provider offers it: their completion then
//! means the data is in the target's memory, as `MPI_Win_flush` promises. Where it
//! does not ([`OfiWindow::delivery_complete`]), a completion means the provider
//! has sent the data (transmit complete) and a put may still be on its way.
//! Gets and fetches complete when their data is back, which is after the target's
//! memory was read either way.
//!
//! The flush waits for every operation the window started (to any peer); the
//! fence is the flush, then the barrier of 1-byte messages over the same
//! endpoint ([`fence_barrier`]), which the window needs because
//! [`OneSided::fence`] has no control channel.
//!
//! **Progress.** A provider whose data progress is manual (`shm` and
//! `tcp;ofi_rxm`: the target copies the data in its own progress) would not serve
//! a passive target that waits elsewhere (on the control channel): the window
//! then runs a progress thread that reads a counter bound to the endpoint
//! (`fi_cntr_read` progresses it) until the window closes. Between two reads it
//! yields while the window is busy and sleeps once it is idle, 20 us at first,
//! twice as long after each read that found nothing, up to about a millisecond
//! ([`Pace`]), so that idle ranks leave their cores to the ranks that share them.
//! Busy means the counter moved lately: under `--wait poll` within
//! [`POLL_HOT`], under `--wait block` within [`BLOCK_HOT`]. The counter sees
//! other ranks' operations on this window only where the provider has
//! `FI_RMA_EVENT` (`shm`); elsewhere (`tcp;ofi_rxm`) it moves with this rank's
//! own operations only, so under poll the thread yields for the window's whole
//! life and under block a passive target serves each operation within a sleep.
//! Providers with automatic progress (`sockets`) get no thread.

use super::ffi;
use super::memory::Mr;
use super::{open_with, setup_error, Ctx, OfiTransport, NAME, RMA};
use crate::OfiOptions;
use ngauge_transport::one_sided::{exchange_keys, fence_barrier};
use ngauge_transport::{BufferId, Control, OneSided, Rank, Transport, TransportError, WaitMode};
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Contexts of operations in flight: after this many operations without a
/// flush the window waits for all of them before it reuses the first context.
const RING: usize = 256;
/// Empty polls between two clock readings of a wait.
const SPINS_PER_CLOCK: u32 = 256;
/// `--wait poll`: how long after the progress counter last moved the progress
/// thread keeps yielding (where the counter sees other ranks' operations).
const POLL_HOT: Duration = Duration::from_millis(100);
/// `--wait block`: the same, as long as the data path's blocking waits yield.
const BLOCK_HOT: Duration = Duration::from_millis(1);
/// The progress thread's first sleep once the window is idle; each further
/// sleep doubles it, [`SLEEP_DOUBLINGS`] times at most (about 1.3 ms).
const FIRST_SLEEP: Duration = Duration::from_micros(20);
const SLEEP_DOUBLINGS: u32 = 6;

/// The completions the transport's queue delivered for a window.
#[derive(Default)]
pub struct Completions {
    /// Operations completed (successfully or not).
    done: u64,
    /// The first operation that failed, in the provider's words.
    failed: Option<String>,
}

impl OfiTransport {
    /// A completion of a window's operation (`RMA`).
    pub(super) fn one_sided_completed(&mut self, error: Option<String>) {
        self.one_sided.done += 1;
        if let Some(words) = error {
            self.one_sided.failed.get_or_insert(words);
        }
    }
}

/// Memory of whole 64-bit words that libfabric reads and writes while no Rust
/// reference to it exists: it is only reached through its pointer.
struct Words {
    ptr: *mut u64,
    len: usize,
}

impl Words {
    fn zeroed(len: usize) -> Words {
        let b: Box<[u64]> = vec![0u64; len].into_boxed_slice();
        Words {
            len: b.len(),
            ptr: Box::into_raw(b).cast::<u64>(),
        }
    }

    fn bytes(&self) -> *mut u8 {
        self.ptr.cast::<u8>()
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        // SAFETY: the allocation `zeroed` leaked, rebuilt once with its length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// A peer's window: its address (or offset 0) and key.
#[derive(Clone, Copy, Default)]
struct Remote {
    addr: u64,
    key: u64,
}

/// The counter of a manual-progress endpoint, as the progress thread holds it.
struct Counter(*mut ffi::fid_cntr);
// SAFETY: the domain is thread safe (`FI_THREAD_SAFE`), and the window joins the
// thread before the endpoint (and its counter) closes.
unsafe impl Send for Counter {}

impl Counter {
    fn read(&self) -> u64 {
        // SAFETY: see `Send`: a live counter on a thread-safe domain.
        unsafe { ffi::ngo_cntr_read(self.0) }
    }
}

/// How the progress thread waits between two counter reads (module docs).
#[derive(Clone, Copy, Debug)]
struct Pace {
    /// How long after the counter moved the thread yields rather than sleeps.
    hot: Duration,
}

impl Pace {
    /// The pace for `wait` on a counter that does (`rma_event`) or does not see
    /// other ranks' operations: without them a polling window cannot tell when
    /// it is idle, and yields throughout.
    fn new(wait: WaitMode, rma_event: bool) -> Pace {
        let hot = match (wait, rma_event) {
            (WaitMode::Poll, true) => POLL_HOT,
            (WaitMode::Poll, false) => Duration::MAX,
            (WaitMode::Block, _) => BLOCK_HOT,
        };
        Pace { hot }
    }

    /// What follows a read `quiet` after the counter last moved, the `sleeps`-th
    /// read since the window went idle: a yield (`None`) or a sleep.
    fn pause(&self, quiet: Duration, sleeps: u32) -> Option<Duration> {
        (quiet >= self.hot).then(|| FIRST_SLEEP * 2u32.pow(sleeps.min(SLEEP_DOUBLINGS)))
    }

    /// Progresses through `counter` until `stop`.
    fn run(self, counter: &Counter, stop: &AtomicBool) {
        let (mut last, mut moved, mut sleeps) = (counter.read(), Instant::now(), 0);
        while !stop.load(Ordering::Relaxed) {
            let now = counter.read();
            if now != last {
                (last, moved, sleeps) = (now, Instant::now(), 0);
            }
            match self.pause(moved.elapsed(), sleeps) {
                None => std::thread::yield_now(),
                Some(d) => {
                    sleeps += 1;
                    std::thread::sleep(d);
                }
            }
        }
    }
}

/// The window of every rank, with this rank's origin and result buffers.
pub struct OfiWindow {
    remote: Vec<Remote>,
    bytes: usize,
    /// Words of the origin and result buffers (each `words` long), then the
    /// operand of fetch-and-add (1).
    words: usize,
    /// Completion flags of puts and accumulates.
    flags: u64,
    /// Doubles one `fi_atomic` sums (0: no floating-point sums).
    sum_max: usize,
    /// Operations started; the transport counts their completions.
    issued: u64,
    /// The fence's barrier messages (see [`fence_barrier`]).
    token: BufferId,
    #[allow(clippy::vec_box)]
    ring: Vec<Box<Ctx>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Registrations of `window` and `local`, closed before the transport.
    regs: Vec<Mr>,
    local_desc: *mut c_void,
    /// The endpoint; dropped before the memory it may still touch.
    t: OfiTransport,
    window: Words,
    local: Words,
}

/// Opens a transport with one-sided operations (collective: every rank of
/// `control` calls it) and a window of `bytes` on every rank.
///
/// # Errors
/// `TransportError::Unavailable` for a provider without RMA and atomics (the
/// reason names the providers that have them), `Setup` when a rank could not
/// register its window.
pub fn open_window(
    control: &mut dyn Control,
    opts: &OfiOptions,
    bytes: usize,
) -> Result<OfiWindow, TransportError> {
    // The window's own waits spin (its operations are what is timed); `--wait`
    // paces the progress thread.
    let pace_for = opts.wait;
    let opts = OfiOptions {
        op: crate::OfiOp::Send,
        wait: WaitMode::Poll,
        ..opts.clone()
    };
    let mut t = open_with(control, &opts, true)?;
    let words = bytes.div_ceil(8).max(1);
    let (window, local) = (Words::zeroed(words), Words::zeroed(2 * words + 1));
    // SAFETY: the local buffer's last word, written before any operation reads it.
    unsafe { local.ptr.add(2 * words).write(1) };
    let remote_access = (ffi::FI_REMOTE_READ | ffi::FI_REMOTE_WRITE) as u64;
    let local_access = (ffi::FI_READ | ffi::FI_WRITE) as u64;
    let mut regs = Vec::new();
    // SAFETY: both allocations live in the window, whose `drop` closes the
    // registrations before it frees them and before the transport closes.
    let registered = unsafe {
        t.memory
            .register_raw(window.bytes(), words * 8, remote_access)
            .and_then(|w| {
                regs.push(w);
                t.memory
                    .register_raw(local.bytes(), local.len * 8, local_access)
            })
    };
    let mine = match registered {
        Ok(l) => {
            regs.push(l);
            let w = &regs[0];
            Ok([w.base.to_le_bytes(), w.key.to_le_bytes()].concat())
        }
        Err(e) => Err(e.to_string()),
    };
    let keys = exchange_keys(
        control,
        NAME,
        mine.as_deref().map_err(String::as_str),
        |k| {
            let word = |i: usize| u64::from_le_bytes(k[i..i + 8].try_into().expect("8 bytes"));
            (k.len() == 16).then(|| Remote {
                addr: word(0),
                key: word(8),
            })
        },
    );
    let token = t.alloc_buffer(2);
    let mut w = OfiWindow {
        remote: Vec::new(),
        bytes,
        words,
        flags: u64::from(ffi::FI_COMPLETION)
            | if t.ep.delivery {
                u64::from(ffi::FI_DELIVERY_COMPLETE)
            } else {
                0
            },
        sum_max: sum_max(&t),
        issued: 0,
        token: BufferId(0),
        ring: (0..RING).map(|i| Ctx::boxed(RMA | i as u64)).collect(),
        stop: Arc::new(AtomicBool::new(false)),
        thread: None,
        local_desc: regs.get(1).map_or(std::ptr::null_mut(), |m| m.desc),
        regs,
        t,
        window,
        local,
    };
    (w.remote, w.token) = (keys?, token?);
    if !w.t.ep.cntr.is_null() {
        let (counter, stop) = (Counter(w.t.ep.cntr), Arc::clone(&w.stop));
        let pace = Pace::new(pace_for, w.t.ep.rma_event);
        let spawned = std::thread::Builder::new()
            .name("ofi-progress".into())
            .spawn(move || pace.run(&counter, &stop));
        w.thread = Some(spawned.map_err(|e| setup_error(format!("progress thread: {e}")))?);
    }
    Ok(w)
}

/// Doubles one `fi_atomic` with `FI_SUM` on `FI_DOUBLE` takes (0 where the
/// provider has no such atomic).
fn sum_max(t: &OfiTransport) -> usize {
    // SAFETY: the endpoint is enabled; the call only asks.
    let n = unsafe { ffi::ngo_sum_valid(t.ep.ep, 0, ffi::fi_datatype_FI_DOUBLE) };
    n.max(0) as usize
}

impl OfiWindow {
    /// Whether puts and accumulates complete at the target (see the module docs).
    pub fn delivery_complete(&self) -> bool {
        self.t.ep.delivery
    }

    /// What the endpoint runs on.
    pub fn facts(&self) -> &crate::Facts {
        self.t.facts()
    }

    fn pending(&self) -> u64 {
        self.issued - self.t.one_sided.done
    }

    fn io(&self, peer: Rank, op: &'static str, what: String) -> TransportError {
        self.t.io(peer, op, what)
    }

    /// `peer`'s address and the remote address and key of `offset`, with
    /// `offset + len` checked against the window.
    fn target(
        &self,
        peer: Rank,
        offset: usize,
        len: usize,
        op: &'static str,
    ) -> Result<(ffi::fi_addr_t, u64, u64), TransportError> {
        self.t.check_peer(peer)?;
        if offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(self.io(
                peer,
                op,
                format!(
                    "{offset}+{len} bytes outside the window of {} bytes",
                    self.bytes
                ),
            ));
        }
        let r = self.remote[peer];
        Ok((self.t.peers[peer].addr, r.addr + offset as u64, r.key))
    }

    /// Posts one operation with the next context of the ring (after waiting for
    /// every operation in flight when the ring comes round).
    fn post(
        &mut self,
        peer: Rank,
        op: &'static str,
        mut call: impl FnMut(*mut c_void) -> isize,
    ) -> Result<(), TransportError> {
        let slot = (self.issued % RING as u64) as usize;
        if slot == 0 && self.pending() > 0 {
            self.complete_all(peer, op)?;
        }
        let ctx = Ctx::ptr(&mut self.ring[slot]);
        self.t.retry(peer, op, |_| call(ctx))?;
        self.issued += 1;
        Ok(())
    }

    /// Progresses until every operation started has completed, within the
    /// transport's timeout; the first failure is the error.
    fn complete_all(&mut self, peer: Rank, op: &'static str) -> Result<(), TransportError> {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.pending() > 0 {
            if self.t.progress()? {
                continue;
            }
            spins += 1;
            if spins < SPINS_PER_CLOCK {
                std::hint::spin_loop();
                continue;
            }
            spins = 0;
            if start.elapsed() > self.t.timeout {
                return Err(TransportError::Timeout {
                    transport: NAME,
                    peer,
                    op,
                    after: self.t.timeout,
                });
            }
        }
        match self.t.one_sided.failed.take() {
            Some(words) => Err(self.io(peer, op, words)),
            None => Ok(()),
        }
    }

    fn idle(&self, what: &'static str) -> Result<(), TransportError> {
        match self.pending() {
            0 => Ok(()),
            n => Err(self.io(
                self.t.rank,
                what,
                format!("{n} operations in flight use the buffer; flush first"),
            )),
        }
    }

    /// The origin buffer, the result buffer and the operand 1, as pointers.
    fn origin(&self) -> *mut u8 {
        self.local.bytes()
    }

    fn result(&self) -> *mut u8 {
        // SAFETY: word `words` of the local allocation of `2 * words + 1`.
        unsafe { self.local.ptr.add(self.words).cast::<u8>() }
    }

    fn one(&self) -> *const u64 {
        // SAFETY: the last word of the local allocation.
        unsafe { self.local.ptr.add(2 * self.words) }
    }
}

impl OneSided for OfiWindow {
    fn window_bytes(&self) -> usize {
        self.bytes
    }

    fn has_fence(&self) -> bool {
        true
    }

    fn has_accumulate(&self) -> bool {
        self.sum_max > 0
    }

    fn end_passive(&mut self) -> Result<(), TransportError> {
        self.complete_all(self.t.rank, "flush")
    }

    fn fill_origin(&mut self, byte: u8) -> Result<(), TransportError> {
        self.idle("fill")?;
        // SAFETY: the origin's `words * 8 >= bytes` bytes, which no operation
        // reads (idle).
        unsafe { std::ptr::write_bytes(self.origin(), byte, self.bytes) };
        Ok(())
    }

    fn fill_origin_f64(&mut self, value: f64) -> Result<(), TransportError> {
        self.idle("fill")?;
        for i in 0..self.bytes / 8 {
            // SAFETY: in bounds of the origin's words (8-aligned); idle.
            unsafe { self.origin().cast::<f64>().add(i).write(value) };
        }
        Ok(())
    }

    fn put(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (dest, addr, key) = self.target(peer, offset, len, "put")?;
        let (ep, buf, desc, flags) = (self.t.ep.ep, self.origin(), self.local_desc, self.flags);
        // SAFETY: `len <= bytes` bytes of the registered origin buffer, unwritten
        // until the flush (`idle`); the target range lies in the peer's window
        // (checked); the context stays in the ring until its completion.
        self.post(peer, "put", |ctx| unsafe {
            ffi::ngo_write(ep, buf.cast(), len, desc, dest, addr, key, flags, ctx)
        })
    }

    fn get(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (dest, addr, key) = self.target(peer, offset, len, "get")?;
        let (ep, buf, desc) = (self.t.ep.ep, self.result(), self.local_desc);
        // SAFETY: as in `put`, for the result buffer libfabric writes until the
        // flush.
        self.post(peer, "get", |ctx| unsafe {
            ffi::ngo_read(ep, buf.cast(), len, desc, dest, addr, key, ctx)
        })
    }

    fn accumulate_sum_f64(
        &mut self,
        peer: Rank,
        offset: usize,
        count: usize,
    ) -> Result<(), TransportError> {
        let (dest, addr, key) = self.target(peer, offset, count * 8, "accumulate")?;
        if self.sum_max == 0 {
            return Err(self.io(
                peer,
                "accumulate",
                "the provider has no FI_SUM on FI_DOUBLE".into(),
            ));
        }
        let (ep, desc, flags) = (self.t.ep.ep, self.local_desc, self.flags);
        let mut done = 0;
        while done < count {
            if done > 0 {
                // One chunk in flight at a time: `shm` (1.17) crashes with
                // several full-size atomics in flight.
                self.complete_all(peer, "accumulate")?;
            }
            let n = (count - done).min(self.sum_max);
            // SAFETY: doubles `done..done + n` of the origin buffer.
            let buf = unsafe { self.origin().cast::<f64>().add(done) };
            let at = addr + done as u64 * 8;
            // SAFETY: as in `put`.
            self.post(peer, "accumulate", |ctx| unsafe {
                ffi::ngo_sum_f64(ep, buf, n, desc, dest, at, key, flags, ctx)
            })?;
            done += n;
        }
        Ok(())
    }

    fn fetch_add_u64(&mut self, peer: Rank, offset: usize) -> Result<(), TransportError> {
        let (dest, addr, key) = self.target(peer, offset, 8, "fetch_add")?;
        self.idle("fetch_add")?;
        let (ep, one, result, desc) = (self.t.ep.ep, self.one(), self.result(), self.local_desc);
        // SAFETY: the operand and the result word lie in the registered local
        // buffer, untouched until the flush; `addr` is 8-aligned when `offset`
        // is (the window is).
        self.post(peer, "fetch_add", |ctx| unsafe {
            ffi::ngo_fetch_add_u64(ep, one, desc, result.cast(), desc, dest, addr, key, ctx)
        })
    }

    fn flush(&mut self, peer: Rank) -> Result<(), TransportError> {
        self.t.check_peer(peer)?;
        self.complete_all(peer, "flush")
    }

    fn fence(&mut self) -> Result<(), TransportError> {
        self.complete_all(self.t.rank, "fence")?;
        fence_barrier(&mut self.t, self.token)
    }

    fn poll_byte(&mut self, offset: usize) -> Result<u8, TransportError> {
        // Manual progress: a peer's put lands inside some rank's progress.
        self.t.progress()?;
        Ok(self.local_byte(offset))
    }

    fn local_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.bytes, "offset {offset} outside the window");
        // SAFETY: in bounds (asserted) of the window a peer may be writing: a
        // volatile byte load, any value valid.
        unsafe { self.window.bytes().add(offset).read_volatile() }
    }

    fn result_u64(&self) -> Result<u64, TransportError> {
        self.idle("result")?;
        // SAFETY: the first (aligned) word of the idle result buffer.
        Ok(unsafe { self.result().cast::<u64>().read() })
    }

    /// Completes this rank's operations and waits (a fence) until every rank has,
    /// so that no peer still addresses this window when it goes.
    fn close(mut self: Box<Self>) -> Result<(), TransportError> {
        self.fence()
    }
}

impl Drop for OfiWindow {
    /// Stops the progress thread, then closes the registrations; the transport
    /// closes the endpoint, then the memory goes.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for mr in self.regs.drain(..) {
            mr.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge_transport::inproc;
    use std::sync::Barrier;

    #[test]
    fn a_polling_window_without_remote_events_never_sleeps() {
        let pace = Pace::new(WaitMode::Poll, false);
        assert_eq!(pace.pause(Duration::from_secs(3600), 100), None);
    }

    #[test]
    fn an_idle_window_sleeps_longer_and_longer_up_to_a_cap() {
        for (wait, hot) in [(WaitMode::Poll, POLL_HOT), (WaitMode::Block, BLOCK_HOT)] {
            let pace = Pace::new(wait, true);
            assert_eq!(pace.pause(hot / 2, 0), None, "{wait:?}");
            let sleeps: Vec<_> = (0..9).map(|n| pace.pause(hot, n).unwrap()).collect();
            assert_eq!(sleeps[0], FIRST_SLEEP);
            assert_eq!(sleeps[1], 2 * FIRST_SLEEP);
            assert_eq!(sleeps[8], 64 * FIRST_SLEEP);
        }
        let block = Pace::new(WaitMode::Block, false);
        assert_eq!(block.pause(BLOCK_HOT, 0), Some(FIRST_SLEEP));
    }

    /// User plus system CPU time, in clock ticks (`CLK_TCK`, 100 on Linux), of
    /// this process's threads named `ofi-progress`.
    fn progress_ticks() -> u64 {
        let mut ticks = 0;
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim() != "ofi-progress" {
                continue;
            }
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // Fields after the command's closing parenthesis: state is the 3rd
            // field of the line, utime and stime the 14th and 15th.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            ticks += f.get(10).unwrap_or(&0) + f.get(11).unwrap_or(&0);
        }
        ticks
    }

    /// The progress threads of two idle windows over `shm` (manual progress)
    /// sleep under both wait modes: together they use less than a fifth of one
    /// core; each yielded through the window's whole life before.
    #[test]
    fn idle_windows_leave_the_core_to_others() {
        for wait in [WaitMode::Block, WaitMode::Poll] {
            let opts = OfiOptions {
                provider: Some("shm".into()),
                wait,
                timeout: Duration::from_secs(10),
                ..OfiOptions::default()
            };
            let (opened, done) = (Arc::new(Barrier::new(3)), Arc::new(Barrier::new(3)));
            let ranks: Vec<_> = inproc::world(2)
                .into_iter()
                .map(|(_, mut control)| {
                    let (opts, opened, done) = (opts.clone(), opened.clone(), done.clone());
                    std::thread::spawn(move || {
                        let w = open_window(&mut control, &opts, 64);
                        opened.wait();
                        done.wait();
                        w.map(drop)
                    })
                })
                .collect();
            opened.wait();
            // Past the time a window stays hot after opening.
            std::thread::sleep(POLL_HOT + Duration::from_millis(50));
            let (before, start) = (progress_ticks(), Instant::now());
            std::thread::sleep(Duration::from_millis(400));
            let used = (progress_ticks() - before) as f64 / 100.0;
            let wall = start.elapsed().as_secs_f64();
            done.wait();
            for r in ranks {
                r.join().unwrap().unwrap();
            }
            assert!(
                used < 0.2 * wall,
                "{wait:?}: the progress threads used {used:.2} s of CPU in {wall:.2} s"
            );
        }
    }
}
