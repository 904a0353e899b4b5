//! Runs AdamAsync steps with the native Rust library (`hogwild::optim::AdamAsync`), for the Python
//! tests that check the TensorFlow plugin gives the same bits.
//!
//! Input on stdin, one `name value...` line each, values as the hex bit patterns of the elements:
//! `dtype f32|f64`, `mode dense|nesterov|sparse|rmsprop`, `steps N`, `row_len N`, `hyper lr b1 b2
//! eps`, `var ...`, `grad ...` (one step's gradient, reused each step), `indices ...` (decimal, for
//! the sparse modes). Output: `var`, `m`, `v`, `powers` lines in the same hex form.

use std::collections::HashMap;
use std::io::Read;

use anyhow::{anyhow, bail, Context};
use hogwild::optim::{AdamAsync, AdamAsyncState, Real};

trait Bits: Real {
    fn parse_hex(s: &str) -> anyhow::Result<Self>;
    fn hex(self) -> String;
}
impl Bits for f32 {
    fn parse_hex(s: &str) -> anyhow::Result<Self> {
        Ok(f32::from_bits(u32::from_str_radix(s, 16)?))
    }
    fn hex(self) -> String {
        format!("{:08x}", self.to_bits())
    }
}
impl Bits for f64 {
    fn parse_hex(s: &str) -> anyhow::Result<Self> {
        Ok(f64::from_bits(u64::from_str_radix(s, 16)?))
    }
    fn hex(self) -> String {
        format!("{:016x}", self.to_bits())
    }
}

fn values<T: Bits>(lines: &HashMap<&str, Vec<&str>>, name: &str) -> anyhow::Result<Vec<T>> {
    let words = lines
        .get(name)
        .ok_or_else(|| anyhow!("missing line `{name}`"))?;
    words
        .iter()
        .map(|w| T::parse_hex(w).with_context(|| format!("line `{name}`: bad hex `{w}`")))
        .collect()
}

fn number(lines: &HashMap<&str, Vec<&str>>, name: &str) -> anyhow::Result<usize> {
    let words = lines
        .get(name)
        .ok_or_else(|| anyhow!("missing line `{name}`"))?;
    let word = words
        .first()
        .ok_or_else(|| anyhow!("line `{name}` is empty"))?;
    word.parse()
        .with_context(|| format!("line `{name}`: bad number `{word}`"))
}

fn run<T: Bits>(lines: &HashMap<&str, Vec<&str>>, mode: &str) -> anyhow::Result<()> {
    let hyper = values::<T>(lines, "hyper")?;
    let [lr, b1, b2, eps] = hyper[..] else {
        bail!(
            "line `hyper` needs lr beta1 beta2 epsilon, got {} values",
            hyper.len()
        );
    };
    let mut opt = AdamAsync::new(lr, b1, b2, eps);
    opt.use_nesterov = mode == "nesterov";
    opt.apply_sparse_rmsprop = mode == "rmsprop";
    let mut var = values::<T>(lines, "var")?;
    let grad = values::<T>(lines, "grad")?;
    let mut state = AdamAsyncState::new(var.len(), &opt);
    for _ in 0..number(lines, "steps")? {
        match mode {
            "dense" | "nesterov" => opt.apply_dense(&mut var, &mut state, &grad)?,
            "sparse" | "rmsprop" => {
                let indices = lines
                    .get("indices")
                    .ok_or_else(|| anyhow!("missing line `indices`"))?
                    .iter()
                    .map(|w| w.parse::<i64>().with_context(|| format!("bad index `{w}`")))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let row_len = number(lines, "row_len")?;
                opt.apply_sparse(&mut var, &mut state, &grad, &indices, row_len)?
            }
            other => bail!("unknown mode `{other}`"),
        }
    }
    let line = |name: &str, xs: &[T]| {
        let words: Vec<String> = xs.iter().map(|x| x.hex()).collect();
        println!("{name} {}", words.join(" "));
    };
    line("var", &var);
    line("m", &state.m);
    line("v", &state.v);
    line("powers", &[state.beta1_power, state.beta2_power]);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let lines: HashMap<&str, Vec<&str>> = input
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.next().map(|name| (name, words.collect()))
        })
        .collect();
    let dtype = lines
        .get("dtype")
        .and_then(|w| w.first().copied())
        .unwrap_or("");
    let mode = lines
        .get("mode")
        .and_then(|w| w.first().copied())
        .unwrap_or("");
    match dtype {
        "f32" => run::<f32>(&lines, mode),
        "f64" => run::<f64>(&lines, mode),
        other => bail!("line `dtype` must be f32 or f64, got `{other}`"),
    }
}
