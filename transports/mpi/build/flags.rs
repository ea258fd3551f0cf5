//! Parsing of MPI compiler-wrapper and pkg-config output, shared by `build.rs` and
//! the crate's unit tests (`#[path]`-included in both).

use std::path::PathBuf;

/// The flags of an MPI installation that the shim's build and link need.
#[derive(Default, Debug, PartialEq, Eq)]
pub struct Flags {
    pub includes: Vec<PathBuf>,
    pub defines: Vec<(String, Option<String>)>,
    pub lib_dirs: Vec<PathBuf>,
    pub libs: Vec<String>,
    /// Run-time search paths (`-Wl,-rpath,DIR` and its spellings): an MPI outside
    /// the loader's default paths (`/opt/...`) is found at run time only through
    /// them.
    pub rpaths: Vec<PathBuf>,
}

/// Splits compiler-wrapper output into the flags we use; unknown flags are ignored.
///
/// Linker options come as `-Wl,a,b,...`; an `-rpath` may be followed by its
/// directory in the same option (`-Wl,-rpath,DIR`), with `=` (`-Wl,-rpath=DIR`),
/// or in the next one (`-Wl,-rpath -Wl,DIR`, as Open MPI's wrappers print it).
pub fn parse(words: &str, flags: &mut Flags) {
    let mut rpath_next = false;
    for word in words.split_whitespace() {
        if let Some(linker) = word.strip_prefix("-Wl,") {
            for arg in linker.split(',').filter(|a| !a.is_empty()) {
                if rpath_next {
                    flags.rpaths.push(arg.into());
                    rpath_next = false;
                } else if arg == "-rpath" || arg == "--rpath" || arg == "-R" {
                    rpath_next = true;
                } else if let Some(dir) = arg
                    .strip_prefix("-rpath=")
                    .or_else(|| arg.strip_prefix("--rpath="))
                {
                    flags.rpaths.push(dir.into());
                }
            }
            continue;
        }
        rpath_next = false;
        if let Some(dir) = word.strip_prefix("-I") {
            flags.includes.push(dir.into());
        } else if let Some(def) = word.strip_prefix("-D") {
            let mut parts = def.splitn(2, '=');
            let name = parts.next().unwrap_or_default().to_string();
            flags.defines.push((name, parts.next().map(str::to_string)));
        } else if let Some(dir) = word.strip_prefix("-L") {
            flags.lib_dirs.push(dir.into());
        } else if let Some(lib) = word.strip_prefix("-l") {
            flags.libs.push(lib.to_string());
        }
    }
}
