use approx::assert_abs_diff_eq;

use super::*;
use crate::rng::{unit_f32, SplitMix64};

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

/// gensim's `most_similar(positive, negative, topn=k, restrict_vocab=among)` written out in f64,
/// step by step as keyedvectors.py computes it: `get_mean_vector(keys, weights (+1 / -1),
/// pre_normalize=True, post_normalize=True)` (the weighted sum of unit vectors divided by the
/// sum of the weights' magnitudes, then `unitvec`), `dists = dot(vectors[:among], mean) /
/// norms[:among]`, the `k + len(keys)` best by `argsort(reverse=True)`, the query's own indices
/// dropped, the first `k` kept. Ties (which gensim leaves in argpartition's order) by index.
fn gensim_most_similar(
    raw: &[Vec<f32>],
    positive: &[usize],
    negative: &[usize],
    k: usize,
    among: usize,
) -> Vec<(usize, f64)> {
    let dim = raw[0].len();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let as_f64 = |i: usize| raw[i].iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let mut mean = vec![0.0f64; dim];
    for (&i, w) in positive
        .iter()
        .map(|i| (i, 1.0))
        .chain(negative.iter().map(|i| (i, -1.0)))
    {
        let v = as_f64(i);
        let n = norm(&v);
        for (m, x) in mean.iter_mut().zip(&v) {
            *m += w * x / n;
        }
    }
    let total = (positive.len() + negative.len()) as f64;
    mean.iter_mut().for_each(|m| *m /= total);
    let n = norm(&mean);
    mean.iter_mut().for_each(|m| *m /= n);
    let mut dists: Vec<(usize, f64)> = (0..among.min(raw.len()))
        .map(|i| {
            let v = as_f64(i);
            let d: f64 = v.iter().zip(&mean).map(|(x, m)| x * m).sum();
            (i, d / norm(&v))
        })
        .collect();
    dists.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let keys: Vec<usize> = positive.iter().chain(negative).copied().collect();
    dists.truncate(k + keys.len());
    dists.retain(|(i, _)| !keys.contains(i));
    dists.truncate(k);
    dists
}

/// Words at known angles from "east" in the plane, of different lengths (so that a ranking by
/// dot products, without normalising, would be another): their cosine similarities with "east"
/// are the cosines of the angles.
fn compass() -> WordVectors {
    let at = |degrees: f64, length: f64| {
        let r = degrees.to_radians();
        [(length * r.cos()) as f32, (length * r.sin()) as f32]
    };
    let rows = [
        at(0.0, 1.0),   // east
        at(90.0, 5.0),  // north
        at(30.0, 0.5),  // east-north-east
        at(180.0, 2.0), // west
        at(45.0, 3.0),  // north-east
        at(30.0, 4.0),  // ene2: the direction of ene, longer
    ];
    let names = ["east", "north", "ene", "west", "ne", "ene2"];
    WordVectors::new(words(&names), 2, rows.concat()).unwrap()
}

#[test]
fn neighbours_are_ranked_by_cosine_with_the_query_left_out() {
    let v = compass();
    let east = v.index("east").unwrap();
    let got = v.most_similar(&[east], &[], 10);
    let names: Vec<&str> = got.iter().map(|n| v.word(n.index)).collect();
    // ene and ene2 tie (one direction): the first in the vectors' order first.
    assert_eq!(names, ["ene", "ene2", "ne", "north", "west"]);
    let expected = [30f64, 30.0, 45.0, 90.0, 180.0].map(|d| d.to_radians().cos() as f32);
    for (n, want) in got.iter().zip(expected) {
        assert_abs_diff_eq!(n.similarity, want, epsilon = 1e-6);
    }
    // k cuts the list; k = 0 answers nothing (gensim returns [] for topn < 1).
    assert_eq!(v.most_similar(&[east], &[], 2).len(), 2);
    assert!(v.most_similar(&[east], &[], 0).is_empty());
    // A query word is left out however often it is given, and only the query's words are.
    let ne = v.index("ne").unwrap();
    let got = v.most_similar(&[east, east, ne], &[], 10);
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|n| n.index != east && n.index != ne));
}

