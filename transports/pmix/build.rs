//! With the `client` feature: finds PMIx with pkg-config (`pmix`, at least 4.0, for
//! `PMIx_Value_load`/`PMIx_Info_load` as functions), links it, and generates Rust
//! declarations of the client calls of `pmix.h` with bindgen into
//! `OUT_DIR/pmix.rs`. The version found is exported to the crate as
//! `NGAUGE_PMIX_BUILD_VERSION`. Without the feature it does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "client")]
    generate();
}

#[cfg(feature = "client")]
fn generate() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let pmix = pkg_config::Config::new()
        .atleast_version("4.0")
        .probe("pmix")
        .unwrap_or_else(|e| {
            panic!(
                "the `pmix` feature needs PMIx 4.0 or later with its pkg-config file \
                 (Debian: apt-get install libpmix-dev): {e}"
            )
        });
    println!("cargo:rustc-env=NGAUGE_PMIX_BUILD_VERSION={}", pmix.version);
    let includes = pmix
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()));
    let bindings = bindgen::Builder::default()
        .header_contents("ngauge_pmix.h", "#include <pmix.h>\n")
        .clang_args(includes)
        .allowlist_function(
            "PMIx_(Init|Finalize|Put|Commit|Fence|Get|Get_version|Error_string|Abort)",
        )
        .allowlist_function("PMIx_(Value_load|Value_destruct|Info_load)")
        .allowlist_type("pmix_(proc|value|info|byte_object)_t")
        .allowlist_var("PMIX_[A-Z0-9_]+")
        .size_t_is_usize(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not read pmix.h");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("pmix.rs"))
        .expect("cannot write the PMIx bindings");
}
