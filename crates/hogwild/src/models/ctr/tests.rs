use super::*;
use crate::executor::{self, Progress, RunOptions};
use crate::feed::{SlotBatch, SlotValues};
use crate::files::Output;
use crate::optim::{Adagrad, AdamAsync, Sgd};
use approx::assert_relative_eq;
use std::path::{Path, PathBuf};

const DESC: &str = r#"
name: "MultiSlotDataFeed"
batch_size: 16
multi_slot_desc {
  slots { name: "a" type: "uint64" is_dense: false is_used: true }
  slots { name: "b" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

fn desc() -> DataFeedDesc {
    DataFeedDesc::from_text(DESC).unwrap()
}

/// [`DESC`] with a third field, `c`, before the label.
fn desc3() -> DataFeedDesc {
    let c = r#"slots { name: "c" type: "uint64" is_dense: false is_used: true }
  slots { name: "label""#;
    DataFeedDesc::from_text(&DESC.replace(r#"slots { name: "label""#, c)).unwrap()
}

fn one(a: u64, b: u64, y: u64) -> Batch {
    let slot = |v: u64| SlotBatch {
        values: SlotValues::U64(vec![v]),
        offsets: vec![0, 1],
    };
    Batch::from_slots(vec![slot(a), slot(b), slot(y)])
}

// One SGD step (lr 0.5) of an FM with dim 2 on features A (w 0.2, v [0.1, -0.2]) and B (w -0.3,
// v [0.3, 0.4]), bias 0.1, label 1. numpy:
//   logit = 0.1 + 0.2 - 0.3 + vA @ vB = -0.05; p = sig(logit) = 0.4875026; loss = 0.7184596
//   g = p - 1; wA' = 0.2 - 0.5 g = 0.4562487; vA' = vA - 0.5 g vB = [0.17687461, -0.09750052]
//   vB' = vB - 0.5 g vA = [0.32562487, 0.34875026]; b' = 0.1 - 0.5 g = 0.35624870
#[test]
fn one_fm_sgd_step_matches_numpy() {
    let mut cfg = CtrConfig::new(1000);
    cfg.dim = Some(2);
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.5f32 }).unwrap();
    m.init();
    let mut w = m.new_worker(&desc()).unwrap();
    let batch = one(11, 22, 1);
    m.gather(&mut w, &batch, 0).unwrap();
    let [(ta, ra), (tb, rb)] = [w.feats[0], w.feats[1]];
    assert_ne!(ra, rb);
    let t = &m.feature_tables()[ta];
    assert_eq!(ta, tb);
    t.write_weights(ra, &[0.2, 0.1, -0.2]);
    t.write_weights(rb, &[-0.3, 0.3, 0.4]);
    m.bias.write_weights(0, &[0.1]);
    assert_relative_eq!(
        m.predict(&mut w, &batch, 0).unwrap(),
        0.4875026,
        epsilon = 1e-6
    );
    let mut out = [0.0f64];
    m.train_batch(&mut w, &batch, &mut out, None).unwrap();
    assert_relative_eq!(out[0], 0.7184596, epsilon = 1e-6);
    let mut row = [0.0f32; 3];
    t.read_weights(ra, &mut row);
    assert_relative_eq!(
        &row[..],
        &[0.4562487, 0.17687461, -0.09750052][..],
        epsilon = 1e-6
    );
    t.read_weights(rb, &mut row);
    assert_relative_eq!(row[1], 0.32562487, epsilon = 1e-6);
    assert_relative_eq!(row[2], 0.34875026, epsilon = 1e-6);
    assert_relative_eq!(m.bias.weights(0)[0].load(), 0.3562487, epsilon = 1e-6);
}

// Per-field sizes: field a has 1 factor, b has 3; component 0 is shared, 1 and 2 only b's.
// logit = wA + wB + vA[0] * vB[0] = 0.5 - 0.25 + 0.5 * 2.0 = 1.25 (no pair in components 1, 2).
#[test]
fn per_field_sizes_share_leading_components() {
    let mut cfg = CtrConfig::new(64);
    cfg.field_dims.insert("a".into(), 1);
    cfg.dim = Some(3);
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    assert_eq!(m.feature_tables().len(), 2);
    assert_eq!(m.feature_tables()[0].name(), "fm_k1");
    let mut w = m.new_worker(&desc()).unwrap();
    let batch = one(1, 2, 0);
    m.gather(&mut w, &batch, 0).unwrap();
    let [(ta, ra), (tb, rb)] = [w.feats[0], w.feats[1]];
    assert_eq!((ta, tb), (0, 1));
    m.feature_tables()[0].write_weights(ra, &[0.5, 0.5]);
    m.feature_tables()[1].write_weights(rb, &[-0.25, 2.0, 7.0, -3.0]);
    assert_relative_eq!(m.forward::<false>(&mut w, 0.0), 1.25);
}

// Logistic regression with weights -1, 0, 1 for ids 1, 2, 3 of field `a` (field `b`'s id 9 and
// the bias stay 0) scores each instance by its `a` id's weight. The exact AUC (ties half) over
// every positive-negative pair, in python:
//   s = [-1, -1, 0, 0, 0, 1, 1, -1]; y = [0, 1, 0, 1, 1, 1, 0, 0]
//   pos = [a for a, l in zip(s, y) if l]; neg = [a for a, l in zip(s, y) if not l]
//   sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))  # 0.59375
#[test]
fn eval_reports_the_exact_auc_over_every_thread() {
    let m = Ctr::new(CtrKind::Lr, CtrConfig::new(1024), Sgd { lr: 0.1f32 }).unwrap();
    m.init();
    let mut w = m.new_worker(&desc()).unwrap();
    let rows: Vec<(usize, usize)> = [1u64, 2, 3]
        .iter()
        .map(|&a| {
            m.gather(&mut w, &one(a, 9, 0), 0).unwrap();
            w.feats[0]
        })
        .collect();
    let b_row = w.feats[1];
    let mut distinct = rows.clone();
    distinct.push(b_row);
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "rows {rows:?} and {b_row:?} collide");
    for (&(t, row), weight) in rows.iter().zip([-1.0f32, 0.0, 1.0]) {
        m.feature_tables()[t].write_weights(row, &[weight]);
    }
    let (ids, labels) = ([1u64, 1, 2, 2, 2, 3, 3, 1], [0u64, 1, 0, 1, 1, 1, 0, 0]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test");
    let text: String = ids
        .iter()
        .zip(labels)
        .map(|(a, y)| format!("1 {a} 1 9 1 {y}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    let files = vec![path];
    // Batches of 2: the instances spread over both threads, whose pairs the executor merges.
    let mut options = quiet();
    options.feed.batch_size = Some(2);
    let r = executor::eval_from_files(&m, &desc(), &files, 2, &[], &options, None).unwrap();
    assert_eq!(r.fetched[1].0, "auc");
    assert_relative_eq!(r.get("auc").unwrap(), 0.59375);
    let mut out = Output::create(&dir.path().join("pred.txt")).unwrap();
    let r =
        executor::eval_from_files(&m, &desc(), &files, 2, &[], &options, Some(&mut out)).unwrap();
    assert_relative_eq!(r.get("auc").unwrap(), 0.59375);

    // A worker collects one pair per evaluated instance with a label, none in training.
    let mut w = m.new_worker(&desc()).unwrap();
    m.eval_batch(&mut w, &one(3, 9, 1), &mut [0.0], None)
        .unwrap();
    assert_eq!(m.auc(&mut w).unwrap().len(), 1);
    m.auc(&mut w).unwrap().clear();
    m.train_batch(&mut w, &one(3, 9, 1), &mut [0.0], None)
        .unwrap();
    assert!(m.auc(&mut w).unwrap().is_empty());
}

/// A known model: logit = w[a] + w[b] + interaction (a and b share parity) over 50 ids per field.
fn write_data(dir: &Path, name: &str, files: usize, lines: usize, seed: u64) -> Vec<PathBuf> {
    let mut s = seed;
    let mut next = move || {
        s = mix64(s);
        s
    };
    (0..files)
        .map(|f| {
            let mut text = String::new();
            for _ in 0..lines {
                let (a, b) = (next() % 50, next() % 50);
                let wa = (a % 7) as f64 * 0.3 - 0.9;
                let wb = (b % 5) as f64 * 0.4 - 0.8;
                let inter = if a % 2 == b % 2 { 1.5 } else { -1.5 };
                let p = 1.0 / (1.0 + (-(wa + wb + inter)).exp());
                let y = u64::from(crate::rng::unit_f64(next()) <= p);
                text.push_str(&format!("1 {a} 1 {b} 1 {y}\n"));
            }
            let path = dir.join(format!("{name}-{f}"));
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

fn quiet() -> RunOptions {
    RunOptions {
        print_period: 0,
        progress: Progress::Quiet,
        ..RunOptions::default()
    }
}

fn fit<O: Optimizer<f32> + OptimizerDesc>(
    m: &Ctr<O>,
    train: &[PathBuf],
    test: &[PathBuf],
    threads: usize,
) -> (f64, f64) {
    executor::startup(m);
    for _ in 0..4 {
        executor::run_from_files(m, &desc(), train, threads, &[], &quiet(), None).unwrap();
    }
    let r = executor::eval_from_files(m, &desc(), test, 1, &[], &quiet(), None).unwrap();
    (r.get("loss").unwrap(), r.get("auc").unwrap())
}

#[test]
fn fm_learns_interactions_lr_cannot_and_two_threads_match_one() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_data(dir.path(), "train", 2, 4000, 1);
    let test = write_data(dir.path(), "test", 1, 3000, 2);
    let ada = Adagrad {
        lr: 0.1f32,
        initial_accumulator: 0.1,
    };
    let lr = Ctr::new(CtrKind::Lr, CtrConfig::new(4096), ada).unwrap();
    let (_, auc_lr) = fit(&lr, &train, &test, 1);
    let mut cfg = CtrConfig::new(4096);
    cfg.dim = Some(4);
    cfg.init_scale = 0.1;
    let fm = Ctr::new(CtrKind::Fm, cfg.clone(), ada).unwrap();
    let (loss1, auc1) = fit(&fm, &train, &test, 1);
    assert!(auc1 > auc_lr + 0.05, "fm {auc1} vs lr {auc_lr}");
    assert!(auc1 > 0.8, "fm auc {auc1}");
    let fm2 = Ctr::new(CtrKind::Fm, cfg.clone(), ada).unwrap();
    let (loss2, auc2) = fit(&fm2, &train, &test, 2);
    assert!(
        auc2 > auc1 - 0.01 && loss2 < loss1 + 0.01,
        "2 threads {auc2} {loss2} vs 1: {auc1} {loss1}"
    );
    let adam = Ctr::new(
        CtrKind::Fm,
        cfg.clone(),
        AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8),
    )
    .unwrap();
    let (_, auc_adam) = fit(&adam, &train, &test, 2);
    assert!(auc_adam > 0.8, "adam_async auc {auc_adam}");
    let mut rms = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
    rms.apply_sparse_rmsprop = true;
    let rms = Ctr::new(CtrKind::Fm, cfg.clone(), rms).unwrap();
    let (_, auc_rms) = fit(&rms, &train, &test, 1);
    assert!(auc_rms > 0.8, "rmsprop auc {auc_rms}");
    let sgd = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.05f32 }).unwrap();
    let (_, auc_sgd) = fit(&sgd, &train, &test, 1);
    assert!(auc_sgd > 0.8, "sgd auc {auc_sgd}");
}

#[test]
fn predictions_are_one_probability_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let test = write_data(dir.path(), "test", 1, 40, 3);
    let m = Ctr::new(CtrKind::Lr, CtrConfig::new(128), Sgd { lr: 0.1f32 }).unwrap();
    m.init();
    let out = dir.path().join("pred.txt");
    let mut output = Output::create(&out).unwrap();
    executor::eval_from_files(&m, &desc(), &test, 1, &[], &quiet(), Some(&mut output)).unwrap();
    output.commit().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 40);
    assert!(
        text.lines().all(|l| l == "0.500000"),
        "zero model predicts 0.5"
    );
}

#[test]
fn bad_labels_fields_and_configs_are_named() {
    let m = Ctr::new(CtrKind::Lr, CtrConfig::new(16), Sgd { lr: 0.1f32 }).unwrap();
    let mut w = m.new_worker(&desc()).unwrap();
    let e = m
        .train_batch(&mut w, &one(1, 2, 2), &mut [0.0], None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"label\"") && e.contains("label 2 is not 0 or 1"),
        "{e}"
    );

    let mut cfg = CtrConfig::new(16);
    cfg.fields = vec!["a".into(), "c".into()];
    let m = Ctr::new(CtrKind::Lr, cfg, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc()).unwrap_err().to_string();
    assert!(e.contains("fields.c") && e.contains("no used slot"), "{e}");

    let mut cfg = CtrConfig::new(16);
    cfg.field_dims.insert("zz".into(), 2);
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc()).unwrap_err().to_string();
    assert!(e.contains("field_dims.zz"), "{e}");

    for (kind, edit, field) in [
        (
            CtrKind::Lr,
            Box::new(|c: &mut CtrConfig| c.dim = Some(4)) as Box<dyn Fn(&mut _)>,
            "dim",
        ),
        (
            CtrKind::Fm,
            Box::new(|c: &mut CtrConfig| c.dim = Some(0)),
            "dim",
        ),
        (
            CtrKind::Fm,
            Box::new(|c: &mut CtrConfig| c.buckets = 0),
            "buckets",
        ),
        (CtrKind::Fm, Box::new(|c: &mut CtrConfig| c.l2 = -1.0), "l2"),
        (
            CtrKind::Fm,
            Box::new(|c: &mut CtrConfig| c.fields = vec!["label".into()]),
            "fields",
        ),
    ] {
        let mut cfg = CtrConfig::new(16);
        edit(&mut cfg);
        let e = Ctr::new(kind, cfg, Sgd { lr: 0.1f32 })
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

#[test]
fn config_round_trips_through_toml_and_checkpoints() {
    let text = r#"
[model]
kind = "fm"
buckets = 256
dim = 4
field_dims = { a = 2 }

[optimizer]
kind = "adagrad"
lr = 0.1
"#;
    let c = ModelConfig::from_toml(text, "fm.toml").unwrap();
    let ModelKind::Fm(cfg) = &c.model else {
        panic!("parsed as {:?}", c.model)
    };
    let m = Ctr::new(CtrKind::Fm, cfg.clone(), c.optimizer.adagrad().unwrap()).unwrap();
    m.init();
    assert_eq!(ModelConfig::from_toml(&m.describe(), "saved").unwrap(), c);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fm.ckpt");
    crate::checkpoint::save_model(&path, &m).unwrap();
    let mut ck = crate::checkpoint::load(&path).unwrap();
    let back = Ctr::from_checkpoint(
        CtrKind::Fm,
        cfg.clone(),
        c.optimizer.adagrad().unwrap(),
        &mut ck,
    )
    .unwrap();
    let (mut x, mut y) = ([0.0f32; 5], [0.0f32; 5]);
    m.feature_tables()[1].read_weights(7, &mut x);
    back.feature_tables()[1].read_weights(7, &mut y);
    assert_eq!(x, y);
}

// The features of a whole batch are hashed up front (and their rows prefetched): a batch of
// instances with zero, one or several ids per field trains to the same bits as the same instances
// fed one batch each, and evaluates each instance as `predict` does.
#[test]
fn batched_instances_train_like_single_ones() {
    let a: [&[u64]; 5] = [&[1], &[2, 3], &[], &[4], &[1, 5, 6]];
    let b: [&[u64]; 5] = [&[7], &[], &[8], &[9, 10], &[7]];
    let y = [1u64, 0, 1, 0, 1];
    let labels: Vec<&[u64]> = y.iter().map(std::slice::from_ref).collect();
    let whole = Batch::from_slots(vec![slot(&a), slot(&b), slot(&labels)]);
    let single =
        |i: usize| Batch::from_slots(vec![slot(&a[i..=i]), slot(&b[i..=i]), slot(&labels[i..=i])]);
    let mut cfg = CtrConfig::new(64);
    cfg.dim = Some(3);
    let models: Vec<_> = (0..2)
        .map(|_| {
            let m = Ctr::new(
                CtrKind::Fm,
                cfg.clone(),
                Adagrad {
                    lr: 0.3f32,
                    initial_accumulator: 0.1,
                },
            )
            .unwrap();
            m.init();
            m
        })
        .collect();
    let mut w0 = models[0].new_worker(&desc()).unwrap();
    let mut w1 = models[1].new_worker(&desc()).unwrap();
    let mut out = [0.0f64];
    models[0]
        .train_batch(&mut w0, &whole, &mut out, None)
        .unwrap();
    let whole_loss = out[0] * 5.0;
    let mut losses = 0.0;
    for i in 0..5 {
        models[1]
            .train_batch(&mut w1, &single(i), &mut out, None)
            .unwrap();
        losses += out[0];
    }
    assert_same_bits(&models[0], &models[1]);
    let mut text = String::new();
    models[0]
        .eval_batch(&mut w0, &whole, &mut out, Some(&mut text))
        .unwrap();
    let expected: String = (0..5)
        .map(|i| format!("{:.6}\n", models[0].predict(&mut w0, &whole, i).unwrap()))
        .collect();
    assert_eq!(text, expected);
    assert_relative_eq!(whole_loss, losses, epsilon = 1e-9);
}

/// Asserts that every table of `a` holds the same bits as `b`'s.
fn assert_same_bits<O: Optimizer<f32> + OptimizerDesc>(a: &Ctr<O>, b: &Ctr<O>) {
    let bits =
        |t: &Table| -> Vec<u32> { t.elements().iter().map(|c| c.load().to_bits()).collect() };
    for (t0, t1) in a.tables().iter().zip(b.tables()) {
        assert_eq!(bits(t0), bits(t1), "table {}", t0.name());
    }
}

/// A batch of instances with the given ids of fields `a` and `b` and labels.
fn slot(ids: &[&[u64]]) -> SlotBatch {
    let mut offsets = vec![0];
    let mut values = Vec::new();
    for v in ids {
        values.extend_from_slice(v);
        offsets.push(values.len());
    }
    SlotBatch {
        values: SlotValues::U64(values),
        offsets,
    }
}

// A row named several times by one instance is updated once per occurrence, in turn. LR with SGD
// lr 0.5 from zero, label 1: p = 0.5, g = -0.5, each occurrence adds 0.25 to the row:
// id 3 twice: w3 = 0.5; id 4 seventy times: w4 = 17.5; the bias once: 0.25.
#[test]
fn repeated_rows_in_an_instance_update_in_turn() {
    for (id, times, expected) in [(3u64, 2usize, 0.5f32), (4, 70, 17.5)] {
        let m = Ctr::new(CtrKind::Lr, CtrConfig::new(64), Sgd { lr: 0.5f32 }).unwrap();
        m.init();
        let mut w = m.new_worker(&desc()).unwrap();
        let ids = vec![id; times];
        let batch = Batch::from_slots(vec![slot(&[&ids]), slot(&[&[]]), slot(&[&[1]])]);
        m.train_batch(&mut w, &batch, &mut [0.0], None).unwrap();
        let (t, row) = w.feats[0];
        let mut got = [0.0f32];
        m.feature_tables()[t].read_weights(row, &mut got);
        assert_eq!(got[0], expected, "id {id} x{times}");
        m.bias.read_weights(0, &mut got);
        assert_eq!(got[0], 0.25);
    }
}

/// Two workers stepping their copies of the bias during overlapping batches: the shared bias and
/// its slot receive both changes (Hogwild's sum of the threads' steps), none is overwritten, and
/// the accumulator's initial value (stored as zero in a fresh table) is counted once.
#[test]
fn workers_bias_steps_add_up_in_the_shared_bias() {
    let opt = Adagrad {
        lr: 0.1f32,
        initial_accumulator: 0.5,
    };
    let m = Ctr::new(CtrKind::Lr, CtrConfig::new(16), opt).unwrap();
    m.init();
    m.bias.write_weights(0, &[0.25]);
    let (mut first, mut second) = (m.local_bias(), m.local_bias());
    assert_eq!(m.bias.row(0)[1].load(), 0.0);
    assert_eq!(first.now[..2], [0.25, 0.5]);
    first.now[0] += 0.5;
    first.now[1] += 2.0;
    second.now[0] -= 0.125;
    second.now[1] += 1.0;
    m.merge_bias(&first);
    m.merge_bias(&second);
    let cells: Vec<f32> = m.bias.row(0).iter().map(|c| c.load()).collect();
    assert_eq!(cells, [0.625, 3.5]);
}

/// A worker of a multi-threaded run steps private copies of the rows a batch uses often, written
/// back every [`LOCAL_MERGE_EVERY`] batches and when flushed; alone, it must leave the tables
/// exactly as in-place updates do, for every optimizer's slots, in the factorization machine
/// (whole rows) and the field-aware one (runs of a row).
#[test]
fn private_copies_of_hot_rows_give_the_in_place_bits() {
    // Field `a` takes 3 values (rows used ~13 times each), field `b` mostly distinct values.
    let n = 40;
    let a: Vec<Vec<u64>> = (0..n).map(|i| vec![i % 3]).collect();
    let b: Vec<Vec<u64>> = (0..n).map(|i| vec![100 + i * 7 % 23]).collect();
    let y: Vec<Vec<u64>> = (0..n).map(|i| vec![(i * 5 % 7 > 2) as u64]).collect();
    let refs =
        |v: &[Vec<u64>]| -> SlotBatch { slot(&v.iter().map(Vec::as_slice).collect::<Vec<_>>()) };
    let batch = Batch::from_slots(vec![refs(&a), refs(&b), refs(&y)]);
    fn check<O: Optimizer<f32> + OptimizerDesc + Clone>(kind: CtrKind, opt: O, batch: &Batch) {
        let mut cfg = CtrConfig::new(256);
        cfg.dim = Some(4);
        cfg.init_scale = 0.1;
        if kind == CtrKind::Ffm {
            cfg.fields = vec!["a".into(), "b".into()];
            cfg.l2 = 0.01;
        }
        let make = || {
            let m = Ctr::new(kind, cfg.clone(), opt.clone()).unwrap();
            m.init();
            m
        };
        let (plain, copied) = (make(), make());
        // A worker as `workers` makes it, but never copying (a lone field-aware worker may).
        let mut w_plain = plain.new_worker(&desc()).unwrap();
        let mut w_copied = copied.workers(&desc(), 2).unwrap().remove(0);
        let mut out = [0.0f64];
        // A merge after the first LOCAL_MERGE_EVERY batches, then two batches held until the flush.
        for _ in 0..LOCAL_MERGE_EVERY + 2 {
            plain
                .train_batch(&mut w_plain, batch, &mut out, None)
                .unwrap();
            copied
                .train_batch(&mut w_copied, batch, &mut out, None)
                .unwrap();
        }
        assert!(w_plain.batch_local.is_empty());
        let copies = w_copied
            .batch_local
            .iter()
            .filter(|&&l| l != SHARED)
            .count();
        assert!(copies >= 40, "{copies} features used private copies");
        assert!(w_copied.rows.is_held());
        copied.flush(&mut w_copied);
        assert!(!w_copied.rows.is_held());
        assert_same_bits(&plain, &copied);
    }
    for kind in [CtrKind::Fm, CtrKind::Ffm] {
        let ada = Adagrad {
            lr: 0.3f32,
            initial_accumulator: 0.1,
        };
        check(kind, ada, &batch);
        check(kind, Sgd { lr: 0.1f32 }, &batch);
        check(kind, AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8), &batch);
        let mut rms = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
        rms.apply_sparse_rmsprop = true;
        check(kind, rms, &batch);
    }
}

/// A lone worker (1 thread) copies hot rows only for the field-aware machine, and only in
/// batches whose hot rows take at least [`LOCAL_ALONE_MIN_SHARE`] of the uses; what it trains
/// is what a worker updating every row in place trains, bit for bit.
#[test]
fn a_lone_ffm_worker_copies_hot_rows_where_they_take_most_uses() {
    let n = 40;
    // Field `a` takes 3 values; fields `b` and `c` too in the first batch (every use hot),
    // distinct values in the second (a third of the uses hot).
    let a: Vec<Vec<u64>> = (0..n).map(|i| vec![i % 3]).collect();
    let few: Vec<Vec<u64>> = (0..n).map(|i| vec![100 + i % 3]).collect();
    let many: Vec<Vec<u64>> = (0..n).map(|i| vec![200 + i]).collect();
    let y: Vec<Vec<u64>> = (0..n).map(|i| vec![(i * 5 % 7 > 2) as u64]).collect();
    let refs =
        |v: &[Vec<u64>]| -> SlotBatch { slot(&v.iter().map(Vec::as_slice).collect::<Vec<_>>()) };
    let hot = Batch::from_slots(vec![refs(&a), refs(&few), refs(&few), refs(&y)]);
    let cold = Batch::from_slots(vec![refs(&a), refs(&many), refs(&many), refs(&y)]);
    let opt = Adagrad {
        lr: 0.3f32,
        initial_accumulator: 0.1,
    };
    for kind in [CtrKind::Fm, CtrKind::Ffm] {
        let mut cfg = CtrConfig::new(512);
        cfg.dim = Some(4);
        cfg.init_scale = 0.1;
        if kind == CtrKind::Ffm {
            cfg.fields = vec!["a".into(), "b".into(), "c".into()];
            cfg.l2 = 0.01;
        }
        let make = || {
            let m = Ctr::new(kind, cfg.clone(), opt).unwrap();
            m.init();
            m
        };
        let (plain, alone) = (make(), make());
        let mut w_plain = plain.new_worker(&desc3()).unwrap();
        let mut w_alone = alone.workers(&desc3(), 1).unwrap().remove(0);
        let mut out = [0.0f64];
        // Each batch counts (LOCAL_RECOUNT_EVERY batches apart) and is merged before the next.
        for (b, batch) in [&hot, &cold, &hot].into_iter().enumerate() {
            for _ in 0..LOCAL_RECOUNT_EVERY {
                plain
                    .train_batch(&mut w_plain, batch, &mut out, None)
                    .unwrap();
                alone
                    .train_batch(&mut w_alone, batch, &mut out, None)
                    .unwrap();
                alone.flush(&mut w_alone);
            }
            let copies = w_alone.batch_local.iter().filter(|&&l| l != SHARED).count();
            let expected = match (kind, b) {
                (CtrKind::Ffm, 0 | 2) => 3 * n as usize,
                _ => 0,
            };
            assert_eq!(
                copies, expected,
                "{kind:?}, batch {b}: features on private copies"
            );
        }
        assert_same_bits(&plain, &alone);
    }
}

/// A fresh logistic regression with Adagrad holds nothing but zeros (its tables' memory is never
/// written before training), and its first step gives TensorFlow's Adagrad bits: the stored zero
/// accumulator reads as `initial_accumulator`.
#[test]
fn a_fresh_adagrad_lr_is_all_zeros_and_steps_like_tensorflow() {
    let opt = Adagrad {
        lr: 0.5f32,
        initial_accumulator: 0.1,
    };
    let m = Ctr::new(CtrKind::Lr, CtrConfig::new(64), opt).unwrap();
    m.init();
    for t in m.tables.iter().chain([&m.bias]) {
        assert!(t.elements().iter().all(|c| c.load().to_bits() == 0));
        assert!(t.fill().iter().all(|x| x.to_bits() == 0));
    }
    let mut w = m.worker(&desc()).unwrap();
    let mut out = [0.0];
    m.train_batch(&mut w, &one(3, 5, 1), &mut out, None)
        .unwrap();
    // p = sigmoid(0) = 0.5, so every gradient is 0.5 - 1 = -0.5; TF's Adagrad:
    // acc = 0.1 + 0.25, w = 0 - 0.5 * -0.5 / sqrt(acc).
    let acc = 0.1f32 + -0.5f32 * -0.5;
    let expected = 0.0 - 0.5f32 * -0.5 / acc.sqrt();
    let bias: Vec<f32> = m.bias.row(0).iter().map(|c| c.load()).collect();
    assert_eq!(bias, [expected, acc]);
    let changed: Vec<Vec<f32>> = (0..m.tables[0].rows())
        .map(|r| {
            m.tables[0]
                .row(r)
                .iter()
                .map(|c| c.load())
                .collect::<Vec<_>>()
        })
        .filter(|row| row.iter().any(|x| x.to_bits() != 0))
        .collect();
    assert_eq!(changed, vec![vec![expected, acc]; 2]);
}

/// A desc of fields `a` and `b` with their values in `av` and `bv`, field `c` without values,
/// and the label.
fn valued_desc() -> DataFeedDesc {
    use crate::feed::{Slot, SlotType};
    DataFeedDesc::multi_slot(
        16,
        vec![
            Slot::sparse("a", SlotType::U64),
            Slot::sparse("av", SlotType::F32),
            Slot::sparse("b", SlotType::U64),
            Slot::sparse("bv", SlotType::F32),
            Slot::sparse("c", SlotType::U64),
            Slot::sparse("label", SlotType::U64),
        ],
    )
}

fn valued_config(buckets: usize) -> CtrConfig {
    let mut cfg = CtrConfig::new(buckets);
    cfg.values.insert("a".into(), "av".into());
    cfg.values.insert("b".into(), "bv".into());
    cfg
}

/// A batch of float slot values, one list per instance.
fn floats(values: &[&[f32]]) -> SlotBatch {
    let mut offsets = vec![0];
    let mut all = Vec::new();
    for v in values {
        all.extend_from_slice(v);
        offsets.push(all.len());
    }
    SlotBatch {
        values: SlotValues::F32(all),
        offsets,
    }
}

/// One instance of [`valued_desc`]: ids 11 (value `xa`), 22 (value `xb`) and 33, label 1.
fn valued_one(xa: f32, xb: f32) -> Batch {
    Batch::from_slots(vec![
        slot(&[&[11]]),
        floats(&[&[xa]]),
        slot(&[&[22]]),
        floats(&[&[xb]]),
        slot(&[&[33]]),
        slot(&[&[1]]),
    ])
}

// One SGD step (lr 0.5, label 1) with feature values: A (value 0.5), B (value 2.0) and C (a field
// without values: 1); w = [0.2, -0.3, 0.05], v = [[0.1, -0.2], [0.3, 0.4], [-0.1, 0.2]] (FM, dim
// 2), bias 0.1. Python (float64), whose gradients agree with central differences to 1e-8:
//   x = [0.5, 2.0, 1.0]; z = b + sum(x_i w_i) (+ FM: 0.5 sum_k((sum_i x_i v_ik)^2 - sum_i (x_i v_ik)^2))
//   g = sigmoid(z) - 1; w_i' = w_i - lr g x_i; v_ik' = v_ik - lr g x_i (sum_j x_j v_jk - x_i v_ik)
//   LR: z = -0.35, p = 0.41338242, loss = 0.88338216
//       w' = [0.34665439, 0.28661758, 0.34330879], b' = 0.39330879
//   FM: z = -0.325, p = 0.41945770, loss = 0.86879260
//       rows A [0.34513558, 0.17256779, -0.05486442], B [0.28054230, 0.27097288, 0.45805423],
//            C [0.34027115, 0.08867625, 0.40318981], b' = 0.39027115
// The float32 model matches to 1e-6.
#[test]
fn one_sgd_step_with_feature_values_matches_python() {
    type Expected<'a> = (f64, f64, &'a [&'a [f64]], f64);
    let lr: Expected = (
        0.41338242,
        0.88338216,
        &[&[0.34665439], &[0.28661758], &[0.34330879]],
        0.39330879,
    );
    let fm: Expected = (
        0.41945770,
        0.86879260,
        &[
            &[0.34513558, 0.17256779, -0.05486442],
            &[0.28054230, 0.27097288, 0.45805423],
            &[0.34027115, 0.08867625, 0.40318981],
        ],
        0.39027115,
    );
    let start: [&[f32]; 3] = [&[0.2, 0.1, -0.2], &[-0.3, 0.3, 0.4], &[0.05, -0.1, 0.2]];
    for (kind, (p, loss, rows, bias)) in [(CtrKind::Lr, lr), (CtrKind::Fm, fm)] {
        let mut cfg = valued_config(1000);
        if kind == CtrKind::Fm {
            cfg.dim = Some(2);
        }
        let m = Ctr::new(kind, cfg, Sgd { lr: 0.5f32 }).unwrap();
        m.init();
        let mut w = m.new_worker(&valued_desc()).unwrap();
        let batch = valued_one(0.5, 2.0);
        m.gather(&mut w, &batch, 0).unwrap();
        assert_eq!(w.xs, [0.5, 2.0, 1.0]);
        let feats = w.feats.clone();
        let width = rows[0].len();
        for (&(t, row), start) in feats.iter().zip(start) {
            m.feature_tables()[t].write_weights(row, &start[..width]);
        }
        m.bias.write_weights(0, &[0.1]);
        let got = f64::from(m.predict(&mut w, &batch, 0).unwrap());
        assert_relative_eq!(got, p, epsilon = 1e-6);
        let mut out = [0.0f64];
        m.train_batch(&mut w, &batch, &mut out, None).unwrap();
        assert_relative_eq!(out[0], loss, epsilon = 1e-6);
        for (&(t, row), expected) in feats.iter().zip(rows) {
            let mut got = vec![0.0f32; width];
            m.feature_tables()[t].read_weights(row, &mut got);
            let got: Vec<f64> = got.into_iter().map(f64::from).collect();
            assert_relative_eq!(&got[..], &expected[..], epsilon = 1e-6);
        }
        let got = f64::from(m.bias.weights(0)[0].load());
        assert_relative_eq!(got, bias, epsilon = 1e-6);
    }
}

// Values of 1 everywhere train to the same bits as the model without values: the valued
// arithmetic multiplies by the value where the plain one has nothing to multiply.
#[test]
fn values_of_one_train_like_no_values() {
    let a: [&[u64]; 4] = [&[1, 2], &[3], &[], &[1]];
    let ones: [&[f32]; 4] = [&[1.0, 1.0], &[1.0], &[], &[1.0]];
    let b: [&[u64]; 4] = [&[7], &[8, 9], &[7], &[]];
    let b_ones: [&[f32]; 4] = [&[1.0], &[1.0, 1.0], &[1.0], &[]];
    let c: [&[u64]; 4] = [&[4], &[5], &[4], &[6]];
    let labels: [&[u64]; 4] = [&[1], &[0], &[1], &[0]];
    let batch = Batch::from_slots(vec![
        slot(&a),
        floats(&ones),
        slot(&b),
        floats(&b_ones),
        slot(&c),
        slot(&labels),
    ]);
    let opt = Adagrad {
        lr: 0.3f32,
        initial_accumulator: 0.1,
    };
    for kind in [CtrKind::Lr, CtrKind::Fm] {
        let make = |cfg: CtrConfig| {
            let m = Ctr::new(kind, cfg, opt).unwrap();
            m.init();
            m
        };
        let mut plain_cfg = CtrConfig::new(64);
        plain_cfg.l2 = 0.01;
        let mut valued_cfg = valued_config(64);
        valued_cfg.l2 = 0.01;
        let (plain, valued) = (make(plain_cfg), make(valued_cfg));
        let mut wp = plain.new_worker(&valued_desc()).unwrap();
        let mut wv = valued.new_worker(&valued_desc()).unwrap();
        assert!(!wp.layout.valued && wv.layout.valued);
        let (mut lp, mut lv) = ([0.0f64], [0.0f64]);
        for _ in 0..3 {
            plain.train_batch(&mut wp, &batch, &mut lp, None).unwrap();
            valued.train_batch(&mut wv, &batch, &mut lv, None).unwrap();
        }
        assert_eq!(lp, lv);
        assert_same_bits(&plain, &valued);
    }
}

#[test]
fn values_are_checked_against_the_desc_and_each_instance() {
    let desc = valued_desc();
    let new_worker_error = |edit: &dyn Fn(&mut CtrConfig)| {
        let mut cfg = valued_config(16);
        edit(&mut cfg);
        let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
        m.new_worker(&desc).unwrap_err().to_string()
    };
    let e = new_worker_error(&|c| {
        c.values.insert("a".into(), "missing".into());
    });
    assert_eq!(
        e,
        "model config: values.a: the DataFeedDesc has no used slot \"missing\""
    );
    let e = new_worker_error(&|c| {
        c.values.insert("a".into(), "c".into());
    });
    assert_eq!(
        e,
        "model config: values.a: \"c\" must be a float slot in the DataFeedDesc, not uint64"
    );
    let e = new_worker_error(&|c| {
        c.values.insert("zz".into(), "av".into());
    });
    assert!(
        e.contains("values.zz") && e.contains("not one of the fields"),
        "{e}"
    );

    let m = Ctr::new(CtrKind::Fm, valued_config(16), Sgd { lr: 0.1f32 }).unwrap();
    m.init();
    let fresh = Ctr::new(CtrKind::Fm, valued_config(16), Sgd { lr: 0.1f32 }).unwrap();
    fresh.init();
    let mut w = m.new_worker(&desc).unwrap();
    let two = |av: &[f32]| {
        Batch::from_slots(vec![
            slot(&[&[1], &[2, 3]]),
            floats(&[&[0.5], av]),
            slot(&[&[4], &[5]]),
            floats(&[&[1.0], &[1.0]]),
            slot(&[&[6], &[7]]),
            slot(&[&[1], &[0]]),
        ])
    };
    for (av, message) in [
        (
            &[0.5f32][..],
            "slot \"av\", instance 1 of the batch: 1 values for the 2 ids of slot \"a\" (one per id)",
        ),
        (
            &[0.5, f32::NAN][..],
            "slot \"av\", instance 1 of the batch: value NaN of id 3 (position 1) is not a finite number",
        ),
        (
            &[f32::INFINITY, 0.5][..],
            "slot \"av\", instance 1 of the batch: value inf of id 2 (position 0) is not a finite number",
        ),
    ] {
        let e = m.train_batch(&mut w, &two(av), &mut [0.0], None).unwrap_err();
        assert_eq!(e.to_string(), message);
        // The batch is checked before any instance trains.
        assert_same_bits(&m, &fresh);
        let e = m.eval_batch(&mut w, &two(av), &mut [0.0], None).unwrap_err();
        assert_eq!(e.to_string(), message);
        let e = m.predict(&mut w, &two(av), 1).unwrap_err();
        assert_eq!(e.to_string(), message);
    }
    m.train_batch(&mut w, &two(&[0.5, 0.25]), &mut [0.0], None)
        .unwrap();
}

/// libffm's layout, as `hogwild convert --from libffm` writes it: label, fields, ids, values.
fn ffm_config(dim: usize) -> CtrConfig {
    let mut cfg = CtrConfig::new(1 << 16);
    cfg.dim = Some(dim);
    cfg.values.insert("ids".into(), "values".into());
    cfg.field_numbers.insert("ids".into(), "fields".into());
    cfg
}

fn ffm_batch(fields: &[u64], ids: &[u64], values: &[f32]) -> Batch {
    Batch::from_slots(vec![
        floats(&[&[1.0]]),
        slot(&[fields]),
        slot(&[ids]),
        floats(&[values]),
    ])
}

#[test]
fn libffm_field_numbers_are_fields() {
    for n in [0u64, 7, 9, 10, 255, 256, 1000, u64::MAX] {
        assert_eq!(number_salt(n), salt(&n.to_string()), "field {n}");
    }
    let desc = crate::tools::convert::libsvm_desc(true);
    let mut cfg = ffm_config(4);
    cfg.field_dims.insert("2".into(), 2);
    cfg.field_dims.insert("300".into(), 2);
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    assert_eq!(m.dims, [2, 4]);
    let mut w = m.new_worker(&desc).unwrap();
    // The same index 7 in fields 1, 2, 300 and 301: four features (the `fields` slot is no
    // feature of its own), each hashed with its field's name, sized by its field's entry.
    let batch = ffm_batch(&[1, 2, 300, 301], &[7, 7, 7, 7], &[1.0, 0.5, 0.25, 2.0]);
    m.gather(&mut w, &batch, 0).unwrap();
    assert_eq!(w.xs, [1.0, 0.5, 0.25, 2.0]);
    let row = |field: &str| {
        let h = mix64(7 ^ salt(field));
        ((u128::from(h) * (1u128 << 16)) >> 64) as usize
    };
    assert_eq!(
        w.feats,
        [
            (1, row("1")),
            (0, row("2")),
            (0, row("300")),
            (1, row("301"))
        ]
    );
    let rows: std::collections::BTreeSet<usize> = w.feats.iter().map(|f| f.1).collect();
    assert_eq!(rows.len(), 4);
    // A named field called "1" is the same field as number 1.
    let named = Ctr::new(CtrKind::Fm, CtrConfig::new(1 << 16), Sgd { lr: 0.1f32 }).unwrap();
    let named_desc = DataFeedDesc::multi_slot(
        16,
        vec![crate::feed::Slot::sparse("1", crate::feed::SlotType::U64)],
    );
    let mut wn = named.new_worker(&named_desc).unwrap();
    let one_id = Batch::from_slots(vec![slot(&[&[7]])]);
    named.gather(&mut wn, &one_id, 0).unwrap();
    assert_eq!(wn.feats, [(0, row("1"))]);

    // Trains; a mismatch of numbers and ids is named.
    m.init();
    m.train_batch(&mut w, &batch, &mut [0.0], None).unwrap();
    let e = m
        .train_batch(
            &mut w,
            &ffm_batch(&[1], &[7, 8], &[1.0, 1.0]),
            &mut [0.0],
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "slot \"fields\", instance 0 of the batch: 1 field numbers for the 2 ids of slot \"ids\" \
         (one per id)"
    );

    // field_dims keys: field numbers written as numbers; the numbered slot itself is no field.
    for (key, reason) in [
        ("ids", "belong to numbered fields"),
        ("01", "neither one of the fields"),
        ("x", "neither one of the fields"),
    ] {
        let mut cfg = ffm_config(4);
        cfg.field_dims.insert(key.into(), 2);
        let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
        let e = m.new_worker(&desc).unwrap_err().to_string();
        assert!(
            e.contains(&format!("field_dims.{key}")) && e.contains(reason),
            "{key}: {e}"
        );
    }
    let mut cfg = ffm_config(4);
    cfg.fields = vec!["ids".into(), "fields".into()];
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc).unwrap_err().to_string();
    assert!(
        e.contains("field_numbers.ids") && e.contains("cannot also be a field"),
        "{e}"
    );
    let mut cfg = ffm_config(4);
    cfg.field_numbers.insert("ids".into(), "values".into());
    let m = Ctr::new(CtrKind::Fm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc).unwrap_err().to_string();
    assert_eq!(
        e,
        "model config: field_numbers.ids: \"values\" must be a uint64 slot in the DataFeedDesc, not float"
    );
}

/// A desc of field `a`, the label and the importance weight.
fn weighted_desc() -> DataFeedDesc {
    use crate::feed::{Slot, SlotType};
    DataFeedDesc::multi_slot(
        16,
        vec![
            Slot::sparse("a", SlotType::U64),
            Slot::sparse("label", SlotType::U64),
            Slot::sparse("weight", SlotType::F32),
        ],
    )
}

fn weighted(ids: &[&[u64]], labels: &[&[u64]], weights: &[f32]) -> Batch {
    let weights: Vec<&[f32]> = weights.iter().map(std::slice::from_ref).collect();
    Batch::from_slots(vec![slot(ids), slot(labels), floats(&weights)])
}

#[test]
fn importance_weights_scale_the_step_and_zero_leaves_an_instance_out() {
    let mut cfg = CtrConfig::new(64);
    cfg.dim = Some(3);
    cfg.init_scale = 0.1;
    cfg.l2 = 0.1;
    cfg.weight_slot = Some("weight".into());
    let ids: [&[u64]; 3] = [&[1, 2], &[3], &[2, 4]];
    let labels: [&[u64]; 3] = [&[1], &[0], &[0]];
    let make = |opt| {
        let m = Ctr::new(CtrKind::Fm, cfg.clone(), opt).unwrap();
        m.init();
        let w = m.new_worker(&weighted_desc()).unwrap();
        (m, w)
    };

    // SGD: weight 2 at lr 0.5 is the step of weight 1 at lr 1, L2 penalty included, bit for bit;
    // the reported loss is the weighted mean, the same for both.
    let (m2, mut w2) = make(Sgd { lr: 0.5f32 });
    let (m1, mut w1) = make(Sgd { lr: 1.0f32 });
    let (mut out2, mut out1) = ([0.0f64], [0.0f64]);
    m2.train_batch(
        &mut w2,
        &weighted(&ids[..1], &labels[..1], &[2.0]),
        &mut out2,
        None,
    )
    .unwrap();
    m1.train_batch(
        &mut w1,
        &weighted(&ids[..1], &labels[..1], &[1.0]),
        &mut out1,
        None,
    )
    .unwrap();
    assert_same_bits(&m2, &m1);
    assert_eq!(out2, out1);

    // Weight 0: the batch trains as if the instance were not in it, for every optimizer.
    fn zero_weight_is_absent<O: Optimizer<f32> + OptimizerDesc + Copy>(
        cfg: &CtrConfig,
        opt: O,
        ids: &[&[u64]],
        labels: &[&[u64]],
    ) {
        let make = || {
            let m = Ctr::new(CtrKind::Fm, cfg.clone(), opt).unwrap();
            m.init();
            let w = m.new_worker(&weighted_desc()).unwrap();
            (m, w)
        };
        let ((with, mut w_with), (without, mut w_without)) = (make(), make());
        let (mut a, mut b) = ([0.0f64], [0.0f64]);
        let all = weighted(ids, labels, &[1.0, 0.0, 1.0]);
        with.train_batch(&mut w_with, &all, &mut a, None).unwrap();
        let (ids2, labels2) = ([ids[0], ids[2]], [labels[0], labels[2]]);
        let two = weighted(&ids2, &labels2, &[1.0, 1.0]);
        without
            .train_batch(&mut w_without, &two, &mut b, None)
            .unwrap();
        assert_same_bits(&with, &without);
        assert_eq!(a, b);
    }
    zero_weight_is_absent(&cfg, Sgd { lr: 0.5f32 }, &ids, &labels);
    let ada = Adagrad {
        lr: 0.3f32,
        initial_accumulator: 0.1,
    };
    zero_weight_is_absent(&cfg, ada, &ids, &labels);
    let adam = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
    zero_weight_is_absent(&cfg, adam, &ids, &labels);

    // Evaluation: the loss is sum(weight * loss) / sum(weight); instances of weight 0 have no
    // (logit, label) pair for the AUC.
    let (m, mut w) = make(Sgd { lr: 0.5f32 });
    let batch = weighted(&ids, &labels, &[1.0, 0.0, 3.0]);
    let mut out = [0.0f64];
    m.eval_batch(&mut w, &batch, &mut out, None).unwrap();
    assert_eq!(m.auc(&mut w).unwrap().len(), 2);
    let mut loss = |i: usize| {
        let p = f64::from(m.predict(&mut w, &batch, i).unwrap());
        let y = labels[i][0] as f64;
        -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
    };
    let expected = (loss(0) + 3.0 * loss(2)) / 4.0;
    assert_relative_eq!(out[0], expected, epsilon = 1e-5);

    // Bad weights are named; training needs the weight slot, evaluation does without.
    for (weight, reason) in [
        (-1.0f32, "weight -1 is not a finite number >= 0"),
        (f32::NAN, "weight NaN is not a finite number >= 0"),
    ] {
        let e = m
            .train_batch(
                &mut w,
                &weighted(&ids[..1], &labels[..1], &[weight]),
                &mut out,
                None,
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("slot \"weight\", instance 0 of the batch: {reason}")
        );
    }
    let mut w = m.new_worker(&desc()).unwrap();
    let e = m
        .train_batch(&mut w, &one(1, 2, 1), &mut out, None)
        .unwrap_err();
    assert!(e.to_string().contains("weight_slot"), "{e}");
    m.eval_batch(&mut w, &one(1, 2, 1), &mut out, None).unwrap();
    let mut uint_weight = cfg.clone();
    uint_weight.weight_slot = Some("b".into());
    let m = Ctr::new(CtrKind::Fm, uint_weight, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc()).unwrap_err().to_string();
    assert!(
        e.contains("weight_slot") && e.contains("must be a float slot"),
        "{e}"
    );
    let mut label_weight = cfg.clone();
    label_weight.weight_slot = Some("label".into());
    let e = Ctr::new(CtrKind::Fm, label_weight, Sgd { lr: 0.1f32 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("weight_slot"), "{e}");
}

#[test]
fn a_config_with_values_round_trips_and_its_checkpoint_predicts_the_same() {
    let text = r#"
[model]
kind = "fm"
buckets = 4096
dim = 4
values = { ids = "values" }
field_numbers = { ids = "fields" }
field_dims = { 2 = 2 }
weight_slot = "weight"

[optimizer]
kind = "adagrad"
lr = 0.1
"#;
    let c = ModelConfig::from_toml(text, "ffm.toml").unwrap();
    let ModelKind::Fm(cfg) = &c.model else {
        panic!("parsed as {:?}", c.model)
    };
    assert_eq!(cfg.values["ids"], "values");
    assert_eq!(cfg.field_numbers["ids"], "fields");
    assert_eq!(cfg.field_dims["2"], 2);
    assert_eq!(cfg.weight_slot.as_deref(), Some("weight"));
    let m = Ctr::new(CtrKind::Fm, cfg.clone(), c.optimizer.adagrad().unwrap()).unwrap();
    m.init();
    assert_eq!(ModelConfig::from_toml(&m.describe(), "saved").unwrap(), c);
    // libffm's slots and VW's weight.
    let mut slots = crate::tools::convert::libsvm_desc(true).slots().to_vec();
    slots.push(crate::feed::Slot::sparse(
        "weight",
        crate::feed::SlotType::F32,
    ));
    let desc = DataFeedDesc::multi_slot(16, slots);
    let mut batch = ffm_batch(&[1, 2], &[5, 6], &[0.5, 3.0]);
    batch.slots.push(floats(&[&[2.0]]));
    let mut w = m.new_worker(&desc).unwrap();
    m.train_batch(&mut w, &batch, &mut [0.0], None).unwrap();
    let p = m.predict(&mut w, &batch, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ffm.ckpt");
    crate::checkpoint::save_model(&path, &m).unwrap();
    // The factor tables (4,096 rows of 5 and of 3 weights, with their slots: 262,144 bytes)
    // save as the rows the batch moved; the others are drawn again when loaded.
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 4_000, "{size} bytes");
    let mut ck = crate::checkpoint::load(&path).unwrap();
    let stored = ModelConfig::from_toml(&ck.meta, "stored").unwrap();
    assert_eq!(stored, c);
    let ModelKind::Fm(stored) = stored.model else {
        panic!("stored as {:?}", stored.model)
    };
    let back =
        Ctr::from_checkpoint(CtrKind::Fm, stored, c.optimizer.adagrad().unwrap(), &mut ck).unwrap();
    let mut wb = back.new_worker(&desc).unwrap();
    assert_eq!(back.predict(&mut wb, &batch, 0).unwrap(), p);
    assert_same_bits(&m, &back);
}

/// The field-aware factorization machine over [`valued_desc`]: fields a, b, c (numbers 0, 1, 2
/// by their place in `fields`), dim 2, L2 0.1.
fn ffm_named_config(normalize: bool) -> CtrConfig {
    let mut cfg = valued_config(1000);
    cfg.fields = vec!["a".into(), "b".into(), "c".into()];
    cfg.dim = Some(2);
    cfg.l2 = 0.1;
    cfg.normalize = (!normalize).then_some(false);
    cfg
}

// One step (lr 0.5, label 1, L2 0.1) of an FFM with 3 fields and dim 2 on features of values
// x = [0.5, 2.0, 1.0] in fields 0, 1, 2; each row is [w, v_{i,0}, v_{i,1}, v_{i,2}]. numpy (float64):
//   x = np.array([0.5, 2.0, 1.0]); f = [0, 1, 2]; k, F, b, lr, l2 = 2, 3, 0.1, 0.5, 0.1
//   w = np.array([0.2, -0.3, 0.05])
//   v = np.array([[[0.1, -0.2], [0.3, 0.4], [-0.1, 0.2]],
//                 [[0.2, 0.1], [-0.4, 0.3], [0.25, -0.15]],
//                 [[-0.3, 0.2], [0.1, 0.05], [0.6, -0.5]]])  # v[i, field]
//   n = 1 / (x @ x) if normalize else 1.0     # xLearn's instance-wise normalization
//   z = b + np.sqrt(n) * (x @ w) + n * sum(x[i] * x[j] * v[i, f[j]] @ v[j, f[i]]
//                                          for i in range(3) for j in range(i + 1, 3))
//   p = 1 / (1 + np.exp(-z)); g = p - 1; loss = -np.log(p)
//   gw = g * np.sqrt(n) * x + l2 * w
//   gv = np.zeros_like(v); touched = np.zeros((3, F), bool)
//   for i in range(3):
//       for j in range(i + 1, 3):
//           gv[i, f[j]] += g * n * x[i] * x[j] * v[j, f[i]]; gv[j, f[i]] += g * n * x[i] * x[j] * v[i, f[j]]
//           touched[i, f[j]] = touched[j, f[i]] = True
//   gv += l2 * v * touched[:, :, None]     # only the blocks the instance touched
//   sgd:     w - lr * gw, v - lr * gv, b - lr * g
//   adagrad: step = lambda p_, g_: p_ - lr * g_ / np.sqrt(0.1 + g_ * g_)   # accumulator 0.1
//            step(w, gw), np.where(touched[:, :, None], step(v, gv), v), step(b, g)
// The untouched block v_{i,f_i} keeps its values (no pair reaches it, and no L2 either).
// The float32 model matches to 1e-6.
#[test]
fn one_ffm_step_matches_numpy_for_sgd_and_adagrad() {
    type Expected = (bool, f64, f64, [[f64; 7]; 3], f64);
    let sgd: Expected = (
        true,
        0.48400168,
        0.72566691,
        [
            [
                0.24630003,
                0.1,
                -0.2,
                0.29482854,
                0.38491427,
                -0.10237140,
                0.19491427,
            ],
            [
                -0.05979987,
                0.20474281,
                0.11465708,
                -0.4,
                0.3,
                0.24732854,
                -0.13758573,
            ],
            [
                0.16010007,
                -0.28745713,
                0.19491427,
                0.11957135,
                0.03275719,
                0.6,
                -0.5,
            ],
        ],
        0.35799916,
    );
    let adagrad: Expected = (
        true,
        0.48400168,
        0.72566691,
        [
            [
                0.34051311,
                0.1,
                -0.2,
                0.28365515,
                0.35251040,
                -0.10749820,
                0.18392582,
            ],
            [
                0.11763869,
                0.21499134,
                0.14615188,
                -0.4,
                0.3,
                0.24155331,
                -0.11086308,
            ],
            [
                0.33572073,
                -0.26046019,
                0.18392582,
                0.16142129,
                -0.00420518,
                0.6,
                -0.5,
            ],
        ],
        0.52631140,
    );
    let sgd_no_norm: Expected = (
        false,
        0.45512111,
        0.78719172,
        [
            [
                0.32621972,
                0.1,
                -0.2,
                0.33948789,
                0.40724394,
                -0.13586592,
                0.21724394,
            ],
            [
                0.25987889,
                0.27173183,
                0.20397578,
                -0.4,
                0.3,
                0.29198789,
                -0.11525606,
            ],
            [
                0.31993945,
                -0.29862197,
                0.21724394,
                0.23121972,
                -0.03423183,
                0.6,
                -0.5,
            ],
        ],
        0.37243945,
    );
    let start: [[f32; 7]; 3] = [
        [0.2, 0.1, -0.2, 0.3, 0.4, -0.1, 0.2],
        [-0.3, 0.2, 0.1, -0.4, 0.3, 0.25, -0.15],
        [0.05, -0.3, 0.2, 0.1, 0.05, 0.6, -0.5],
    ];
    fn check<O: Optimizer<f32> + OptimizerDesc>(
        opt: O,
        (normalize, p, loss, rows, bias): Expected,
        start: &[[f32; 7]; 3],
    ) {
        let name = format!("{:?}, normalize {normalize}", opt.describe());
        let m = Ctr::new(CtrKind::Ffm, ffm_named_config(normalize), opt).unwrap();
        assert_eq!(m.feature_tables()[0].dim(), 7);
        m.init();
        let mut w = m.new_worker(&valued_desc()).unwrap();
        let batch = valued_one(0.5, 2.0);
        m.gather(&mut w, &batch, 0).unwrap();
        assert_eq!(w.fields, [0, 1, 2]);
        let feats = w.feats.clone();
        for (&(t, row), start) in feats.iter().zip(start) {
            m.feature_tables()[t].write_weights(row, start);
        }
        m.bias.write_weights(0, &[0.1]);
        let got = f64::from(m.predict(&mut w, &batch, 0).unwrap());
        assert_relative_eq!(got, p, epsilon = 1e-6);
        let mut out = [0.0f64];
        m.train_batch(&mut w, &batch, &mut out, None).unwrap();
        assert_relative_eq!(out[0], loss, epsilon = 1e-6);
        for (&(t, row), expected) in feats.iter().zip(rows) {
            let mut got = [0.0f32; 7];
            m.feature_tables()[t].read_weights(row, &mut got);
            let got = got.map(f64::from);
            assert!(
                got.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-6),
                "{name}: row {got:?}, numpy {expected:?}"
            );
        }
        let got = f64::from(m.bias.weights(0)[0].load());
        assert_relative_eq!(got, bias, epsilon = 1e-6);
    }
    check(Sgd { lr: 0.5f32 }, sgd, &start);
    check(Sgd { lr: 0.5f32 }, sgd_no_norm, &start);
    let ada = Adagrad {
        lr: 0.5f32,
        initial_accumulator: 0.1,
    };
    check(ada, adagrad, &start);
}

// Features of one instance that hash to the same row (here all three: one bucket) each take
// their gradient from the row as the forward pass read it, then step the row in turn, each
// reading it as the step before left it. Adagrad lr 0.5 (accumulator 0.1), L2 0.1, label 1, the
// instance of `one_ffm_step_matches_numpy_for_sgd_and_adagrad`. numpy (float64):
//   x = np.array([0.5, 2.0, 1.0]); f = [0, 1, 2]; k, F, b, lr, l2, acc0 = 2, 3, 0.1, 0.5, 0.1, 0.1
//   R = np.array([0.2, 0.1, -0.2, 0.3, 0.4, -0.1, 0.2])   # the one row all three features hash to
//   v = lambda row, field: row[1 + field * k: 1 + (field + 1) * k]
//   n = 1 / (x @ x)
//   z = b + np.sqrt(n) * (x.sum() * R[0]) + n * sum(x[i] * x[j] * v(R, f[j]) @ v(R, f[i])
//                                                for i in range(3) for j in range(i + 1, 3))
//   p = 1 / (1 + np.exp(-z)); g = p - 1
//   grads, touched = np.zeros((3, 7)), np.zeros((3, 7), bool)
//   for i in range(3):
//       grads[i, 0] = g * np.sqrt(n) * x[i]; touched[i, 0] = True
//       for j in range(3):
//           if j != i:
//               s = slice(1 + f[j] * k, 1 + (f[j] + 1) * k)
//               grads[i, s] += g * n * x[i] * x[j] * v(R, f[i]); touched[i, s] = True
//       grads[i] += l2 * R * touched[i]     # the penalty on the touched elements, from the values read
//   row, acc = R.copy(), np.full(7, acc0)
//   for i in range(3):                       # each feature steps the row in turn, as it is then
//       t = touched[i]
//       acc[t] += grads[i, t] ** 2
//       row[t] -= lr * grads[i, t] / np.sqrt(acc[t])
//   p, -np.log(p), row, b - lr * g / np.sqrt(acc0 + g * g)
// The float32 model matches to 1e-6.
#[test]
fn ffm_features_sharing_a_row_step_it_in_turn() {
    let mut cfg = ffm_named_config(true);
    cfg.buckets = 1;
    let opt = Adagrad {
        lr: 0.5f32,
        initial_accumulator: 0.1,
    };
    let m = Ctr::new(CtrKind::Ffm, cfg, opt).unwrap();
    m.init();
    let mut w = m.new_worker(&valued_desc()).unwrap();
    let batch = valued_one(0.5, 2.0);
    m.gather(&mut w, &batch, 0).unwrap();
    assert_eq!(w.feats, [(0, 0), (0, 0), (0, 0)]);
    m.feature_tables()[0].write_weights(0, &[0.2, 0.1, -0.2, 0.3, 0.4, -0.1, 0.2]);
    m.bias.write_weights(0, &[0.1]);
    let p = f64::from(m.predict(&mut w, &batch, 0).unwrap());
    assert_relative_eq!(p, 0.60115189, epsilon = 1e-6);
    let mut out = [0.0f64];
    m.train_batch(&mut w, &batch, &mut out, None).unwrap();
    assert_relative_eq!(out[0], 0.50890765, epsilon = 1e-6);
    let expected = [
        0.81849117,
        0.09842942,
        -0.07838936,
        0.19410025,
        0.29906576,
        0.00827385,
        0.22023662,
    ];
    let mut got = [0.0f32; 7];
    m.feature_tables()[0].read_weights(0, &mut got);
    let got = got.map(f64::from);
    assert!(
        got.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-6),
        "row {got:?}, numpy {expected:?}"
    );
    assert_relative_eq!(
        f64::from(m.bias.weights(0)[0].load()),
        0.49179668,
        epsilon = 1e-6
    );
}

