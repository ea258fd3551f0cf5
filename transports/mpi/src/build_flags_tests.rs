//! Review finding 9: the run-time search paths of an MPI outside the loader's
//! default paths must survive the parsing of the wrapper's output.

use crate::build_flags::{parse, Flags};
use std::path::PathBuf;

fn parsed(words: &str) -> Flags {
    let mut flags = Flags::default();
    parse(words, &mut flags);
    flags
}

#[test]
fn open_mpi_under_opt_keeps_its_rpath() {
    // `mpicc --showme:link` of an Open MPI configured with --prefix=/opt/openmpi.
    let f = parsed(
        "-pthread -Wl,-rpath -Wl,/opt/openmpi/lib -Wl,--enable-new-dtags \
         -L/opt/openmpi/lib -lmpi",
    );
    assert_eq!(f.rpaths, [PathBuf::from("/opt/openmpi/lib")]);
    assert_eq!(f.lib_dirs, [PathBuf::from("/opt/openmpi/lib")]);
    assert_eq!(f.libs, ["mpi"]);
}

#[test]
fn every_rpath_spelling_is_read() {
    let f = parsed("-Wl,-rpath,/a -Wl,-rpath=/b -Wl,--rpath,/c -Wl,-R,/d -Wl,-z,relro");
    let want: Vec<PathBuf> = ["/a", "/b", "/c", "/d"].iter().map(PathBuf::from).collect();
    assert_eq!(f.rpaths, want);
}

#[test]
fn mpich_show_without_rpath_gives_none() {
    let f = parsed(
        "-Wl,-z,relro -I/usr/include/x86_64-linux-gnu/mpich -DX=1 \
         -L/usr/lib/x86_64-linux-gnu -lmpich",
    );
    assert!(f.rpaths.is_empty());
    assert_eq!(
        f.includes,
        [PathBuf::from("/usr/include/x86_64-linux-gnu/mpich")]
    );
    assert_eq!(f.defines, [("X".to_string(), Some("1".to_string()))]);
    assert_eq!(f.libs, ["mpich"]);
}
