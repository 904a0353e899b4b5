//! Training and evaluating from files: the data feed gives every worker thread its own queue of
//! batches (DataFeedDesc + MultiSlot files, as the native executor reads them).

use std::path::PathBuf;

use hogwild::feed::{start_feed, Batch, DataFeedDesc, FeedOptions, SlotType, SlotValues};

use crate::inputs::{SlotKind, SlotRef, SlotValuesRef};
use crate::model::TfModel;
use crate::runner::{run_threads, BatchSlots, RunReport};
use crate::{Error, Result};

impl BatchSlots for Batch {
    fn instances(&self) -> usize {
        self.len
    }

    fn slot_refs(&self) -> Vec<SlotRef<'_>> {
        self.slots
            .iter()
            .map(|s| SlotRef {
                values: match &s.values {
                    SlotValues::U64(v) => SlotValuesRef::U64(v),
                    SlotValues::F32(v) => SlotValuesRef::F32(v),
                },
                offsets: &s.offsets,
            })
            .collect()
    }
}

/// The used slots of `desc`, as [`TfModel::worker`] takes them.
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

/// Trains (`train`) or evaluates `model` in `threads` threads on `files` read as `desc` says.
/// Fetched values are averaged over all batches of all threads; a progress line goes to stderr
/// every `print_period` batches (0: none).
pub fn run_from_files(
    model: &TfModel,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    feed: &FeedOptions,
    train: bool,
    print_period: usize,
) -> Result<RunReport> {
    if threads == 0 {
        return Err(Error::InvalidOption {
            name: "threads",
            reason: "must be at least 1".into(),
        });
    }
    let slots = used_slots(desc);
    let workers = (0..threads)
        .map(|_| model.worker(&slots))
        .collect::<Result<Vec<_>>>()?;
    let mut options = feed.clone();
    options.threads = threads;
    let (queues, handle) = start_feed(desc, files, &options)?;
    let queues: Vec<_> = queues.into_iter().map(|mut q| move || q.recv()).collect();
    let report = run_threads(model, workers, queues, train, print_period, &|| {
        handle.stop()
    });
    // A worker's failure stops the feed, so it comes first; a reader's error (a bad line) ends
    // the queues early, so a run whose workers all finished still fails with it.
    let feed_result = handle.join();
    let report = report?;
    feed_result?;
    Ok(report)
}