/// The field-aware factorization machine over `hogwild convert --from libffm`'s layout.
fn ffm_numbered_config(num_fields: usize) -> CtrConfig {
    let mut cfg = ffm_config(2);
    cfg.num_fields = Some(num_fields);
    cfg.l2 = 0.1;
    cfg
}

// libffm's field numbers are the fields: the same instance written with field numbers 0, 1, 2
// scores and trains as the named fields a, b, c do (ids hash differently, so the rows are set by
// hand). A number at or above num_fields is refused, naming the slot, the number and the id.
#[test]
fn ffm_uses_libffm_field_numbers_and_refuses_numbers_out_of_range() {
    let desc = crate::tools::convert::libsvm_desc(true);
    let m = Ctr::new(CtrKind::Ffm, ffm_numbered_config(3), Sgd { lr: 0.5f32 }).unwrap();
    m.init();
    let mut w = m.new_worker(&desc).unwrap();
    let batch = ffm_batch(&[2, 0, 1], &[33, 11, 22], &[1.0, 0.5, 2.0]);
    m.gather(&mut w, &batch, 0).unwrap();
    assert_eq!(w.fields, [2, 0, 1]);
    assert_eq!(w.xs, [1.0, 0.5, 2.0]);
    let named = Ctr::new(CtrKind::Ffm, ffm_named_config(true), Sgd { lr: 0.5f32 }).unwrap();
    named.init();
    let mut wn = named.new_worker(&valued_desc()).unwrap();
    let named_batch = valued_one(0.5, 2.0);
    named.gather(&mut wn, &named_batch, 0).unwrap();
    let rows: [[f32; 7]; 3] = [
        [0.05, -0.3, 0.2, 0.1, 0.05, 0.6, -0.5],
        [0.2, 0.1, -0.2, 0.3, 0.4, -0.1, 0.2],
        [-0.3, 0.2, 0.1, -0.4, 0.3, 0.25, -0.15],
    ];
    for (&(_, row), values) in w.feats.iter().zip(&rows) {
        m.feature_tables()[0].write_weights(row, values);
    }
    // The named instance lists a, b, c: rows 1, 2, 0 of the numbered one.
    for (&(_, row), values) in wn.feats.iter().zip([&rows[1], &rows[2], &rows[0]]) {
        named.feature_tables()[0].write_weights(row, values);
    }
    m.bias.write_weights(0, &[0.1]);
    named.bias.write_weights(0, &[0.1]);
    let p = m.predict(&mut w, &batch, 0).unwrap();
    assert_relative_eq!(p, named.predict(&mut wn, &named_batch, 0).unwrap());
    assert_relative_eq!(p, 0.48400168, epsilon = 1e-6);
    let (mut a, mut b) = ([0.0f64], [0.0f64]);
    m.train_batch(&mut w, &batch, &mut a, None).unwrap();
    named
        .train_batch(&mut wn, &named_batch, &mut b, None)
        .unwrap();
    assert_relative_eq!(a[0], b[0]);
    // Field c's row (listed first here) is the named model's third, and so on; the pairs are
    // summed in another order, so the floats agree to rounding.
    for (&(_, row), &(_, named_row)) in w
        .feats
        .iter()
        .zip([wn.feats[2], wn.feats[0], wn.feats[1]].iter())
    {
        let (mut x, mut y) = ([0.0f32; 7], [0.0f32; 7]);
        m.feature_tables()[0].read_weights(row, &mut x);
        named.feature_tables()[0].read_weights(named_row, &mut y);
        assert_relative_eq!(&x[..], &y[..], epsilon = 1e-6);
    }

    let message = "slot \"fields\", instance 0 of the batch: field number 3 of id 22 (position 1) \
                   is out of range: the model has num_fields = 3 (fields 0 to 2)";
    let bad = ffm_batch(&[0, 3], &[11, 22], &[1.0, 1.0]);
    let e = m.train_batch(&mut w, &bad, &mut [0.0], None).unwrap_err();
    assert_eq!(e.to_string(), message);
    let e = m.predict(&mut w, &bad, 0).unwrap_err();
    assert_eq!(e.to_string(), message);
    let e = m.check_instance(&mut w, &bad, 0).unwrap_err();
    assert_eq!(e.to_string(), message);
}

