//! DataFeedDesc: Paddle's text format read unchanged, and every validation error.

use hogwild::feed::{DataFeedDesc, Slot, SlotType};

/// Paddle's IMDB demo `data.prototxt`, verbatim.
const IMDB: &str = r#"name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

fn err(text: &str) -> String {
    DataFeedDesc::from_text(text).unwrap_err().to_string()
}

#[test]
fn imdb_prototxt_parses_unchanged() {
    let desc = DataFeedDesc::from_text(IMDB).unwrap();
    assert_eq!(desc.name(), "MultiSlotDataFeed");
    assert_eq!(desc.batch_size(), 2);
    assert_eq!(desc.pipe_command(), "cat");
    let used: Vec<&str> = desc.used_slots().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(used, ["words", "label"]);
    assert!(desc
        .used_slots()
        .iter()
        .all(|s| s.slot_type() == SlotType::U64 && !s.is_dense()));
}

#[test]
fn defaults_follow_paddle() {
    let desc = DataFeedDesc::from_text(
        r#"multi_slot_desc { slots { name: "a" type: "float" is_used: true } }"#,
    )
    .unwrap();
    assert_eq!(desc.batch_size(), 32);
    assert_eq!(desc.pipe_command(), "cat");
    assert!(!desc.slots()[0].is_dense());
}

#[test]
fn compatibility_fields_are_accepted() {
    let desc = DataFeedDesc::from_text(
        r#"name: "MultiSlotInMemoryDataFeed" batch_size: 8 thread_num: 4 pipe_command: "zcat"
           rank_offset: "x" pv_batch_size: 16 input_type: 0
           multi_slot_desc { uid_slot: "u" slots { name: "a" type: "uint64" is_used: true } }"#,
    )
    .unwrap();
    assert_eq!(desc.thread_num(), 4);
    assert_eq!(desc.pipe_command(), "zcat");
}

/// Paddle's current data_feed.proto: every field parses, the ones hogwild does not honour are
/// named, and the desc writes back to text with them.
#[test]
fn the_current_paddle_fields_parse_and_are_named() {
    let text = r#"name: "SlotRecordInMemoryDataFeed" batch_size: 8 thread_num: 4
           pipe_command: "cat" rank_offset: "rank_offset" pv_batch_size: 16 input_type: 1
           so_parser_name: "libparser.so"
           graph_config { walk_degree: 2 walk_len: 8 window: 3 meta_path: "u2i-i2u"
                          gpu_graph_training: false train_table_cap: 1000 accumulate_num: 2 }
           multi_slot_desc { uid_slot: "u" slots { name: "a" type: "uint64" is_used: true } }"#;
    let desc = DataFeedDesc::from_text(text).unwrap();
    assert!(desc.is_in_memory());
    assert_eq!(desc.so_parser_name(), "libparser.so");
    let graph = desc.graph_config.as_ref().unwrap();
    assert_eq!(
        (graph.walk_degree(), graph.walk_len(), graph.window()),
        (2, 8, 3)
    );
    // Defaults follow Paddle's.
    assert_eq!(graph.once_sample_startid_len(), 8000);
    assert!(!graph.gpu_graph_training());
    let ignored = desc.ignored_fields();
    let fields: Vec<&str> = ignored
        .iter()
        .map(|m| m.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "uid_slot",
            "rank_offset",
            "pv_batch_size",
            "input_type",
            "so_parser_name",
            "graph_config"
        ]
    );
    assert!(ignored.iter().all(|m| m.contains("is not honoured")));
    assert_eq!(DataFeedDesc::from_text(&desc.to_text()).unwrap(), desc);
    // input_type 0 is what hogwild does, pv_batch_size 32 Paddle's default: nothing to say; nor
    // for a desc without these fields.
    let plain = text
        .replace("input_type: 1", "input_type: 0")
        .replace("pv_batch_size: 16", "pv_batch_size: 32");
    let said = DataFeedDesc::from_text(&plain).unwrap().ignored_fields();
    assert!(
        !said
            .iter()
            .any(|m| m.starts_with("input_type") || m.starts_with("pv_batch_size")),
        "{said:?}"
    );
    assert!(DataFeedDesc::from_text(IMDB)
        .unwrap()
        .ignored_fields()
        .is_empty());
}

