//! The library as a user's crate meets it: text in and labels out, any saved model loaded back,
//! slots found by name, and errors that compose with `?`.

use std::io::Cursor;

use hogwild::checkpoint::{self, Section};
use hogwild::executor::{self, Run, RunOptions};
use hogwild::feed::{DataFeedDesc, FeedOptions, LineParser, Slot, SlotType};
use hogwild::model::{used_slot, Model};
use hogwild::models::{AnyModel, Bow, BowConfig, Ctr, CtrConfig, CtrKind, Loss};
use hogwild::optim::{AdamAsync, Sgd};
use hogwild::subwords::Subwords;
use hogwild::tools::convert::{fasttext_desc, FastTextOptions, Vocabulary, WordIds, UNKNOWN_WORD};
use hogwild::Error;

const TRAIN: &str = "__label__sports a great match today\n__label__film a great film today\n\
                     __label__sports the match was won\n__label__film the film was long\n";

fn vocabulary() -> Vocabulary {
    let mut vocab = Vocabulary::default();
    vocab.scan(Cursor::new(TRAIN), "train.txt", true).unwrap();
    vocab
}

/// The words slot of each line `FastTextOptions::convert` writes.
fn converted_words(text: &str, vocab: &Vocabulary, opts: &FastTextOptions) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    opts.convert(vocab, Cursor::new(text), "in", &mut out)
        .unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| {
            let mut values = line.split_whitespace().map(|v| v.parse::<u64>().unwrap());
            let count = values.next().unwrap() as usize;
            values.take(count).collect()
        })
        .collect()
}

#[test]
fn text_ids_are_the_converters_words_for_every_option() {
    let vocab = vocabulary();
    let subwords = Subwords::new(3, 4, 50).unwrap();
    let options = [
        FastTextOptions::default(),
        FastTextOptions {
            bigram_buckets: Some(7),
            ..FastTextOptions::default()
        },
        FastTextOptions {
            word_ids: WordIds::Hashed { buckets: 11 },
            ..FastTextOptions::default()
        },
        FastTextOptions {
            subwords: Some(subwords),
            bigram_buckets: Some(5),
            ..FastTextOptions::default()
        },
    ];
    // Known, unknown and no words; labels anywhere on the line are skipped.
    let lines = [
        "__label__film a great film",
        "__label__sports unseen words here",
        "__label__film",
    ];
    for opts in &options {
        let text = lines.join("\n");
        let converted = converted_words(&text, &vocab, opts);
        for (line, want) in lines.iter().zip(&converted) {
            assert_eq!(&opts.text_ids(&vocab, line), want, "{opts:?}: {line}");
        }
    }
    // Without labels, as a user asks.
    let plain = FastTextOptions::default();
    assert_eq!(
        plain.text_ids(&vocab, "great unseen"),
        [vocab.word_id("great").unwrap(), UNKNOWN_WORD]
    );
    assert_eq!(plain.id_space(&vocab), 10, "9 words and the unknown id");
}

#[test]
fn vocabulary_looks_words_and_labels_up_both_ways() {
    let vocab = vocabulary();
    assert_eq!(vocab.word_id("a"), Some(1));
    assert_eq!(vocab.word(1), Some("a"));
    assert_eq!(vocab.word_id("long"), Some(9));
    assert_eq!(vocab.word(9), Some("long"));
    assert_eq!(vocab.word_id("unseen"), None);
    assert_eq!(vocab.word(UNKNOWN_WORD), None, "the unknown id has no word");
    assert_eq!(vocab.word(10), None);
    assert_eq!(vocab.label_id("__label__film"), Some(1));
    assert_eq!(vocab.label_id("film"), None, "labels keep their prefix");
}

fn quiet(epochs: usize) -> RunOptions {
    RunOptions {
        print_period: 0,
        feed: FeedOptions {
            epochs,
            ..FeedOptions::default()
        },
        ..RunOptions::default()
    }
}

/// A bag-of-words model trained on `TRAIN`, and the converted file's directory.
fn trained(vocab: &Vocabulary) -> (Bow<AdamAsync<f32>>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("train.ids");
    let opts = FastTextOptions::default();
    let file = std::fs::File::create(&ids).unwrap();
    opts.convert(vocab, Cursor::new(TRAIN.repeat(20)), "train.txt", file)
        .unwrap();
    let cfg = BowConfig {
        vocab: opts.id_space(vocab),
        classes: vocab.labels(),
        dim: 8,
        ..BowConfig::default()
    };
    let model = Bow::new(cfg, AdamAsync::new(0.1f32, 0.9, 0.999, 1e-8)).unwrap();
    executor::startup(&model);
    Run::new(&model, &fasttext_desc())
        .threads(1)
        .options(&quiet(5))
        .train(&[&ids])
        .unwrap();
    (model, dir)
}