// Each optimizer trains the field-aware machine to the interactions of `write_data` (which
// logistic regression cannot learn: `fm_learns_interactions_lr_cannot...` has LR's AUC), with
// one thread and two.
#[test]
fn ffm_learns_interactions_with_every_optimizer() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_data(dir.path(), "train", 2, 4000, 1);
    let test = write_data(dir.path(), "test", 1, 3000, 2);
    let mut cfg = CtrConfig::new(4096);
    cfg.fields = vec!["a".into(), "b".into()];
    cfg.init_scale = 0.1;
    let ada = Adagrad {
        lr: 0.2f32,
        initial_accumulator: 0.1,
    };
    for threads in [1, 2] {
        let m = Ctr::new(CtrKind::Ffm, cfg.clone(), ada).unwrap();
        let (_, auc) = fit(&m, &train, &test, threads);
        assert!(auc > 0.8, "adagrad, {threads} threads: auc {auc}");
    }
    let adam = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
    let m = Ctr::new(CtrKind::Ffm, cfg.clone(), adam).unwrap();
    let (_, auc) = fit(&m, &train, &test, 2);
    assert!(auc > 0.8, "adam_async auc {auc}");
    let m = Ctr::new(CtrKind::Ffm, cfg, Sgd { lr: 0.5f32 }).unwrap();
    let (_, auc) = fit(&m, &train, &test, 1);
    assert!(auc > 0.8, "sgd auc {auc}");
}

