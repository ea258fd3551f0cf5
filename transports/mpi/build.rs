//! Compiles the C shim (`shim/ngauge_mpi.c`) into one shared object per MPI library
//! found, each linked against its library; the crate carries them all and loads one
//! at run time (`src/shims.rs`), so one build runs under Open MPI's and MPICH's
//! launchers alike and switching MPI rebuilds nothing.
//!
//! Where MPI comes from: the compiler wrapper named by `MPICC` when it is set (only
//! that one); otherwise every one of `mpicc.openmpi`, `mpicc.mpich` and `mpicc` that
//! answers, one per MPI family (Debian's `mpicc` is one of the other two). A wrapper
//! is asked with Open MPI's `--showme:compile` / `--showme:link`, then with MPICH's
//! `-show`. Without a wrapper, pkg-config (`ompi-c`, `mpich`, `mpi`). When nothing
//! answers, the crate carries no shim: everything compiles, and `Mpi::init` reports
//! that this build has no MPI, so a workspace build never needs an MPI installation.
//!
//! Run-time search paths the wrapper or pkg-config asks for (`-Wl,-rpath,DIR`; an MPI
//! under `/opt` needs them unless `LD_LIBRARY_PATH` names it) go into the shared
//! object, which finds its MPI library through them wherever ngauge runs.
//!
//! The script reruns when `MPICC`, `MPIEXEC`, `PATH`, `PKG_CONFIG_PATH` or
//! `PKG_CONFIG_LIBDIR` change, when a wrapper found changes, and, while a wrapper
//! asked is missing, when a directory of `PATH` changes (an MPI installed later is
//! found).
//!
//! Written for the crate: `$OUT_DIR/shims.rs`, the table of shims (MPI family,
//! wrapper, the launcher that belongs to the library, the shared object's bytes);
//! `MPIEXEC` at build time names the launcher of every shim.

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
    for file in [
        "shim/ngauge_mpi.c",
        "shim/ngauge_mpi.h",
        "shim/ngauge_mpi_rma.c",
        "shim/ngauge_mpi_rma.h",
        "build/flags.rs",
    ] {
        println!("cargo:rerun-if-changed={file}");
    }
    for var in [
        "MPICC",
        "MPIEXEC",
        "NGAUGE_MPI_STUB",
        "PATH",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let found = if std::env::var_os("NGAUGE_MPI_STUB").is_some() {
        Vec::new()
    } else {
        libraries()
    };
    // Installing an MPI adds its wrapper to a directory of PATH: while a wrapper
    // asked is missing, look again when one of them changes (not otherwise: a
    // PATH directory changes for many reasons, and each rerun rebuilds).
    if wrappers().iter().any(|w| on_path(w).is_none()) {
        for dir in std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .filter(|d| d.is_dir())
        {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    if found.is_empty() {
        println!(
            "cargo:warning=ngauge-mpi: no MPI found (tried {} with --showme and -show, \
             pkg-config); building without MPI. Install libopenmpi-dev or libmpich-dev, or \
             set MPICC.",
            wrappers().join(", ")
        );
    }
    let mut table = String::from(
        "/// The shims this build carries, in order of preference.\n\
         pub(crate) const SHIMS: &[crate::shims::Shim] = &[\n",
    );
    for library in &found {
        let object = out_dir.join(format!("libngauge_mpi_{}.so", library.flavor));
        compile_shim(&library.flags, &object);
        if let Some(wrapper) = library.mpicc.as_deref().and_then(on_path) {
            println!("cargo:rerun-if-changed={}", wrapper.display());
        }
        table.push_str(&format!(
            "    crate::shims::Shim {{ flavor: {:?}, mpicc: {:?}, mpiexec: {:?}, \
             object: include_bytes!({:?}) }},\n",
            library.flavor,
            library.mpicc.as_deref().unwrap_or(""),
            mpiexec_for(library.flavor),
            object.display().to_string(),
        ));
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("shims.rs"), table).expect("write shims.rs");
}

/// One MPI library found at build time.
struct Library {
    flavor: &'static str,
    /// The wrapper that described it (none for pkg-config).
    mpicc: Option<String>,
    flags: Flags,
}

/// The wrappers asked, in order of preference: `MPICC` alone when set.
fn wrappers() -> Vec<String> {
    match std::env::var("MPICC") {
        Ok(mpicc) if !mpicc.is_empty() => vec![mpicc],
        _ => ["mpicc.openmpi", "mpicc.mpich", "mpicc"]
            .map(String::from)
            .to_vec(),
    }
}

/// Every MPI library found, one per family, the first wrapper of a family winning.
fn libraries() -> Vec<Library> {
    let mut found: Vec<Library> = Vec::new();
    for mpicc in wrappers() {
        if let Some((flags, flavor)) = from_wrapper(&mpicc) {
            if found.iter().all(|l| l.flavor != flavor) {
                found.push(Library {
                    flavor,
                    mpicc: Some(mpicc),
                    flags,
                });
            }
        }
    }
    if found.is_empty() {
        if let Some((flags, flavor)) = from_pkg_config() {
            found.push(Library {
                flavor,
                mpicc: None,
                flags,
            });
        }
    }
    found
}

/// Compiles the shim's C files into the shared object `object`, linked against the
/// MPI library of `flags` with its run-time search paths; `-z defs`: a symbol the
/// library does not define fails here, not at load time.
fn compile_shim(flags: &Flags, object: &Path) {
    let mut build = cc::Build::new();
    build
        .include("shim")
        .opt_level(2)
        .pic(true)
        .warnings(true)
        .extra_warnings(true)
        .cargo_metadata(false);
    for dir in &flags.includes {
        build.include(dir);
    }
    for (name, value) in &flags.defines {
        build.define(name, value.as_deref());
    }
    let mut cmd = build.get_compiler().to_command();
    cmd.args([
        "-shared",
        "shim/ngauge_mpi.c",
        "shim/ngauge_mpi_rma.c",
        "-o",
    ])
    .arg(object)
    .arg("-Wl,-z,defs");
    for dir in &flags.lib_dirs {
        cmd.arg(format!("-L{}", dir.display()));
    }
    for lib in &flags.libs {
        cmd.arg(format!("-l{lib}"));
    }
    for dir in &flags.rpaths {
        cmd.arg(format!("-Wl,-rpath,{}", dir.display()));
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(status.success(), "compiling the MPI shim failed: {cmd:?}");
}
