//! Link the cdylib as a drop-in libibumad: SONAME libibumad.so.3 and
//! rdma-core's symbol versions (IBUMAD_1.0 … IBUMAD_1.4), plus the C object
//! holding the two blocking calls (`src/wait.c`, see there why C).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=libibumad.map");
    println!("cargo:rerun-if-changed=src/wait.c");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibumad.so.3");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibumad.map");

    // rustc links with `cc` on Linux, so a C compiler is there already.
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let obj = out.join("wait.o");
    let status = Command::new(&cc)
        .args([
            "-c",
            "-fPIC",
            "-O2",
            "-g",
            "-std=gnu11",
            "-fexceptions",
            "-Wall",
            "-Werror",
        ])
        .arg(format!("{dir}/src/wait.c"))
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(status.success(), "{cc} failed on src/wait.c");
    println!("cargo:rustc-cdylib-link-arg={}", obj.display());
}