#[test]
fn unused_slots_are_not_fed() {
    let desc = DataFeedDesc::from_text(
        r#"multi_slot_desc {
             slots { name: "a" type: "uint64" is_used: false }
             slots { name: "b" type: "float" is_dense: true is_used: true shape: 3 }
           }"#,
    )
    .unwrap();
    assert_eq!(desc.slots().len(), 2);
    assert_eq!(desc.used_slots().len(), 1);
    assert_eq!(desc.used_slots()[0].dense_width(), Some(3));
}

#[test]
fn to_text_round_trips() {
    let desc = DataFeedDesc::multi_slot(
        64,
        vec![
            Slot::sparse("words", SlotType::U64),
            Slot::dense("x", SlotType::F32, &[-1, 4]),
        ],
    );
    let text = desc.to_text();
    assert_eq!(
        text,
        "name: \"MultiSlotDataFeed\"\nbatch_size: 64\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n  \
         slots { name: \"x\" type: \"float\" is_dense: true is_used: true shape: -1 shape: 4 }\n}\n"
    );
    assert_eq!(DataFeedDesc::from_text(&text).unwrap(), desc);
    let mut odd = desc.clone();
    odd.pipe_command = Some("tr '\"' ' ' \\\n".to_string());
    odd.thread_num = Some(3);
    assert_eq!(DataFeedDesc::from_text(&odd.to_text()).unwrap(), odd);
}

#[test]
fn from_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.prototxt");
    std::fs::write(&path, IMDB).unwrap();
    assert_eq!(DataFeedDesc::from_file(&path).unwrap().batch_size(), 2);
    let missing = dir.path().join("missing.prototxt");
    let message = DataFeedDesc::from_file(&missing).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("{}: ", missing.display())),
        "{message}"
    );
    std::fs::write(&path, "batch_size: 0 multi_slot_desc {}").unwrap();
    assert_eq!(
        DataFeedDesc::from_file(&path).unwrap_err().to_string(),
        format!(
            "data feed desc {}: batch_size must be positive, got 0",
            path.display()
        )
    );
}

#[test]
fn syntax_error() {
    assert_eq!(
        err("batch_size: two"),
        "data feed desc <text>:1:13: not valid protobuf text format: expected an integer, but found 'two'"
    );
    // Line and column of the token at fault, and the end of the text when it ends too early.
    assert_eq!(
        err("batch_size: 2\nmulti_slot_desc {\n  slots { name: \"a\" type \"uint64\" }\n}\n"),
        "data feed desc <text>:3:26: not valid protobuf text format: expected ':' or a message value, but found '\"uint64\"'"
    );
    assert_eq!(
        err("batch_size: 2\nmulti_slot_desc {\n"),
        "data feed desc <text>:3:1: not valid protobuf text format: expected '}' or a field name, but reached end of input"
    );
}

#[test]
fn unknown_field() {
    let message = err("batch_sise: 2");
    assert!(
        message.starts_with("data feed desc <text>:1:1: not valid protobuf text format: ")
            && message.contains("batch_sise"),
        "{message}"
    );
}

#[test]
fn unreadable_bytes_are_named_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.prototxt");
    let read = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let message = DataFeedDesc::from_file(&path).unwrap_err().to_string();
        let prefix = format!("data feed desc {}:", path.display());
        message.strip_prefix(&prefix).unwrap().to_string()
    };
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(IMDB.as_bytes());
    assert_eq!(
        read(&bom),
        "1:1: byte order mark (U+FEFF) at the start: save the file without one"
    );
    assert_eq!(
        read(b"batch_size: 2\nname: \"Multi\0\""),
        "2:13: NUL byte (binary or corrupt data)"
    );
    assert_eq!(read(b"batch_size: 2\n  \xff"), "2:3: not UTF-8 text");
}

