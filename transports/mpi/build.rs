//! Compiles the C shim (`shim/ngauge_mpi.c`) against the MPI library found, and links
//! that library.
//!
//! Where MPI comes from, in order: the compiler wrapper named by `MPICC` (default
//! `mpicc`) asked with Open MPI's `--showme:compile` / `--showme:link`, then with
//! MPICH's `-show`; then pkg-config (`ompi-c`, `mpich`, `mpi`). When none answers,
//! the crate is built as a stub (cfg `ngauge_mpi_stub`): everything compiles, and
//! `Mpi::init` reports that this build has no MPI, so a workspace build never needs an
//! MPI installation.
//!
//! Run-time search paths the wrapper or pkg-config asks for (`-Wl,-rpath,DIR`; an MPI
//! under `/opt` needs them unless `LD_LIBRARY_PATH` names it) are passed on:
//! `cargo:rustc-link-arg` for this package's own binaries and tests, and the links
//! metadata `rpath` (`DEP_NGAUGE_MPI_SHIM_RPATH`, directories joined like `PATH`),
//! which the top-level `build.rs` turns into link arguments of `ngauge` (a library's
//! link arguments do not reach the binaries that depend on it).
//!
//! The script reruns when `MPICC`, `MPIEXEC`, `PATH`, `PKG_CONFIG_PATH` or
//! `PKG_CONFIG_LIBDIR` change, when the wrapper found changes, and, in a stub
//! build, when a directory of `PATH` changes (an MPI installed later is found).
//!
//! Also exported to the crate (for its tests and `info`): `NGAUGE_MPI_FLAVOR`
//! (`openmpi`, `mpich`, `unknown`, `none`), `NGAUGE_MPI_MPICC`, and
//! `NGAUGE_MPIEXEC`, the launcher that belongs to the library linked (override with
//! `MPIEXEC`).

#[path = "build/flags.rs"]
mod flags;

use flags::{parse, Flags};
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_wrapper(mpicc: &str) -> Option<(Flags, &'static str)> {
    let mut flags = Flags::default();
    if let (Some(compile), Some(link)) = (
        run(mpicc, &["--showme:compile"]),
        run(mpicc, &["--showme:link"]),
    ) {
        parse(&compile, &mut flags);
        parse(&link, &mut flags);
        return Some((flags, "openmpi"));
    }
    let show = run(mpicc, &["-show"])?;
    // The first word is the underlying compiler.
    let rest = show.split_once(char::is_whitespace).map_or("", |(_, r)| r);
    parse(rest, &mut flags);
    let flavor = if flags.libs.iter().any(|l| l.contains("mpich")) || show.contains("mpich") {
        "mpich"
    } else {
        "unknown"
    };
    Some((flags, flavor))
}

fn from_pkg_config() -> Option<(Flags, &'static str)> {
    for (name, flavor) in [
        ("ompi-c", "openmpi"),
        ("mpich", "mpich"),
        ("mpi", "unknown"),
    ] {
        if let (Some(cflags), Some(libs)) = (
            run("pkg-config", &["--cflags", name]),
            run("pkg-config", &["--libs", name]),
        ) {
            let mut flags = Flags::default();
            parse(&cflags, &mut flags);
            parse(&libs, &mut flags);
            return Some((flags, flavor));
        }
    }
    None
}

fn on_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| name.into());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The launcher that belongs to the library: its name next to the wrapper's.
fn mpiexec_for(flavor: &str) -> String {
    if let Ok(explicit) = std::env::var("MPIEXEC") {
        return explicit;
    }
    let candidates: &[&str] = match flavor {
        "openmpi" => &["mpirun.openmpi", "mpiexec.openmpi", "mpirun"],
        "mpich" => &["mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "mpiexec"],
        _ => &["mpiexec", "mpirun"],
    };
    candidates
        .iter()
        .find_map(|c| on_path(c))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| candidates[0].to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=shim/ngauge_mpi.c");
    println!("cargo:rerun-if-changed=shim/ngauge_mpi.h");
    println!("cargo:rerun-if-changed=shim/ngauge_mpi_rma.c");
    println!("cargo:rerun-if-changed=shim/ngauge_mpi_rma.h");
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-env-changed=MPIEXEC");
    println!("cargo:rerun-if-env-changed=NGAUGE_MPI_STUB");
    println!("cargo:rerun-if-changed=build/flags.rs");
    for var in [
        "PATH",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(ngauge_mpi_stub)");

    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let found = if std::env::var_os("NGAUGE_MPI_STUB").is_some() {
        None
    } else {
        from_wrapper(&mpicc).or_else(from_pkg_config)
    };
    let Some((flags, flavor)) = found else {
        println!(
            "cargo:warning=ngauge-mpi: no MPI found (tried {mpicc} --showme, {mpicc} -show, \
             pkg-config); building without MPI. Install libopenmpi-dev or libmpich-dev, or \
             set MPICC."
        );
        // Installing MPI adds its wrapper to a directory of PATH: look again then.
        for dir in std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .filter(|d| d.is_dir())
        {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
        println!("cargo:rustc-cfg=ngauge_mpi_stub");
        println!("cargo:rustc-env=NGAUGE_MPI_FLAVOR=none");
        println!("cargo:rustc-env=NGAUGE_MPI_MPICC=");
        println!("cargo:rustc-env=NGAUGE_MPIEXEC=");
        return;
    };

    let mut build = cc::Build::new();
    build
        .file("shim/ngauge_mpi.c")
        .file("shim/ngauge_mpi_rma.c")
        .include("shim")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true);
    for dir in &flags.includes {
        build.include(dir);
    }
    for (name, value) in &flags.defines {
        build.define(name, value.as_deref());
    }
    build.compile("ngauge_mpi_shim");

    for dir in &flags.lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    for lib in &flags.libs {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    for dir in &flags.rpaths {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    if let Ok(joined) = std::env::join_paths(&flags.rpaths) {
        println!("cargo:rpath={}", joined.to_string_lossy());
    }
    if let Some(wrapper) = on_path(&mpicc) {
        println!("cargo:rerun-if-changed={}", wrapper.display());
    }
    println!("cargo:rustc-env=NGAUGE_MPI_FLAVOR={flavor}");
    println!("cargo:rustc-env=NGAUGE_MPI_MPICC={mpicc}");
    println!("cargo:rustc-env=NGAUGE_MPIEXEC={}", mpiexec_for(flavor));
}
