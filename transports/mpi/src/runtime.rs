//! MPI's lifecycle (one `MPI_Init_thread`, one `MPI_Finalize`), the rule that only
//! the thread that initialized MPI calls it, and error translation.

use crate::ffi;
use std::os::raw::{c_char, c_int};
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
    /// The shim could not be chosen or loaded (`NGAUGE_MPI` names an MPI this
    /// build lacks, or the MPI library is gone since the build).
    #[error("MPI shim: {0}")]
    Shim(String),
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
    /// MPI was called from a thread other than the one that initialized it.
    #[error("MPI used from a thread other than the one that initialized it")]
    WrongThread,
    /// `NGAUGE_MPI_THREAD_LEVEL` names no thread level.
    #[error("NGAUGE_MPI_THREAD_LEVEL={0:?}: use single, funneled, serialized or multiple")]
    BadThreadLevel(String),
    /// A one-sided operation asked for bytes outside the window or its origin
    /// buffer, or touched the buffers while operations on them were pending.
    #[error("{op}: {detail}")]
    Window {
        /// The MPI function.
        op: &'static str,
        /// What was wrong.
        detail: String,
    },
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

// ---- the MPI thread ------------------------------------------------------------------

thread_local! {
    /// True on the thread that initialized MPI: the only one that may call it.
    static ON_MPI_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Proof that the current thread may call into MPI (and the shim's tables).
///
/// Every call into MPI comes from the thread that initialized it. That is what
/// `MPI_THREAD_SINGLE`/`FUNNELED` require, and it is cheaper than any lock: Open MPI
/// 4.1 adds about 65 ns to a shared-memory 1-byte latency (0.24 -> 0.30 us here) as
/// soon as a thread level above `SINGLE` is granted, and a C benchmark calling
/// `MPI_Init` runs at `SINGLE`. [`MpiTransport`](crate::MpiTransport) is not `Send`
/// and is made on the MPI thread, so its calls need no check
/// ([`Caller::take`]); the control plane must be `Send` and checks every call
/// ([`Caller::checked`]).
pub(crate) struct Caller(std::marker::PhantomData<*const ()>);

impl Caller {
    /// For objects that cannot leave the MPI thread (checked at their construction).
    #[inline]
    pub(crate) fn take() -> Caller {
        debug_assert!(ON_MPI_THREAD.with(|t| t.get()), "MPI called off its thread");
        Caller(std::marker::PhantomData)
    }

    /// Fails unless this is the thread that initialized MPI.
    pub(crate) fn checked() -> Result<Caller, MpiError> {
        if ON_MPI_THREAD.with(|t| t.get()) {
            Ok(Caller(std::marker::PhantomData))
        } else {
            Err(MpiError::WrongThread)
        }
    }

    /// Turns a shim return code into a `Result`.
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
        // into `buf`, which is 512 bytes long; we are on the MPI thread.
        unsafe { ffi::ngm_error_string(code, buf.as_mut_ptr(), buf.len() as c_int) };
        MpiError::Call {
            op,
            code,
            message: c_string(&buf),
        }
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

/// `NGAUGE_MPI_THREAD_LEVEL` as the shim's level code (default `single`).
fn thread_level_from(value: Option<&str>) -> Result<c_int, MpiError> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("single") => Ok(0),
        Some("funneled") => Ok(1),
        Some("serialized") => Ok(2),
        Some("multiple") => Ok(3),
        Some(other) => Err(MpiError::BadThreadLevel(other.to_string())),
    }
}

/// A [`Caller`], or a panic naming the misuse.
fn on_mpi_thread() -> Caller {
    Caller::checked().expect("MPI used off the thread that initialized it")
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
    /// Initializes MPI (`MPI_Init_thread` at `MPI_THREAD_SINGLE`, like `MPI_Init`;
    /// `NGAUGE_MPI_THREAD_LEVEL=funneled|serialized|multiple` asks for more, to
    /// measure what it costs) or returns the live instance. The calling thread
    /// becomes the only one that may use MPI. Fails after the last instance was
    /// dropped (MPI cannot be initialized twice), on another thread than the one
    /// that initialized it, and in a build without MPI.
    pub fn init() -> Result<Arc<Mpi>, MpiError> {
        Mpi::init_at(std::env::var("NGAUGE_MPI_THREAD_LEVEL").ok().as_deref())
    }

    /// [`Mpi::init`] with the value of `NGAUGE_MPI_THREAD_LEVEL` given.
    fn init_at(level: Option<&str>) -> Result<Arc<Mpi>, MpiError> {
        if !crate::AVAILABLE {
            return Err(MpiError::NotBuilt);
        }
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        match &*state {
            State::Live(weak) => {
                Caller::checked()?;
                if let Some(mpi) = weak.upgrade() {
                    return Ok(mpi);
                }
                return Err(MpiError::Finalized);
            }
            State::Finalized => return Err(MpiError::Finalized),
            State::Never => {}
        }
        // This thread becomes the MPI thread only once MPI is up (below): a failed
        // init must not leave it marked.
        let caller = Caller(std::marker::PhantomData);
        let required = thread_level_from(level)?;
        ffi::load().map_err(MpiError::Shim)?;
        // SAFETY: plain queries, allowed before MPI_Init; no other thread calls MPI
        // (the state mutex is held and MPI is not initialized).
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
        let rc = unsafe { ffi::ngm_init(required, &mut provided) };
        caller.check("MPI_Init_thread", rc)?;
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: MPI is initialized; comm index 0 is MPI_COMM_WORLD in the shim.
        caller.check("MPI_Comm_rank", unsafe { ffi::ngm_comm_rank(0, &mut rank) })?;
        // SAFETY: as above.
        caller.check("MPI_Comm_size", unsafe { ffi::ngm_comm_size(0, &mut size) })?;
        // SAFETY: a pure compile-time fact of the shim.
        let flavor = match unsafe { ffi::ngm_flavor() } {
            1 => Flavor::OpenMpi,
            2 => Flavor::Mpich,
            _ => Flavor::Other,
        };
        let mut buf = [0 as c_char; 1024];
        // SAFETY: the shim writes at most `cap` bytes (NUL included) into `buf`.
        unsafe { ffi::ngm_library_version(buf.as_mut_ptr(), buf.len() as c_int) };
        let mpi = Arc::new(Mpi {
            rank: rank as usize,
            size: size as usize,
            flavor,
            version: c_string(&buf),
            thread_level: provided,
        });
        *state = State::Live(Arc::downgrade(&mpi));
        ON_MPI_THREAD.with(|t| t.set(true));
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
    ///
    /// Off the MPI thread at a thread level below `MPI_THREAD_MULTIPLE`, where MPI
    /// may not be called from there, it ends only this process
    /// (`std::process::exit`); the launcher then ends the job.
    ///
    /// Waits `ABORT_GRACE` (200 ms) first, with stdout flushed: `MPI_Abort` takes the
    /// launcher's output forwarding down with the job, and MPICH's hydra dropped what
    /// the rank had written just before (the "lost rank" line of a liveness failure
    /// in a CI run, the in-flight warning in 1 of 6 runs). The job is ending anyway.
    pub fn abort(&self, code: i32) -> ! {
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::thread::sleep(ABORT_GRACE);
        if Caller::checked().is_ok() || self.thread_level == 3 {
            // SAFETY: MPI is initialized while `self` lives, and this thread may call
            // it: it is the thread that initialized MPI, or MPI granted
            // MPI_THREAD_MULTIPLE. MPI_Abort does not return on success.
            unsafe { ffi::ngm_abort(code) };
        }
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
    /// The thread level MPI granted, 0 (`MPI_THREAD_SINGLE`) to 3 (`MULTIPLE`).
    pub fn thread_level(&self) -> i32 {
        self.thread_level
    }
    /// `MPI_Get_library_version`, first line.
    pub fn library_version(&self) -> &str {
        self.version.lines().next().unwrap_or_default()
    }

    /// `MPI_Wtime()`: seconds since an arbitrary origin, for comparison with the
    /// RDTSCP clock.
    ///
    /// # Panics
    /// Off the thread that initialized MPI (as do [`Mpi::wtick`] and
    /// [`Mpi::requests_in_flight`]).
    pub fn wtime(&self) -> f64 {
        let _caller = on_mpi_thread();
        // SAFETY: MPI is initialized while `self` lives; we are on its thread.
        unsafe { ffi::ngm_wtime() }
    }

    /// `MPI_Wtick()`: the resolution of [`Mpi::wtime`] in seconds.
    pub fn wtick(&self) -> f64 {
        let _caller = on_mpi_thread();
        // SAFETY: as in `wtime`.
        unsafe { ffi::ngm_wtick() }
    }

    /// Requests started and not yet completed, over every communicator (tests use it
    /// to check that nothing leaks).
    pub fn requests_in_flight(&self) -> usize {
        let _caller = on_mpi_thread();
        // SAFETY: reads a counter of the shim, on the MPI thread.
        unsafe { ffi::ngm_requests_in_flight() }.max(0) as usize
    }

    /// `MPI_COMM_WORLD` itself (fails off the MPI thread).
    pub(crate) fn world(self: &Arc<Self>) -> Result<Comm, MpiError> {
        Caller::checked()?;
        Ok(Comm {
            index: 0,
            _mpi: Arc::clone(self),
        })
    }
}

/// The exit status of a job aborted because requests were left in flight.
pub(crate) const ABORT_IN_FLIGHT: i32 = 3;
/// How long a rank that aborts the job waits first, so that the launcher forwards
/// what the rank wrote before the abort ends the forwarding.
const ABORT_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

impl Drop for Mpi {
    fn drop(&mut self) {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        *state = State::Finalized;
        if Caller::checked().is_err() {
            eprintln!("ngauge-mpi: warning: MPI not finalized: its last handle was dropped on another thread");
            return;
        }
        // SAFETY: reads a counter of the shim, on the MPI thread.
        let in_flight = unsafe { ffi::ngm_requests_in_flight() };
        if in_flight > 0 {
            // A request left behind (a transport dropped with requests pending, a
            // control-plane collective that timed out) may never complete, and
            // MPI_Finalize could wait for it forever: end the job instead.
            // One write, not eprintln!'s several: the launcher forwards what it has
            // read when MPI_Abort takes the job down, and under MPICH's hydra a
            // message written in pieces arrived cut after its first pieces
            // ("ngauge-mpi: error: 1").
            let message = format!(
                "ngauge-mpi: error: {in_flight} MPI request(s) still in flight at the end; \
                 aborting the job instead of calling MPI_Finalize, which could wait for them\n"
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), message.as_bytes());
            // MPI is not finalized yet and this is its thread (checked above).
            self.abort(ABORT_IN_FLIGHT);
        }
        // SAFETY: the last handle on the library is going away: every Comm holds an
        // Arc<Mpi>, so no transport or control plane is left, and no request is in
        // flight (checked above); we are on the MPI thread.
        unsafe { ffi::ngm_finalize() };
    }
}

/// A communicator of the shim: always `MPI_COMM_WORLD` (index 0; ngauge makes no
/// other, see the crate docs), which is never freed. Keeps MPI alive.
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
    fn only_the_mpi_thread_may_call() {
        assert!(matches!(Caller::checked(), Err(MpiError::WrongThread)));
        ON_MPI_THREAD.with(|t| t.set(true));
        assert!(Caller::checked().is_ok());
        let other = std::thread::spawn(|| Caller::checked().is_err());
        assert!(other.join().unwrap());
        ON_MPI_THREAD.with(|t| t.set(false));
    }

    #[test]
    fn a_failed_init_leaves_the_thread_unmarked() {
        // Fails before any MPI call (and in a build without MPI, earlier still).
        assert!(Mpi::init_at(Some("many")).is_err());
        assert!(
            matches!(Caller::checked(), Err(MpiError::WrongThread)),
            "a failed init marked this thread as the MPI thread"
        );
    }

    #[test]
    fn thread_levels_parse() {
        assert_eq!(thread_level_from(None).unwrap(), 0);
        assert_eq!(thread_level_from(Some("serialized")).unwrap(), 2);
        assert_eq!(thread_level_from(Some("MULTIPLE")).unwrap(), 3);
        assert!(matches!(
            thread_level_from(Some("many")),
            Err(MpiError::BadThreadLevel(_))
        ));
    }
}
