//! Link the cdylib as a drop-in libibumad: SONAME libibumad.so.3 and
//! rdma-core's symbol versions (IBUMAD_1.0 … IBUMAD_1.4).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libibumad.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibumad.so.3");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibumad.map");
}
