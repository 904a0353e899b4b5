//! The data feed's slots as the graph's inputs take them.

use hogwild::feed::{DataFeedDesc, SlotType};

use crate::inputs::SlotKind;

/// The used slots of `desc`, as [`TfModel::slot_worker`](crate::TfModel::slot_worker) takes
/// them.
pub fn used_slots(desc: &DataFeedDesc) -> Vec<(String, SlotKind)> {
    desc.used_slots()
        .iter()
        .map(|s| {
            let kind = match s.slot_type() {
                SlotType::U64 => SlotKind::U64,
                SlotType::F32 => SlotKind::F32,
            };
            (s.name.clone(), kind)
        })
        .collect()
}
