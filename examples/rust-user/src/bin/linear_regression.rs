//! A model of one's own: a linear regression `y ≈ w·x + b` over a dense float slot `x` of two
//! values and a float label `y`, trained Hogwild-style from a MultiSlot file.
//! `cargo run --bin linear_regression -- OUT_DIR`
use hogwild::feed::{Batch, DataFeedDesc, Slot, SlotType};
use hogwild::model::{used_slot, Model, StageTimes};
use hogwild::optim::Sgd;
use hogwild::{Error, Result, Run, RunOptions, Table};

/// Row 0 of `params`: the weights of `x`, then the bias.
struct LinReg {
    params: Table,
    opt: Sgd<f32>,
}
/// A thread's slot positions and gradient buffer.
struct Worker {
    x: usize,
    y: usize,
    grad: Vec<f32>,
}

impl LinReg {
    /// The error of instance `i` (prediction minus label), and its `x`.
    fn error<'b>(&self, w: &Worker, batch: &'b Batch, i: usize) -> Result<(f32, &'b [f32])> {
        let x = batch.slots[w.x].f32s(i).unwrap(); // `used_slot` checked the type
        if x.len() + 1 != self.params.dim() {
            return Err(Error::model(format!("slot \"x\", instance {i}: {} values", x.len())));
        }
        let bias = self.params.weights(0)[x.len()].load();
        Ok((self.params.dot(0, x) + bias - batch.slots[w.y].f32s(i).unwrap()[0], x))
    }
}

impl Model for LinReg {
    type Worker = Worker;
    fn metrics(&self) -> Vec<String> {
        vec!["mse".into()]
    }
    fn startup(&self) {} // zero weights are a fine start
    fn worker(&self, desc: &DataFeedDesc) -> Result<Worker> {
        let (x, y) = (used_slot(desc, "x", SlotType::F32)?, used_slot(desc, "y", SlotType::F32)?);
        Ok(Worker { x, y, grad: vec![1.0; self.params.dim()] }) // the bias's gradient stays 1
    }
    fn train_batch(&self, w: &mut Worker, batch: &Batch, out: &mut [f64], _: Option<&mut StageTimes>) -> Result<()> {
        let step = self.params.begin(&self.opt, false)?; // dense: every weight moves
        let mut squares = 0.0;
        for i in 0..batch.len {
            let (e, x) = self.error(w, batch, i)?;
            squares += f64::from(e * e);
            w.grad[..x.len()].copy_from_slice(x);
            self.params.update_row(&self.opt, &step, 0, &w.grad, 2.0 * e); // gradient 2e·(x, 1)
        }
        self.params.finish(&self.opt, false, 1); // one row touched
        out[0] = squares / batch.len as f64;
        Ok(())
    }
    fn eval_batch(&self, w: &mut Worker, batch: &Batch, out: &mut [f64], _: Option<&mut String>) -> Result<()> {
        let squares: Result<f64> = (0..batch.len).map(|i| Ok(f64::from(self.error(w, batch, i)?.0.powi(2)))).sum();
        out[0] = squares? / batch.len as f64;
        Ok(())
    }
    fn tables(&self) -> Vec<&Table> {
        vec![&self.params]
    }
    fn describe(&self) -> String {
        format!("linreg {}", self.params.dim() - 1)
    }
}

fn main() -> Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "rust-user-out".into());
    std::fs::create_dir_all(&out)?;
    let file = format!("{out}/linear.txt");
    let line = |i: u32| {
        let (a, b) = ((i % 10) as f32 / 10.0, (i % 7) as f32 / 7.0);
        format!("2 {a} {b} 1 {}\n", 2.0 * a - b + 0.5)
    };
    std::fs::write(&file, (0..500).map(line).collect::<String>())?;
    let desc = DataFeedDesc::multi_slot(
        10,
        vec![Slot::dense("x", SlotType::F32, &[2]), Slot::dense("y", SlotType::F32, &[1])],
    );
    let opt = Sgd { lr: 0.05f32 };
    let model = LinReg { params: Table::new("params", 1, 3, &opt)?, opt };
    let quiet = RunOptions { print_period: 0, ..RunOptions::default() };
    for _ in 0..20 {
        Run::new(&model, &desc).options(&quiet).train(&[&file])?;
    }
    let mse = Run::new(&model, &desc).options(&quiet).eval(&[&file])?.get("mse").unwrap_or(f64::NAN);
    let mut w = [0.0f32; 3];
    model.params.read_weights(0, &mut w);
    println!("y = {:.3} x0 + {:.3} x1 + {:.3}, mse {mse:.2e}", w[0], w[1], w[2]);
    if !(mse < 1e-3) {
        return Err(Error::model(format!("mse {mse} after training, want below 1e-3")));
    }
    Ok(())
}