#[test]
fn ffm_settings_are_checked() {
    let named = || {
        let mut cfg = CtrConfig::new(16);
        cfg.fields = vec!["a".into(), "b".into()];
        cfg
    };
    let cases: [(CtrKind, CtrConfig, &str, &str); 7] = [
        (CtrKind::Ffm, CtrConfig::new(16), "fields", "name them"),
        (
            CtrKind::Ffm,
            ffm_config(4),
            "num_fields",
            "above the largest",
        ),
        (
            CtrKind::Ffm,
            CtrConfig {
                num_fields: Some(3),
                ..named()
            },
            "num_fields",
            "3, but fields names 2 fields",
        ),
        (
            CtrKind::Ffm,
            CtrConfig {
                num_fields: Some(0),
                ..ffm_config(4)
            },
            "num_fields",
            "at least 1",
        ),
        (
            CtrKind::Ffm,
            CtrConfig {
                field_dims: [("a".to_string(), 2)].into(),
                ..named()
            },
            "field_dims",
            "one factor size",
        ),
        (
            CtrKind::Fm,
            CtrConfig {
                num_fields: Some(2),
                ..named()
            },
            "num_fields",
            "only the field-aware",
        ),
        (
            CtrKind::Lr,
            CtrConfig {
                normalize: Some(false),
                ..CtrConfig::new(16)
            },
            "normalize",
            "only the field-aware",
        ),
    ];
    for (kind, cfg, field, reason) in cases {
        let e = Ctr::new(kind, cfg, Sgd { lr: 0.1f32 })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{field}: ")) && e.contains(reason),
            "{field}: {e}"
        );
    }
    // With field numbers, every field is numbered.
    let mut cfg = ffm_numbered_config(4);
    cfg.fields = vec!["ids".into(), "values_ids".into()];
    let desc = DataFeedDesc::multi_slot(
        16,
        ["ids", "fields", "values_ids"]
            .iter()
            .map(|n| crate::feed::Slot::sparse(n, crate::feed::SlotType::U64))
            .chain([
                crate::feed::Slot::sparse("values", crate::feed::SlotType::F32),
                crate::feed::Slot::sparse("label", crate::feed::SlotType::U64),
            ])
            .collect(),
    );
    let m = Ctr::new(CtrKind::Ffm, cfg, Sgd { lr: 0.1f32 }).unwrap();
    let e = m.new_worker(&desc).unwrap_err().to_string();
    assert!(
        e.contains("fields.values_ids") && e.contains("give \"values_ids\" its field numbers"),
        "{e}"
    );
    // The table holds `num_fields` factor vectors per row, and round-trips through TOML.
    let m = Ctr::new(CtrKind::Ffm, ffm_numbered_config(5), Sgd { lr: 0.1f32 }).unwrap();
    assert_eq!(m.feature_tables()[0].dim(), 1 + 5 * 2);
    assert_eq!(m.feature_tables()[0].name(), "ffm_k2");
    let again = ModelConfig::from_toml(&m.describe(), "m.toml").unwrap();
    assert_eq!(again.model, ModelKind::Ffm(ffm_numbered_config(5)));
}

