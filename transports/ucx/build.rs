//! With the `ucp` feature: finds UCX with pkg-config (`ucx`, at least 1.10, for
//! the `*_nbx` calls), links it, and generates Rust declarations of its UCP API
//! (`ucp/api/ucp.h`, and the log handler hook of `ucs/debug/log_def.h`) with
//! bindgen into `OUT_DIR/ucp.rs`. The version found is
//! exported to the crate as `NGAUGE_UCX_BUILD_VERSION`. Without the feature it
//! does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "ucp")]
    generate();
}

#[cfg(feature = "ucp")]
fn generate() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let ucx = pkg_config::Config::new()
        .atleast_version("1.10")
        .probe("ucx")
        .unwrap_or_else(|e| {
            panic!(
                "the `ucx` feature needs UCX 1.10 or later with its pkg-config file \
                 (Debian: apt-get install libucx-dev): {e}"
            )
        });
    println!("cargo:rustc-env=NGAUGE_UCX_BUILD_VERSION={}", ucx.version);
    let includes = ucx
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()));
    let bindings = bindgen::Builder::default()
        .header_contents(
            "ngauge_ucx.h",
            "#include <ucp/api/ucp.h>\n#include <ucs/debug/log_def.h>\n",
        )
        .clang_args(includes)
        .allowlist_function("ucp_.*")
        .allowlist_function("ucs_status_string")
        // UCX logs to stdout; ngauge's stdout is its results (`--json`).
        .allowlist_function("ucs_log_push_handler")
        .allowlist_function("vsnprintf")
        .allowlist_type("ucs_log_func_t")
        .allowlist_type("ucp_.*")
        .allowlist_type("ucs_status_t")
        .allowlist_var("UCP_.*")
        // Flag enums are OR-ed together: plain constants of the enum's type.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen could not read ucp/api/ucp.h");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("ucp.rs"))
        .expect("cannot write the UCP bindings");
}
