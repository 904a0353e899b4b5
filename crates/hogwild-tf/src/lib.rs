//! Runs TensorFlow graphs that use the AdamAsync op library, Hogwild-style.

/// The TensorFlow version the runner is linked against.
pub fn tensorflow_version() -> String {
    tensorflow::version().unwrap_or_else(|e| format!("unknown ({e})"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn links_the_wheel_library() {
        assert_eq!(super::tensorflow_version(), "2.21.0");
    }
}