/// `Ctr::train_batch` with the field-aware instance loop `F` chosen by the caller (4 or 8: the
/// loops with the short way for distinct fields; 0: the general loop alone).
fn train_ffm_with<const F: usize, O: Optimizer<f32>>(m: &Ctr<O>, w: &mut CtrWorker, batch: &Batch) {
    let label_at = m.cfg.training_label(w.label_at, w.weight_at).unwrap();
    let steps = m.begin().unwrap();
    let mut rows = [0usize];
    m.gather_batch(w, batch, true).unwrap();
    let mut bias = m.local_bias();
    let sums = m
        .train_instances::<true, F>(w, batch, label_at, &steps, &mut bias, &mut rows)
        .unwrap();
    w.rows.end_batch(&m.opt, &m.tables);
    m.merge_bias(&bias);
    m.finish(&rows, sums.applied);
}

// The short way of `ffm_update_distinct` (an instance's features each in a field and a row of
// their own) steps the same bits as the general loop, for every optimizer, at factor sizes 4
// and 8, with values, over several steps (so that the slots are no longer fresh): instances 0-2
// take it, instance 3 (field 0 twice) and instance 4 (ids 5 and 5 in field 0: one row twice)
// do not. The short loop also writes into a worker's private copies of hot rows (ids 5 and 7
// in fields 0 and 2, used 4 times or more in every batch), merged back at the end: one thread
// then gives the shared rows' bits.
#[test]
fn ffm_distinct_fields_take_a_short_way_to_the_general_loops_bits() {
    let desc = crate::tools::convert::libsvm_desc(true);
    let fields: [&[u64]; 5] = [&[0, 1, 2, 3], &[2, 0, 4], &[1, 3, 2], &[0, 0, 2], &[0, 0]];
    let ids: [&[u64]; 5] = [
        &[5, 6, 7, 8],
        &[7, 5, 10],
        &[11, 12, 7],
        &[13, 5, 7],
        &[5, 5],
    ];
    let values: [&[f32]; 5] = [
        &[1.0, 0.5, 2.0, 0.25],
        &[1.5, 1.0, 0.75],
        &[0.5, 3.0, 1.0],
        &[1.0, 2.0, 0.5],
        &[0.5, 1.5],
    ];
    let labels: [&[f32]; 5] = [&[1.0], &[0.0], &[1.0], &[0.0], &[1.0]];
    let batch = Batch::from_slots(vec![
        floats(&labels),
        slot(&fields),
        slot(&ids),
        floats(&values),
    ]);
    fn check<O: Optimizer<f32> + OptimizerDesc + Clone>(opt: O, k: usize, batch: &Batch) {
        let desc = crate::tools::convert::libsvm_desc(true);
        let mut cfg = ffm_config(k);
        cfg.num_fields = Some(5);
        cfg.l2 = 0.01;
        let name = format!("{:?}, k {k}", opt.describe());
        let new = || {
            let m = Ctr::new(CtrKind::Ffm, cfg.clone(), opt.clone()).unwrap();
            m.init();
            m
        };
        let (short, general, local) = (new(), new(), new());
        let mut ws = short.new_worker(&desc).unwrap();
        let mut wg = general.new_worker(&desc).unwrap();
        let mut wl = local.new_worker(&desc).unwrap();
        wl.copy_rows = true;
        for _ in 0..3 {
            match k {
                4 => train_ffm_with::<4, O>(&short, &mut ws, batch),
                _ => train_ffm_with::<8, O>(&short, &mut ws, batch),
            }
            train_ffm_with::<0, O>(&general, &mut wg, batch);
            match k {
                4 => train_ffm_with::<4, O>(&local, &mut wl, batch),
                _ => train_ffm_with::<8, O>(&local, &mut wl, batch),
            }
        }
        assert!(wl.rows.len() >= 2, "{name}: hot rows {}", wl.rows.len());
        wl.rows.merge(&local.opt, &local.tables);
        // Each element as the optimizer reads it: a zero Adagrad accumulator stands for the
        // initial one, which a private copy holds and a shared row may store either way.
        let bits = |m: &Ctr<O>| -> Vec<u32> {
            let (table, stride) = (&m.tables[0], m.tables[0].stride());
            let cells = table.elements().iter().enumerate();
            let values =
                cells.map(|(e, c)| element_value(&m.opt, table.dim(), e % stride, c.load()));
            let bias = m.bias.elements().iter().map(|c| c.load());
            values.chain(bias).map(f32::to_bits).collect()
        };
        let expected = bits(&general);
        for (m, way) in [(&short, "short"), (&local, "short, private copies")] {
            let got = bits(m);
            let differ = (0..got.len()).find(|&e| got[e] != expected[e]);
            assert_eq!(differ, None, "{name}, {way}: first differing element");
        }
        let fresh = new();
        let changed = short.tables[0]
            .elements()
            .iter()
            .zip(fresh.tables[0].elements());
        let n = changed.filter(|(a, b)| a.load() != b.load()).count();
        assert!(n > 50, "{name}: {n} elements changed");
    }
    // Which instances the short way takes.
    let m = Ctr::new(
        CtrKind::Ffm,
        {
            let mut cfg = ffm_config(4);
            cfg.num_fields = Some(5);
            cfg
        },
        Sgd { lr: 0.1f32 },
    )
    .unwrap();
    let mut w = m.new_worker(&desc).unwrap();
    let taken: Vec<bool> = (0..5)
        .map(|i| {
            m.gather(&mut w, &batch, i).unwrap();
            super::ffm::distinct(&w.fields, &w.feats)
        })
        .collect();
    assert_eq!(taken, [true, true, true, false, false]);
    let ada = Adagrad {
        lr: 0.2f32,
        initial_accumulator: 1.0,
    };
    for k in [4, 8] {
        check(Sgd { lr: 0.1f32 }, k, &batch);
        check(ada, k, &batch);
        check(AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8), k, &batch);
    }
}

