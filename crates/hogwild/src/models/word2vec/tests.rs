use super::*;
use crate::executor::{self, Progress, RunOptions};
use approx::assert_relative_eq;

fn vocab(counts: &[u64]) -> Vocab {
    Vocab {
        words: (0..counts.len()).map(|i| format!("w{i}")).collect(),
        counts: counts.to_vec(),
    }
}

fn small_cfg(dim: usize) -> Word2VecConfig {
    let mut c = Word2VecConfig::new("unused.vocab");
    c.dim = dim;
    c.min_count = 1;
    c.sample = 0.0;
    c
}

const DESC: &str = r#"
name: "MultiSlotDataFeed"
batch_size: 4
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
}
"#;

// One pair step, dim 2, word 0, context 1, noise word 2, alpha 0.1. numpy (float64):
//   sig = lambda x: 1 / (1 + np.exp(-x))
//   l1 = [0.2, -0.1]; o0 = [0.3, 0.5]; o2 = [-0.4, 0.1]; a = 0.1; neu = 0
//   f = l1 @ o0; g = (1 - sig(f)) * a; loss = -log(sig(f)); neu += g * o0; o0 += g * l1
//   f = l1 @ o2; g = (0 - sig(f)) * a; loss += -log(sig(-f)); neu += g * o2; o2 += g * l1
//   -> loss 1.3373190, o0 [0.30995, 0.495025], o2 [-0.4095503, 0.10477515],
//      l1 + neu [0.23402561, -0.07990015]
#[test]
fn one_pair_step_matches_numpy() {
    let m = Word2Vec::new(small_cfg(2), Sgd { lr: 0.1 }, vocab(&[3, 2, 1])).unwrap();
    m.input().write_weights(1, &[0.2, -0.1]);
    m.output().write_weights(0, &[0.3, 0.5]);
    m.output().write_weights(2, &[-0.4, 0.1]);
    let mut w = m.new_worker(0);
    let loss = m.pair_step(&mut w, &[2], 0, 1, 0.1, true);
    assert_relative_eq!(loss, 1.337_319, epsilon = 1e-5);
    let mut row = [0.0f32; 2];
    m.output().read_weights(0, &mut row);
    assert_relative_eq!(&row[..], &[0.30995, 0.495025][..], epsilon = 1e-6);
    m.output().read_weights(2, &mut row);
    assert_relative_eq!(&row[..], &[-0.4095503, 0.10477515][..], epsilon = 1e-6);
    m.input().read_weights(1, &mut row);
    assert_relative_eq!(&row[..], &[0.23402561, -0.07990015][..], epsilon = 1e-6);
}

// One CBOW step, dim 2, word 0, context words [1, 2, 1] (word 1 twice in the window), noise
// word 3, alpha 0.1: gensim's cbow_mean=1 (word2vec_inner.pyx, w2v_fast_sentence_cbow_neg) and
// word2vec.c's -cbow 1. numpy (float64):
//   sig = lambda x: 1 / (1 + np.exp(-x))
//   v1 = [0.2, -0.1]; v2 = [-0.3, 0.4]; o0 = [0.3, 0.5]; o3 = [-0.4, 0.1]; a = 0.1
//   h = (v1 + v2 + v1) / 3; neu = 0
//   f = h @ o0; g = (1 - sig(f)) * a; loss = -log(sig(f)); neu += g * o0; o0 += g * h
//   f = h @ o3; g = (0 - sig(f)) * a; loss += -log(sig(-f)); neu += g * o3; o3 += g * h
//   v1 += 2 * neu; v2 += neu       # every occurrence in the window gets the whole correction
//   -> loss 1.3615346, o0 [0.30163056, 0.50326112], o3 [-0.40166111, 0.09667778],
//      v1 [0.26921677, -0.06104983], v2 [-0.26539162, 0.41947508]
#[test]
fn one_cbow_step_matches_numpy() {
    let mut c = small_cfg(2);
    c.arch = Arch::Cbow;
    let m = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[4, 3, 2, 1])).unwrap();
    m.input().write_weights(1, &[0.2, -0.1]);
    m.input().write_weights(2, &[-0.3, 0.4]);
    m.output().write_weights(0, &[0.3, 0.5]);
    m.output().write_weights(3, &[-0.4, 0.1]);
    let mut w = m.new_worker(0);
    let loss = m.cbow_step(&mut w, &[1, 2, 1], &[3], 0, 0.1, true);
    assert_relative_eq!(loss, 1.361_534_6, epsilon = 1e-5);
    let mut row = [0.0f32; 2];
    for (table, id, expected) in [
        (m.output(), 0, [0.301_630_6, 0.503_261_1]),
        (m.output(), 3, [-0.401_661_1, 0.096_677_78]),
        (m.input(), 1, [0.269_216_8, -0.061_049_83]),
        (m.input(), 2, [-0.265_391_6, 0.419_475_1]),
    ] {
        table.read_weights(id, &mut row);
        assert_relative_eq!(&row[..], &expected[..], epsilon = 1e-6);
    }
}

