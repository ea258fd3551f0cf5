//! MPI's lifecycle (one `MPI_Init_thread`, one `MPI_Finalize`), the lock that
//! serializes every call into the library, and error translation.

use crate::ffi;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Which MPI library the shim was compiled against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Open MPI (`OPEN_MPI` defined by its `mpi.h`).
    OpenMpi,
    /// MPICH or a derivative (`MPICH_VERSION` defined).
    Mpich,
    /// Another MPI.
    Other,
}

impl Flavor {
    /// `openmpi`, `mpich` or `other`, as in result metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::OpenMpi => "openmpi",
            Flavor::Mpich => "mpich",
            Flavor::Other => "other",
        }
    }
}

/// Why MPI could not be started or a call into it failed.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    /// The crate was compiled without an MPI library.
    #[error(
        "this ngauge was built without MPI (no mpicc or pkg-config MPI found at build time); \
         install libopenmpi-dev or libmpich-dev and rebuild with --features mpi"
    )]
    NotBuilt,
    /// No MPI launcher started this process.
    #[error(
        "-t mpi needs an MPI launcher: run it as `mpirun -np 2 ngauge -t mpi ...` \
         (Open MPI) or `mpiexec -n 2 ngauge -t mpi ...` (MPICH)"
    )]
    NoLauncher,
    /// MPI was finalized already; the standard forbids initializing it again.
    #[error("MPI was already finalized in this process and cannot be initialized again")]
    Finalized,
    /// MPI was initialized by someone else (a library linked into the process).
    #[error("MPI was initialized outside ngauge-mpi; refusing to share its lifecycle")]
    ForeignInit,
    /// A call into MPI failed.
    #[error("{op} failed: {message} (MPI error {code})")]
    Call {
        /// The MPI function.
        op: &'static str,
        /// The error code (positive: MPI's; negative: the shim's).
        code: i32,
        /// MPI's description.
        message: String,
    },
}

/// True when the environment shows an MPI launcher (Open MPI's `mpirun`, MPICH's
/// Hydra, or a PMIx server) started this process.
pub fn launched_by_mpi() -> bool {
    launched_by_mpi_from(|name| std::env::var_os(name).is_some())
}

/// [`launched_by_mpi`] over an arbitrary environment lookup (testable).
pub fn launched_by_mpi_from(has: impl Fn(&str) -> bool) -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .any(|name| has(name))
}

// ---- the call lock ------------------------------------------------------------------

/// Held while a thread is inside the MPI library (or the shim's tables).
///
/// MPI is initialized at `MPI_THREAD_SERIALIZED` (cheaper than `MULTIPLE` on the
/// message path): calls may come from any thread but never two at once. A spin lock
/// makes that so at the cost of one atomic exchange per call, a few nanoseconds, which
/// matters next to a shared-memory latency of a few hundred. Waits that can last
/// (blocking-mode progress loops, control-plane collectives) release it between tests.
static IN_MPI: AtomicBool = AtomicBool::new(false);

pub(crate) struct CallLock(());

impl CallLock {
    #[inline]
    pub(crate) fn take() -> CallLock {
        while IN_MPI
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        CallLock(())
    }

    /// Turns a shim return code into a `Result`, describing failures while the lock
    /// is still held.
    #[inline]
    pub(crate) fn check(&self, op: &'static str, code: c_int) -> Result<(), MpiError> {
        if code == ffi::OK {
            Ok(())
        } else {
            Err(self.error(op, code))
        }
    }

    #[cold]
    pub(crate) fn error(&self, op: &'static str, code: c_int) -> MpiError {
        let mut buf = [0 as c_char; 512];
        // SAFETY: the shim writes at most `cap` bytes including the terminating NUL
        // into `buf`, which is 512 bytes long; the lock serializes the call.
        unsafe { ffi::ngm_error_string(code, buf.as_mut_ptr(), buf.len() as c_int) };
        MpiError::Call {
            op,
            code,
            message: c_string(&buf),
        }
    }
}

impl Drop for CallLock {
    #[inline]
    fn drop(&mut self) {
        IN_MPI.store(false, Ordering::Release);
    }
}

fn c_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

// ---- lifecycle ------------------------------------------------------------------------

