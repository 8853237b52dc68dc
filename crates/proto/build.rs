//! Compiles the contracts in `proto/` with protox (pure Rust: these machines have no protoc)
//! and generates the prost messages and tonic clients and servers.

use std::path::PathBuf;
use std::{env, fs};

use prost::Message;

fn proto_files(dir: &PathBuf, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            proto_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            out.push(path);
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let proto_root = manifest_dir.join("../../proto");
    println!("cargo:rerun-if-changed={}", proto_root.display());

    let mut files = Vec::new();
    proto_files(&proto_root, &mut files);
    let descriptors = protox::compile(&files, [&proto_root]).unwrap_or_else(|err| panic!("{err:?}"));

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    fs::write(out_dir.join("thinkus_descriptor.bin"), descriptors.encode_to_vec()).expect("write the descriptor set");

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Servers answer UNIMPLEMENTED for any RPC a service does not override.
        .generate_default_stubs(true)
        // A message that does not decode is the sender's error: INVALID_ARGUMENT, not INTERNAL.
        .codec_path("crate::codec::ProtoCodec")
        // One module tree mirroring the proto packages, so cross-package paths resolve.
        .include_file("thinkus.rs")
        .compile_fds(descriptors)
        .expect("generate code from the descriptor set");
}
