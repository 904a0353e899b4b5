//! The MultiSlot line parser: values, and every error class with its exact message (through
//! `check_file`, which reports each bad line as the feed's strict mode would).

use hogwild::feed::{Batch, DataFeedDesc, LineParser, SlotValues};
use hogwild::rng::XorShift64;
use hogwild::tools::check_file;

/// Slots: ids (uint64, sparse), x (float, dense, shape 2), y (float, unused).
const DESC: &str = r#"batch_size: 4
multi_slot_desc {
  slots { name: "ids" type: "uint64" is_used: true }
  slots { name: "x" type: "float" is_dense: true is_used: true shape: 2 }
  slots { name: "y" type: "float" is_used: false }
}"#;

fn desc() -> DataFeedDesc {
    DataFeedDesc::from_text(DESC).unwrap()
}

/// The message `check_file` gives for a file holding `line` only, without the `file:` prefix.
fn problem(desc: &DataFeedDesc, line: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, format!("{line}\n")).unwrap();
    let report = check_file(desc, &path, 10).unwrap();
    assert_eq!(report.bad_lines, 1, "{line:?} should be bad");
    let message = report.problems[0].to_string();
    let prefix = format!("{}:", path.display());
    message.strip_prefix(&prefix).unwrap().to_string()
}

#[test]
fn good_line_values() {
    let desc = desc();
    let parser = LineParser::new(&desc);
    let mut batch = Batch::empty(&desc);
    parser
        .parse_into(
            b"3 0 18446744073709551615 42 2 1.5 -2e-3 1 nan_ok_unused",
            &mut batch,
        )
        .unwrap_err();
    assert_eq!(batch.len, 0, "a bad line leaves the batch untouched");
    parser
        .parse_into(b"3 0 18446744073709551615 42 2 1.5 -2e-3 1 7", &mut batch)
        .unwrap();
    parser
        .parse_into(b"\t1  9 2 +4 5. 2 1 2  ", &mut batch)
        .unwrap();
    assert_eq!(batch.len, 2);
    assert_eq!(
        batch.slots[0].values,
        SlotValues::U64(vec![0, u64::MAX, 42, 9])
    );
    assert_eq!(batch.slots[0].offsets, [0, 3, 4]);
    assert_eq!(
        batch.slots[1].values,
        SlotValues::F32(vec![1.5, -2e-3, 4.0, 5.0])
    );
    assert_eq!(batch.slots.len(), 2, "the unused slot is not fed");
}

#[test]
fn zero_count() {
    assert_eq!(
        problem(&desc(), "0 2 1 2 1 0"),
        "1: slot \"ids\": count 0 (every slot needs at least one value; pad it)"
    );
}

#[test]
fn negative_count() {
    assert_eq!(
        problem(&desc(), "-2 1 2 2 1 2 1 0"),
        "1: slot \"ids\": count -2 is negative"
    );
}

#[test]
fn count_not_a_number() {
    assert_eq!(
        problem(&desc(), "two 1 2"),
        "1: slot \"ids\": count \"two\" is not a number"
    );
}

#[test]
fn count_too_large_for_the_line() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 2 9 1.0"),
        "1: slot \"y\": count 9 is too large for the rest of the line (4 bytes)"
    );
}

#[test]
fn count_beyond_u64() {
    assert_eq!(
        problem(&desc(), "99999999999999999999999 1"),
        "1: slot \"ids\": count 99999999999999999999999 is too large for the rest of the line (2 bytes)"
    );
}

#[test]
fn truncated_values() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 2 3 10 20"),
        "1: slot \"y\": expected 3 values, the line ends after 2 (truncated line)"
    );
}

#[test]
fn truncated_before_a_count() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 2"),
        "1: slot \"y\": line ends before the count (truncated line)"
    );
}

#[test]
fn empty_line() {
    assert_eq!(
        problem(&desc(), ""),
        "1: slot \"ids\": line ends before the count (truncated line)"
    );
}

#[test]
fn id_not_a_number() {
    assert_eq!(
        problem(&desc(), "2 5 x7 2 1 2 1 0"),
        "1: slot \"ids\": value 2 \"x7\" is not an unsigned integer"
    );
    assert_eq!(
        problem(&desc(), "1 1.5 2 1 2 1 0"),
        "1: slot \"ids\": value 1 \"1.5\" is not an unsigned integer"
    );
}

#[test]
fn id_out_of_range() {
    assert_eq!(
        problem(&desc(), "1 18446744073709551616 2 1 2 1 0"),
        "1: slot \"ids\": value 1 \"18446744073709551616\" is out of range for uint64"
    );
    assert_eq!(
        problem(&desc(), "1 -4 2 1 2 1 0"),
        "1: slot \"ids\": value 1 \"-4\" is out of range for uint64"
    );
}

#[test]
fn float_not_a_number() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 abc 1 0"),
        "1: slot \"x\": value 2 \"abc\" is not a number"
    );
}

#[test]
fn float_out_of_range() {
    assert_eq!(
        problem(&desc(), "1 5 2 1e39 1 1 0"),
        "1: slot \"x\": value 1 \"1e39\" is out of range for float"
    );
    assert_eq!(
        problem(&desc(), "1 5 2 1 2 1 nan"),
        "1: slot \"y\": value 1 \"nan\" is out of range for float"
    );
}