// A query term that is a vector of its own (a word outside the vectors, given its n-grams'
// vector) counts as a word of that direction, whatever its length, and leaves no word out.
#[test]
fn a_vector_term_queries_like_a_word_of_its_direction_and_leaves_nothing_out() {
    let v = compass();
    let (east, north) = (v.index("east").unwrap(), v.index("north").unwrap());
    let query = |positive: &[Term], negative: &[Term]| {
        let got = v.nearest(&[v.query_terms(positive, negative)], 10, v.len());
        got[0]
            .iter()
            .map(|n| (n.index, n.similarity))
            .collect::<Vec<_>>()
    };
    // Three times east's length: east itself first, at cosine 1, then as for the word.
    let far_east = Term::Vector(vec![3.0, 0.0]);
    let got = query(std::slice::from_ref(&far_east), &[]);
    assert_eq!(got.len(), 6);
    assert_eq!(got[0].0, east);
    assert_abs_diff_eq!(got[0].1, 1.0, epsilon = 1e-6);
    let as_word: Vec<_> = v.most_similar(&[east], &[], 10);
    let rest: Vec<_> = got[1..].iter().map(|&(i, _)| i).collect();
    assert_eq!(rest, as_word.iter().map(|n| n.index).collect::<Vec<_>>());
    // Mixed with words: the mean of the unit vectors, the words alone left out.
    let mixed = query(&[far_east, Term::Word(north)], &[]);
    let ne = v.index("ne").unwrap();
    assert_eq!(mixed[0].0, ne);
    assert!(mixed.iter().all(|&(i, _)| i != north) && mixed.iter().any(|&(i, _)| i == east));
}

/// "a is to b as c is to ?" is gensim's `most_similar(positive=[b, c], negative=[a])` (3CosAdd):
/// the direction of unit(b) - unit(a) + unit(c). Here the axes are (male, female, royal, young),
/// and the vectors' lengths differ, which the unit vectors undo.
fn family() -> (WordVectors, Vec<Vec<f32>>) {
    let rows: Vec<Vec<f32>> = vec![
        vec![2.0, 0.0, 0.0, 0.0], // man
        vec![0.0, 0.5, 0.0, 0.0], // woman
        vec![3.0, 0.0, 3.0, 0.0], // king
        vec![0.0, 1.0, 1.0, 0.0], // queen
        vec![1.0, 0.0, 0.0, 1.0], // boy
        vec![0.0, 7.0, 0.0, 7.0], // girl
    ];
    let names = ["man", "woman", "king", "queen", "boy", "girl"];
    let v = WordVectors::new(words(&names), 4, rows.concat()).unwrap();
    (v, rows)
}

#[test]
fn analogies_are_3cosadd_as_gensim_computes_it() {
    let (v, rows) = family();
    let i = |w: &str| v.index(w).unwrap();
    // man : king :: woman : ? -- unit(king) - unit(man) + unit(woman) = (1/sqrt2 - 1, 1,
    // 1/sqrt2, 0), of length sqrt(3 - sqrt2); queen = (0, 1, 1, 0) / sqrt2, so its cosine is
    // (1 + 1/sqrt2) / sqrt2 / sqrt(3 - sqrt2) = 0.958 (each line of that by hand, and in
    // gensim_most_similar above).
    let got = v.most_similar(&[i("king"), i("woman")], &[i("man")], 3);
    assert_eq!(v.word(got[0].index), "queen");
    let s2 = 2f64.sqrt();
    let queen = (1.0 + 1.0 / s2) / s2 / (3.0 - s2).sqrt();
    assert_abs_diff_eq!(f64::from(got[0].similarity), queen, epsilon = 1e-6);
    let reference = gensim_most_similar(&rows, &[i("king"), i("woman")], &[i("man")], 3, 6);
    assert_eq!(got.len(), reference.len());
    for (n, (index, similarity)) in got.iter().zip(reference) {
        assert_eq!(n.index, index);
        assert_abs_diff_eq!(f64::from(n.similarity), similarity, epsilon = 1e-6);
    }
    let got = v.most_similar(&[i("boy"), i("woman")], &[i("man")], 1);
    assert_eq!(v.word(got[0].index), "girl");
}