#[test]
fn unknown_slot_type() {
    assert_eq!(
        err(r#"multi_slot_desc { slots { name: "a" type: "int32" is_used: true } }"#),
        "data feed desc <text>: slot \"a\": unknown type \"int32\" (use \"uint64\" or \"float\")"
    );
}

#[test]
fn no_used_slot() {
    assert_eq!(
        err(r#"multi_slot_desc { slots { name: "a" type: "uint64" } }"#),
        "data feed desc <text>: no slot has is_used: true"
    );
}

#[test]
fn no_slots() {
    assert_eq!(
        err("batch_size: 4"),
        "data feed desc <text>: no slots (multi_slot_desc { slots { ... } } is missing)"
    );
}

#[test]
fn non_positive_batch_size() {
    let slots = r#"multi_slot_desc { slots { name: "a" type: "uint64" is_used: true } }"#;
    assert_eq!(
        err(&format!("batch_size: -3 {slots}")),
        "data feed desc <text>: batch_size must be positive, got -3"
    );
}

#[test]
fn duplicate_slot_names() {
    assert_eq!(
        err(r#"multi_slot_desc {
                 slots { name: "a" type: "uint64" is_used: true }
                 slots { name: "b" type: "uint64" is_used: true }
                 slots { name: "a" type: "float" is_used: true } }"#),
        "data feed desc <text>: slot \"a\" appears twice (slots 1 and 3)"
    );
}

#[test]
fn nameless_slot() {
    assert_eq!(
        err(r#"multi_slot_desc { slots { type: "uint64" is_used: true } }"#),
        "data feed desc <text>: slot 1 has no name"
    );
}

#[test]
fn unsupported_reader() {
    assert_eq!(
        err(
            r#"name: "PrivateQueueDataFeed" multi_slot_desc { slots { name: "a" type: "uint64" is_used: true } }"#
        ),
        "data feed desc <text>: name: reader \"PrivateQueueDataFeed\" is not supported (use \
         \"MultiSlotDataFeed\", or \"MultiSlotInMemoryDataFeed\" or \"SlotRecordInMemoryDataFeed\" \
         for in-memory training)"
    );
}

#[test]
fn bad_shapes() {
    let slot = |extra: &str| {
        format!(
            r#"multi_slot_desc {{ slots {{ name: "d" type: "float" is_used: true {extra} }} }}"#
        )
    };
    assert_eq!(
        err(&slot("shape: 3")),
        "data feed desc <text>: slot \"d\": a shape is only meaningful with is_dense: true"
    );
    assert_eq!(
        err(&slot("is_dense: true shape: 0")),
        "data feed desc <text>: slot \"d\": shape dimension 0 must be positive or -1"
    );
    assert_eq!(
        err(&slot("is_dense: true shape: -1 shape: -1")),
        "data feed desc <text>: slot \"d\": shape has more than one -1 dimension"
    );
}

#[test]
fn to_text_keeps_unset_fields_unset() {
    // Found by fuzzing: a slot without is_used must not come back with an explicit false.
    let desc = DataFeedDesc::from_text(
        r#"multi_slot_desc {
             slots { name: "a" type: "uint64" is_dense: false }
             slots { name: "b" type: "uint64" is_used: true }
           }"#,
    )
    .unwrap();
    assert_eq!(desc.slots()[0].is_used, None);
    assert_eq!(DataFeedDesc::from_text(&desc.to_text()).unwrap(), desc);
    // Also found by fuzzing: control characters in names must be escaped.
    let mut odd = desc.clone();
    odd.multi_slot_desc.as_mut().unwrap().slots[0].name = "a\0b\x7f\tc\u{e9}".to_string();
    assert_eq!(DataFeedDesc::from_text(&odd.to_text()).unwrap(), odd);
}
