//! What a CTR model keeps of an in-memory dataset for one training run
//! ([`Model::prepare_dataset`](crate::Model::prepare_dataset)): every record's features hashed to
//! their tables and rows, with their values and field numbers, and the record's label and
//! importance weight, all checked once. Each epoch then copies a batch's features from here,
//! where it would otherwise copy the records' values into the batch and hash them again: on a
//! small set (gss, 10 fields, FM) those two took a fifth of every epoch (`docs/benchmarks.md`,
//! CTR, small data), and xLearn too parses and hashes its rows once.
//!
//! The features take 8 bytes each (table and row packed in one word), about what the dataset
//! holds for the same values; nothing is kept when that would crowd the machine's memory
//! ([`fits_in_memory`]), and the run then gathers and hashes every batch as a streaming run does.

use std::ops::Range;
use std::sync::{Arc, PoisonError};

use super::{Ctr, CtrWorker};
use crate::feed::{Batch, DatasetOrigins, SlotBatch, SlotType, SlotValues};
use crate::feed::{DataFeedDesc, InMemoryDataset};
use crate::optim::Optimizer;
use crate::store::{available_memory, prefetch};
use crate::{Error, Result};

/// Records gathered and hashed at a time while preparing.
const CHUNK: usize = 4096;

/// Bits of a packed feature that hold its row; the table is in the bits above.
const ROW_BITS: u32 = 56;

/// Records ahead of the one being copied whose features (and their values and fields) are
/// prefetched, and twice as far ahead, whose [`Head`] is: records are visited in shuffled
/// order, so each one's head and features are cache misses, which were most of the copy's time
/// without the prefetches (gss; flights' field numbers for FFM).
const PREFETCH_RECORDS: usize = 8;

/// Every record of one in-memory dataset as a CTR model trains it.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The dataset's identity: a referred batch of it names its records by these origins.
    origins: Arc<DatasetOrigins>,
    /// One per record, and one more whose start ends the last record's features.
    heads: Vec<Head>,
    /// Table (above [`ROW_BITS`]) and row of each feature.
    feats: Vec<u64>,
    xs: Vec<f32>,
    fields: Vec<u32>,
}

/// A record: where its features start (they end where the next record's start), its label and
/// its importance weight, together in one cache line.
#[derive(Debug, Clone, Copy)]
struct Head {
    start: usize,
    label: f32,
    weight: f32,
}

