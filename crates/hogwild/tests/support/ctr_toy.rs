//! Test data shared by the core crate's and the command's tests (included with `#[path]`).

use hogwild::rng::{mix64, unit_f32};

/// A CTR set only a feature's value explains: the label is 1 iff the value of feature 1 (in every instance, uniform in
/// [0, 1]) is above 0.5; three more features of random ids (2..50) and values carry nothing.
/// Lines of libsvm, libffm (feature 1 in field 0, the others in fields 1-3) or VW text (VW: every
/// fifth instance has its label flipped and importance weight 0, the others weight 1 or 2).
pub fn value_dependent(format: &str, lines: usize, seed: u64) -> String {
    let mut s = seed;
    let mut unit = move || {
        s = mix64(s);
        unit_f32(s)
    };
    let mut text = String::new();
    for n in 0..lines {
        let x = unit();
        let y = u8::from(x > 0.5);
        let noise: Vec<(u64, f32)> = (0..3)
            .map(|_| (2 + (unit() * 48.0) as u64, unit()))
            .collect();
        match format {
            "libsvm" => {
                text.push_str(&format!("{y} 1:{x}"));
                for (id, v) in noise {
                    text.push_str(&format!(" {id}:{v}"));
                }
            }
            "libffm" => {
                text.push_str(&format!("{y} 0:1:{x}"));
                for (field, (id, v)) in noise.into_iter().enumerate() {
                    text.push_str(&format!(" {}:{id}:{v}", field + 1));
                }
            }
            _ => {
                let (label, weight) = match n % 5 {
                    4 => (1 - 2 * i32::from(y), 0.0),
                    k => (2 * i32::from(y) - 1, if k % 2 == 0 { 1.0 } else { 2.0 }),
                };
                text.push_str(&format!("{label} {weight} 'line{n}|key x:{x} |noise"));
                for (id, v) in noise {
                    text.push_str(&format!(" f{id}:{v}"));
                }
            }
        }
        text.push('\n');
    }
    text
}