// One hierarchical-softmax pair step (hs = true, negative = 0), dim 2, word 2, context 1,
// alpha 0.1, vocabulary counts [4, 3, 2, 1]. word2vec.c's tree of those counts joins 3 and 2
// (node 0), then node 0 and 1 (node 1), then 0 and node 1 (node 2, the root); word 2's way is
// node 2 (second child: label 0), node 1 (first: label 1), node 0 (second: label 0). numpy
// (float64):
//   sig = lambda x: 1 / (1 + np.exp(-x))
//   l1 = [0.2, -0.1]; n2 = [0.3, 0.5]; n1 = [-0.4, 0.1]; n0 = [0.1, 0.2]; a = 0.1; neu = 0
//   for n, label in [(n2, 0), (n1, 1), (n0, 0)]:
//       f = l1 @ n; g = (label - sig(f)) * a
//       loss += -log(sig(f)) if label else -log(sig(-f)); neu += g * n; n += g * l1
//   -> loss 2.1304662, n2 [0.28995, 0.505025], n1 [-0.3895503, 0.09477515], n0 [0.09, 0.205],
//      l1 + neu [0.15902561, -0.12990015]
#[test]
fn one_hierarchical_softmax_step_matches_numpy() {
    let mut c = small_cfg(2);
    c.hs = true;
    c.negative = 0;
    let m = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[4, 3, 2, 1])).unwrap();
    let hs = m.hs.as_ref().unwrap();
    assert_eq!(hs.tree.points(2), &[2, 1, 0]);
    assert_eq!(hs.tree.codes(2), &[true, false, true]);
    assert_eq!(hs.tree.points(0), &[2]);
    m.input().write_weights(1, &[0.2, -0.1]);
    hs.table.write_weights(2, &[0.3, 0.5]);
    hs.table.write_weights(1, &[-0.4, 0.1]);
    hs.table.write_weights(0, &[0.1, 0.2]);
    let mut w = m.new_worker(0);
    let loss = m.pair_step(&mut w, &[], 2, 1, 0.1, true);
    assert_relative_eq!(loss, 2.130_466_2, epsilon = 1e-5);
    let mut row = [0.0f32; 2];
    for (table, id, expected) in [
        (&hs.table, 2, [0.28995, 0.505025]),
        (&hs.table, 1, [-0.389_550_3, 0.094_775_15]),
        (&hs.table, 0, [0.09, 0.205]),
        (m.input(), 1, [0.159_025_6, -0.129_900_15]),
    ] {
        table.read_weights(id, &mut row);
        assert_relative_eq!(&row[..], &expected[..], epsilon = 1e-6);
    }
    // Negative sampling's rows are not used.
    for r in 0..4 {
        m.output().read_weights(r, &mut row);
        assert_eq!(row, [0.0, 0.0]);
    }
}

/// With both, an example's loss is hierarchical softmax's plus negative sampling's, each
/// computed from the hidden vector as it was before the step.
#[test]
fn hierarchical_softmax_and_negative_sampling_add_up() {
    let run = |hs: bool, negative: usize| {
        let mut c = small_cfg(2);
        c.hs = hs;
        c.negative = negative;
        let m = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[4, 3, 2, 1])).unwrap();
        m.input().write_weights(1, &[0.2, -0.1]);
        m.output().write_weights(2, &[0.3, 0.5]);
        m.output().write_weights(3, &[-0.4, 0.1]);
        if let Some(hs) = &m.hs {
            for (r, row) in [[0.1, 0.2], [-0.4, 0.1], [0.3, 0.5]].iter().enumerate() {
                hs.table.write_weights(r, row);
            }
        }
        let mut w = m.new_worker(0);
        m.pair_step(&mut w, &[3], 2, 1, 0.1, false)
    };
    assert_relative_eq!(run(true, 1), run(true, 0) + run(false, 1), epsilon = 1e-6);
}

/// CBOW's examples: each word with the words of its window (window 1 is never shrunk) and at
/// most `negative` noise words, none of them the word; a sentence of one word has none.
#[test]
fn cbow_windows_hold_the_neighbours_and_noise() {
    let mut c = small_cfg(2);
    c.arch = Arch::Cbow;
    c.window = 1;
    let m = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[4, 3, 2, 1])).unwrap();
    let mut w = m.new_worker(0);
    w.sentence = vec![2, 0, 3];
    m.draw_examples(&mut w);
    let words: Vec<u32> = w.windows.iter().map(|e| e.0).collect();
    assert_eq!(words, [2, 0, 3]);
    let ends: Vec<usize> = w.windows.iter().map(|e| e.1).collect();
    assert_eq!(ends, [1, 3, 4]);
    assert_eq!(w.contexts, [0, 2, 3, 0]);
    let mut start = 0;
    for &(word, _, end) in &w.windows {
        let negs = &w.pair_negs[start..end];
        assert!(negs.len() <= 5 && !negs.contains(&word), "{word}: {negs:?}");
        start = end;
    }
    w.sentence = vec![1];
    m.draw_examples(&mut w);
    assert!(w.windows.is_empty() && w.contexts.is_empty());
    assert_eq!(m.train_sentence(&mut w, 0.1, true), (0.0, 0));
}

// gensim/word2vec.c keep probability: t = sample * total; p = (sqrt(c / t) + 1) * t / c.
// Counts [1000, 10, 1], min_count 2, sample 1e-3: total 1010 (the rare word is left out), t = 1.01;
// python: t = 1e-3 * 1010; (math.sqrt(1000 / t) + 1) * t / 1000, and the same for c = 10.
#[test]
fn subsampling_and_learning_rate_follow_word2vec() {
    let mut c = small_cfg(2);
    c.sample = 1e-3;
    c.min_count = 2;
    c.min_lr = 0.001;
    let m = Word2Vec::new(c, Sgd { lr: 0.025 }, vocab(&[1000, 10, 1])).unwrap();
    assert_relative_eq!(m.learning_rate(5000), 0.025, epsilon = 0.0); // no run planned yet
    m.start_run(2);
    let p = |id: usize| m.keep[id] as f64 / 4_294_967_296.0;
    assert_relative_eq!(p(0), 0.03279050, epsilon = 1e-6);
    assert_relative_eq!(p(1), 0.41880497, epsilon = 1e-6);
    assert_eq!(m.keep[2], 0, "below min_count");
    // The run's words are (1000 + 10) * 2 epochs.
    assert_relative_eq!(m.learning_rate(0), 0.025);
    assert_relative_eq!(m.learning_rate(1010), 0.013, epsilon = 1e-7);
    assert_relative_eq!(m.learning_rate(5000), 0.001);
}

