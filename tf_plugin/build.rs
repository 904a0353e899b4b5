//! Compiles the C++ half of the cxx bridge into the static library. tf_plugin/build.sh passes
//! TensorFlow's ABI define in CXXFLAGS, so the glue and the kernels agree on `std::string`.
fn main() {
    cxx_build::bridge("src/lib.rs")
        .std("c++17")
        .compile("hogwild_tf_plugin_bridge");
    println!("cargo:rerun-if-changed=src/lib.rs");
}