enum State {
    Never,
    Live(Weak<Mpi>),
    Finalized,
}

static STATE: Mutex<State> = Mutex::new(State::Never);

/// The initialized MPI library. Obtained with [`Mpi::init`]; shared (`Arc`) by every
/// transport, control plane and communicator made from it; `MPI_Finalize` runs when
/// the last of them is dropped.
#[derive(Debug)]
pub struct Mpi {
    rank: usize,
    size: usize,
    flavor: Flavor,
    version: String,
    thread_level: i32,
}

impl Mpi {
    /// Initializes MPI (`MPI_Init_thread`, `MPI_THREAD_SERIALIZED`) or returns the
    /// live instance. Fails after the last instance was dropped (MPI cannot be
    /// initialized twice) and in a build without MPI.
    pub fn init() -> Result<Arc<Mpi>, MpiError> {
        if !crate::AVAILABLE {
            return Err(MpiError::NotBuilt);
        }
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        match &*state {
            State::Live(weak) => {
                if let Some(mpi) = weak.upgrade() {
                    return Ok(mpi);
                }
                return Err(MpiError::Finalized);
            }
            State::Finalized => return Err(MpiError::Finalized),
            State::Never => {}
        }
        let lock = CallLock::take();
        // SAFETY: plain queries, allowed before MPI_Init; serialized by the lock.
        if unsafe { ffi::ngm_finalized() } != 0 {
            return Err(MpiError::Finalized);
        }
        // SAFETY: as above.
        if unsafe { ffi::ngm_initialized() } != 0 {
            return Err(MpiError::ForeignInit);
        }
        let mut provided: c_int = 0;
        // SAFETY: MPI has not been initialized (checked above, under the state mutex,
        // so no other thread can race us); `provided` is a valid out pointer.
        let rc = unsafe { ffi::ngm_init(ffi::THREAD_SERIALIZED, &mut provided) };
        lock.check("MPI_Init_thread", rc)?;
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: MPI is initialized; comm index 0 is MPI_COMM_WORLD in the shim.
        lock.check("MPI_Comm_rank", unsafe { ffi::ngm_comm_rank(0, &mut rank) })?;
        // SAFETY: as above.
        lock.check("MPI_Comm_size", unsafe { ffi::ngm_comm_size(0, &mut size) })?;
        // SAFETY: a pure compile-time fact of the shim.
        let flavor = match unsafe { ffi::ngm_flavor() } {
            1 => Flavor::OpenMpi,
            2 => Flavor::Mpich,
            _ => Flavor::Other,
        };
        let mut buf = [0 as c_char; 1024];
        // SAFETY: the shim writes at most `cap` bytes (NUL included) into `buf`.
        unsafe { ffi::ngm_library_version(buf.as_mut_ptr(), buf.len() as c_int) };
        drop(lock);
        let mpi = Arc::new(Mpi {
            rank: rank as usize,
            size: size as usize,
            flavor,
            version: c_string(&buf),
            thread_level: provided,
        });
        *state = State::Live(Arc::downgrade(&mpi));
        Ok(mpi)
    }

    /// [`Mpi::init`], but only inside a job an MPI launcher started
    /// ([`launched_by_mpi`]): what `-t mpi` uses, so that a binary run by hand gets
    /// an error naming the fix instead of a one-rank singleton job.
    pub fn init_under_launcher() -> Result<Arc<Mpi>, MpiError> {
        if !crate::AVAILABLE {
            return Err(MpiError::NotBuilt);
        }
        if !launched_by_mpi() {
            return Err(MpiError::NoLauncher);
        }
        Mpi::init()
    }

