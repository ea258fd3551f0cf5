//! Running the binary under the launcher of the MPI this run uses (cargo feature
//! `mpi`; `ngauge_mpi::shim()`: `NGAUGE_MPI` picks among the MPIs the build found),
//! for the tests of commands that also run over MPI.
#![allow(dead_code)]

use std::process::{Command, Output};
use std::time::Duration;

/// `mpiexec -n np ngauge args` for the MPI this run uses, with what Open MPI
/// needs here (root, more ranks than cores).
pub fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut cmd = Command::new(ngauge_mpi::shim().mpiexec);
    if ngauge_mpi::shim().flavor == "openmpi" {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .arg("--oversubscribe");
    }
    cmd.arg("-n")
        .arg(np.to_string())
        .arg(env!("CARGO_BIN_EXE_ngauge"))
        .args(args);
    cmd
}

/// Runs `cmd`, killing it after `limit` so that a hung job fails the test.
pub fn run(mut cmd: Command, limit: Duration) -> Output {
    let child = super::spawn_piped(&mut cmd);
    super::output_within(child, limit).unwrap_or_else(|out| {
        panic!(
            "{cmd:?} hung for {limit:?}; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// True (after [`super::skip`] said so where the user sees it) when ngauge-mpi has
/// no MPI for this run (none built, or not the one `NGAUGE_MPI` names) and the test
/// must be skipped; a failure instead when `NGAUGE_REQUIRE_MPI=1` (set by
/// `scripts/test` where it installed MPI) or `CI=true` says MPI must be there.
pub fn skip(test: &str) -> bool {
    let Err(why) = ngauge_mpi::shims::selected() else {
        return false;
    };
    super::skip(
        test,
        super::Lack::InstalledOrRequired("NGAUGE_REQUIRE_MPI"),
        why,
    );
    true
}
