//! Batches: per used slot, all instances' values concatenated plus offsets (Paddle's LoD).

use std::sync::Arc;

use super::desc::{DataFeedDesc, SlotType};
use super::origin::{DatasetOrigins, Origin};
use crate::channel::ByteSize;
use crate::Error;

/// The values of one slot for a whole batch.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotValues {
    /// A `uint64` slot (ids).
    U64(Vec<u64>),
    /// A `float` slot.
    F32(Vec<f32>),
}

impl SlotValues {
    fn empty(kind: SlotType) -> Self {
        match kind {
            SlotType::U64 => SlotValues::U64(Vec::new()),
            SlotType::F32 => SlotValues::F32(Vec::new()),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            SlotValues::U64(v) => v.len(),
            SlotValues::F32(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        match self {
            SlotValues::U64(v) => v.truncate(len),
            SlotValues::F32(v) => v.truncate(len),
        }
    }

    fn byte_size(&self) -> usize {
        match self {
            SlotValues::U64(v) => std::mem::size_of_val(v.as_slice()),
            SlotValues::F32(v) => std::mem::size_of_val(v.as_slice()),
        }
    }
}

/// One used slot of a batch: instance `i` owns `values[offsets[i]..offsets[i + 1]]`.
///
/// A dense slot has the same number of values per instance, so it reshapes to
/// `[len, values.len() / len]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotBatch {
    /// All instances' values concatenated.
    pub values: SlotValues,
    /// `len + 1` entries, starting at 0.
    pub offsets: Vec<usize>,
}

impl SlotBatch {
    pub(crate) fn new(kind: SlotType) -> Self {
        SlotBatch {
            values: SlotValues::empty(kind),
            offsets: vec![0],
        }
    }

    /// Number of instances.
    pub fn instances(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The `uint64` values of instance `i`, or `None` for a float slot.
    pub fn u64s(&self, i: usize) -> Option<&[u64]> {
        match &self.values {
            SlotValues::U64(v) => Some(&v[self.offsets[i]..self.offsets[i + 1]]),
            SlotValues::F32(_) => None,
        }
    }

    /// The float values of instance `i`, or `None` for a uint64 slot.
    pub fn f32s(&self, i: usize) -> Option<&[f32]> {
        match &self.values {
            SlotValues::F32(v) => Some(&v[self.offsets[i]..self.offsets[i + 1]]),
            SlotValues::U64(_) => None,
        }
    }

    /// Ends the current instance: everything pushed since the previous call belongs to it.
    pub(crate) fn end_instance(&mut self) {
        self.offsets.push(self.values.len());
    }

    /// Drops values pushed since the last complete instance.
    pub(crate) fn rollback(&mut self) {
        let keep = *self.offsets.last().expect("offsets start with 0");
        self.values.truncate(keep);
    }
}

/// The instance ids of a batch's or a dataset's instances, one after another (empty when the
/// lines carry none, see [`super::LinePrefix`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct InstanceIds {
    bytes: Vec<u8>,
    /// Where each id ends in `bytes`.
    ends: Vec<usize>,
}

impl InstanceIds {
    pub(crate) fn push(&mut self, id: &[u8]) {
        self.bytes.extend_from_slice(id);
        self.ends.push(self.bytes.len());
    }

    /// Id `i`, if the instances have ids.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.bytes[start..end])
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Appends every id of `other`.
    pub(crate) fn extend(&mut self, other: &InstanceIds) {
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        self.ends.extend(other.ends.iter().map(|&end| base + end));
    }

    pub(crate) fn byte_size(&self) -> usize {
        self.bytes.len() + std::mem::size_of_val(self.ends.as_slice())
    }
}

/// A batch of instances, one `SlotBatch` per used slot in the desc's order.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Instances in this batch (at most batch_size; a reader's last batch may be short).
    pub len: usize,
    /// One per used slot, in the desc's order.
    pub slots: Vec<SlotBatch>,
    /// The file and line of each instance, when the batch was read from files (see
    /// [`Batch::origin`]).
    pub(crate) origin: Origin,
    /// Each instance's id, when the lines carry one ([`Batch::ins_id`]).
    pub(crate) ids: InstanceIds,
}

/// Batches are equal when they hold the same instances, wherever those were read from.
impl PartialEq for Batch {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.slots == other.slots && self.ids == other.ids
    }
}

impl Batch {
    /// An empty batch laid out for the desc's used slots.
    pub fn empty(desc: &DataFeedDesc) -> Self {
        Batch::from_slots(
            desc.used_slots()
                .iter()
                .map(|s| SlotBatch::new(s.slot_type()))
                .collect(),
        )
    }

