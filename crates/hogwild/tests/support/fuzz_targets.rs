//! The bodies of the fuzz targets (`fuzz/fuzz_targets/`), shared by cargo-fuzz (`make fuzz`, which
//! includes this file with `#[path]`) and the corpus replay that every `cargo test` runs
//! (`tests/fuzz_corpus.rs`). Each takes any bytes and panics only on a bug.

use hogwild::feed::{Batch, DataFeedDesc, LineParser, Slot, SlotType, SlotValues};

fn layout(selector: u8) -> DataFeedDesc {
    let kind = |bit: u8| {
        if selector & bit != 0 {
            SlotType::F32
        } else {
            SlotType::U64
        }
    };
    let mut a = Slot::sparse("a", kind(1));
    let mut b = Slot::sparse("b", kind(2));
    if selector & 4 != 0 {
        a.is_used = Some(false);
    }
    if selector & 8 != 0 {
        b = Slot::dense("b", kind(2), &[2]);
    }
    if selector & 16 != 0 {
        b = Slot::dense("b", kind(2), &[]);
    }
    DataFeedDesc::multi_slot(4, vec![a, b])
}

fn is_sep(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// The reference: split on separators, every token all digits and in range, counts exact.
fn reference_u64(line: &[u8], slots: usize) -> Option<Vec<Vec<u64>>> {
    let mut tokens = line
        .split(|&b| is_sep(b))
        .filter(|t| !t.is_empty())
        .map(|t| {
            if t.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(t).ok()?.parse::<u64>().ok()
            } else {
                None
            }
        });
    let mut out = Vec::new();
    for _ in 0..slots {
        let count = tokens.next()??;
        if count == 0 {
            return None;
        }
        let mut values = Vec::new();
        for _ in 0..count {
            values.push(tokens.next()??);
        }
        out.push(values);
    }
    tokens.next().is_none().then_some(out)
}

/// The MultiSlot line parser. The first byte picks the slot layout; the rest is the line.
/// Checks: no panic; a good line adds exactly one instance with consistent offsets; a bad line
/// leaves the batch untouched and renders a message; and for uint64-only layouts the result
/// agrees with a plain reference parser built on `str::parse`.
pub fn multislot_line(data: &[u8]) {
    let Some((&selector, line)) = data.split_first() else {
        return;
    };
    let desc = layout(selector);
    let parser = LineParser::new(&desc);
    let mut batch = Batch::empty(&desc);
    // A first good instance, so that rollback and dense-width checks have something before.
    let first = match (desc.slots()[0].slot_type(), desc.slots()[1].slot_type()) {
        (SlotType::U64, SlotType::U64) => "1 7 2 8 9",
        (SlotType::U64, SlotType::F32) => "1 7 2 0.5 1",
        (SlotType::F32, SlotType::U64) => "1 0.5 2 8 9",
        (SlotType::F32, SlotType::F32) => "1 0.5 2 0.5 1",
    };
    parser.parse_into(first.as_bytes(), &mut batch).unwrap();
    let before = batch.clone();
    match parser.parse_into(line, &mut batch) {
        Ok(()) => {
            assert_eq!(batch.len, 2);
            for slot in &batch.slots {
                assert_eq!(slot.offsets.len(), 3);
                assert!(slot.offsets.windows(2).all(|w| w[0] < w[1]));
                assert_eq!(slot.offsets[2], slot.values.len());
                if let SlotValues::F32(v) = &slot.values {
                    assert!(v.iter().all(|x| x.is_finite()));
                }
            }
        }
        Err(err) => {
            assert_eq!(batch, before, "a bad line must leave the batch as it was");
            assert!(!err.kind.to_string().is_empty());
        }
    }
    // Differential check on the plain layout: two used sparse uint64 slots.
    if selector & 0b11111 == 0 {
        let ours = parser.parse_into(line, &mut Batch::empty(&desc)).is_ok();
        let reference = reference_u64(line, 2);
        assert_eq!(
            ours,
            reference.is_some(),
            "line {:?}",
            String::from_utf8_lossy(line)
        );
        if let Some(expected) = reference {
            let mut one = Batch::empty(&desc);
            parser.parse_into(line, &mut one).unwrap();
            for (slot, values) in one.slots.iter().zip(expected) {
                assert_eq!(slot.values, SlotValues::U64(values));
            }
        }
    }
}

/// Reading a data.prototxt: any text either gives a valid desc or an error, never a panic; a
/// valid desc survives a text round trip.
pub fn desc_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(desc) = DataFeedDesc::from_text(text) {
        let again = DataFeedDesc::from_text(&desc.to_text()).expect("round trip");
        assert_eq!(again, desc);
        assert!(!desc.used_slots().is_empty());
    }
}
