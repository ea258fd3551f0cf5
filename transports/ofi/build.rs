//! With the feature `libfabric`: finds libfabric with pkg-config, generates its
//! bindings with bindgen from the headers found (types, constants and the functions
//! the library exports), and compiles `shim/ngauge_ofi.c`, which turns the calls
//! that `fabric.h` and its siblings define `static inline` (the setup calls through
//! the ops tables, the whole data path, the completion queue) into functions Rust
//! can call. Without the feature it does nothing: the crate is its pure parts.
//!
//! A build with the feature and no libfabric fails, naming the package to install:
//! a build that asked for the transport never silently lacks it.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "libfabric")]
    fabric::build();
}

#[cfg(feature = "libfabric")]
mod fabric {
    use std::path::PathBuf;

    const HEADERS: &[&str] = &[
        "rdma/fabric.h",
        "rdma/fi_atomic.h",
        "rdma/fi_cm.h",
        "rdma/fi_domain.h",
        "rdma/fi_endpoint.h",
        "rdma/fi_eq.h",
        "rdma/fi_errno.h",
        "rdma/fi_rma.h",
        "rdma/fi_tagged.h",
    ];

    pub fn build() {
        println!("cargo:rerun-if-changed=shim/ngauge_ofi.c");
        println!("cargo:rerun-if-changed=shim/ngauge_ofi.h");
        let lib = match pkg_config::Config::new()
            .atleast_version("1.9")
            .probe("libfabric")
        {
            Ok(lib) => lib,
            Err(e) => panic!(
                "ngauge-ofi: libfabric (1.9 or later) not found by pkg-config: {e}\n\
                 Install libfabric-dev (Debian, Ubuntu) or libfabric-devel, or set \
                 PKG_CONFIG_PATH to the directory of libfabric.pc; or build without \
                 the `ofi` feature."
            ),
        };
        let wrapper: String = HEADERS
            .iter()
            .map(|h| format!("#include <{h}>\n"))
            .collect();
        let mut bindings = bindgen::Builder::default()
            .header_contents("ngauge_ofi_bindings.h", &wrapper)
            .allowlist_type("fi_.*|fid_.*|fid")
            .allowlist_function(
                "fi_getinfo|fi_freeinfo|fi_dupinfo|fi_fabric|fi_strerror|fi_version|fi_tostr",
            )
            .allowlist_var("FI_.*")
            .derive_default(true)
            .size_t_is_usize(true)
            .layout_tests(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks));
        for dir in &lib.include_paths {
            bindings = bindings.clang_arg(format!("-I{}", dir.display()));
        }
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
        bindings
            .generate()
            .expect("ngauge-ofi: bindgen could not read the libfabric headers")
            .write_to_file(out.join("bindings.rs"))
            .expect("ngauge-ofi: cannot write the bindings");

        let mut shim = cc::Build::new();
        shim.file("shim/ngauge_ofi.c")
            .include("shim")
            .opt_level(2)
            .warnings(true)
            .extra_warnings(true);
        for dir in &lib.include_paths {
            shim.include(dir);
        }
        shim.compile("ngauge_ofi_shim");
        // pkg_config::probe already printed libfabric's link lines; the shim's
        // static library comes first, so it is named again after it.
        for dir in &lib.link_paths {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        println!("cargo:rustc-link-lib=dylib=fabric");
    }
}