#[test]
fn trailing_garbage() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 2 1 0 extra stuff"),
        "1: trailing data after the last slot: \"extra stuff\""
    );
}

#[test]
fn a_byte_order_mark_is_named_not_printed() {
    assert_eq!(
        problem(&desc(), "\u{feff}1 5 2 1 2 1 0"),
        "1: byte order mark (U+FEFF) at the start of the line: save the file without one"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("utf16");
    std::fs::write(&path, b"\xff\xfe1\x00 \x005\x00\n").unwrap();
    let report = check_file(&desc(), &path, 10).unwrap();
    assert_eq!(
        report.problems[0].to_string(),
        format!(
            "{}:1: UTF-16 byte order mark: the file is UTF-16, MultiSlot files are ASCII text",
            path.display()
        )
    );
}

#[test]
fn a_nul_byte_is_named_by_its_column() {
    assert_eq!(
        problem(&desc(), "1 5 2 1\u{0}2 1 0"),
        "1: NUL byte at column 8 (binary or corrupt data)"
    );
    assert_eq!(
        problem(&desc(), "\u{0}\u{0}\u{0}"),
        "1: NUL byte at column 1 (binary or corrupt data)"
    );
}

#[test]
fn control_characters_in_a_token_are_escaped() {
    assert_eq!(
        problem(&desc(), "1 5 2 1 2 1 0 \u{1b}[31mred"),
        "1: trailing data after the last slot: \"\\u{1b}[31mred\""
    );
}

#[test]
fn long_tokens_are_shortened() {
    let long = "z".repeat(50);
    assert_eq!(
        problem(&desc(), &format!("1 5 2 1 2 1 0 {long}")),
        format!(
            "1: trailing data after the last slot: \"{}...\"",
            "z".repeat(32)
        )
    );
}

#[test]
fn dense_width_from_shape() {
    assert_eq!(
        problem(&desc(), "1 5 3 1 2 3 1 0"),
        "1: slot \"x\": dense slot has 3 values, its shape needs 2"
    );
}

#[test]
fn dense_width_without_shape_follows_the_batch() {
    let desc = DataFeedDesc::from_text(
        r#"multi_slot_desc { slots { name: "d" type: "float" is_dense: true is_used: true } }"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, "2 1 2\n2 3 4\n3 1 2 3\n2 5 6\n").unwrap();
    let report = check_file(&desc, &path, 10).unwrap();
    assert_eq!((report.lines, report.bad_lines), (4, 1));
    assert_eq!(
        report.problems[0].to_string(),
        format!(
            "{}:3: slot \"d\": dense slot has 3 values, earlier lines of this batch have 2",
            path.display()
        )
    );
}

#[test]
fn check_reports_every_line_and_class() {
    let desc = desc();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(
        &path,
        "1 5 2 1 2 1 0\n0 2 1 2 1 0\n1 5 2 1 2 1 0 x\n1 5 2 1 2 1 0\n0 2 1 2 1 0\n1 5\n",
    )
    .unwrap();
    let report = check_file(&desc, &path, 2).unwrap();
    assert_eq!((report.lines, report.bad_lines), (6, 4));
    assert_eq!(report.problems.len(), 2, "capped at max_problems");
    let classes: Vec<(&str, u64)> = report.classes.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(
        classes,
        [
            ("trailing garbage", 1),
            ("truncated line", 1),
            ("zero count", 2)
        ]
    );
    assert!(report.problems[1]
        .to_string()
        .starts_with(&format!("{}:3: ", path.display())));
}

#[test]
fn ids_of_every_length_match_std_parse() {
    // Ids of 1 to 20 digits, at every alignment, checked against `str::parse::<u64>`.
    let desc = DataFeedDesc::from_text(
        r#"multi_slot_desc { slots { name: "ids" type: "uint64" is_used: true } }"#,
    )
    .unwrap();
    let parser = LineParser::new(&desc);
    let mut rng = XorShift64(0x9E37_79B9_7F4A_7C15);
    let mut tokens = Vec::new();
    for digits in 1..=20u32 {
        for _ in 0..50 {
            let r = rng.next();
            let max = if digits == 20 {
                u64::MAX
            } else {
                10u64.pow(digits) - 1
            };
            let min = if digits == 1 {
                0
            } else {
                10u64.pow(digits - 1)
            };
            tokens.push((min + r % (max - min)).to_string());
        }
        tokens.push("0".repeat(digits as usize)); // leading zeros
    }
    for start in 0..tokens.len() {
        let take: Vec<&String> = tokens[start..].iter().take(7).collect();
        let line = format!(
            "{}{}",
            take.len(),
            take.iter().map(|t| format!(" {t}")).collect::<String>()
        );
        let mut batch = Batch::empty(&desc);
        parser.parse_into(line.as_bytes(), &mut batch).unwrap();
        let expected: Vec<u64> = take.iter().map(|t| t.parse().unwrap()).collect();
        assert_eq!(batch.slots[0].values, SlotValues::U64(expected), "{line}");
    }
}
