//! Converters: exact output lines, the matching desc, and errors with file and line.

use std::io::Cursor;

use std::path::Path;

use hogwild::executor::{self, Progress, Run, RunOptions};
use hogwild::feed::DataFeedDesc;
use hogwild::models::{Ctr, CtrKind, ModelConfig, ModelKind};
use hogwild::subwords::Subwords;
use hogwild::tools::check_file;
use hogwild::tools::convert::{
    convert_csv, convert_libsvm, convert_vw, fasttext_desc, fasttext_hash, libsvm_ctr_keys,
    libsvm_desc, vw_ctr_keys, vw_desc, CsvOptions, FastTextOptions, Vocabulary, WordIds,
};

#[path = "support/ctr_toy.rs"]
mod ctr_toy;
use ctr_toy::value_dependent;

fn fasttext(input: &str, vocab: &Vocabulary, opts: &FastTextOptions) -> String {
    let mut out = Vec::new();
    opts.convert(vocab, Cursor::new(input), "in", &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// Every converted line must pass the checker with the converter's desc (after a text
/// round trip of the desc, as `hogwild convert` writes it).
fn assert_valid(desc: &DataFeedDesc, multislot: &str) {
    let desc = DataFeedDesc::from_text(&desc.to_text()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    std::fs::write(&path, multislot).unwrap();
    let report = check_file(&desc, &path, 10).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

const TRAIN: &str = "__label__pos good movie\n__label__neg the movie\n__label__pos\n";

#[test]
fn fasttext_with_a_vocabulary() {
    let mut vocab = Vocabulary::default();
    vocab.scan(Cursor::new(TRAIN), "train", true).unwrap();
    assert_eq!((vocab.word_ids(), vocab.labels()), (4, 2));
    assert_eq!(
        vocab.label_counts(),
        Some(&[2, 1][..]),
        "pos twice, neg once"
    );
    let opts = FastTextOptions {
        word_ids: WordIds::Vocabulary,
        bigram_buckets: None,
        subwords: None,
    };
    let out = fasttext(TRAIN, &vocab, &opts);
    // Word ids by first appearance from 1 (good 1, movie 2, the 3); a line without words gets
    // the unknown/padding id 0.
    assert_eq!(out, "2 1 2 1 0 \n2 3 2 1 1 \n1 0 1 0 \n");
    assert_valid(&fasttext_desc(), &out);
    // Test data reuses the saved vocabulary: unknown words map to 0.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab");
    vocab.save(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "label\t__label__pos\t2\nlabel\t__label__neg\t1\nword\tgood\nword\tmovie\nword\tthe\n"
    );
    let reloaded = Vocabulary::load(&path).unwrap();
    assert_eq!(reloaded, vocab);
    // A vocabulary written before counts were kept loads without them.
    std::fs::write(
        &path,
        "label\t__label__pos\nlabel\t__label__neg\nword\tgood\n",
    )
    .unwrap();
    let old = Vocabulary::load(&path).unwrap();
    assert_eq!((old.labels(), old.label_counts()), (2, None));
    assert_eq!(
        fasttext("__label__neg great movie\n", &reloaded, &opts),
        "2 0 2 1 1 \n"
    );
}

#[test]
fn fasttext_hashed_with_bigrams() {
    // python: h = FNV-1a 32 over int8-sign-extended bytes (fastText's Dictionary::hash);
    //   h("good") = 4200608216, h("movie") = 2935200975 -> % 100 = 16, 75
    //   bigram: (int64(h1 as int32) * 116049371 + int64(h2 as int32)) mod 2^64 % 1000 = 615
    assert_eq!(fasttext_hash("good"), 4_200_608_216);
    assert_eq!(fasttext_hash("movie"), 2_935_200_975);
    let mut vocab = Vocabulary::default();
    vocab.scan(Cursor::new(TRAIN), "train", false).unwrap();
    let opts = FastTextOptions {
        word_ids: WordIds::Hashed { buckets: 100 },
        bigram_buckets: Some(1000),
        subwords: None,
    };
    let out = fasttext("__label__pos good movie\n", &vocab, &opts);
    assert_eq!(out, format!("3 16 75 {} 1 0 \n", 100 + 615));
}

#[test]
fn fasttext_errors_name_file_and_line() {
    let mut vocab = Vocabulary::default();
    vocab.scan(Cursor::new(TRAIN), "train", true).unwrap();
    let opts = FastTextOptions {
        word_ids: WordIds::Vocabulary,
        bigram_buckets: None,
        subwords: None,
    };
    let run = |input: &str| {
        opts.convert(&vocab, Cursor::new(input), "test.txt", Vec::new())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        run("__label__pos ok\nno label here\n"),
        "test.txt:2: no __label__ on the line"
    );
    assert_eq!(
        run("__label__meh good\n"),
        "test.txt:1: unknown label \"__label__meh\""
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab");
    std::fs::write(&path, "word\tgood\nbogus\n").unwrap();
    assert_eq!(
        Vocabulary::load(&path).unwrap_err().to_string(),
        format!(
            "{}:2: expected \"label<TAB>name<TAB>count\", \"word<TAB>token\" or \
             \"subwords<TAB>minn<TAB>maxn<TAB>buckets\", got \"bogus\"",
            path.display()
        )
    );
    for (text, want) in [
        (
            "label\t__label__a\t3\nlabel\t__label__b\tmany\n",
            ":2: label __label__b: \"many\" is no count",
        ),
        (
            "label\t__label__a\t3\nlabel\t__label__b\n",
            ":2: label __label__b lacks a count, unlike the first label line",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let e = Vocabulary::load(&path).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    std::fs::write(&path, "subwords\t4\t3\t10\nword\tgood\n").unwrap();
    assert_eq!(
        Vocabulary::load(&path).unwrap_err().to_string(),
        format!(
            "{}:1: maxn: must be at least minn (4), got 3",
            path.display()
        )
    );
}

// fastText itself (pip fasttext-numpy2-wheel) on the training text below: its dictionary is
// `</s>` then the words in order (ids 0..8, nwords 8), as hogwild's vocabulary numbers them
// (0 is any other word, 1..8 the words), so the ids agree whole:
//   m = fasttext.train_supervised(input="t.txt", minn=3, maxn=6, bucket=1000000, dim=2,
//                                 epoch=1, minCount=1)
//   m.get_subwords("a")  -> (['a', '<a>'], [7, 87608])
//   m.get_subwords("zz") -> (['<zz', '<zz>', 'zz>'], [777875, 257975, 1049])  (not a word)
#[test]
fn fasttext_subwords_follow_each_word_with_fasttexts_ids() {
    const TEXT: &str = "__label__a hello world café naïve\n__label__b straße 日本語 a\n";
    let mut vocab = Vocabulary::default();
    vocab.scan(Cursor::new(TEXT), "train", true).unwrap();
    let subwords = Subwords::new(3, 6, 1_000_000).unwrap();
    vocab.set_subwords(Some(subwords));
    let opts = FastTextOptions {
        word_ids: WordIds::Vocabulary,
        bigram_buckets: None,
        subwords: Some(subwords),
    };
    assert_eq!(opts.id_space(&vocab), 8);
    let out = fasttext("__label__b a zz\n", &vocab, &opts);
    assert_eq!(out, "5 7 87608 777875 257975 1049 1 1 \n");
    assert_valid(&fasttext_desc(), &out);
    // The vocabulary keeps the n-gram settings for the test data's conversion.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab");
    vocab.save(&path).unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .starts_with("subwords\t3\t6\t1000000\nlabel\t__label__a\t1\n"));
    let reloaded = Vocabulary::load(&path).unwrap();
    assert_eq!(reloaded.subwords(), Some(subwords));
    assert_eq!(reloaded, vocab);
    // With bigrams, the n-grams' buckets come after the bigrams' (the model's vocab).
    let opts = FastTextOptions {
        bigram_buckets: Some(10),
        ..opts
    };
    let out = fasttext("__label__b a zz\n", &vocab, &opts);
    assert!(out.starts_with("6 7 87618 777885 257985 1059 "), "{out}");
}

#[test]
fn libsvm_and_libffm() {
    let mut out = Vec::new();
    convert_libsvm(Cursor::new("+1 3:0.5 10:2\n-1\n\n"), "in", &mut out, false).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "1 1 2 3 10 2 0.5 2 \n1 -1 1 0 1 0 \n");
    assert_valid(&libsvm_desc(false), &out);

    let mut out = Vec::new();
    convert_libffm(Cursor::new("0 1:7:1 2:9:0.25\n"), &mut out);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "1 0 2 1 2 2 7 9 2 1 0.25 \n");
    assert_valid(&libsvm_desc(true), &out);
}

fn convert_libffm(input: Cursor<&str>, out: &mut Vec<u8>) {
    convert_libsvm(input, "in", out, true).unwrap();
}

#[test]
fn libsvm_errors() {
    let run = |input: &str, ffm: bool| {
        convert_libsvm(Cursor::new(input), "a.svm", Vec::new(), ffm)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        run("1 3:1\nyes 1:1\n", false),
        "a.svm:2: label \"yes\" is not a finite number"
    );
    assert_eq!(
        run("1 3\n", false),
        "a.svm:1: feature \"3\" is not index:value"
    );
    assert_eq!(
        run("1 3:1\n", true),
        "a.svm:1: feature \"3:1\" is not field:index:value"
    );
    assert_eq!(
        run("1 -3:1\n", false),
        "a.svm:1: index \"-3\" is not an unsigned integer"
    );
    assert_eq!(
        run("1 3:x\n", false),
        "a.svm:1: value \"x\" is not a finite number"
    );
    // A value no model can use: NaN or infinite.
    for value in ["nan", "NaN", "inf", "-inf", "1e39"] {
        assert_eq!(
            run(&format!("1 3:1\n0 4:{value}\n"), false),
            format!("a.svm:2: value \"{value}\" is not a finite number")
        );
        assert_eq!(
            run(&format!("1 0:3:{value}\n"), true),
            format!("a.svm:1: value \"{value}\" is not a finite number")
        );
    }
}

#[test]
fn vowpal_wabbit() {
    // python: fnv1a64(b"a^x") % 1000 = 298, fnv1a64(b"^y") % 1000 = 168,
    // fnv1a64(b"b^y") % 1000 = 776
    let mut out = Vec::new();
    convert_vw(
        Cursor::new("1 2.0 'tag|a x:0.5 | y\n-1 |a\n"),
        "in",
        &mut out,
        1000,
    )
    .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "1 1 1 2 2 298 168 2 0.5 1 \n1 -1 1 1 1 0 1 0 \n");
    assert_valid(&vw_desc(), &out);
    let vw = |input: &str| {
        let mut out = Vec::new();
        convert_vw(Cursor::new(input), "v", &mut out, 1000).map(|_| String::from_utf8(out).unwrap())
    };
    let err = |input: &str| vw(input).unwrap_err().to_string();
    assert_eq!(err("1 a b\n"), "v:1: no '|' before the features");
    // A namespace's scale multiplies its features' values; a tag touching the '|' is a tag.
    assert_eq!(
        vw("1 0.5 tag|a:2 x:0.5 |b:0.25 y\n").unwrap(),
        "1 1 1 0.5 2 298 776 2 1 0.25 \n"
    );
    assert_eq!(
        vw("1 0.5 tag|a:2 x:0.5\n").unwrap(),
        vw("1 0.5 'tag |a:2 x:0.5\n").unwrap()
    );
    assert_eq!(
        err("1 1.0 0.5 |a x\n"),
        "v:1: initial prediction (base) \"0.5\": the CTR models have none; remove it"
    );
    assert_eq!(err("1 -2 |a x\n"), "v:1: importance -2 is negative");
    assert_eq!(
        err("1 nan |a x\n"),
        "v:1: importance \"nan\" is not a finite number"
    );
    assert_eq!(
        err("1|a x\n"),
        "v:1: no label before the tag \"1\" (VW's tag: the last token, when it starts with ' or \
         touches the '|')"
    );
    assert_eq!(
        err("1 |a x:inf\n"),
        "v:1: value \"inf\" is not a finite number"
    );
    assert_eq!(
        err("1 |a:1e30 x:1e30\n"),
        "v:1: value of \"x:1e30\" scaled by namespace \"a:1e30\" is not finite"
    );
    assert_eq!(
        err("1 |a:x y\n"),
        "v:1: namespace scale \"x\" is not a finite number"
    );
}

#[test]
fn csv_columns_become_slots() {
    // python: fnv1a64(b"carrier=UA") % 1000 = 568, fnv1a64(b"origin=JFK") % 1000 = 303
    let input = "delay,carrier,origin\n1,UA,JFK\n0,\"UA\",JFK\n";
    let opts = CsvOptions {
        label: "delay".to_string(),
        columns: None,
        buckets: 1000,
        delimiter: b',',
    };
    let mut out = Vec::new();
    let (lines, desc) = convert_csv(Cursor::new(input), "f.csv", &mut out, &opts).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(lines, 2);
    assert_eq!(out, "1 1 1 568 1 303 \n1 0 1 568 1 303 \n");
    let names: Vec<&str> = desc.slots().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["delay", "carrier", "origin"]);
    assert_valid(&desc, &out);

    let err = |input: &str, opts: &CsvOptions| {
        convert_csv(Cursor::new(input.to_string()), "f.csv", Vec::new(), opts)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("a,b\n1,2\n", &opts),
        "f.csv:1: no column \"delay\" in the header"
    );
    assert_eq!(
        err("delay,b\nlate,2\n", &opts),
        "f.csv:2: label column \"delay\" \"late\" is not a finite number"
    );
    let only_b = CsvOptions {
        columns: Some(vec!["b".to_string(), "b".to_string()]),
        ..opts.clone()
    };
    assert_eq!(
        err("delay,b\n1,2\n", &only_b),
        "f.csv:1: slot \"b\" appears twice (slots 2 and 3)"
    );
}

/// Converts `train` and `test` text of `format` into `dir`, trains `kind` with the `[model]`
/// keys `keys` for 5 epochs on 2 threads and returns the test AUC.
fn converted_auc(dir: &Path, format: &str, kind: &str, keys: &str, train: &str, test: &str) -> f64 {
    let convert = |text: &str, name: &str| {
        let path = dir.join(name);
        let out = std::fs::File::create(&path).unwrap();
        let input = Cursor::new(text);
        match format {
            "vw" => convert_vw(input, name, out, 1 << 20).unwrap(),
            _ => convert_libsvm(input, name, out, format == "libffm").unwrap(),
        };
        vec![path]
    };
    let (train, test) = (convert(train, "train.ms"), convert(test, "test.ms"));
    let desc = match format {
        "vw" => vw_desc(),
        _ => libsvm_desc(format == "libffm"),
    };
    let dim = if kind == "fm" { "dim = 4\n" } else { "" };
    let toml = format!(
        "[model]\nkind = \"{kind}\"\nbuckets = 4096\n{dim}{keys}\n\
         [optimizer]\nkind = \"adagrad\"\nlr = 0.1\n"
    );
    let config = ModelConfig::from_toml(&toml, "toy.toml").unwrap();
    let (ModelKind::Lr(cfg) | ModelKind::Fm(cfg)) = config.model else {
        panic!("{toml}")
    };
    let kind = if kind == "fm" {
        CtrKind::Fm
    } else {
        CtrKind::Lr
    };
    let m = Ctr::new(kind, cfg, config.optimizer.adagrad().unwrap()).unwrap();
    let mut options = RunOptions {
        print_period: 0,
        progress: Progress::Quiet,
        ..RunOptions::default()
    };
    options.feed.epochs = 5;
    executor::startup(&m);
    Run::new(&m, &desc)
        .threads(2)
        .options(&options)
        .train(&train)
        .unwrap();
    let r = Run::new(&m, &desc)
        .threads(1)
        .options(&options)
        .eval(&test)
        .unwrap();
    r.get("auc").unwrap()
}

// The CTR models learn a label that only a feature's value carries, from converted libsvm,
// libffm and VW text with the keys the converters name; read as categorical ids (the default
// [model]), the set has nothing to learn from.
#[test]
fn converted_values_train_a_value_dependent_label() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["libsvm", "libffm", "vw"] {
        let (train, test) = (
            value_dependent(format, 2000, 1),
            value_dependent(format, 1000, 2),
        );
        let keys = match format {
            "libsvm" => libsvm_ctr_keys(false),
            "libffm" => libsvm_ctr_keys(true),
            _ => vw_ctr_keys(),
        };
        for kind in ["lr", "fm"] {
            let auc = converted_auc(dir.path(), format, kind, keys, &train, &test);
            eprintln!("{format} {kind}: test AUC {auc:.4}");
            assert!(auc > 0.95, "{format} {kind}: test AUC {auc}");
        }
        let auc = converted_auc(dir.path(), format, "lr", "", &train, &test);
        eprintln!("{format} lr without the keys: test AUC {auc:.4}");
        assert!(
            (auc - 0.5).abs() < 0.1,
            "{format} without keys: test AUC {auc}"
        );
    }
}
