//! `hogwild export --format tf-train`, `hogwild tf-train --restore` and `hogwild import` against
//! native training: from the same weights, one step on the same batch (one instance, which holds
//! a word twice) gives the same weights and optimizer state, within 1e-5 relative (float32), per
//! model variant and optimizer. A native step applies each instance's gradient in turn and the
//! graph a batch's gradient at once, so the step is compared on a batch of one instance.
#![cfg(feature = "tf")]

use std::path::{Path, PathBuf};

use hogwild::checkpoint;

mod common;
use common::{convert_text, fails, ok};

/// The op library AdamAsync's apply ops come from (`make plugin`).
fn plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/plugin/libadam_async_ops.so")
}

const TRAIN: &str = "__label__a red green blue red\n__label__b cat dog cat bird\n\
                     __label__a blue green red sky\n__label__b dog bird cat mouse\n";

/// Optimizer sections: (name, TOML).
const OPTIMIZERS: [(&str, &str); 3] = [
    ("sgd", "kind = \"sgd\"\nlr = 0.5\n"),
    ("adagrad", "kind = \"adagrad\"\nlr = 0.5\n"),
    ("adam_async", "kind = \"adam_async\"\nlr = 0.05\n"),
];

/// Model variants: lines of the [model] section besides the vocabulary.
const VARIANTS: [(&str, &str); 3] = [
    ("mean_bigrams", "dim = 4\nbigram_buckets = 16\n"),
    (
        "sum_bias_plain",
        "dim = 4\npool = \"sum\"\nbias = true\nend_of_text = false\n",
    ),
    // One sigmoid per label; the step's instance has two labels.
    ("ova", "dim = 4\nbigram_buckets = 16\nloss = \"ova\"\n"),
];

/// Every table's rows (weights and slots) and scalars of the checkpoint at `path`.
fn tables(path: &Path) -> Vec<(String, Vec<f32>, Vec<f32>)> {
    let ck = checkpoint::load(path).unwrap();
    let mut out: Vec<_> = ck
        .tables
        .iter()
        .map(|t| {
            let mut values = vec![0f32; t.rows() * t.stride()];
            for (r, row) in values.chunks_exact_mut(t.stride()).enumerate() {
                t.read_row(r, row);
            }
            (t.name().to_string(), values, t.scalars())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Asserts that `got` and `want` agree within 1e-5 relative; a stored Adagrad accumulator of 0
/// reads as its initial value (0.1), which the TensorFlow side stores.
fn assert_close(what: &str, got: &[f32], want: &[f32], adagrad: bool) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let read = |x: f32| if adagrad && x == 0.0 { 0.1 } else { x };
        let (g2, w2) = (read(g), read(w));
        let tol = 1e-5 * w2.abs().max(g2.abs()) + 1e-7;
        assert!(
            (g2 - w2).abs() <= tol,
            "{what}: element {i}: tf-train {g} native {w}"
        );
    }
}

#[test]
fn one_tf_train_step_of_the_exported_graph_matches_a_native_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), TRAIN).unwrap();
    std::fs::write(d.join("one.txt"), "__label__b cat dog red cat\n").unwrap();
    convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    convert_text(d, "one.txt", "single.ms", &["--vocab", "vocab.txt"]);
    std::fs::write(d.join("two.txt"), "__label__b __label__a cat dog red cat\n").unwrap();
    convert_text(d, "two.txt", "two.ms", &["--vocab", "vocab.txt"]);
    let desc = std::fs::read_to_string(d.join("data.prototxt")).unwrap();
    let one = regex_free_batch_size(&desc, 1);
    std::fs::write(d.join("one.prototxt"), one).unwrap();
    assert!(plugin().is_file(), "run `make plugin` first");
    for (variant, model) in VARIANTS {
        let batch = if variant == "ova" {
            "two.ms"
        } else {
            "single.ms"
        };
        std::fs::copy(d.join(batch), d.join("one.ms")).unwrap();
        for (opt, section) in OPTIMIZERS {
            let name = format!("{variant}_{opt}");
            let toml = format!(
                "[model]\nkind = \"bow\"\nvocab = 10\nclasses = 2\n{model}\n[optimizer]\n{section}"
            );
            std::fs::write(d.join(format!("{name}.toml")), toml).unwrap();
            step_matches(d, &name, opt == "adagrad", &[], &[]);
        }
    }
}