#[test]
fn noise_follows_unigram_to_the_three_quarters() {
    let counts = [16u64, 81, 1, 0];
    let weights: Vec<f64> = counts.iter().map(|&c| (c as f64).powf(0.75)).collect();
    let table = AliasTable::new(&weights);
    let mut rng = XorShift64Star::from_seed(9);
    let mut seen = [0usize; 4];
    let n = 200_000;
    for _ in 0..n {
        seen[table.sample(rng.next()) as usize] += 1;
    }
    // 16^0.75 = 8, 81^0.75 = 27, 1^0.75 = 1: probabilities 8/36, 27/36, 1/36, 0.
    let expected = [8.0 / 36.0, 27.0 / 36.0, 1.0 / 36.0, 0.0];
    for (k, (&s, &e)) in seen.iter().zip(&expected).enumerate() {
        assert_relative_eq!(s as f64 / n as f64, e, epsilon = 0.005);
        assert!(k != 3 || s == 0);
    }
}

#[test]
fn vocabulary_from_text_and_conversion_to_ids() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt");
    std::fs::write(&a, "the cat sat\nthe dog\n\nrare\n").unwrap();
    std::fs::write(&b, "dog the the cat the\n").unwrap();
    let files = vec![a, b];
    let v = Vocab::count_text(&files, 2).unwrap();
    assert_eq!(v.words, vec!["the", "cat", "dog"]);
    assert_eq!(v.counts, vec![5, 2, 2]);
    let path = dir.path().join("out/vocab.txt");
    v.write(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "the 5\ncat 2\ndog 2\n"
    );
    assert_eq!(Vocab::from_file(&path).unwrap(), v);
    let parts = text_to_ids(&v, &files, &dir.path().join("ids"), 3).unwrap();
    assert_eq!(
        std::fs::read_to_string(&parts[0]).unwrap(),
        "2 0 1\n2 0 2\n",
        "unknown words dropped, empty lines left out"
    );
    assert_eq!(
        std::fs::read_to_string(&parts[1]).unwrap(),
        "3 2 0 0\n2 1 0\n",
        "split after max_sentence ids"
    );
    let e = Vocab::count_text(&files, 9).unwrap_err().to_string();
    assert!(e.contains("min_count") && e.contains("a.txt"), "{e}");
}

#[test]
fn vocabulary_of_id_files_counts_each_id() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("part-0");
    std::fs::write(&f, "3 1 4 1\n2 5 1\n").unwrap();
    let desc = DataFeedDesc::from_text(DESC).unwrap();
    let v = Vocab::count_ids(&desc, &[f], "words").unwrap();
    assert_eq!(v.counts, vec![0, 3, 0, 0, 1, 1]);
    assert_eq!(v.words[4], "4");
}

#[test]
fn bad_vocabularies_configs_and_ids_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.txt");
    std::fs::write(&path, "the 5\ncat x\n").unwrap();
    let e = Vocab::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("v.txt:2") && e.contains("\"x\""), "{e}");
    std::fs::write(&path, "the 5 7\n").unwrap();
    let e = Vocab::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("v.txt:1") && e.contains("word count"), "{e}");
    std::fs::write(&path, "").unwrap();
    assert!(Vocab::from_file(&path)
        .unwrap_err()
        .to_string()
        .contains("empty"));
    assert!(Vocab::from_file(&dir.path().join("none")).is_err());

    let v = vocab(&[3, 2]);
    for (field, edit) in [
        (
            "dim",
            Box::new(|c: &mut Word2VecConfig| c.dim = 0) as Box<dyn Fn(&mut _)>,
        ),
        ("window", Box::new(|c: &mut Word2VecConfig| c.window = 0)),
        (
            "negative",
            Box::new(|c: &mut Word2VecConfig| c.negative = 0),
        ),
        ("min_lr", Box::new(|c: &mut Word2VecConfig| c.min_lr = 1.0)),
        ("sample", Box::new(|c: &mut Word2VecConfig| c.sample = -1.0)),
        (
            "min_count",
            Box::new(|c: &mut Word2VecConfig| c.min_count = 10),
        ),
        // The run's epochs set the decay: a second epoch count is refused, not trained with.
        (
            "hogwild train --epochs",
            Box::new(|c: &mut Word2VecConfig| c.epochs = Some(5)),
        ),
    ] {
        let mut c = small_cfg(4);
        edit(&mut c);
        let e = Word2Vec::new(c, Sgd { lr: 0.025 }, v.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{field}: {e}");
    }

    let m = Word2Vec::new(small_cfg(4), Sgd { lr: 0.025 }, v).unwrap();
    let mut w = m.new_worker(0);
    let e = m
        .train_sentence_ids(&mut w, &[0, 7])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"words\"") && e.contains("word id 7 at offset 1"),
        "{e}"
    );
    let other = DataFeedDesc::from_text(&DESC.replace("\"words\"", "\"text\"")).unwrap();
    let e = m.worker(&other).unwrap_err().to_string();
    assert!(e.contains("\"words\""), "{e}");
}