impl Prepared {
    fn empty(origins: Arc<DatasetOrigins>) -> Self {
        Prepared {
            origins,
            heads: Vec::new(),
            feats: Vec::new(),
            xs: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Appends `part`, the records after this one's, and ends the records with the head that
    /// holds the last one's end.
    fn append(&mut self, part: Prepared) {
        self.heads.pop();
        let base = self.feats.len();
        let heads = part.heads.iter().map(|h| Head {
            start: base + h.start,
            ..*h
        });
        self.heads.extend(heads);
        self.feats.extend_from_slice(&part.feats);
        self.xs.extend_from_slice(&part.xs);
        self.fields.extend_from_slice(&part.fields);
    }

    /// Bytes held.
    pub(super) fn byte_size(&self) -> usize {
        std::mem::size_of_val(self.heads.as_slice())
            + std::mem::size_of_val(self.feats.as_slice())
            + std::mem::size_of_val(self.xs.as_slice())
            + std::mem::size_of_val(self.fields.as_slice())
    }

    /// Record `r`'s features: its entries of `feats` (and of `xs` and `fields` when the model
    /// uses them).
    fn features(&self, r: usize) -> Range<usize> {
        self.heads[r].start..self.heads[r + 1].start
    }
}

fn pack(table: usize, row: usize) -> u64 {
    (table as u64) << ROW_BITS | row as u64
}

fn unpack(feature: u64) -> (usize, usize) {
    (
        (feature >> ROW_BITS) as usize,
        (feature & ((1 << ROW_BITS) - 1)) as usize,
    )
}

/// Whether a copy of about `bytes` leaves room: at most half of what the kernel says is
/// available (true when it does not say).
fn fits_in_memory(bytes: usize) -> bool {
    available_memory().is_none_or(|free| bytes <= free / 2)
}

impl<O: Optimizer<f32>> Ctr<O> {
    /// Prepares every record of `data` (laid out by `desc`) in `threads` threads: `None` when
    /// the copy would not fit ([`fits_in_memory`]). Fails on the first record (in the
    /// dataset's order) that training would refuse, named by its file and line.
    pub(super) fn prepare(
        &self,
        desc: &DataFeedDesc,
        data: &InMemoryDataset,
        threads: usize,
    ) -> Result<Option<Prepared>> {
        // A feature packs its table into the bits above its row.
        let packs = self.tables.len() <= 1 << (64 - ROW_BITS) && self.cfg.buckets < 1 << ROW_BITS;
        // The features and their values or field numbers take about what the records' values
        // take in the dataset, twice at most.
        if !packs || !fits_in_memory(data.byte_size().saturating_mul(2)) {
            return Ok(None);
        }
        let n = data.len();
        let parts = threads.clamp(1, n.div_ceil(CHUNK).max(1));
        let done: Vec<Result<Prepared>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..parts)
                .map(|p| {
                    let range = p * n / parts..(p + 1) * n / parts;
                    s.spawn(move || self.prepare_part(desc, data, range))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(thread, h)| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::WorkerFailed {
                            thread,
                            message: "panicked while preparing the in-memory dataset".into(),
                        })
                    })
                })
                .collect()
        });
        let parts = done.into_iter().collect::<Result<Vec<_>>>()?;
        // Reserved whole, so that appending never holds a part and a reallocated copy at once.
        let total = |f: fn(&Prepared) -> usize| parts.iter().map(f).sum::<usize>();
        let mut all = Prepared::empty(Arc::clone(data.origins()));
        all.heads.reserve_exact(total(|p| p.heads.len()));
        all.feats.reserve_exact(total(|p| p.feats.len()));
        all.xs.reserve_exact(total(|p| p.xs.len()));
        all.fields.reserve_exact(total(|p| p.fields.len()));
        for part in parts {
            all.append(part);
        }
        Ok(Some(all).filter(|all| all.heads.len() == n + 1))
    }

    /// The records `range` of `data`, gathered and hashed as a training batch would be.
    fn prepare_part(
        &self,
        desc: &DataFeedDesc,
        data: &InMemoryDataset,
        range: Range<usize>,
    ) -> Result<Prepared> {
        let mut w = self.new_worker(desc)?;
        let label_at = self.cfg.training_label(w.label_at, w.weight_at)?;
        let mut part = Prepared::empty(Arc::clone(data.origins()));
        let mut batch = data.empty_batch();
        let mut order = Vec::with_capacity(CHUNK);
        for start in range.clone().step_by(CHUNK) {
            let end = (start + CHUNK).min(range.end);
            // Below u32::MAX: the in-memory source refuses larger datasets first.
            order.clear();
            order.extend(start as u32..end as u32);
            batch.clear();
            data.gather(&mut batch, &order);
            let located = |e| batch.locate_error(e);
            self.gather_batch(&mut w, &batch, false).map_err(located)?;
            let base = part.feats.len();
            for i in 0..batch.len {
                part.heads.push(Head {
                    start: base + w.batch_starts[i],
                    label: self.label(&batch, label_at, i).map_err(located)?,
                    weight: self.weight(&w, &batch, i).map_err(located)?,
                });
            }
            let feats = w.batch_feats.iter().map(|&(t, row)| pack(t, row));
            part.feats.extend(feats);
            part.xs.extend_from_slice(&w.batch_xs);
            part.fields.extend_from_slice(&w.batch_fields);
        }
        part.heads.push(Head {
            start: part.feats.len(),
            label: 0.0,
            weight: 0.0,
        });
        Ok(part)
    }

    /// What this model prepared of the dataset a referred `batch` comes from.
    pub(super) fn prepared_for(&self, batch: &Batch) -> Result<Arc<Prepared>> {
        let held = self.prepared.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_ref() {
            Some(p) if batch.records_of(&p.origins).is_some() => Ok(Arc::clone(p)),
            _ => Err(Error::Step {
                message: "a batch without values, from a dataset the model did not prepare".into(),
            }),
        }
    }

    /// Keeps `prepared` for the batches of the next run (or, with `None`, nothing).
    pub(super) fn keep_prepared(&self, prepared: Option<Prepared>) {
        *self.prepared.lock().unwrap_or_else(PoisonError::into_inner) = prepared.map(Arc::new);
    }

    /// [`Ctr::gather_batch`] for training on a referred `batch` of the dataset `p` holds: its
    /// records' features copied from `p`, their labels and weights into `w.labels` (the label
    /// at `label_at`, as a training batch holds it), where training reads them.
    pub(super) fn gather_prepared(
        &self,
        w: &mut CtrWorker,
        p: &Prepared,
        batch: &Batch,
        (label_at, label_type): (usize, SlotType),
    ) {
        let records = batch.records_of(&p.origins).unwrap_or_default();
        let slots = 1 + label_at.max(w.weight_at.unwrap_or(0));
        if w.labels.slots.len() != slots {
            let layout = (0..slots).map(|s| match s {
                _ if s == label_at => SlotBatch::new(label_type),
                _ if Some(s) == w.weight_at => SlotBatch::new(SlotType::F32),
                _ => SlotBatch::new(SlotType::U64),
            });
            w.labels = Batch::from_slots(layout.collect());
        }
        w.labels.clear();
        w.start_batch(true);
        for (k, &r) in records.iter().enumerate() {
            if let Some(&ahead) = records.get(k + 2 * PREFETCH_RECORDS) {
                prefetch(&p.heads[ahead as usize]);
            }
            if let Some(&ahead) = records.get(k + PREFETCH_RECORDS) {
                let at = p.heads[ahead as usize].start;
                if let Some(f) = p.feats.get(at) {
                    prefetch(f);
                }
                if let Some(x) = p.xs.get(at) {
                    prefetch(x);
                }
                if let Some(f) = p.fields.get(at) {
                    prefetch(f);
                }
            }
            let r = r as usize;
            let range = p.features(r);
            w.batch_feats
                .extend(p.feats[range.clone()].iter().map(|&f| unpack(f)));
            if w.layout.valued {
                w.batch_xs.extend_from_slice(&p.xs[range.clone()]);
            }
            if w.layout.field_count.is_some() {
                w.batch_fields.extend_from_slice(&p.fields[range]);
            }
            w.batch_starts.push(w.batch_feats.len());
            let Head { label, weight, .. } = p.heads[r];
            match &mut w.labels.slots[label_at].values {
                SlotValues::U64(v) => v.push(u64::from(label > 0.0)),
                SlotValues::F32(v) => v.push(label),
            }
            if let Some(at) = w.weight_at {
                if let SlotValues::F32(v) = &mut w.labels.slots[at].values {
                    v.push(weight);
                }
            }
            w.labels.end_instance();
        }
        self.plan_batch(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_pack_their_table_and_row() {
        for (t, row) in [(0, 0), (1, 5), (255, (1 << ROW_BITS) - 1), (3, 1 << 40)] {
            assert_eq!(unpack(pack(t, row)), (t, row));
        }
    }
}