/// Trains `{name}.toml` natively for 2 epochs on `train.ms`, then takes one step from it on
/// `one.ms` (batch size 1, `one.prototxt`) both ways (the exported graph through `tf-train`
/// and `import`, and `train --resume`) and compares every table. `feed` is the export's
/// `--feed` where it needs one (CTR models), `train` more arguments of the first training.
fn step_matches(d: &Path, name: &str, adagrad: bool, feed: &[&str], train: &[&str]) {
    let plugin = plugin();
    let plugin = plugin.to_str().unwrap();
    let run = |args: &[&str]| ok(d, args);
    let (m, graph_dir) = (format!("{name}.ckpt"), format!("{name}.tf"));
    let config = format!("{name}.toml");
    let mut first = vec![
        "train",
        "--config",
        &config,
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--threads",
        "1",
        "--save",
        &m,
        "--quiet",
    ];
    first.extend_from_slice(train);
    run(&first);
    let mut export = vec![
        "export",
        "--model",
        &m,
        "--format",
        "tf-train",
        "--op-library",
        plugin,
        "-o",
        &graph_dir,
    ];
    export.extend_from_slice(feed);
    run(&export);
    let (meta, ckpt) = (
        format!("{graph_dir}/graph.meta"),
        format!("{graph_dir}/ckpt"),
    );
    let trained = format!("{graph_dir}/trained");
    run(&[
        "tf-train",
        "--graph",
        &meta,
        "--restore",
        &ckpt,
        "--op-library",
        plugin,
        "--feed",
        "one.prototxt",
        "one.ms",
        "--save",
        &trained,
        "--print-period",
        "0",
    ]);
    let imported = format!("{name}.imported.ckpt");
    run(&[
        "import",
        "--model",
        &m,
        "--tf-checkpoint",
        &trained,
        "-o",
        &imported,
    ]);
    let native = format!("{name}.native.ckpt");
    run(&[
        "train",
        "--resume",
        &m,
        "--feed",
        "one.prototxt",
        "one.ms",
        "--epochs",
        "1",
        "--threads",
        "1",
        "--save",
        &native,
        "--quiet",
    ]);
    let (got, want) = (tables(&d.join(&imported)), tables(&d.join(&native)));
    let before = tables(&d.join(&m));
    assert_eq!(got.len(), want.len(), "{name}");
    for ((g, w), b) in got.iter().zip(&want).zip(&before) {
        assert_eq!(g.0, w.0, "{name}");
        let what = format!("{name}: table {}", g.0);
        assert_close(&what, &g.1, &w.1, adagrad);
        assert_close(&format!("{what} scalars"), &g.2, &w.2, false);
        // The step moved the table: the comparison is not of two unchanged copies.
        assert_ne!(b.1, w.1, "{what}: the native step changed nothing");
    }
}

