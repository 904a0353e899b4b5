//! From data-feed slots to the graph's input tensors.
//!
//! A slot named `s` feeds the signature input `s`. If the signature also has `s/row_splits` (or,
//! as a TF2 signature names a `tf.RaggedTensorSpec` argument's row splits, `s_1`), the slot is
//! sparse: `s` gets all values of the batch concatenated (`[N]`) and the row splits input the
//! row offsets (`[B+1]`, int64 or int32), the layout of `tf.RaggedTensor.from_row_splits`; a
//! ragged placeholder in a TF1 signature is read as those two inputs. Otherwise the
//! slot is dense: every instance holds the same number `w` of values, fed as `[B]` when the input
//! has rank 1 (so `w` must be 1) and as `[B, w]` when it has rank 2. `uint64` slots feed int64
//! tensors, `float` slots float32 ones.

use tensorflow::Tensor;

use crate::graph::{Input, ROW_SPLITS_SUFFIX};
use crate::proto::{dtype_name, DT_FLOAT, DT_INT32, DT_INT64};
use crate::{Error, Result};

/// A slot's value type, as declared in the data feed description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// `uint64`: ids.
    U64,
    /// `float`.
    F32,
}

/// One slot's values for a batch, every instance's concatenated, borrowed from the batch.
#[derive(Debug, Clone, Copy)]
pub enum SlotValuesRef<'a> {
    /// A `uint64` slot's ids, fed as int64 (an id above `i64::MAX` is an [`Error::BadBatch`]).
    U64(&'a [u64]),
    /// A `float` slot's values, fed as float32.
    F32(&'a [f32]),
}

/// One slot of a batch: instance `i` owns `values[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Copy)]
pub struct SlotRef<'a> {
    /// The values of every instance, concatenated; their type must be the slot's
    /// [`SlotKind`].
    pub values: SlotValuesRef<'a>,
    /// `instances + 1` entries, starting at 0.
    pub offsets: &'a [usize],
}

/// A tensor ready to feed.
pub(crate) enum FeedTensor {
    I64(Tensor<i64>),
    I32(Tensor<i32>),
    F32(Tensor<f32>),
}

/// How a slot's row offsets are fed.
#[derive(Debug, Clone, Copy)]
struct RowSplits {
    input: usize,
    int32: bool,
}

#[derive(Debug, Clone)]
struct SlotFeed {
    name: String,
    kind: SlotKind,
    values: usize,
    row_splits: Option<RowSplits>,
    /// Rank of the values input, for dense slots (`None`: unknown).
    rank: Option<usize>,
}

/// Which input of one signature each used slot feeds; built once per run.
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

