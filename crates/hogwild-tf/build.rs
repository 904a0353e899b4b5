//! Gives binaries that link TensorFlow an rpath to the wheel's library folder (the `rpath`
//! variable of the tensorflow.pc written by scripts/setup.sh), so they run without
//! LD_LIBRARY_PATH.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let out = Command::new("pkg-config")
        .args(["--variable=rpath", "tensorflow"])
        .output();
    if let Ok(out) = out {
        let rpath = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !rpath.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{rpath}");
        }
    }
}
