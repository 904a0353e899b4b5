//! From data-feed slots to the graph's input tensors.
//!
//! A slot named `s` feeds the signature input `s`. If the signature also has `s/row_splits`, the
//! slot is sparse: `s` gets all values of the batch concatenated (`[N]`) and `s/row_splits` the
//! row offsets (`[B+1]`, int64), the layout of `tf.RaggedTensor.from_row_splits`. Otherwise the
//! slot is dense: every instance holds the same number `w` of values, fed as `[B]` when the input
//! has rank 1 (so `w` must be 1) and as `[B, w]` when it has rank 2. `uint64` slots feed int64
//! tensors, `float` slots float32 ones.

use tensorflow::Tensor;

use crate::graph::{TrainGraph, ROW_SPLITS_SUFFIX};
use crate::proto::{dtype_name, DT_FLOAT, DT_INT64};
use crate::{Error, Result};

/// A slot's value type, as declared in the data feed description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// `uint64`: ids.
    U64,
    /// `float`.
    F32,
}

/// One slot's values for a batch.
#[derive(Debug, Clone, Copy)]
pub enum SlotValuesRef<'a> {
    U64(&'a [u64]),
    F32(&'a [f32]),
}

/// One slot of a batch: instance `i` owns `values[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Copy)]
pub struct SlotRef<'a> {
    pub values: SlotValuesRef<'a>,
    /// `instances + 1` entries, starting at 0.
    pub offsets: &'a [usize],
}

/// A tensor ready to feed.
pub(crate) enum FeedTensor {
    I64(Tensor<i64>),
    F32(Tensor<f32>),
}

#[derive(Debug, Clone)]
struct SlotFeed {
    name: String,
    kind: SlotKind,
    values: usize,
    row_splits: Option<usize>,
    /// Rank of the values input, for dense slots (`None`: unknown).
    rank: Option<usize>,
}

/// Which graph input each used slot feeds; built once per run.
#[derive(Debug, Clone)]
pub struct Binding {
    slots: Vec<SlotFeed>,
}

fn mismatch(slot: &str, reason: String) -> Error {
    Error::SlotMismatch {
        slot: slot.into(),
        reason,
    }
}