/// The model with the executor's default [`Model::prepare_dataset`] (nothing kept): its
/// in-memory runs gather, check and hash every batch's records every epoch.
struct Unprepared<'a, O>(&'a Ctr<O>);

impl<O: Optimizer<f32> + OptimizerDesc> Model for Unprepared<'_, O> {
    type Worker = CtrWorker;
    fn metrics(&self) -> Vec<String> {
        self.0.metrics()
    }
    fn startup(&self) {
        self.0.startup()
    }
    fn worker(&self, desc: &DataFeedDesc) -> Result<CtrWorker> {
        self.0.worker(desc)
    }
    fn workers(&self, desc: &DataFeedDesc, threads: usize) -> Result<Vec<CtrWorker>> {
        self.0.workers(desc, threads)
    }
    fn plan(&self, plan: &crate::model::RunPlan<'_>) -> Result<()> {
        self.0.plan(plan)
    }
    fn train_batch(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        out: &mut [f64],
        stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        assert!(
            !batch.is_referred(),
            "an unprepared model gets whole batches"
        );
        self.0.train_batch(w, batch, out, stages)
    }
    fn eval_batch(
        &self,
        w: &mut CtrWorker,
        batch: &Batch,
        out: &mut [f64],
        predictions: Option<&mut String>,
    ) -> Result<()> {
        self.0.eval_batch(w, batch, out, predictions)
    }
    fn flush(&self, w: &mut CtrWorker) {
        self.0.flush(w)
    }
    fn tables(&self) -> Vec<&Table> {
        self.0.tables()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn auc<'w>(&self, w: &'w mut CtrWorker) -> Option<&'w mut Auc> {
        self.0.auc(w)
    }
}

