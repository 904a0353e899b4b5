//! word2vec through the public API, as the command line drives it: vocabulary from text, text
//! to ids, Hogwild training in two threads, export in word2vec's text format, checkpoint round
//! trip.

use std::path::Path;

use hogwild::executor::{self, Progress, Run, RunOptions};
use hogwild::feed::DataFeedDesc;
use hogwild::models::{text_to_ids, Input, Vocab, Word2Vec, Word2VecConfig};
use hogwild::optim::Sgd;

const DESC: &str = r#"
name: "MultiSlotDataFeed"
batch_size: 8
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
}
"#;

/// Sentences about animals or about numbers, never mixed; "zebra" appears once.
fn write_text(path: &Path) {
    let animals = ["cat", "dog", "horse", "cow", "sheep", "goat"];
    let numbers = ["one", "two", "three", "four", "five", "six"];
    let mut s = 12345u64;
    let mut text = String::from("zebra\n");
    for line in 0..600 {
        let words = if line % 2 == 0 { &animals } else { &numbers };
        let sentence: Vec<&str> = (0..10)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                words[(s % 6) as usize]
            })
            .collect();
        text.push_str(&sentence.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn parse_vectors(text: &str) -> Vec<(String, Vec<f32>)> {
    let mut lines = text.lines();
    let header: Vec<usize> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(|x| x.parse().unwrap())
        .collect();
    let rows: Vec<(String, Vec<f32>)> = lines
        .map(|l| {
            let mut parts = l.split(' ');
            let word = parts.next().unwrap().to_string();
            (word, parts.map(|x| x.parse().unwrap()).collect())
        })
        .collect();
    assert_eq!(header, vec![rows.len(), rows[0].1.len()]);
    assert!(rows.iter().all(|(_, v)| v.len() == header[1]));
    rows
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

#[test]
fn text_to_vectors_in_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("corpus.txt");
    write_text(&text);
    let mut cfg = Word2VecConfig::new(dir.path().join("vocab.txt"));
    cfg.input = Input::Text;
    cfg.dim = 16;
    cfg.min_count = 2;
    cfg.window = 3;
    cfg.sample = 0.0;
    let vocab = Vocab::count_text(std::slice::from_ref(&text), cfg.min_count).unwrap();
    assert_eq!(vocab.len(), 12, "zebra is below min_count");
    vocab.write(&cfg.vocab_file).unwrap();
    let ids = text_to_ids(&vocab, &[text], &dir.path().join("ids"), 1000).unwrap();
    let desc = DataFeedDesc::from_text(DESC).unwrap();
    let model = Word2Vec::new(cfg.clone(), Sgd { lr: 0.05 }, vocab).unwrap();
    executor::startup(&model);
    let quiet = RunOptions {
        print_period: 0,
        progress: Progress::Quiet,
        ..RunOptions::default()
    };
    let mut losses = Vec::new();
    for _ in 0..4 {
        let r = Run::new(&model, &desc)
            .threads(2)
            .options(&quiet)
            .train(&ids)
            .unwrap();
        assert_eq!(r.instances, 600);
        assert_eq!(r.get("effective_words"), Some(6000.0));
        losses.push(r.get("loss").unwrap());
    }
    assert!(losses[3] < losses[0], "loss fell: {losses:?}");

    let out = dir.path().join("vectors.txt");
    assert_eq!(model.export_text(&out).unwrap(), 12);
    let rows = parse_vectors(&std::fs::read_to_string(&out).unwrap());
    let get = |w: &str| &rows.iter().find(|(x, _)| x == w).unwrap().1;
    let same = cos(get("cat"), get("dog"));
    let other = cos(get("cat"), get("two"));
    assert!(same > other + 0.3, "cat~dog {same}, cat~two {other}");

    let ck = dir.path().join("w2v.ckpt");
    hogwild::checkpoint::save_model(&ck, &model).unwrap();
    // The checkpoint holds the vocabulary: the file is not needed to load it.
    std::fs::remove_file(&cfg.vocab_file).unwrap();
    let mut loaded = hogwild::checkpoint::load(&ck).unwrap();
    let back = Word2Vec::from_checkpoint(cfg, Sgd { lr: 0.05 }, &mut loaded).unwrap();
    assert_eq!(back.words_done(), model.words_done());
    let again = dir.path().join("again.txt");
    back.export_text(&again).unwrap();
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(&out).unwrap()
    );
}

/// Runs over one corpus at the same time write the same vocabulary and ids files: each write
/// goes to its own temporary file and is renamed into place, so every writer succeeds, every
/// file read afterwards is whole, and no temporary file is left behind.
#[test]
fn concurrent_writers_of_the_vocabulary_and_ids_files_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("corpus.txt");
    write_text(&text);
    let vocab = Vocab::count_text(std::slice::from_ref(&text), 2).unwrap();
    let alone = dir.path().join("alone");
    let want = text_to_ids(&vocab, std::slice::from_ref(&text), &alone, 1000).unwrap();
    let want = std::fs::read(&want[0]).unwrap();
    let vocab_file = dir.path().join("shared/vocab.txt");
    let ids_dir = dir.path().join("shared/ids");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    vocab.write(&vocab_file).unwrap();
                    let files =
                        text_to_ids(&vocab, std::slice::from_ref(&text), &ids_dir, 1000).unwrap();
                    assert_eq!(std::fs::read(&files[0]).unwrap(), want);
                    assert_eq!(Vocab::from_file(&vocab_file).unwrap().len(), vocab.len());
                }
            });
        }
    });
    let mut left: Vec<String> = std::fs::read_dir(dir.path().join("shared"))
        .unwrap()
        .chain(std::fs::read_dir(&ids_dir).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["0-corpus.txt.ids", "ids", "vocab.txt"]);
}