    /// A batch of the instances in `slots` (each with the same number of instances), read from
    /// no file.
    pub fn from_slots(slots: Vec<SlotBatch>) -> Self {
        Batch {
            len: slots.first().map_or(0, SlotBatch::instances),
            slots,
            origin: Origin::Unknown,
            ids: InstanceIds::default(),
        }
    }

    /// The id of instance `i`, when its line started with one (read with a
    /// [`super::LinePrefix`] that has an id): Paddle's `ins_id`, or its `logkey`.
    pub fn ins_id(&self, i: usize) -> Option<&[u8]> {
        self.ids.get(i)
    }

    /// The name of the file instance `i` was read from and its line (from 1), when the batch was
    /// read from files (by the feed, or gathered from an [`super::InMemoryDataset`]). For an
    /// instance of a byte range of a large file, the lines before the range are counted now.
    pub fn origin(&self, i: usize) -> Option<(String, u64)> {
        self.origin.locate(i)
    }

    /// `error` naming the file and line of the instance it is about: a model's
    /// [`Error::BadInstance`] (an instance by its place in this batch) becomes
    /// [`Error::BadRecord`] when the instance's origin is known; any other error is returned as
    /// it is.
    pub fn locate_error(&self, error: Error) -> Error {
        self.origin.locate_error(error)
    }

    /// The record numbers of this batch's instances when it came from the in-memory dataset
    /// `origins` names ([`super::InMemoryDataset::origins`]).
    pub(crate) fn records_of(&self, origins: &Arc<DatasetOrigins>) -> Option<&[u32]> {
        self.origin.records_of(origins)
    }

    /// Whether the batch holds its instances by record number alone, without their values
    /// ([`super::InMemoryDataset::refer`]).
    pub(crate) fn is_referred(&self) -> bool {
        self.len > 0 && self.slots.iter().all(|s| s.instances() == 0)
    }

    /// Ends the current instance in every slot.
    pub(crate) fn end_instance(&mut self) {
        for slot in &mut self.slots {
            slot.end_instance();
        }
        self.len += 1;
    }

    /// Drops a partially parsed instance.
    pub(crate) fn rollback(&mut self) {
        for slot in &mut self.slots {
            slot.rollback();
        }
    }

    /// An empty batch with the same layout as `other`.
    pub fn empty_like(other: &Batch) -> Self {
        Batch::from_slots(
            other
                .slots
                .iter()
                .map(|s| {
                    SlotBatch::new(match s.values {
                        SlotValues::U64(_) => SlotType::U64,
                        SlotValues::F32(_) => SlotType::F32,
                    })
                })
                .collect(),
        )
    }

    /// Takes the batch out, leaving an empty one with the same layout.
    pub(crate) fn take(&mut self) -> Batch {
        let fresh = Batch::empty_like(self);
        std::mem::replace(self, fresh)
    }

    /// Empties the batch, keeping its buffers (so a reused batch allocates nothing).
    pub(crate) fn clear(&mut self) {
        for slot in &mut self.slots {
            slot.values.truncate(0);
            slot.offsets.truncate(1);
        }
        self.origin.clear();
        self.ids.clear();
        self.len = 0;
    }

    /// Appends instance `i` of `from` (same layout), without its origin.
    #[inline]
    pub(crate) fn push_instance(&mut self, from: &Batch, i: usize) {
        for (dst, src) in self.slots.iter_mut().zip(&from.slots) {
            let (a, b) = (src.offsets[i], src.offsets[i + 1]);
            // One value (a CTR field, a label) is the common case: a push, not a memcpy call.
            match (&mut dst.values, &src.values) {
                (SlotValues::U64(d), SlotValues::U64(s)) if b == a + 1 => d.push(s[a]),
                (SlotValues::F32(d), SlotValues::F32(s)) if b == a + 1 => d.push(s[a]),
                (SlotValues::U64(d), SlotValues::U64(s)) => d.extend_from_slice(&s[a..b]),
                (SlotValues::F32(d), SlotValues::F32(s)) => d.extend_from_slice(&s[a..b]),
                _ => unreachable!("batches of one desc share their layout"),
            }
            dst.end_instance();
        }
        if let Some(id) = from.ids.get(i) {
            self.ids.push(id);
        }
        self.len += 1;
    }
}

impl ByteSize for Batch {
    fn byte_size(&self) -> usize {
        self.slots
            .iter()
            .map(|s| s.values.byte_size() + std::mem::size_of_val(s.offsets.as_slice()))
            .sum::<usize>()
            + self.origin.byte_size()
            + self.ids.byte_size()
    }
}
