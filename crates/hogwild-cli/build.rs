//! With the `tf` feature the binary links TensorFlow from the wheel in .venv: give it the wheel's
//! library folder as rpath (the `rpath` variable of the tensorflow.pc that scripts/setup.sh
//! writes), as crates/hogwild-tf/build.rs does for that crate's own tests.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if std::env::var_os("CARGO_FEATURE_TF").is_none() {
        return;
    }
    let out = Command::new("pkg-config")
        .args(["--variable=rpath", "tensorflow"])
        .output();
    if let Ok(out) = out {
        let rpath = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !rpath.is_empty() {
            println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{rpath}");
        }
    }
}