/// Whether `key` looks like a name TensorFlow made up for one component of a flattened
/// argument (`batch_1`), as it does for a `tf.RaggedTensorSpec` inside a dict.
fn is_flattened_name(key: &str) -> bool {
    key.rsplit_once('_')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Binding {
    /// Binds the used slots `slots` (name and kind, in batch order) to a signature's `inputs`.
    /// Every input needs a slot and every slot an input, with matching types.
    pub(crate) fn new(inputs: &[Input], slots: &[(String, SlotKind)]) -> Result<Self> {
        let find = |key: &str| inputs.iter().position(|i| i.key == key);
        let is_slot = |key: &str| slots.iter().any(|(name, _)| name == key);
        let keys = || {
            inputs
                .iter()
                .map(|i| i.key.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Inputs TensorFlow named after a flattened argument: the slot names were lost.
        let hint = if inputs
            .iter()
            .any(|i| is_flattened_name(&i.key) && !is_slot(&i.key))
        {
            " (a tf.RaggedTensorSpec inside a dict or list argument of a TF2 signature loses \
             its key: declare each slot's values and row splits as tf.TensorSpecs named \
             \"<slot>\" and \"<slot>/row_splits\", see docs/runner-contract.md)"
        } else {
            ""
        };
        let mut used = vec![false; inputs.len()];
        let mut feeds = Vec::with_capacity(slots.len());
        for (name, kind) in slots {
            let splits_key = format!("{name}{ROW_SPLITS_SUFFIX}");
            let Some(values) = find(name) else {
                if let Some(r) = find(&splits_key) {
                    return Err(mismatch(
                        name,
                        format!(
                            "the graph takes input \"{splits_key}\" ({}) but no input \"{name}\" \
                             for the values; a variable-length slot feeds both",
                            inputs[r].tensor.name
                        ),
                    ));
                }
                return Err(mismatch(
                    name,
                    format!(
                        "the graph has no input for this slot (its inputs: {}); mark the slot \
                         is_used: false{hint}",
                        keys()
                    ),
                ));
            };
            // `<slot>_1` is how a TF2 signature names the row splits of a tf.RaggedTensorSpec
            // argument `<slot>`; a slot of that name keeps it.
            let ragged_key = format!("{name}_1");
            let row_splits =
                find(&splits_key).or_else(|| find(&ragged_key).filter(|_| !is_slot(&ragged_key)));
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
            let row_splits = match row_splits {
                Some(r) => {
                    let splits = &inputs[r];
                    if splits.dtype != DT_INT64 && splits.dtype != DT_INT32 {
                        return Err(mismatch(
                            name,
                            format!(
                                "input \"{}\" ({}), the row splits of \"{name}\", is {}; row \
                                 splits are fed as int64 (or int32)",
                                splits.key,
                                splits.tensor.name,
                                dtype_name(splits.dtype)
                            ),
                        ));
                    }
                    if splits.rank.is_some_and(|r| r != 1) {
                        return Err(mismatch(
                            name,
                            format!(
                                "input \"{}\" ({}), the row splits of \"{name}\", has rank {}; \
                                 row splits are fed as [B+1], rank 1",
                                splits.key,
                                splits.tensor.name,
                                splits.rank.unwrap_or_default()
                            ),
                        ));
                    }
                    if input.rank.is_some_and(|r| r != 1) {
                        return Err(mismatch(
                            name,
                            format!(
                                "input \"{}\" ({}) has rank {}; the values of a slot fed with \
                                 row splits (\"{}\") are fed flat, rank 1",
                                input.key,
                                input.tensor.name,
                                input.rank.unwrap_or_default(),
                                splits.key
                            ),
                        ));
                    }
                    used[r] = true;
                    Some(RowSplits {
                        input: r,
                        int32: splits.dtype == DT_INT32,
                    })
                }
                None if input.rank.is_some_and(|r| r == 0 || r > 2) => {
                    return Err(mismatch(
                        name,
                        format!(
                            "input \"{}\" ({}) has rank {}; a slot without row splits feeds \
                             rank 1 ([B]) or 2 ([B, width])",
                            input.key,
                            input.tensor.name,
                            input.rank.unwrap_or_default()
                        ),
                    ));
                }
                None => None,
            };
            used[values] = true;
            feeds.push(SlotFeed {
                name: name.clone(),
                kind: *kind,
                values,
                row_splits,
                rank: input.rank,
            });
        }
        if let Some(input) = inputs.iter().zip(&used).find(|(_, u)| !**u).map(|(i, _)| i) {
            let slot = input
                .key
                .strip_suffix(ROW_SPLITS_SUFFIX)
                .unwrap_or(&input.key);
            return Err(mismatch(
                slot,
                format!(
                    "the graph takes input \"{}\" ({}) but the data feed has no used slot \
                     \"{slot}\"{hint}",
                    input.key, input.tensor.name
                ),
            ));
        }
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
                let dims = [slot.offsets.len() as u64];
                let t = if r.int32 {
                    let splits = slot
                        .offsets
                        .iter()
                        .map(|&o| i32::try_from(o))
                        .collect::<std::result::Result<Vec<i32>, _>>()
                        .map_err(|_| {
                            bad(
                                &feed.name,
                                format!(
                                    "{n} values do not fit the graph's int32 row splits;                                      export them as int64"
                                ),
                            )
                        })?;
                    FeedTensor::I32(tensor(&dims, &splits, &feed.name, batch)?)
                } else {
                    let splits: Vec<i64> = slot.offsets.iter().map(|&o| o as i64).collect();
                    FeedTensor::I64(tensor(&dims, &splits, &feed.name, batch)?)
                };
                out.push((r.input, t));
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