/// `desc` with its batch size set to `n`.
fn regex_free_batch_size(desc: &str, n: usize) -> String {
    desc.lines()
        .map(|l| {
            if l.trim_start().starts_with("batch_size:") {
                format!("batch_size: {n}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn import_refuses_a_checkpoint_of_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), TRAIN).unwrap();
    convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    for (name, dim) in [("a", 4), ("b", 8)] {
        std::fs::write(
            d.join(format!("{name}.toml")),
            format!(
                "[model]\nkind = \"bow\"\nvocab = 10\nclasses = 2\ndim = {dim}\n\n\
                 [optimizer]\nkind = \"sgd\"\nlr = 0.5\n"
            ),
        )
        .unwrap();
        ok(
            d,
            &[
                "train",
                "--config",
                &format!("{name}.toml"),
                "--feed",
                "data.prototxt",
                "train.ms",
                "--save",
                &format!("{name}.ckpt"),
                "--quiet",
            ],
        );
    }
    ok(
        d,
        &[
            "export", "--model", "a.ckpt", "--format", "tf-train", "-o", "a.tf",
        ],
    );
    let e = fails(
        d,
        &[
            "import",
            "--model",
            "b.ckpt",
            "--tf-checkpoint",
            "a.tf/ckpt",
            "-o",
            "c.ckpt",
        ],
    );
    assert!(
        e.contains(
            "tensor \"embedding\" has shape [11, 4], but the model's table \"embedding\" \
                    needs [11, 8]"
        ),
        "{e}"
    );
    assert!(!d.join("c.ckpt").exists());
    let e = fails(
        d,
        &[
            "import",
            "--model",
            "b.ckpt",
            "--tf-checkpoint",
            "nowhere/ckpt",
            "-o",
            "c.ckpt",
        ],
    );
    assert!(e.contains("importing nowhere/ckpt"), "{e}");
}

/// The CTR data of `lines` lines of examples/ctr/train.txt as `train.ms`, its first line as
/// `one.ms`, the walk-through's desc as `data.prototxt` and `one.prototxt` (batch size 1).
fn ctr_setup(d: &Path, file: &str, desc: &str, lines: usize) {
    let text = std::fs::read_to_string(file).unwrap();
    let head: String = text.lines().take(lines).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("train.ms"), &head).unwrap();
    let first = head.lines().next().unwrap();
    std::fs::write(d.join("one.ms"), format!("{first}\n")).unwrap();
    let desc = std::fs::read_to_string(desc).unwrap();
    std::fs::write(d.join("data.prototxt"), &desc).unwrap();
    std::fs::write(d.join("one.prototxt"), regex_free_batch_size(&desc, 1)).unwrap();
}

#[test]
fn one_tf_train_step_of_an_exported_ctr_graph_matches_a_native_step() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ctr");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (train, desc) = (examples.join("train.txt"), examples.join("data.prototxt"));
    ctr_setup(d, train.to_str().unwrap(), desc.to_str().unwrap(), 300);
    // Logistic regression, the factorization machine of two factor sizes and the field-aware
    // one (normalized, its pairs through each other's field vectors), with an L2 penalty, per
    // optimizer.
    let models = [
        ("lr", "kind = \"lr\"\nbuckets = 512\nl2 = 0.01\n"),
        (
            "fm",
            "kind = \"fm\"\nbuckets = 512\ndim = 4\nfield_dims = { hour = 2 }\nl2 = 0.01\n\
             init_scale = 0.1\n",
        ),
        (
            "ffm",
            "kind = \"ffm\"\nbuckets = 512\ndim = 4\nfields = [\"user\", \"item\", \"hour\", \
             \"site\"]\nl2 = 0.01\ninit_scale = 0.1\n",
        ),
    ];
    for (model, section) in models {
        for (opt, optimizer) in OPTIMIZERS {
            let name = format!("{model}_{opt}");
            std::fs::write(
                d.join(format!("{name}.toml")),
                format!("[model]\n{section}\n[optimizer]\n{optimizer}"),
            )
            .unwrap();
            if (model, opt) == ("ffm", "adam_async") {
                // A field-aware row steps only its touched blocks natively, which a sparse
                // apply of AdamAsync cannot: refused, and said so.
                let m = format!("{name}.ckpt");
                ok(
                    d,
                    &[
                        "train",
                        "--config",
                        &format!("{name}.toml"),
                        "--feed",
                        "data.prototxt",
                        "train.ms",
                        "--save",
                        &m,
                        "--quiet",
                    ],
                );
                let e = fails(
                    d,
                    &[
                        "export",
                        "--model",
                        &m,
                        "--feed",
                        "data.prototxt",
                        "--format",
                        "tf-train",
                        "-o",
                        "ffm_adam.tf",
                    ],
                );
                assert!(
                    e.contains("field-aware factorization machine with sgd or adagrad"),
                    "{e}"
                );
                continue;
            }
            step_matches(
                d,
                &name,
                opt == "adagrad",
                &["--feed", "data.prototxt"],
                &[],
            );
        }
    }
}

#[test]
fn vw_values_and_importance_weights_step_as_natively() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ctr");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let vw = examples.join("train.vw");
    ok(
        d,
        &[
            "convert",
            "--from",
            "vw",
            vw.to_str().unwrap(),
            "-o",
            "all.ms",
        ],
    );
    let all = d.join("all.ms");
    ctr_setup(
        d,
        all.to_str().unwrap(),
        d.join("data.prototxt").to_str().unwrap(),
        300,
    );
    let config = std::fs::read_to_string(examples.join("vw.toml")).unwrap();
    std::fs::write(
        d.join("vw.toml"),
        config.replace("buckets = 65536", "buckets = 512"),
    )
    .unwrap();
    step_matches(d, "vw", true, &["--feed", "data.prototxt"], &[]);
}

/// The linear learning-rate schedule in the graph (`--lr-decay-instances`): two epochs each way
/// at batch size 1, in the files' order, end with the same tables.
#[test]
fn the_linear_schedule_decays_as_natively() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), TRAIN.repeat(3)).unwrap();
    convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    let desc = std::fs::read_to_string(d.join("data.prototxt")).unwrap();
    std::fs::write(d.join("one.prototxt"), regex_free_batch_size(&desc, 1)).unwrap();
    std::fs::write(
        d.join("m.toml"),
        "[model]\nkind = \"bow\"\nvocab = 10\nclasses = 2\ndim = 4\nbigram_buckets = 16\n\
         lr_hold = 0.25\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.5\n",
    )
    .unwrap();
    let run = |args: &[&str]| ok(d, args);
    run(&[
        "train",
        "--config",
        "m.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--save",
        "m.ckpt",
        "--quiet",
    ]);
    // 12 instances, 2 epochs.
    run(&[
        "export",
        "--model",
        "m.ckpt",
        "--format",
        "tf-train",
        "--lr-decay-instances",
        "24",
        "-o",
        "m.tf",
    ]);
    run(&[
        "tf-train",
        "--graph",
        "m.tf/graph.meta",
        "--restore",
        "m.tf/ckpt",
        "--feed",
        "one.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--save",
        "m.tf/trained",
        "--print-period",
        "0",
    ]);
    run(&[
        "import",
        "--model",
        "m.ckpt",
        "--tf-checkpoint",
        "m.tf/trained",
        "-o",
        "tf.ckpt",
    ]);
    run(&[
        "train",
        "--resume",
        "m.ckpt",
        "--feed",
        "one.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--threads",
        "1",
        "--no-shuffle",
        "--save",
        "native.ckpt",
        "--quiet",
    ]);
    // Without the schedule the graph trains at the full rate: the tables differ.
    run(&[
        "export",
        "--model",
        "m.ckpt",
        "--format",
        "tf-train",
        "-o",
        "constant.tf",
    ]);
    run(&[
        "tf-train",
        "--graph",
        "constant.tf/graph.meta",
        "--restore",
        "constant.tf/ckpt",
        "--feed",
        "one.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--save",
        "constant.tf/trained",
        "--print-period",
        "0",
    ]);
    run(&[
        "import",
        "--model",
        "m.ckpt",
        "--tf-checkpoint",
        "constant.tf/trained",
        "-o",
        "constant.ckpt",
    ]);
    let (got, want) = (tables(&d.join("tf.ckpt")), tables(&d.join("native.ckpt")));
    let constant = tables(&d.join("constant.ckpt"));
    for ((g, w), c) in got.iter().zip(&want).zip(&constant) {
        assert_close(&format!("table {}", g.0), &g.1, &w.1, true);
        assert_ne!(c.1, w.1, "table {}: the schedule changed nothing", g.0);
    }
}

