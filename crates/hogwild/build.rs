//! Compiles proto/data_feed.proto with the pure-Rust `protox` compiler (no `protoc` needed), keeps
//! the encoded descriptor set for run-time reflection (text-format parsing), and generates the prost
//! structs from it.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/data_feed.proto");
    let fds = protox::compile(["proto/data_feed.proto"], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("data_feed_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