/// Two topics of 10 words each; every sentence draws from one topic.
fn write_topics(dir: &Path, files: usize, lines: usize) -> Vec<PathBuf> {
    let mut rng = XorShift64Star::from_seed(4);
    (0..files)
        .map(|f| {
            let mut text = String::new();
            for _ in 0..lines {
                let topic = rng.next() % 2;
                text.push_str("12");
                for _ in 0..12 {
                    text.push_str(&format!(" {}", topic * 10 + rng.next() % 10));
                }
                text.push('\n');
            }
            let p = dir.join(format!("part-{f}"));
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect()
}

fn cosine(m: &Word2Vec, a: usize, b: usize) -> f32 {
    let (mut x, mut y) = (vec![0.0; m.cfg.dim], vec![0.0; m.cfg.dim]);
    m.input().read_weights(a, &mut x);
    m.input().read_weights(b, &mut y);
    dot(&x, &y) / (dot(&x, &x).sqrt() * dot(&y, &y).sqrt())
}

/// Mean cosine within topics minus across topics.
fn topic_gap(m: &Word2Vec) -> f32 {
    let (mut within, mut across) = ((0.0, 0), (0.0, 0));
    for a in 0..20 {
        for b in a + 1..20 {
            let c = cosine(m, a, b);
            if a / 10 == b / 10 {
                within = (within.0 + c, within.1 + 1);
            } else {
                across = (across.0 + c, across.1 + 1);
            }
        }
    }
    within.0 / within.1 as f32 - across.0 / across.1 as f32
}

/// A model of the topics' words (dim 16, window 3, no subsampling) with `setting` applied,
/// trained 3 epochs on `threads` threads; its last loss.
fn trained(
    threads: usize,
    files: &[PathBuf],
    vocab_file: &Path,
    setting: impl Fn(&mut Word2VecConfig),
) -> (Word2Vec, f64) {
    let mut c = Word2VecConfig::new(vocab_file);
    setting(&mut c);
    c.dim = 16;
    c.min_count = 1;
    c.window = 3;
    c.sample = 0.0;
    let desc = DataFeedDesc::from_text(DESC).unwrap();
    let v = Vocab::count_ids(&desc, files, "words").unwrap();
    let m = Word2Vec::new(c, Sgd { lr: 0.05 }, v).unwrap();
    executor::startup(&m);
    let mut opts = RunOptions {
        print_period: 0,
        progress: Progress::Quiet,
        ..RunOptions::default()
    };
    opts.feed.epochs = 3;
    let r = executor::run_from_files(&m, &desc, files, threads, &[], &opts, None).unwrap();
    assert_eq!(r.get("effective_words"), Some(3.0 * 12.0 * 400.0));
    // The run's words are all taken, so the last pairs trained at the floor's rate.
    assert_eq!(m.words_done(), 3 * 12 * 400);
    assert_eq!(m.learning_rate(m.words_done()), m.config().min_lr);
    (m, r.get("loss").unwrap())
}

#[test]
fn learns_topics_and_two_threads_reach_one_threads_quality() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_topics(dir.path(), 2, 200);
    for arch in [Arch::Skipgram, Arch::Cbow] {
        let (one, loss1) = trained(1, &files, &dir.path().join("v"), |c| c.arch = arch);
        let (two, loss2) = trained(2, &files, &dir.path().join("v"), |c| c.arch = arch);
        let (g1, g2) = (topic_gap(&one), topic_gap(&two));
        assert!(g1 > 0.5, "{arch:?} one thread: within - across cosine {g1}");
        assert!(g2 > g1 - 0.1, "{arch:?} two threads {g2} vs one {g1}");
        assert!(
            loss2 < loss1 * 1.1,
            "{arch:?} loss two threads {loss2} vs one {loss1}"
        );
        assert_eq!(one.words_done(), 3 * 12 * 400);
    }
}

#[test]
fn export_is_word2vec_text_format_sorted_by_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = small_cfg(3);
    c.min_count = 2;
    let v = Vocab {
        words: vec!["b".into(), "a".into(), "rare".into(), "c".into()],
        counts: vec![5, 9, 1, 5],
    };
    let m = Word2Vec::new(c, Sgd { lr: 0.025 }, v).unwrap();
    m.init();
    m.input().write_weights(1, &[0.5, -0.25, 1.0 / 3.0]);
    let path = dir.path().join("vectors.txt");
    assert_eq!(m.export_text(&path).unwrap(), 3);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "3 3");
    assert_eq!(lines[1], "a 0.500000 -0.250000 0.333333");
    let words: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(words, vec!["a", "b", "c"]);
    for (line, id) in lines[2..].iter().zip([0usize, 3]) {
        let mut row = [0.0f32; 3];
        m.input().read_weights(id, &mut row);
        let got: Vec<f32> = line
            .split(' ')
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(got.len(), 3);
        assert_relative_eq!(&got[..], &row[..], epsilon = 1e-6);
    }
    assert!(text.ends_with('\n') && !text.contains("  "));
}

/// A trained model, saved and loaded: its vectors, progress and vocabulary come back from the
/// checkpoint alone (the configuration's vocabulary file does not exist).
#[test]
fn checkpoint_keeps_vectors_progress_and_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = small_cfg(4);
    c.vocab_file = dir.path().join("never-written.txt");
    c.arch = Arch::Cbow;
    let m = Word2Vec::new(c.clone(), Sgd { lr: 0.025 }, vocab(&[4, 3, 2])).unwrap();
    m.init();
    let mut w = m.new_worker(0);
    m.train_sentence_ids(&mut w, &[0, 1, 2, 0]).unwrap();
    let path = dir.path().join("m.ckpt");
    crate::checkpoint::save_model(&path, &m).unwrap();
    let mut ck = crate::checkpoint::load(&path).unwrap();
    let back = Word2Vec::from_checkpoint(c, Sgd { lr: 0.025 }, &mut ck).unwrap();
    assert_eq!(back.words_done(), 4);
    assert_eq!(back.vocab(), m.vocab());
    assert_eq!(back.vocab_source(), &VocabSource::Checkpoint(path.clone()));
    let (mut x, mut y) = ([0.0f32; 4], [0.0f32; 4]);
    for r in 0..3 {
        m.input().read_weights(r, &mut x);
        back.input().read_weights(r, &mut y);
        assert_eq!(x, y);
    }
    let stored = m.describe();
    assert!(stored.contains("\narch = \"cbow\"\n"), "{stored}");
    let cfg = ModelConfig::from_stored(&stored, "stored").unwrap();
    assert!(matches!(&cfg.model, ModelKind::Word2vec(c) if c.arch == Arch::Cbow));
    // A model saved before the setting existed holds skip-gram vectors.
    let older = stored.replace("arch = \"cbow\"\n", "");
    let cfg = ModelConfig::from_stored(&older, "older").unwrap();
    assert!(matches!(&cfg.model, ModelKind::Word2vec(c) if c.arch == Arch::Skipgram));
}