/// The batched, threaded scan against the reference on random vectors: more queries than a
/// batch, more rows than a thread takes (in a pool of 4 threads, so that the ranges' bests are
/// merged), a dimension no multiple of the 8 lanes, and `among` below the word count with query
/// words past it.
#[test]
fn the_threaded_scan_matches_the_reference() {
    let (n, dim) = (10_000, 13);
    let mut rng = SplitMix64(7);
    let rows: Vec<Vec<f32>> = (0..n)
        .map(|_| (0..dim).map(|_| unit_f32(rng.next()) - 0.5).collect())
        .collect();
    let names: Vec<String> = (0..n).map(|i| format!("w{i}")).collect();
    let v = WordVectors::new(names, dim, rows.concat()).unwrap();
    let asked: Vec<(Vec<usize>, Vec<usize>)> = (0..150)
        .map(|q| match q % 3 {
            0 => (vec![rng.below(n)], vec![]),
            1 => (vec![rng.below(n), rng.below(n)], vec![rng.below(n)]),
            _ => (vec![n - 1 - q], vec![]),
        })
        .collect();
    let queries: Vec<Query> = asked.iter().map(|(p, m)| v.query(p, m)).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    for (k, among) in [(7, n), (3, 9_000)] {
        let answers = pool.install(|| v.nearest(&queries, k, among));
        assert_eq!(answers.len(), queries.len());
        for ((positive, negative), got) in asked.iter().zip(&answers) {
            let want = gensim_most_similar(&rows, positive, negative, k, among);
            assert_eq!(got.len(), k);
            for (j, (n, (index, similarity))) in got.iter().zip(&want).enumerate() {
                assert_abs_diff_eq!(f64::from(n.similarity), *similarity, epsilon = 1e-5);
                // Neighbours closer than rounding may trade places; others may not.
                let close =
                    |o: Option<&(usize, f64)>| o.is_some_and(|o| (o.1 - similarity).abs() < 1e-5);
                if !(close(want.get(j + 1)) || j > 0 && close(want.get(j - 1))) {
                    assert_eq!(n.index, *index, "rank {j} of {positive:?} - {negative:?}");
                }
                assert!(n.index < among);
            }
        }
    }
}

#[test]
fn zero_vectors_have_no_direction() {
    let v = WordVectors::new(
        words(&["zero", "a", "b"]),
        2,
        vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
    )
    .unwrap();
    let zero = v.query(&[0], &[]);
    assert!(zero.is_zero());
    let got = v.nearest(&[zero], 5, 3).remove(0);
    assert_eq!(got.iter().map(|n| n.index).collect::<Vec<_>>(), [1, 2]);
    assert!(got.iter().all(|n| n.similarity == 0.0));
    // a and -a cancel out.
    assert!(v.query(&[1], &[1]).is_zero());
    assert!(!v.query(&[1], &[]).is_zero());
}

#[test]
fn bad_vectors_are_refused_with_the_word() {
    let e = WordVectors::new(words(&["a", "b"]), 1, vec![1.0, f32::NAN]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "word vectors: the vector of \"b\" holds a NaN or an infinite value"
    );
    let e = WordVectors::new(words(&["a", "a"]), 1, vec![1.0, 2.0]).unwrap_err();
    assert!(e.to_string().contains("\"a\" is given twice"), "{e}");
    assert!(WordVectors::new(vec![], 1, vec![]).is_err());
    assert!(WordVectors::new(words(&["a"]), 0, vec![]).is_err());
    assert!(WordVectors::new(words(&["a"]), 2, vec![1.0]).is_err());
}

fn parse(text: &str) -> Result<(WordVectors, Vec<Duplicate>)> {
    WordVectors::parse_text(text.as_bytes(), "v.txt")
}

#[test]
fn text_vectors_are_read_as_gensim_reads_them() {
    // word2vec.c's trailing space, a CRLF line, tabs, and a word given twice (the first kept;
    // the header counts it, as gensim reads it).
    let (v, duplicates) = parse("4 2\nx 1.0 0.0 \r\ny\t0 2\nx 0 1\nz -1e0 0.000000\n\n").unwrap();
    assert_eq!(v.words(), ["x", "y", "z"]);
    assert_eq!(v.dim(), 2);
    assert_eq!(
        duplicates,
        [Duplicate {
            word: "x".into(),
            line: 4
        }]
    );
    assert_eq!(
        v.unit_vectors().as_slice().unwrap(),
        [1.0, 0.0, 0.0, 1.0, -1.0, 0.0]
    );
}

#[test]
fn malformed_text_vectors_name_the_line() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "v.txt: the file is empty"),
        (b"hello\n", "v.txt:1: expected the header"),
        (b"2 0\n", "v.txt:1: expected the header"),
        (b"0 3\n", "v.txt:1: expected the header"),
        (
            b"2 2\na 1 2\nb 1\n",
            "v.txt:3: \"b\" has 1 values, the header says 2",
        ),
        (b"2 2\na 1 2\nb 1 2 3\n", "v.txt:3: \"b\" has 3 values"),
        (
            b"1 2\na 1 x\n",
            "v.txt:2: value 2 of \"a\", \"x\", is not a finite number",
        ),
        (b"1 2\na 1 nan\n", "v.txt:2: value 2 of \"a\", \"nan\""),
        (b"1 2\na 1 inf\n", "is not a finite number"),
        (
            b"2 2\na 1 2\n",
            "v.txt:3: the file ends after 1 of the 2 vectors",
        ),
        (
            b"1 2\na 1 2\nb 3 4\n",
            "v.txt:3: more lines than the 1 vectors",
        ),
        (b"2 2\na 1 2\n\nb 1 2\n", "v.txt:3: an empty line"),
        (
            b"1 2\n\xff\x00\x01 1 2\n",
            "v.txt:2: not UTF-8 text (byte 1)",
        ),
    ];
    for (text, want) in cases {
        let e = WordVectors::parse_text(*text, "v.txt")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(want),
            "{:?}: {e:?} lacks {want:?}",
            String::from_utf8_lossy(text)
        );
    }
    let e = WordVectors::read_text(Path::new("/nonexistent/v.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/nonexistent/v.txt: cannot open"), "{e}");
}

