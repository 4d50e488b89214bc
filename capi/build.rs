//! Link the cdylib as a drop-in libibumad: SONAME libibumad.so.3 and
//! rdma-core's symbol versions (IBUMAD_1.0 … IBUMAD_1.4), plus the C object
//! holding the two blocking calls (`src/wait.c`, see there why C).
//!
//! `cc` picks the target's compiler and honours `CC`/`CFLAGS` (and their
//! per-target forms), so cross builds and distribution flags reach wait.c.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libibumad.map");
    println!("cargo:rerun-if-changed=src/wait.c");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibumad.so.3");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibumad.map");

    // The object is linked into the cdylib only: a static archive would be
    // offered to every target of the package, and wait.c's symbols are
    // versioned through the map, which only the cdylib link applies.
    let objs = cc::Build::new()
        .file("src/wait.c")
        .pic(true)
        .std("gnu11")
        .flag("-fexceptions")
        .warnings(true)
        .warnings_into_errors(true)
        .compile_intermediates();
    for o in objs {
        println!("cargo:rustc-cdylib-link-arg={}", o.display());
    }
}