/// Any word survives the checkpoint's encoding (white space, non-ASCII, empty); a damaged
/// encoding is refused with what is wrong, never a panic, at every length.
#[test]
fn vocabulary_bytes_round_trip_and_damage_is_named() {
    let v = Vocab {
        words: vec![
            "the".into(),
            "a b\tc".into(),
            "日本\u{3000}語".into(),
            String::new(),
        ],
        counts: vec![u64::MAX, 7, 1, 0],
    };
    let bytes = v.to_bytes();
    assert_eq!(Vocab::from_bytes(&bytes).unwrap(), v);
    for cut in 0..bytes.len() {
        let e = Vocab::from_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            e.contains("ends inside") || e.contains("declared"),
            "cut {cut}: {e}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        Vocab::from_bytes(&longer).unwrap_err(),
        "1 bytes after its last word"
    );
    let mut huge = bytes.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Vocab::from_bytes(&huge).unwrap_err().contains("declared"));
    let mut not_utf8 = bytes.clone();
    // Word 0 "the" starts after the word count, its count and its length.
    not_utf8[8 + 8 + 4] = 0xff;
    assert_eq!(
        Vocab::from_bytes(&not_utf8).unwrap_err(),
        "word 0 is not UTF-8"
    );
    let empty = Vocab::default().to_bytes();
    assert_eq!(Vocab::from_bytes(&empty).unwrap_err(), "it has no words");
}

/// A model saved and its checkpoint's vocabulary section replaced by `bytes` (under a valid
/// checksum), loaded back.
fn load_with_vocab_section(dir: &Path, bytes: Option<Vec<u8>>) -> Result<Word2Vec> {
    let mut c = small_cfg(2);
    c.vocab_file = dir.join("vocab.txt");
    let m = Word2Vec::new(c.clone(), Sgd { lr: 0.025 }, vocab(&[4, 3, 2])).unwrap();
    m.init();
    let sections: Vec<Section> = bytes
        .into_iter()
        .map(|bytes| Section {
            name: VOCAB_SECTION.into(),
            bytes,
        })
        .collect();
    let path = dir.join("m.ckpt");
    crate::checkpoint::save(&path, &m.describe(), &sections, &m.tables()).unwrap();
    let mut ck = crate::checkpoint::load(&path).unwrap();
    Word2Vec::from_checkpoint(c, Sgd { lr: 0.025 }, &mut ck)
}