/// [`family`], with "King" after its lower-case form, pointing where man : king :: woman : ?
/// points: gensim's case-insensitive evaluation passes over it (it is the query word KING),
/// a case-sensitive one answers it.
fn family_with_a_variant() -> WordVectors {
    let (v, mut rows) = family();
    let s = 0.5f32.sqrt();
    rows.insert(3, vec![s - 1.0, 1.0, s, 0.0]);
    let mut names = v.words().to_vec();
    names.insert(3, "King".into());
    WordVectors::new(names, 4, rows.concat()).unwrap()
}

/// A questions file whose answers are known by construction (see [`family`]): in "family", lines
/// 2, 3, 4 and 7 right, line 5 wrong (the answer is queen), line 6 skipped (no "princess"),
/// line 8 not four words; "capitals" all skipped.
const QUESTIONS: &str = ": family\n\
    man king woman queen\n\
    man boy woman girl\n\
    woman queen man king\n\
    man king woman girl\n\
    man king woman princess\n\
    MAN KING Woman QUEEN\n\
    man king woman\n\
    : capitals\n\
    paris france rome italy\n\
    athens greece oslo norway\n";

fn questions() -> Questions {
    Questions::parse(QUESTIONS.as_bytes(), "q.txt").unwrap()
}

fn counts(a: &SectionAccuracy) -> (usize, usize, usize) {
    (a.correct, a.incorrect, a.skipped)
}

#[test]
fn analogy_accuracy_follows_gensims_rules() {
    let q = questions();
    assert_eq!(q.len(), 8);
    assert_eq!(q.invalid_lines(), [8]);
    let v = family_with_a_variant();
    let got = q.evaluate(&v, 300_000, Case::Insensitive);
    assert_eq!(got.among, 7);
    assert_eq!(got.sections.len(), 2);
    assert_eq!(got.sections[0].name, "family");
    assert_eq!(counts(&got.sections[0]), (4, 1, 1));
    assert_abs_diff_eq!(got.sections[0].accuracy(), 0.8);
    assert_eq!(got.sections[1].name, "capitals");
    assert_eq!(counts(&got.sections[1]), (0, 0, 2));
    assert_eq!(got.sections[1].accuracy(), 0.0);
    let total = got.total();
    assert_eq!(total.name, "Total accuracy");
    assert_eq!(counts(&total), (4, 1, 3));

    // Case-sensitive: "King" is an answer of its own (lines 2 and 5 wrong), line 7 is skipped.
    let got = q.evaluate(&v, 300_000, Case::Sensitive);
    assert_eq!(counts(&got.sections[0]), (2, 2, 2));

    // Only the first 4 words take part (man, woman, king, King): every question has a word past
    // them and is skipped.
    let got = q.evaluate(&v, 4, Case::Insensitive);
    assert_eq!((got.among, counts(&got.total())), (4, (0, 0, 8)));
    // The first 5 (queen too): lines 2, 4 and 7 right; line 5 (girl) skipped now.
    let got = q.evaluate(&v, 5, Case::Insensitive);
    assert_eq!(counts(&got.sections[0]), (3, 0, 3));
}

#[test]
fn questions_files_are_read_as_gensim_reads_them() {
    // A header's name is what follows `: ` and any further colons and spaces, trimmed; a line
    // `:x` is no header but a question of one word; blank lines are skipped everywhere.
    let q = Questions::parse(
        "\n: :  a b \r\nw x y z\n\n:x\n:\tno\nW X Y Z\r\n".as_bytes(),
        "q.txt",
    )
    .unwrap();
    assert_eq!(q.section_names().collect::<Vec<_>>(), ["a b"]);
    assert_eq!(q.len(), 2);
    assert_eq!(q.invalid_lines(), [5, 6]);
    let cases: &[(&[u8], &str)] = &[
        (
            b"a b c d\n: s\n",
            "q.txt:1: a question before the first section header",
        ),
        (b": s\n\n: t\nx y\n", "q.txt: no questions"),
        (b"", "q.txt: no questions"),
        (b": s\na b c \xe9\n", "q.txt:2: not UTF-8 text"),
    ];
    for (text, want) in cases {
        let e = Questions::parse(*text, "q.txt").unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} is not {want:?}");
    }
}