/// libffm's slots (label, field numbers, ids, values) and VW's importance weights.
fn prepared_desc() -> DataFeedDesc {
    use crate::feed::{Slot, SlotType};
    DataFeedDesc::multi_slot(
        8,
        vec![
            Slot::sparse("label", SlotType::F32),
            Slot::sparse("fields", SlotType::U64),
            Slot::sparse("ids", SlotType::U64),
            Slot::sparse("values", SlotType::F32),
            Slot::sparse("weight", SlotType::F32),
        ],
    )
}

/// `lines` MultiSlot lines of `prepared_desc`: 1 to 4 features of fields 0-2, values in
/// (0, 2), weights 0, 0.5 or 1.5; `bad_at` (a line number from 1) gets field number 7.
fn write_prepared_data(path: &Path, lines: usize, bad_at: Option<usize>) {
    let mut s = 7u64;
    let mut next = move || {
        s = mix64(s);
        s
    };
    let mut text = String::new();
    for line in 1..=lines {
        let n = 1 + (next() % 4) as usize;
        let fields: Vec<u64> = (0..n)
            .map(|k| {
                if Some(line) == bad_at && k == 0 {
                    7
                } else {
                    next() % 3
                }
            })
            .collect();
        let ids: Vec<u64> = (0..n).map(|_| next() % 40).collect();
        let values: Vec<f32> = (0..n).map(|_| (next() % 200) as f32 / 100.0).collect();
        let y = u64::from(ids.iter().sum::<u64>() % 3 == 0);
        let weight = [0.0, 0.5, 1.5][(next() % 3) as usize];
        let join = |v: Vec<String>| format!("{} {}", v.len(), v.join(" "));
        text.push_str(&format!(
            "1 {y} {} {} {} 1 {weight}\n",
            join(fields.iter().map(u64::to_string).collect()),
            join(ids.iter().map(u64::to_string).collect()),
            join(values.iter().map(f32::to_string).collect()),
        ));
    }
    std::fs::write(path, text).unwrap();
}