    /// The live instance, if MPI is initialized and not finalized.
    pub fn live() -> Option<Arc<Mpi>> {
        match &*STATE.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Live(weak) => weak.upgrade(),
            _ => None,
        }
    }

    /// `MPI_Abort(MPI_COMM_WORLD, code)`: ends every rank of the job (the launcher
    /// reports it). For a rank that failed while others may wait for it: finalizing
    /// instead could wait forever.
    pub fn abort(&self, code: i32) -> ! {
        // No lock: another thread may be stuck inside MPI holding it, and aborting
        // is exactly what must still work then.
        // SAFETY: MPI is initialized while `self` lives; MPI_Abort may be called
        // from any thread and does not return on success.
        unsafe { ffi::ngm_abort(code) };
        std::process::exit(code)
    }

    /// Rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Size of `MPI_COMM_WORLD`.
    pub fn size(&self) -> usize {
        self.size
    }
    /// The library family.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }
    /// The thread level MPI granted, 0 (`MPI_THREAD_SINGLE`) to 3 (`MULTIPLE`); 2
    /// (`SERIALIZED`) is asked for. Below 2, calls must also stay on the thread that
    /// initialized MPI, which ngauge (one thread per rank) does.
    pub fn thread_level(&self) -> i32 {
        self.thread_level
    }
    /// `MPI_Get_library_version`, first line.
    pub fn library_version(&self) -> &str {
        self.version.lines().next().unwrap_or_default()
    }

    /// `MPI_Wtime()`: seconds since an arbitrary origin, for comparison with the
    /// RDTSCP clock.
    pub fn wtime(&self) -> f64 {
        let _lock = CallLock::take();
        // SAFETY: MPI is initialized while `self` lives; serialized by the lock.
        unsafe { ffi::ngm_wtime() }
    }

    /// `MPI_Wtick()`: the resolution of [`Mpi::wtime`] in seconds.
    pub fn wtick(&self) -> f64 {
        let _lock = CallLock::take();
        // SAFETY: as in `wtime`.
        unsafe { ffi::ngm_wtick() }
    }

    /// Requests started and not yet completed, over every communicator (tests use it
    /// to check that nothing leaks).
    pub fn requests_in_flight(&self) -> usize {
        let _lock = CallLock::take();
        // SAFETY: reads a counter of the shim; serialized by the lock.
        unsafe { ffi::ngm_requests_in_flight() }.max(0) as usize
    }

    /// A private duplicate of `MPI_COMM_WORLD` (collective: every rank calls it).
    pub(crate) fn dup_world(self: &Arc<Self>) -> Result<Comm, MpiError> {
        let lock = CallLock::take();
        let mut index: c_int = -1;
        // SAFETY: MPI is initialized while `self` lives; `index` is a valid out
        // pointer; serialized by the lock.
        lock.check("MPI_Comm_dup", unsafe {
            ffi::ngm_comm_dup_world(&mut index)
        })?;
        Ok(Comm {
            index,
            _mpi: Arc::clone(self),
        })
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = CallLock::take();
        // SAFETY: the last handle on the library is going away: every Comm holds an
        // Arc<Mpi>, so all communicators were freed (and their requests completed or
        // leaked deliberately) before this point.
        unsafe { ffi::ngm_finalize() };
        *state = State::Finalized;
    }
}

/// A communicator of the shim (a dup of `MPI_COMM_WORLD`); keeps MPI alive and frees
/// itself on drop.
#[derive(Debug)]
pub(crate) struct Comm {
    pub(crate) index: c_int,
    _mpi: Arc<Mpi>,
}

impl Comm {
    pub(crate) fn mpi(&self) -> &Arc<Mpi> {
        &self._mpi
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let _lock = CallLock::take();
        // SAFETY: the index came from ngm_comm_dup_world and is freed once, here; MPI
        // is still initialized because `_mpi` is dropped after this body runs.
        unsafe { ffi::ngm_comm_free(self.index) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_detection_reads_open_mpi_and_hydra_variables() {
        assert!(launched_by_mpi_from(|n| n == "OMPI_COMM_WORLD_SIZE"));
        assert!(launched_by_mpi_from(|n| n == "PMI_RANK"));
        assert!(!launched_by_mpi_from(|n| n == "SLURM_PROCID"));
        assert!(!launched_by_mpi_from(|_| false));
    }

    #[test]
    fn c_strings_stop_at_nul_and_trim() {
        let buf: Vec<c_char> = b"Open MPI v4.1.4 \0garbage"
            .iter()
            .map(|&b| b as c_char)
            .collect();
        assert_eq!(c_string(&buf), "Open MPI v4.1.4");
    }

    #[test]
    fn the_call_lock_is_exclusive() {
        let first = CallLock::take();
        let other = std::thread::spawn(|| {
            let _second = CallLock::take();
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!other.is_finished());
        drop(first);
        other.join().unwrap();
    }
}
