//! A text classifier with the library alone: fastText-style lines in, labels of new text out.
//! `cargo run --bin text -- OUT_DIR` (run from examples/rust-user: it reads ../text/train.txt).
use std::{fs::File, io::BufReader};

use hogwild::feed::FeedOptions;
use hogwild::models::{AnyModel, Bow, BowConfig};
use hogwild::optim::AdamAsync;
use hogwild::tools::convert::{fasttext_desc, FastTextOptions, Vocabulary};
use hogwild::{checkpoint, executor, Error, Run, RunOptions};

fn main() -> hogwild::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "rust-user-out".into());
    std::fs::create_dir_all(&out)?;
    let (train, ids, saved) = ("../text/train.txt", format!("{out}/train.ids"), format!("{out}/model.ckpt"));
    let mut vocab = Vocabulary::default();
    vocab.scan(BufReader::new(File::open(train)?), train, true)?;
    let opts = FastTextOptions::default();
    opts.convert(&vocab, BufReader::new(File::open(train)?), train, File::create(&ids)?)?;

    let cfg = BowConfig { vocab: opts.id_space(&vocab), classes: vocab.labels(), ..BowConfig::default() };
    let model = Bow::new(cfg, AdamAsync::new(0.05f32, 0.9, 0.999, 1e-8))?;
    executor::startup(&model);
    let options = RunOptions {
        print_period: 0,
        feed: FeedOptions { epochs: 5, ..FeedOptions::default() },
        ..RunOptions::default()
    };
    let report = Run::new(&model, &fasttext_desc()).options(&options).train(&[&ids])?;
    println!("trained on {} instances, loss {:.4}", report.instances, report.get("loss").unwrap_or(f64::NAN));
    checkpoint::save_model(&saved, &model)?;

    let (_config, loaded) = AnyModel::load(&saved)?;
    let asked = [("the striker scored a goal", "__label__sports"), ("snow and frost today", "__label__weather")];
    for (text, want) in asked {
        let (label, p) = loaded.predict_text(&vocab, text, 1)?.remove(0);
        println!("{text}: {label} ({p:.2})");
        if label != want {
            return Err(Error::model(format!("\"{text}\": {label}, not {want}")));
        }
    }
    Ok(())
}