fn prepared_config(kind: CtrKind) -> CtrConfig {
    let mut cfg = CtrConfig::new(512);
    cfg.fields = vec!["ids".into()];
    cfg.values.insert("ids".into(), "values".into());
    cfg.weight_slot = Some("weight".into());
    match kind {
        CtrKind::Lr => {}
        CtrKind::Fm => cfg.dim = Some(3),
        CtrKind::Ffm => {
            cfg.dim = Some(4);
            cfg.num_fields = Some(3);
            cfg.field_numbers.insert("ids".into(), "fields".into());
        }
    }
    cfg
}

fn in_memory(epochs: usize) -> RunOptions {
    let mut options = quiet();
    options.feed.mode = crate::feed::FeedMode::InMemory { shuffle: Some(3) };
    options.feed.epochs = epochs;
    options
}

// A training run over an in-memory dataset hashes and checks every record once (the model keeps
// them, `ctr/prepared.rs`) and its batches then hold record numbers only: it trains the bits of
// the run that gathers and hashes every batch, for every model, with values, field numbers and
// importance weights, and with plain fields; with two threads it trains every instance of every
// epoch as well. The model keeps nothing once the run ends, nor for a run of one epoch.
#[test]
fn prepared_datasets_train_the_bits_of_gathered_batches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("train.ms");
    write_prepared_data(&file, 300, None);
    let desc = prepared_desc();
    let data =
        InMemoryDataset::load(&desc, std::slice::from_ref(&file), &in_memory(3).feed).unwrap();
    let ada = Adagrad {
        lr: 0.1f32,
        initial_accumulator: 0.1,
    };
    let plain = |kind| {
        let mut cfg = prepared_config(kind);
        cfg.values.clear();
        cfg.weight_slot = None;
        cfg
    };
    for (kind, cfg) in [
        (CtrKind::Lr, prepared_config(CtrKind::Lr)),
        (CtrKind::Fm, prepared_config(CtrKind::Fm)),
        (CtrKind::Ffm, prepared_config(CtrKind::Ffm)),
        (CtrKind::Fm, plain(CtrKind::Fm)),
    ] {
        let (a, b) = (
            Ctr::new(kind, cfg.clone(), ada).unwrap(),
            Ctr::new(kind, cfg.clone(), ada).unwrap(),
        );
        executor::startup(&a);
        executor::startup(&b);
        let ra = executor::train_dataset(&a, &desc, &data, 1, &[], &in_memory(3), None).unwrap();
        let rb =
            executor::train_dataset(&Unprepared(&b), &desc, &data, 1, &[], &in_memory(3), None)
                .unwrap();
        assert_same_bits(&a, &b);
        let bias = |m: &Ctr<Adagrad<f32>>| m.bias.weights(0)[0].load().to_bits();
        assert_eq!(bias(&a), bias(&b), "{kind:?}");
        assert_eq!(ra.get("loss"), rb.get("loss"), "{kind:?}");
        // What the model kept counts as data: 8 bytes a feature, 16 a record at least.
        assert!(ra.data_bytes >= rb.data_bytes + 300 * 16, "{kind:?}");
        assert!(
            a.prepared.lock().unwrap().is_none(),
            "released after the run"
        );

        let two = Ctr::new(kind, cfg, ada).unwrap();
        executor::startup(&two);
        let r = executor::train_dataset(&two, &desc, &data, 2, &[], &in_memory(3), None).unwrap();
        assert_eq!(r.instances, 3 * 300, "{kind:?}");
        assert!(r.get("loss").unwrap().is_finite());
    }
    // A single epoch reads each record once anyway: nothing is kept for it.
    let (one, other) = (
        Ctr::new(CtrKind::Fm, prepared_config(CtrKind::Fm), ada).unwrap(),
        Ctr::new(CtrKind::Fm, prepared_config(CtrKind::Fm), ada).unwrap(),
    );
    executor::startup(&one);
    executor::startup(&other);
    let r1 = executor::train_dataset(&one, &desc, &data, 1, &[], &in_memory(1), None).unwrap();
    let unprepared = Unprepared(&other);
    let r2 =
        executor::train_dataset(&unprepared, &desc, &data, 1, &[], &in_memory(1), None).unwrap();
    assert_eq!(r1.data_bytes, r2.data_bytes);
    assert_same_bits(&one, &other);
}

// A record training would refuse fails an in-memory run before anything trains, named by its
// file and line, as it fails a run that meets it in a batch.
#[test]
fn a_bad_record_fails_a_prepared_run_before_it_trains() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.ms");
    write_prepared_data(&file, 50, Some(37));
    let desc = prepared_desc();
    let data =
        InMemoryDataset::load(&desc, std::slice::from_ref(&file), &in_memory(2).feed).unwrap();
    let sgd = Sgd { lr: 0.1f32 };
    let m = Ctr::new(CtrKind::Ffm, prepared_config(CtrKind::Ffm), sgd).unwrap();
    executor::startup(&m);
    let before: Vec<u32> = m.tables()[0]
        .elements()
        .iter()
        .map(|c| c.load().to_bits())
        .collect();
    let e = executor::train_dataset(&m, &desc, &data, 2, &[], &in_memory(2), None).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("{}:37", file.display())) && text.contains("field number 7"),
        "{text}"
    );
    let after: Vec<u32> = m.tables()[0]
        .elements()
        .iter()
        .map(|c| c.load().to_bits())
        .collect();
    assert_eq!(before, after, "nothing trained");
    assert!(m.prepared.lock().unwrap().is_none());
    let unprepared =
        executor::train_dataset(&Unprepared(&m), &desc, &data, 1, &[], &in_memory(2), None)
            .unwrap_err()
            .to_string();
    assert_eq!(
        unprepared, text,
        "the same error as a run that gathers every batch"
    );
}