/// A checkpoint whose vocabulary does not decode, or does not have a word per row, is refused.
#[test]
fn a_bad_stored_vocabulary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = load_with_vocab_section(dir.path(), Some(vec![1, 2, 3]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("m.ckpt") && e.contains("corrupt: its vocabulary"),
        "{e}"
    );
    let e = load_with_vocab_section(dir.path(), Some(vocab(&[4, 3]).to_bytes()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 x 2") && e.contains("2 x 2"), "{e}");
}

/// A checkpoint written before checkpoints held vocabularies (no vocabulary section) reads the
/// vocabulary file it names, says so, and is refused, naming the file, when that file is
/// missing or has another number of words.
#[test]
fn checkpoints_without_a_vocabulary_read_the_file_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vocab.txt");
    let e = load_with_vocab_section(dir.path(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("m.ckpt")
            && e.contains("older")
            && e.contains(&file.display().to_string())
            && e.contains("cannot open"),
        "{e}"
    );
    assert!(!e.contains("relative"), "an absolute path: {e}");
    vocab(&[5, 4, 3, 2]).write(&file).unwrap();
    let e = load_with_vocab_section(dir.path(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&file.display().to_string())
            && e.contains("has 4 words for the model's 3 vectors"),
        "{e}"
    );
    let other = Vocab {
        words: vec!["x".into(), "y".into(), "z".into()],
        counts: vec![9, 8, 7],
    };
    other.write(&file).unwrap();
    let m = load_with_vocab_section(dir.path(), None).unwrap();
    assert_eq!(m.vocab(), &other);
    assert_eq!(
        m.vocab_source(),
        &VocabSource::File {
            checkpoint: dir.path().join("m.ckpt"),
            file: file.clone(),
        }
    );
    // Saved again, the checkpoint holds the vocabulary and no longer reads the file.
    let again = dir.path().join("again.ckpt");
    crate::checkpoint::save_model(&again, &m).unwrap();
    std::fs::remove_file(&file).unwrap();
    let mut ck = crate::checkpoint::load(&again).unwrap();
    let back = Word2Vec::from_checkpoint(m.config().clone(), Sgd { lr: 0.025 }, &mut ck).unwrap();
    assert_eq!(back.vocab(), &other);
    assert_eq!(back.vocab_source(), &VocabSource::Checkpoint(again));
}

// The tabulated ln(1 + exp(-x)) against the exact value (f64) on a grid off the table's knots.
#[test]
fn softplus_table_is_accurate() {
    let t = SoftplusTable::new();
    for k in 0..=1200 {
        let x = -6.0 + k as f64 * 0.01 + 0.000_37f64.min(6.0 - (-6.0 + k as f64 * 0.01)).max(0.0);
        let exact = (-x).exp().ln_1p();
        assert_relative_eq!(f64::from(t.at(x as f32)), exact, epsilon = 1e-6);
    }
}

/// Hierarchical softmax alone learns the topics, at one and two threads, and its model keeps
/// its tree's rows through a checkpoint (the tree itself is rebuilt from the stored counts).
#[test]
fn hierarchical_softmax_learns_topics_and_survives_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_topics(dir.path(), 2, 200);
    let hs_only = |c: &mut Word2VecConfig| (c.hs, c.negative) = (true, 0);
    for threads in [1, 2] {
        let (m, _) = trained(threads, &files, &dir.path().join("v"), hs_only);
        let gap = topic_gap(&m);
        assert!(gap > 0.5, "{threads} threads: within - across cosine {gap}");
        let path = dir.path().join("hs.ckpt");
        crate::checkpoint::save_model(&path, &m).unwrap();
        let stored = m.describe();
        assert!(stored.contains("\nhs = true\n"), "{stored}");
        let mut ck = crate::checkpoint::load(&path).unwrap();
        let back =
            Word2Vec::from_checkpoint(m.config().clone(), Sgd { lr: 0.05 }, &mut ck).unwrap();
        let (a, b) = (m.hs.as_ref().unwrap(), back.hs.as_ref().unwrap());
        assert_eq!(a.tree, b.tree);
        let (mut x, mut y) = ([0.0f32; 16], [0.0f32; 16]);
        for r in 0..a.table.rows() {
            a.table.read_weights(r, &mut x);
            b.table.read_weights(r, &mut y);
            assert_eq!(x, y);
        }
    }
    // Neither loss is a configuration that trains nothing; a tree needs two words.
    let mut none = small_cfg(2);
    none.negative = 0;
    let err = Word2Vec::new(none, Sgd { lr: 0.1 }, vocab(&[2, 1]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("negative") && err.contains("hs = true"),
        "{err}"
    );
    let mut one = small_cfg(2);
    one.hs = true;
    let err = Word2Vec::new(one, Sgd { lr: 0.1 }, vocab(&[2]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("at least 2 words, not 1"), "{err}");
}

/// A model with subwords (minn 3, maxn 6, 1,000,000 buckets, fastText's) over the words
/// `w0 zz a w3` (counts 4 3 2 1), dim 2, window 1, every row zero until written.
fn subword_model(arch: Arch) -> Word2Vec {
    let mut c = small_cfg(2);
    c.arch = arch;
    c.window = 1;
    (c.minn, c.maxn, c.subword_buckets) = (3, 6, 1_000_000);
    let v = Vocab {
        words: ["w0", "zz", "a", "w3"].map(String::from).to_vec(),
        counts: vec![4, 3, 2, 1],
    };
    Word2Vec::new(c, Sgd { lr: 0.1 }, v).unwrap()
}

/// The n-gram buckets fastText gives "zz" ("<zz", "<zz>", "zz>") and "a" ("<a>") with
/// `minn 3 -maxn 6 -bucket 1000000`: its ids less its 8 words, from the classifier's test
/// against fastText (`crate::subwords`).
const ZZ_BUCKETS: [usize; 3] = [777_875 - 8, 257_975 - 8, 1049 - 8];
const A_BUCKET: usize = 87_608 - 8;

/// The rows of "zz" (its own, then its n-grams') and of "a", written with the values of the
/// numpy snippets below; returns the rows in that order.
fn write_subword_rows(m: &Word2Vec) -> [usize; 6] {
    let words = m.vocab().len();
    let rows = [
        1,
        words + ZZ_BUCKETS[0],
        words + ZZ_BUCKETS[1],
        words + ZZ_BUCKETS[2],
        2,
        words + A_BUCKET,
    ];
    let values = [
        [0.2, -0.1],
        [0.4, 0.3],
        [-0.1, 0.5],
        [0.3, -0.3],
        [-0.3, 0.4],
        [0.1, 0.1],
    ];
    for (r, v) in rows.iter().zip(values) {
        m.input().write_weights(*r, &v);
    }
    m.output().write_weights(0, &[0.3, 0.5]);
    m.output().write_weights(3, &[-0.4, 0.1]);
    rows
}

// One skip-gram step with subwords (fastText's `skipgram` and `Model::update`): target word 0,
// input word "zz" (its row v and n-gram rows g1 g2 g3), noise word 3, alpha 0.1. The hidden
// vector is the mean of the four rows; each row gets the whole correction. numpy (float64):
//   sig = lambda x: 1 / (1 + np.exp(-x))
//   v = [0.2, -0.1]; g1 = [0.4, 0.3]; g2 = [-0.1, 0.5]; g3 = [0.3, -0.3]
//   o0 = [0.3, 0.5]; o3 = [-0.4, 0.1]; a = 0.1
//   h = (v + g1 + g2 + g3) / 4; neu = 0
//   f = h @ o0; g = (1 - sig(f)) * a; loss = -log(sig(f)); neu += g * o0; o0 += g * h
//   f = h @ o3; g = (0 - sig(f)) * a; loss += -log(sig(-f)); neu += g * o3; o3 += g * h
//   -> loss 1.2984185, o0 [0.309450554, 0.504725277], o3 [-0.409650143, 0.095174929],
//      v + neu [0.233476117, -0.081198687], g1 + neu [0.433476117, 0.318801313],
//      g2 + neu [-0.066523883, 0.518801313], g3 + neu [0.333476117, -0.281198687]
// Tolerance 1e-6: float32 arithmetic on values of order 1.
#[test]
fn one_subword_skipgram_step_matches_numpy() {
    let m = subword_model(Arch::Skipgram);
    let rows = write_subword_rows(&m);
    let got: Vec<usize> = m
        .word_rows
        .as_ref()
        .unwrap()
        .of(1)
        .iter()
        .map(|&r| r as usize)
        .collect();
    assert_eq!(got, rows[..4]);
    let mut w = m.new_worker(0);
    let loss = m.pair_step(&mut w, &[3], 0, 1, 0.1, true);
    assert_relative_eq!(loss, 1.298_418_5, epsilon = 1e-5);
    let mut row = [0.0f32; 2];
    for (table, id, expected) in [
        (m.output(), 0, [0.309_450_55, 0.504_725_3]),
        (m.output(), 3, [-0.409_650_14, 0.095_174_93]),
        (m.input(), rows[0], [0.233_476_12, -0.081_198_69]),
        (m.input(), rows[1], [0.433_476_12, 0.318_801_3]),
        (m.input(), rows[2], [-0.066_523_88, 0.518_801_3]),
        (m.input(), rows[3], [0.333_476_12, -0.281_198_7]),
    ] {
        table.read_weights(id, &mut row);
        assert_relative_eq!(&row[..], &expected[..], epsilon = 1e-6);
    }
}

// One CBOW step with subwords (fastText's `cbow`): word 0, context words "zz" (rows v g1 g2 g3)
// and "a" (rows u ga), noise word 3, alpha 0.1: the hidden vector is the mean of all six rows,
// and each gets the whole correction. numpy (float64), `sig` and the rows as above:
//   u = [-0.3, 0.4]; ga = [0.1, 0.1]; h = (v + g1 + g2 + g3 + u + ga) / 6; the same two steps
//   -> loss 1.32275, o0 [0.304737741, 0.507106611], o3 [-0.404937503, 0.092593745],
//      v + neu [0.233963236, -0.081248799], g3 + neu [0.333963236, -0.281248799],
//      u + neu [-0.266036764, 0.418751201], ga + neu [0.133963236, 0.118751201]
#[test]
fn one_subword_cbow_step_matches_numpy() {
    let m = subword_model(Arch::Cbow);
    let rows = write_subword_rows(&m);
    let mut w = m.new_worker(0);
    let loss = m.cbow_step(&mut w, &[1, 2], &[3], 0, 0.1, true);
    assert_relative_eq!(loss, 1.322_75, epsilon = 1e-5);
    let mut row = [0.0f32; 2];
    for (table, id, expected) in [
        (m.output(), 0, [0.304_737_74, 0.507_106_6]),
        (m.output(), 3, [-0.404_937_5, 0.092_593_745]),
        (m.input(), rows[0], [0.233_963_24, -0.081_248_8]),
        (m.input(), rows[3], [0.333_963_24, -0.281_248_8]),
        (m.input(), rows[4], [-0.266_036_76, 0.418_751_2]),
        (m.input(), rows[5], [0.133_963_24, 0.118_751_2]),
    ] {
        table.read_weights(id, &mut row);
        assert_relative_eq!(&row[..], &expected[..], epsilon = 1e-6);
    }
}

/// With subwords a skip-gram pair is fastText's: the word's rows predict each context word, the
/// noise words drawn against the context word (window 1 is never shrunk).
#[test]
fn subword_pairs_take_the_word_as_input() {
    let m = subword_model(Arch::Skipgram);
    let mut w = m.new_worker(0);
    w.sentence = vec![0, 1, 2];
    m.draw_examples(&mut w);
    let pairs: Vec<(u32, u32)> = w.pairs.iter().map(|&(t, i, _)| (t, i)).collect();
    assert_eq!(pairs, [(1, 0), (0, 1), (2, 1), (1, 2)]);
    let mut start = 0;
    for &(target, _, end) in &w.pairs {
        assert!(w.pair_negs[start..end].iter().all(|&n| n != target));
        start = end;
    }
}

/// The exported vector of a word is the mean of its rows (fastText's `getWordVector`); a word
/// outside the vocabulary gets the mean of its n-grams' rows, with the buckets fastText gives
/// "hello" (the classifier's test against fastText), and zero when it has no n-gram in range.
#[test]
fn subword_vectors_are_means_of_rows() {
    let dir = tempfile::tempdir().unwrap();
    let m = subword_model(Arch::Skipgram);
    m.init();
    let words = m.vocab().len();
    let mean = |rows: &[usize]| {
        let mut sum = [0.0f64; 2];
        let mut row = [0.0f32; 2];
        for &r in rows {
            m.input().read_weights(r, &mut row);
            sum[0] += f64::from(row[0]);
            sum[1] += f64::from(row[1]);
        }
        sum.map(|x| (x / rows.len() as f64) as f32)
    };
    let zz: Vec<usize> = [1]
        .into_iter()
        .chain(ZZ_BUCKETS.map(|b| words + b))
        .collect();
    let path = dir.path().join("v.txt");
    m.export_text(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().find(|l| l.starts_with("zz ")).unwrap();
    let got: Vec<f32> = line
        .split(' ')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_relative_eq!(&got[..], &mean(&zz)[..], epsilon = 1e-6);
    let mut v = [0.0f32; 2];
    m.word_vector(1, &mut v);
    assert_relative_eq!(&v[..], &mean(&zz)[..], epsilon = 1e-6);

    let hello = [
        188588, 128672, 361316, 760913, 613750, 198318, 831731, 68695, 992352, 798173, 616889,
        617350, 350920, 504798,
    ]
    .map(|id| words + id - 8);
    assert_eq!(m.ngram_vector("hello", &mut v), Some(14));
    assert_relative_eq!(&v[..], &mean(&hello)[..], epsilon = 1e-6);
    // "zz" outside the vocabulary would have its n-grams alone.
    assert_eq!(m.ngram_vector("zz", &mut v), Some(3));
    assert_relative_eq!(&v[..], &mean(&zz[1..])[..], epsilon = 1e-6);
    let mut c = small_cfg(2);
    (c.minn, c.maxn, c.subword_buckets) = (5, 6, 10);
    let short = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[2, 1])).unwrap();
    short.init();
    // "<ab>" has 4 characters: no n-gram of 5 or 6.
    assert_eq!(short.ngram_vector("ab", &mut v), Some(0));
    assert_eq!(v, [0.0, 0.0]);
    let plain = Word2Vec::new(small_cfg(2), Sgd { lr: 0.1 }, vocab(&[2, 1])).unwrap();
    assert_eq!(plain.ngram_vector("ab", &mut v), None);
}

/// A model with subwords saved and loaded: its n-gram settings are in the stored config, its
/// rows come back, and a config saved before the settings existed has none.
#[test]
fn checkpoint_keeps_subwords() {
    let dir = tempfile::tempdir().unwrap();
    let m = subword_model(Arch::Skipgram);
    m.init();
    let mut w = m.new_worker(0);
    m.train_sentence_ids(&mut w, &[0, 1, 2, 3, 1]).unwrap();
    let path = dir.path().join("m.ckpt");
    crate::checkpoint::save_model(&path, &m).unwrap();
    let stored = m.describe();
    for key in [
        "\nminn = 3\n",
        "\nmaxn = 6\n",
        "\nsubword_buckets = 1000000\n",
    ] {
        assert!(stored.contains(key), "{key}: {stored}");
    }
    let cfg = ModelConfig::from_stored(&stored, "stored").unwrap();
    let ModelKind::Word2vec(c) = cfg.model else {
        panic!("{stored}")
    };
    let mut ck = crate::checkpoint::load(&path).unwrap();
    let back = Word2Vec::from_checkpoint(c, Sgd { lr: 0.1 }, &mut ck).unwrap();
    assert_eq!(back.subwords(), m.subwords());
    assert_eq!(back.input().rows(), 4 + 1_000_000);
    let (mut x, mut y) = ([0.0f32; 2], [0.0f32; 2]);
    for id in 0..4 {
        m.word_vector(id, &mut x);
        back.word_vector(id, &mut y);
        assert_eq!(x, y);
    }
    m.ngram_vector("hello", &mut x);
    back.ngram_vector("hello", &mut y);
    assert_eq!(x, y);
    let older = ["minn = 3\n", "maxn = 6\n", "subword_buckets = 1000000\n"]
        .iter()
        .fold(stored.clone(), |s, key| s.replace(key, ""));
    let cfg = ModelConfig::from_stored(&older, "older").unwrap();
    assert!(matches!(&cfg.model, ModelKind::Word2vec(c) if c.subwords().unwrap().is_none()));
}

/// Subword settings that do not fit together are refused before training, naming the key.
#[test]
fn bad_subword_settings_are_named() {
    for ((minn, maxn, buckets), key, says) in [
        ((3, 6, 0), "subword_buckets", "must be at least 1"),
        ((0, 0, 100), "subword_buckets", "need minn and maxn"),
        ((0, 6, 100), "minn", "must be at least 1"),
        ((4, 3, 100), "maxn", "must be at least minn (4)"),
        (
            (3, 6, u32::MAX as usize),
            "subword_buckets",
            "more than the 2147483648",
        ),
    ] {
        let mut c = small_cfg(2);
        (c.minn, c.maxn, c.subword_buckets) = (minn, maxn, buckets);
        let e = Word2Vec::new(c, Sgd { lr: 0.1 }, vocab(&[2, 1]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(key) && e.contains(says),
            "{minn} {maxn} {buckets}: {e}"
        );
    }
}

// The input rows start uniform in [-1/dim, 1/dim] (fastText's and gensim's start, twice
// word2vec.c's width), the same for the same seed and different for another; the output rows
// start at zero.
#[test]
fn input_rows_start_uniform_within_one_over_dim() {
    let dim = 50;
    let start = |seed: u64| {
        let mut cfg = small_cfg(dim);
        cfg.seed = seed;
        let m = Word2Vec::new(cfg, Sgd { lr: 0.1 }, vocab(&[5; 200])).unwrap();
        m.init();
        let mut rows = vec![0.0f32; 200 * dim];
        for (r, row) in rows.chunks_mut(dim).enumerate() {
            m.input().read_weights(r, row);
        }
        let mut out = vec![0.0f32; dim];
        m.output().read_weights(7, &mut out);
        assert!(out.iter().all(|&x| x == 0.0));
        rows
    };
    let rows = start(1);
    let bound = 1.0 / dim as f32;
    assert!(rows.iter().all(|x| x.abs() <= bound), "within 1/dim");
    let wide = rows.iter().filter(|x| x.abs() > 0.5 * bound).count() as f64;
    // Uniform over the whole width: half beyond 0.5/dim (none with word2vec.c's start).
    assert!(
        (wide / rows.len() as f64 - 0.5).abs() < 0.03,
        "{wide} of {}",
        rows.len()
    );
    let mean = rows.iter().map(|&x| f64::from(x)).sum::<f64>() / rows.len() as f64;
    assert!(mean.abs() < 0.02 * f64::from(bound), "centred: {mean}");
    assert_eq!(rows, start(1));
    assert_ne!(rows, start(2));
}