#[test]
fn libffm_field_numbers_and_values_step_as_natively() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ctr");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ffm = examples.join("train.ffm");
    ok(
        d,
        &[
            "convert",
            "--from",
            "libffm",
            ffm.to_str().unwrap(),
            "-o",
            "all.ms",
        ],
    );
    let all = d.join("all.ms");
    ctr_setup(
        d,
        all.to_str().unwrap(),
        d.join("data.prototxt").to_str().unwrap(),
        300,
    );
    let config = std::fs::read_to_string(examples.join("ffm.toml")).unwrap();
    std::fs::write(
        d.join("ffm.toml"),
        config.replace("buckets = 65536", "buckets = 512"),
    )
    .unwrap();
    step_matches(d, "ffm", true, &["--feed", "data.prototxt"], &[]);
}

/// The hierarchical softmax over the Huffman tree of three labels' counts (two inner nodes):
/// the gold's way from the root is stepped, as natively, per optimizer.
#[test]
fn hs_steps_as_natively() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/text");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = std::fs::read_to_string(examples.join("train.txt")).unwrap();
    let head: String = text.lines().take(90).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("train.txt"), &head).unwrap();
    let first = head.lines().next().unwrap();
    std::fs::write(d.join("one.txt"), format!("{first}\n")).unwrap();
    let out = convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    let vocab = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("vocab = "))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or_else(|| panic!("convert names no vocab:\n{out}"))
        .to_string();
    convert_text(d, "one.txt", "one.ms", &["--vocab", "vocab.txt"]);
    let desc = std::fs::read_to_string(d.join("data.prototxt")).unwrap();
    std::fs::write(d.join("one.prototxt"), regex_free_batch_size(&desc, 1)).unwrap();
    for (opt, section) in OPTIMIZERS {
        let name = format!("hs_{opt}");
        std::fs::write(
            d.join(format!("{name}.toml")),
            format!(
                "[model]\nkind = \"bow\"\nvocab = {vocab}\nclasses = 3\ndim = 4\n\
                 bigram_buckets = 16\nloss = \"hs\"\n\n[optimizer]\n{section}"
            ),
        )
        .unwrap();
        step_matches(d, &name, opt == "adagrad", &[], &["--labels", "vocab.txt"]);
    }
}