#[test]
fn predict_text_ranks_labels_by_name_and_a_loaded_model_agrees_bit_for_bit() {
    let vocab = vocabulary();
    let (model, dir) = trained(&vocab);
    let top = model.predict_text(&vocab, "what a match", 2).unwrap();
    assert_eq!(
        top.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
        ["__label__sports", "__label__film"]
    );
    assert!(top[0].1 > 0.5 && top[0].1 >= top[1].1, "{top:?}");
    approx::assert_relative_eq!(top[0].1 + top[1].1, 1.0, max_relative = 1e-5);
    // The probabilities are predict_ids' of the converter's ids.
    let ids = FastTextOptions::default().text_ids(&vocab, "what a match");
    let by_id = model.predict_ids(&ids, 1).unwrap();
    assert_eq!(by_id, [(0, top[0].1)]);
    assert_eq!(
        model.predict_text(&vocab, "what a match", 9).unwrap().len(),
        2,
        "k past the classes"
    );

    // Saved by either saver, loaded whatever the kind.
    let path = dir.path().join("model.ckpt");
    checkpoint::save_model(&path, &model).unwrap();
    let (config, loaded) = AnyModel::load(&path).unwrap();
    assert!(matches!(loaded, AnyModel::BowAdam(_)));
    assert_eq!(config.optimizer.lr(), 0.1);
    let again = loaded.predict_text(&vocab, "what a match", 2).unwrap();
    assert_eq!(again, top);
    let any = AnyModel::BowAdam(model);
    any.save(&path, 7).unwrap();
    let (_, _, epochs) = AnyModel::load_trained(&path).unwrap();
    assert_eq!(epochs, 7);
}

#[test]
fn text_prediction_needs_a_bag_of_words_model() {
    let ctr = Ctr::new(CtrKind::Lr, CtrConfig::new(16), Sgd { lr: 0.1f32 }).unwrap();
    let e = AnyModel::CtrSgd(ctr)
        .predict_text(&vocabulary(), "a match", 1)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model config: model.kind: text prediction needs a bag-of-words model (kind = \"bow\")"
    );
}

#[test]
fn a_corrupt_epochs_section_is_named() {
    let cfg = BowConfig {
        vocab: 11,
        classes: 2,
        loss: Loss::Softmax,
        ..BowConfig::default()
    };
    let model = Bow::new(cfg, Sgd { lr: 0.1f32 }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.ckpt");
    let mut sections = model.sections();
    sections.push(Section {
        name: "trained_epochs".into(),
        bytes: vec![1, 2, 3],
    });
    checkpoint::save(&path, &model.describe(), &sections, &model.tables()).unwrap();
    let e = AnyModel::load(&path).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "checkpoint {}: section trained_epochs holds 3 bytes, not 8",
            path.display()
        )
    );
}

#[test]
fn used_slot_finds_slots_by_name_and_names_what_is_wrong() {
    let desc = DataFeedDesc::multi_slot(
        4,
        vec![
            Slot::sparse("ids", SlotType::U64),
            Slot::dense("x", SlotType::F32, &[2]),
        ],
    );
    assert_eq!(used_slot(&desc, "x", SlotType::F32).unwrap(), 1);
    let e = used_slot(&desc, "x", SlotType::U64)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "model config: slot \"x\": must be a uint64 slot in the DataFeedDesc, not float"
    );
    let e = used_slot(&desc, "y", SlotType::F32)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "model config: slot \"y\": the DataFeedDesc has no used slot of that name"
    );
}

/// A parser's line error goes through `?` into any boxed error, with its message.
fn parse(desc: &DataFeedDesc, line: &str) -> Result<(), Box<dyn std::error::Error>> {
    let parser = LineParser::new(desc);
    let mut batch = hogwild::Batch::empty(desc);
    parser.parse_into(line.as_bytes(), &mut batch)?;
    Ok(())
}

#[test]
fn errors_compose_with_the_question_mark() {
    let desc = fasttext_desc();
    assert!(parse(&desc, "1 5 1 0").is_ok());
    let e = parse(&desc, "1 5 0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "slot 1: count 0 (every slot needs at least one value; pad it)"
    );
    let e = parse(&desc, "1 5 1 0 7").unwrap_err();
    assert_eq!(e.to_string(), "trailing data after the last slot: \"7\"");

    let io = std::fs::read("/no/such/file").unwrap_err();
    let e = Error::from(io);
    assert!(
        matches!(
            e,
            Error::IoError {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("I/O error: "), "{e}");
    assert_eq!(
        Error::model("slot \"x\": too wide").to_string(),
        "slot \"x\": too wide"
    );
}
