//! Records build facts for result metadata (`meta.build`) and `ngauge --version`:
//! compiler, profile, target, target features, enabled transports, git revision.

use std::process::Command;

fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output_of(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    let opt_level = std::env::var("OPT_LEVEL").unwrap_or_default();
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let mut transports = vec!["tcp", "udp"];
    if std::env::var_os("CARGO_FEATURE_VERBS").is_some() {
        transports.push("verbs");
    }
    if std::env::var_os("CARGO_FEATURE_MPI").is_some() {
        transports.push("mpi");
    }
    if std::env::var_os("CARGO_FEATURE_UCX").is_some() {
        transports.push("ucx");
    }
    if std::env::var_os("CARGO_FEATURE_OFI").is_some() {
        transports.push("ofi");
    }
    let git = output_of("git", &["rev-parse", "--short=12", "HEAD"])
        .map(|rev| {
            // --no-optional-locks: a status that rewrote the index would make the
            // next build run this script again (and rebuild the crate) for nothing.
            let dirty = output_of(
                "git",
                &[
                    "--no-optional-locks",
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                ],
            )
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-dirty")
            } else {
                rev
            }
        })
        .unwrap_or_else(|| "unknown".into());

    println!("cargo:rustc-env=NGAUGE_BUILD_RUSTC={rustc_version}");
    println!("cargo:rustc-env=NGAUGE_BUILD_PROFILE={profile}");
    println!("cargo:rustc-env=NGAUGE_BUILD_OPT_LEVEL={opt_level}");
    println!("cargo:rustc-env=NGAUGE_BUILD_TARGET={target}");
    println!("cargo:rustc-env=NGAUGE_BUILD_TARGET_FEATURES={features}");
    println!(
        "cargo:rustc-env=NGAUGE_BUILD_TRANSPORTS={}",
        transports.join(",")
    );
    println!("cargo:rustc-env=NGAUGE_BUILD_GIT={git}");
    println!("cargo:rerun-if-changed=build.rs");
    // A commit or a checkout changes HEAD or the branch it names. Not the index:
    // every `git status` or `git diff` may rewrite it, and each rewrite would
    // rebuild the crate; the `-dirty` mark is as of this script's last run.
    if let Some(git_dir) = output_of("git", &["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
    }
    if let (Some(common), Some(branch)) = (
        output_of("git", &["rev-parse", "--git-common-dir"]),
        output_of("git", &["symbolic-ref", "-q", "HEAD"]),
    ) {
        // Only files that exist: cargo reruns the script every time for one that
        // does not. A packed branch moves packed-refs.
        for file in [
            format!("{common}/{branch}"),
            format!("{common}/packed-refs"),
        ] {
            if std::path::Path::new(&file).exists() {
                println!("cargo:rerun-if-changed={file}");
            }
        }
    }
}