impl Binding {
    /// Binds the used slots `slots` (name and kind, in batch order) to `graph`'s inputs. Every
    /// graph input needs a slot and every slot an input, with matching types.
    pub fn new(graph: &TrainGraph, slots: &[(String, SlotKind)]) -> Result<Self> {
        let inputs = graph.inputs();
        let find = |key: &str| inputs.iter().position(|i| i.key == key);
        for input in inputs {
            let slot = input
                .key
                .strip_suffix(ROW_SPLITS_SUFFIX)
                .unwrap_or(&input.key);
            if !slots.iter().any(|(name, _)| name == slot) {
                return Err(mismatch(
                    slot,
                    format!(
                        "the graph takes input \"{}\" ({}) but the data feed has no used slot \
                         \"{slot}\"",
                        input.key, input.tensor.name
                    ),
                ));
            }
        }
        let feeds = slots
            .iter()
            .map(|(name, kind)| {
                let values = find(name).ok_or_else(|| {
                    mismatch(
                        name,
                        format!(
                            "the graph has no input for this slot (its inputs: {}); mark the \
                             slot is_used: false",
                            graph.input_keys().join(", ")
                        ),
                    )
                })?;
                let input = &inputs[values];
                let want = match kind {
                    SlotKind::U64 => DT_INT64,
                    SlotKind::F32 => DT_FLOAT,
                };
                if input.dtype != want {
                    return Err(mismatch(
                        name,
                        format!(
                            "a {} slot cannot feed input \"{}\" ({}) of type {}; it feeds {}",
                            match kind {
                                SlotKind::U64 => "uint64",
                                SlotKind::F32 => "float",
                            },
                            input.key,
                            input.tensor.name,
                            dtype_name(input.dtype),
                            dtype_name(want)
                        ),
                    ));
                }
                let row_splits = find(&format!("{name}{ROW_SPLITS_SUFFIX}"));
                if let Some(r) = row_splits {
                    let splits = &inputs[r];
                    if splits.dtype != DT_INT64 {
                        return Err(mismatch(
                            name,
                            format!(
                                "input \"{}\" ({}) is {}; row splits are fed as int64",
                                splits.key,
                                splits.tensor.name,
                                dtype_name(splits.dtype)
                            ),
                        ));
                    }
                    if input.rank.is_some_and(|r| r != 1) {
                        return Err(mismatch(
                            name,
                            format!(
                                "input \"{}\" ({}) has rank {}; sparse values are fed flat, \
                                 rank 1",
                                input.key,
                                input.tensor.name,
                                input.rank.unwrap_or_default()
                            ),
                        ));
                    }
                } else if input.rank.is_some_and(|r| r == 0 || r > 2) {
                    return Err(mismatch(
                        name,
                        format!(
                            "input \"{}\" ({}) has rank {}; a dense slot feeds rank 1 ([B]) or \
                             2 ([B, width])",
                            input.key,
                            input.tensor.name,
                            input.rank.unwrap_or_default()
                        ),
                    ));
                }
                Ok(SlotFeed {
                    name: name.clone(),
                    kind: *kind,
                    values,
                    row_splits,
                    rank: input.rank,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Binding { slots: feeds })
    }

    /// The tensors for one batch of `instances` instances, `slots` in the order given to
    /// [`Binding::new`]. `batch` numbers the batch in errors.
    pub(crate) fn tensors(
        &self,
        slots: &[SlotRef<'_>],
        instances: usize,
        batch: u64,
    ) -> Result<Vec<(usize, FeedTensor)>> {
        let bad = |slot: &str, reason: String| Error::BadBatch {
            batch,
            slot: slot.into(),
            reason,
        };
        if slots.len() != self.slots.len() {
            return Err(bad(
                "*",
                format!(
                    "the batch has {} slots, the data feed description {}",
                    slots.len(),
                    self.slots.len()
                ),
            ));
        }
        let mut out = Vec::with_capacity(self.slots.len() * 2);
        for (feed, slot) in self.slots.iter().zip(slots) {
            let n = values_len(&slot.values);
            if slot.offsets.len() != instances + 1
                || slot.offsets.first() != Some(&0)
                || slot.offsets.last() != Some(&n)
                || slot.offsets.windows(2).any(|w| w[0] > w[1])
            {
                return Err(bad(
                    &feed.name,
                    format!(
                        "offsets must rise from 0 to {n} in {} entries (got {} entries)",
                        instances + 1,
                        slot.offsets.len()
                    ),
                ));
            }
            let dims: Vec<u64> = if feed.row_splits.is_some() {
                vec![n as u64]
            } else {
                let width = if instances == 0 { 0 } else { slot.offsets[1] };
                if let Some(i) =
                    (0..instances).find(|&i| slot.offsets[i + 1] - slot.offsets[i] != width)
                {
                    return Err(bad(
                        &feed.name,
                        format!(
                            "instance {i} has {} values, instance 0 has {width}; a slot fed \
                             without row_splits needs the same count in every instance",
                            slot.offsets[i + 1] - slot.offsets[i]
                        ),
                    ));
                }
                match feed.rank {
                    Some(1) if width != 1 => {
                        return Err(bad(
                            &feed.name,
                            format!(
                                "instances have {width} values but the graph input has rank 1 \
                                 (one value per instance)"
                            ),
                        ))
                    }
                    Some(1) => vec![instances as u64],
                    None if width == 1 => vec![instances as u64],
                    _ => vec![instances as u64, width as u64],
                }
            };
            let values = match (slot.values, feed.kind) {
                (SlotValuesRef::U64(v), SlotKind::U64) => {
                    let mut ids = Vec::with_capacity(v.len());
                    for (k, &x) in v.iter().enumerate() {
                        let id = i64::try_from(x).map_err(|_| {
                            bad(
                                &feed.name,
                                format!("value {x} at offset {k} does not fit int64"),
                            )
                        })?;
                        ids.push(id);
                    }
                    FeedTensor::I64(tensor(&dims, &ids, &feed.name, batch)?)
                }
                (SlotValuesRef::F32(v), SlotKind::F32) => {
                    FeedTensor::F32(tensor(&dims, v, &feed.name, batch)?)
                }
                _ => {
                    return Err(bad(
                        &feed.name,
                        "the batch's values have a different type than the slot".into(),
                    ))
                }
            };
            out.push((feed.values, values));
            if let Some(r) = feed.row_splits {
                let splits: Vec<i64> = slot.offsets.iter().map(|&o| o as i64).collect();
                let t = tensor(&[splits.len() as u64], &splits, &feed.name, batch)?;
                out.push((r, FeedTensor::I64(t)));
            }
        }
        Ok(out)
    }
}

fn values_len(v: &SlotValuesRef<'_>) -> usize {
    match v {
        SlotValuesRef::U64(x) => x.len(),
        SlotValuesRef::F32(x) => x.len(),
    }
}

fn tensor<T: tensorflow::TensorType>(
    dims: &[u64],
    values: &[T],
    slot: &str,
    batch: u64,
) -> Result<Tensor<T>> {
    Tensor::new(dims)
        .with_values(values)
        .map_err(|s| Error::BadBatch {
            batch,
            slot: slot.into(),
            reason: format!("cannot make a tensor of shape {dims:?}: {s}"),
        })
}
