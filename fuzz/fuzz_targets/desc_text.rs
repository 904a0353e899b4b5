//! Fuzzes reading a data.prototxt (the checks: `desc_text` in the shared target file).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // reason: the shared file holds every target; this binary runs one
#[path = "../../crates/hogwild/tests/support/fuzz_targets.rs"]
mod targets;

fuzz_target!(|data: &[u8]| targets::desc_text(data));
