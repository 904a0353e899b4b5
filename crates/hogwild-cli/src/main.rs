//! The `hogwild` command.

use anyhow::Result;
use clap::{Parser, Subcommand};
use hogwild::optim::{AdamAsync, AdamAsyncState};

#[derive(Parser)]
#[command(
    name = "hogwild",
    version,
    about = "Lock-free asynchronous training on CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a small model on built-in data with AdamAsync and print its progress.
    Demo {
        /// Number of steps.
        #[arg(long, default_value_t = 300)]
        steps: usize,
    },
    /// Train a TensorFlow graph from files with several threads sharing one session (Hogwild).
    #[cfg(feature = "tf")]
    TfTrain(Box<hogwild_tf::TfTrainArgs>),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Demo { steps } => demo(steps),
        #[cfg(feature = "tf")]
        Command::TfTrain(args) => hogwild_tf::tf_train(&args).map(|_| ()).map_err(Into::into),
    }
}

/// Logistic regression on generated, linearly separable data, trained with dense AdamAsync.
fn demo(steps: usize) -> Result<()> {
    const DIM: usize = 16;
    const N: usize = 512;
    let truth: Vec<f32> = (0..DIM).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.5).collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let xs: Vec<Vec<f32>> = (0..N).map(|_| (0..DIM).map(|_| rand()).collect()).collect();
    let ys: Vec<f32> = xs
        .iter()
        .map(|x| f32::from(x.iter().zip(&truth).map(|(a, b)| a * b).sum::<f32>() > 0.0))
        .collect();
    let opt = AdamAsync::new(0.05f32, 0.9, 0.999, 1e-8);
    let mut w = vec![0.0f32; DIM];
    let mut state = AdamAsyncState::new(DIM, &opt);
    for step in 1..=steps {
        let mut grad = vec![0.0f32; DIM];
        let (mut loss, mut correct) = (0.0f32, 0usize);
        for (x, &y) in xs.iter().zip(&ys) {
            let z: f32 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            loss -= y * p.max(1e-7).ln() + (1.0 - y) * (1.0 - p).max(1e-7).ln();
            correct += usize::from((p > 0.5) == (y > 0.5));
            for (g, a) in grad.iter_mut().zip(x) {
                *g += (p - y) * a / N as f32;
            }
        }
        opt.apply_dense(&mut w, &mut state, &grad)?;
        if step % 50 == 0 || step == 1 {
            println!(
                "step {step:4}  loss {:.4}  accuracy {:.3}",
                loss / N as f32,
                correct as f32 / N as f32
            );
        }
    }
    Ok(())
}
