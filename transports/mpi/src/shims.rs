//! The MPI shims this build carries, one shared object per MPI library `build.rs`
//! found, and the choice of the one a process loads.
//!
//! One build serves every MPI installed: the launcher that started the process
//! tells which library its ranks must use (Open MPI's `mpirun` sets
//! `OMPI_COMM_WORLD_SIZE`, MPICH's Hydra `PMI_RANK`/`PMI_SIZE`), and
//! `NGAUGE_MPI=openmpi|mpich` says it where the launcher does not (`srun
//! --mpi=pmix` sets only PMIx's variables, which both understand). Without either,
//! the first shim is used (`MPICC`'s, else Open MPI's, else MPICH's).

/// One MPI library this build has a shim for.
#[derive(Debug)]
pub struct Shim {
    /// `openmpi`, `mpich`, `unknown` (a wrapper of neither family), or `none`.
    pub flavor: &'static str,
    /// The compiler wrapper that described the library (empty: pkg-config).
    pub mpicc: &'static str,
    /// The launcher that belongs to the library (`mpirun.openmpi`,
    /// `mpiexec.hydra`, ...; `MPIEXEC` at build time overrides it).
    pub mpiexec: &'static str,
    /// The shared object, compiled and linked against the library.
    pub(crate) object: &'static [u8],
}

impl Shim {
    /// What [`crate::shim`] names when there is no shim to use.
    pub const NONE: Shim = Shim {
        flavor: "none",
        mpicc: "",
        mpiexec: "",
        object: &[],
    };
}

include!(concat!(env!("OUT_DIR"), "/shims.rs"));

/// The environment variable that names the MPI family to load.
pub const SELECT_VAR: &str = "NGAUGE_MPI";

/// Why no shim could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The build found no MPI library.
    #[error(
        "this build carries no MPI shim (build.rs found no mpicc or pkg-config MPI; set MPICC)"
    )]
    NoneBuilt,
    /// `NGAUGE_MPI` names a family this build has no shim for.
    #[error("NGAUGE_MPI={asked:?}: this build has a shim for {built} only")]
    NotBuilt {
        /// What `NGAUGE_MPI` said.
        asked: String,
        /// The families built, comma-separated.
        built: String,
    },
}

/// The shims this build carries, in order of preference.
pub fn built() -> &'static [Shim] {
    SHIMS
}

/// The shim this process uses (the rule in the module's documentation), from
/// `built` and the environment lookup `var`.
pub fn select_from(
    built: &'static [Shim],
    var: impl Fn(&str) -> Option<String>,
) -> Result<&'static Shim, SelectError> {
    let first = built.first().ok_or(SelectError::NoneBuilt)?;
    let of = |flavor: &str| built.iter().find(|s| s.flavor == flavor);
    if let Some(asked) = var(SELECT_VAR).filter(|v| !v.is_empty()) {
        return of(&asked.to_ascii_lowercase()).ok_or_else(|| SelectError::NotBuilt {
            asked,
            built: built
                .iter()
                .map(|s| s.flavor)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let launcher = if var("OMPI_COMM_WORLD_SIZE").is_some() {
        Some("openmpi")
    } else if var("PMI_RANK").is_some() || var("PMI_SIZE").is_some() {
        Some("mpich")
    } else {
        None
    };
    Ok(launcher.and_then(of).unwrap_or(first))
}

/// [`select_from`] over this build's shims and the process environment, decided
/// once.
pub fn selected() -> Result<&'static Shim, SelectError> {
    static CHOICE: std::sync::OnceLock<Result<&'static Shim, SelectError>> =
        std::sync::OnceLock::new();
    CHOICE
        .get_or_init(|| select_from(built(), |name| std::env::var(name).ok()))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    static TWO: [Shim; 2] = [
        Shim {
            flavor: "openmpi",
            mpicc: "mpicc.openmpi",
            mpiexec: "mpirun.openmpi",
            object: &[],
        },
        Shim {
            flavor: "mpich",
            mpicc: "mpicc.mpich",
            mpiexec: "mpiexec.hydra",
            object: &[],
        },
    ];

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_launcher_picks_the_library_of_its_family() {
        let ompi = select_from(&TWO, env(&[("OMPI_COMM_WORLD_SIZE", "2")])).unwrap();
        assert_eq!(ompi.flavor, "openmpi");
        let hydra = select_from(&TWO, env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")])).unwrap();
        assert_eq!(hydra.flavor, "mpich");
    }

    #[test]
    fn ngauge_mpi_overrides_the_launcher_and_a_family_not_built_is_refused() {
        let chosen = select_from(
            &TWO,
            env(&[("NGAUGE_MPI", "MPICH"), ("OMPI_COMM_WORLD_SIZE", "2")]),
        )
        .unwrap();
        assert_eq!(chosen.flavor, "mpich");
        let err = select_from(&TWO, env(&[("NGAUGE_MPI", "intel")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "NGAUGE_MPI=\"intel\": this build has a shim for openmpi, mpich only"
        );
    }

    #[test]
    fn without_a_hint_the_first_shim_is_used_and_without_shims_none() {
        let chosen = select_from(&TWO, env(&[("PMIX_RANK", "0")])).unwrap();
        assert_eq!(chosen.flavor, "openmpi");
        // Hydra started us, but only Open MPI's shim exists: that one still loads
        // (a one-rank job the transport reports, as before).
        let chosen = select_from(&TWO[..1], env(&[("PMI_RANK", "0")])).unwrap();
        assert_eq!(chosen.flavor, "openmpi");
        assert_eq!(
            select_from(&[], env(&[])).unwrap_err(),
            SelectError::NoneBuilt
        );
    }
}
