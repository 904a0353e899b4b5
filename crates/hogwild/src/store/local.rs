//! A worker's private copies of the rows that its batches update many times.
//!
//! Rows of low-cardinality features (a CTR model's airport, carrier or month) are read and
//! written by nearly every instance. Updated in the shared table instance by instance, their
//! cache lines travel between the cores on every instance of every thread, and the second thread
//! then costs more than it brings. [`LocalRows`] keeps a set of such hot rows: it copies them into
//! the worker's memory, lets the worker step the copies instance by instance, and writes the
//! changes back once every `merge_every` batches ([`LocalRows::end_batch`]), or whenever the
//! worker is asked to ([`LocalRows::merge`]: at the end of its part of an epoch, before the
//! tables are read or saved).
//!
//! A worker training alone gains by copies too where its rows are wide (the field-aware
//! machine's block per field): a copy is stepped in plain memory, where a shared row is
//! copied in and out by atomic 16-byte moves and prefetched line by line. It then copies only
//! when the hot rows take most of a batch's uses ([`LocalRows::set_min_share`]), since every
//! feature costs a lookup.
//!
//! Each load and merge moves the copied rows' cache lines between the cores, which costs more
//! the farther apart the cores are (between the sockets of a large server), so the copies are
//! kept over a few batches rather than merged after each; the other workers' changes to a hot
//! row then reach a worker's copy that many batches later at most, which left the FM's test AUC
//! on flights unchanged (commit 8d57c96 has the measurement).
//!
//! The hot rows are those a batch used at least `min_uses` times, counted in the first batch
//! planned after `recount_every` batches since the last count, when no copies are held: which
//! rows are frequent changes slowly, and counting every batch's uses in a hash map costs a
//! noticeable share of an instance that only multi-threaded runs would pay. Between counts, a
//! feature is looked up in the small map of hot rows (`benches/local_rows.rs` measures both).
//!
//! Merging adds the copy's change to what the shared row holds then, so the other workers'
//! updates made during the batch are kept; an element that no other worker changed gets the
//! copy's value itself, so one thread gives exactly the per-instance result. The merge is a
//! relaxed load and store per element, racy in Hogwild's way (a concurrent write between the
//! two can be lost), not a compare-and-swap loop: it runs for every element of every hot row of
//! every batch.

use super::{element_value, step_runs, Table};
use crate::optim::Optimizer;

/// `LocalRows::plan`'s entry for a feature whose row stays in the shared table.
pub const SHARED: u32 = u32::MAX;

/// An entry of the hash map that counts a batch's uses of each (table, row): 16 bytes, so that
/// the map of a batch's features stays in the first cache levels.
#[derive(Debug, Clone, Copy, Default)]
struct Count {
    /// `table << 48 | row`.
    key: u64,
    /// The count that wrote the entry (entries of other counts are empty).
    generation: u32,
    /// The uses so far.
    uses: u32,
}

/// An entry of the map from a hot row's key to its copy.
#[derive(Debug, Clone, Copy)]
struct Hot {
    /// `table << 48 | row`, or [`NO_KEY`] for an empty entry.
    key: u64,
    /// Index into `LocalRows::copies`.
    copy: u32,
}

/// [`Hot::key`] of an empty entry: row 2^48 - 1 of table 65,535, which no model has.
const NO_KEY: u64 = u64::MAX;

/// One hot row's copy: its table and row, and where its elements start in the buffers.
#[derive(Debug, Clone, Copy)]
struct Copy {
    table: u32,
    row: usize,
    at: usize,
}

/// A worker's private copies of its batches' hot rows (see the module documentation).
#[derive(Debug)]
pub struct LocalRows {
    min_uses: u32,
    /// The least share of a counted batch's uses that fall on hot rows for any to be copied.
    min_share: f32,
    recount_every: u32,
    merge_every: u32,
    /// The counting map.
    counts: Vec<Count>,
    generation: u32,
    /// The hot rows (table, row), found by the last count.
    hot_rows: Vec<(usize, usize)>,
    /// The hot rows' copies, found by hashing their key to a pair of entries (see `count`).
    hot: Vec<Hot>,
    copies: Vec<Copy>,
    /// Batches planned with the copies since they were loaded (0: none held).
    planned: u32,
    /// Batches planned so far.
    batch: u64,
    /// The first batch that counts again.
    next_count: u64,
    /// The rows' elements (weights, then slots, as the table lays them out) when loaded.
    start: Vec<f32>,
    /// The copies, stepped by the worker.
    now: Vec<f32>,
}

/// The home entry of `key` in a map of `mask + 1` entries: rows are hashes or dense ids, and a
/// multiplicative mix spreads either.
#[inline(always)]
fn home(key: u64, mask: usize) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask
}

#[inline(always)]
fn key(table: usize, row: usize) -> u64 {
    (table as u64) << 48 | row as u64
}

impl LocalRows {
    /// Copies of the rows a batch uses at least `min_uses` times (at least 1), counted about
    /// once every `recount_every` batches (at least 1), merged every `merge_every` batches (at
    /// least 1).
    pub fn new(min_uses: u32, recount_every: u32, merge_every: u32) -> Self {
        LocalRows {
            min_uses: min_uses.max(1),
            min_share: 0.0,
            recount_every: recount_every.max(1),
            merge_every: merge_every.max(1),
            counts: Vec::new(),
            generation: 0,
            hot_rows: Vec::new(),
            hot: Vec::new(),
            copies: Vec::new(),
            planned: 0,
            batch: 0,
            next_count: 0,
            start: Vec::new(),
            now: Vec::new(),
        }
    }

    /// Copies no row unless the hot rows take at least `share` of a counted batch's uses (0,
    /// the default: whatever they take). For a worker that trains alone, whose copies spare it
    /// the shared rows' atomic copies and prefetches but cost a lookup of every feature, which
    /// pays only where most features' rows are hot.
    pub fn set_min_share(&mut self, share: f32) {
        self.min_share = share;
    }

    /// Plans a batch whose features are `rows` (table index into `tables`, row): in a batch that
    /// counts, the rows used at least `min_uses` times become the hot rows; unless the copies
    /// are still held from an earlier batch (not merged yet), every hot row is copied into the
    /// worker; then `local[k]` is set to the copy of feature `k`'s row, or [`SHARED`] (`local`
    /// is left empty when no row is hot). A copy holds the slots' values as `opt` reads them
    /// ([`Optimizer::slot_value`]).
    pub fn plan<O: Optimizer<f32>>(
        &mut self,
        opt: &O,
        tables: &[Table],
        rows: impl ExactSizeIterator<Item = (usize, usize)> + Clone,
        local: &mut Vec<u32>,
    ) {
        local.clear();
        if self.planned == 0 && self.batch >= self.next_count {
            self.count(tables, rows.clone());
            self.next_count = self.batch + u64::from(self.recount_every);
        }
        self.batch += 1;
        if self.copies.is_empty() {
            return;
        }
        if self.planned == 0 {
            self.load(opt, tables);
        }
        self.planned += 1;
        let mask = self.hot.len() - 1;
        let hot = &self.hot;
        local.extend(rows.map(|(table, row)| {
            let key = key(table, row);
            let at = home(key, mask);
            // The two entries of the key's pair (see `count`). Selects rather than branches:
            // whether a feature's row is hot is a coin toss.
            let (a, b) = (hot[at], hot[at ^ 1]);
            let copy = if a.key == key { a.copy } else { SHARED };
            if b.key == key {
                b.copy
            } else {
                copy
            }
        }));
    }

    /// Copies every hot row from the shared table.
    fn load<O: Optimizer<f32>>(&mut self, opt: &O, tables: &[Table]) {
        for c in &self.copies {
            let t = &tables[c.table as usize];
            let cells = t.row(c.row);
            let start = &mut self.start[c.at..c.at + cells.len()];
            for (i, (x, cell)) in start.iter_mut().zip(cells).enumerate() {
                *x = element_value(opt, t.dim(), i, cell.load());
            }
        }
        // `now` may hold a worker's scratch rows after the copies (`with_scratch`).
        self.now[..self.start.len()].copy_from_slice(&self.start);
    }

    /// Counts the uses of each row in `rows` and makes those used at least `min_uses` times
    /// the hot rows, each with room for a copy.
    fn count(&mut self, tables: &[Table], rows: impl ExactSizeIterator<Item = (usize, usize)>) {
        let features = rows.len();
        let capacity = (features + features / 2).next_power_of_two().max(16);
        if self.counts.len() < capacity || self.generation == u32::MAX {
            self.counts.clear();
            self.counts
                .resize(capacity.max(self.counts.len()), Count::default());
            self.generation = 0;
        }
        self.generation += 1;
        let mask = self.counts.len() - 1;
        self.hot_rows.clear();
        let mut hot_uses = 0usize;
        for (table, row) in rows {
            let key = key(table, row);
            let mut at = home(key, mask);
            loop {
                let entry = &mut self.counts[at];
                if entry.generation != self.generation {
                    *entry = Count {
                        key,
                        generation: self.generation,
                        uses: 0,
                    };
                }
                if entry.key == key {
                    entry.uses += 1;
                    if entry.uses == self.min_uses {
                        self.hot_rows.push((table, row));
                        hot_uses += self.min_uses as usize;
                    } else if entry.uses > self.min_uses {
                        hot_uses += 1;
                    }
                    break;
                }
                at = (at + 1) & mask;
            }
        }
        if (hot_uses as f64) < f64::from(self.min_share) * features as f64 {
            self.hot_rows.clear();
        }
        self.hot_rows.truncate(SHARED as usize);
        self.copies.clear();
        self.hot.clear();
        if self.hot_rows.is_empty() {
            return;
        }
        // A key may sit in either entry of its pair, both in one cache line, so that a lookup
        // is two loads and no probing loop; a third hot key of a pair (rare at a quarter full)
        // stays shared.
        let size = (4 * self.hot_rows.len()).next_power_of_two();
        self.hot.resize(
            size,
            Hot {
                key: NO_KEY,
                copy: SHARED,
            },
        );
        let mask = size - 1;
        let mut elements = 0;
        for &(table, row) in &self.hot_rows {
            let key = key(table, row);
            let home = home(key, mask);
            let Some(at) = [home, home ^ 1]
                .into_iter()
                .find(|&at| self.hot[at].key == NO_KEY)
            else {
                continue;
            };
            self.hot[at] = Hot {
                key,
                copy: self.copies.len() as u32,
            };
            self.copies.push(Copy {
                table: table as u32,
                row,
                at: elements,
            });
            elements += tables[table].row(row).len();
        }
        self.start.resize(elements, 0.0);
        self.now.resize(elements, 0.0);
    }

    /// Number of hot rows, copied for each batch.
    pub fn len(&self) -> usize {
        self.copies.len()
    }

    /// Whether no row is hot.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Where copy `local`'s elements start in [`LocalRows::with_scratch`]'s buffer.
    #[inline]
    pub fn offset(&self, local: u32) -> usize {
        self.copies[local as usize].at
    }

    /// The copies' elements (as [`LocalRows::row_mut`] holds them; copy `local` from
    /// [`LocalRows::offset`]) followed by `scratch` more of the worker's own, and where those
    /// start: one buffer in which the worker steps the rows of an instance, its copies and the
    /// shared rows it read, wherever each lies. The scratch part holds what the last call left
    /// there, when it was as long.
    #[inline]
    pub fn with_scratch(&mut self, scratch: usize) -> (&mut [f32], usize) {
        let at = self.start.len();
        self.now.resize(at + scratch, 0.0);
        (&mut self.now, at)
    }

    /// Copy `local`'s weights (the first `dim` elements).
    #[inline]
    pub fn weights(&self, local: u32, dim: usize) -> &[f32] {
        let at = self.copies[local as usize].at;
        &self.now[at..at + dim]
    }

    /// Copy `local`'s elements, weights then slots (`len` of them: the table's stride), to
    /// be changed in place by a worker that steps them itself.
    #[inline]
    pub fn row_mut(&mut self, local: u32, len: usize) -> &mut [f32] {
        let at = self.copies[local as usize].at;
        &mut self.now[at..at + len]
    }

    /// Applies `opt`'s rule to copy `local` (of a table of `dim` weights) with gradient `grad`:
    /// [`LocalRows::update_runs`] on the whole row, the bits of [`Table::update_row`] on a
    /// shared row.
    #[inline]
    pub fn update_row<O: Optimizer<f32>>(
        &mut self,
        opt: &O,
        step: &O::Step,
        local: u32,
        dim: usize,
        grad: &[f32],
    ) {
        let whole = 0..dim;
        self.update_runs(opt, step, local, dim, grad, std::slice::from_ref(&whole));
    }

    /// Applies `opt`'s rule to the elements `runs` of copy `local` (of a table of `dim` weights)
    /// with gradient `grad`, as [`Table::update_runs`] does on a shared row (the same code).
    #[inline]
    pub fn update_runs<O: Optimizer<f32>>(
        &mut self,
        opt: &O,
        step: &O::Step,
        local: u32,
        dim: usize,
        grad: &[f32],
        runs: &[std::ops::Range<usize>],
    ) {
        let at = self.copies[local as usize].at;
        step_runs(opt, step, dim, &mut self.now[at..], grad, runs);
    }

    /// Ends a planned batch: merges the copies ([`LocalRows::merge`]) when they have served
    /// `merge_every` batches.
    pub fn end_batch<O: Optimizer<f32>>(&mut self, opt: &O, tables: &[Table]) {
        if self.planned >= self.merge_every {
            self.merge(opt, tables);
        }
    }

    /// Whether copies are held whose changes are not in the shared tables yet.
    pub fn is_held(&self) -> bool {
        self.planned > 0
    }

    /// Writes the copies' changes back to `tables` now (see the module documentation), reading
    /// the shared slots as `opt` does; the next batch copies the hot rows afresh. Does nothing
    /// when no copies are held.
    pub fn merge<O: Optimizer<f32>>(&mut self, opt: &O, tables: &[Table]) {
        // Taken first: a merge cut short by a panic is not repeated.
        if std::mem::take(&mut self.planned) == 0 {
            return;
        }
        for copy in &self.copies {
            let table = &tables[copy.table as usize];
            let cells = table.row(copy.row);
            let start = &self.start[copy.at..copy.at + cells.len()];
            let now = &self.now[copy.at..copy.at + cells.len()];
            for (i, ((cell, &start), &now)) in cells.iter().zip(start).zip(now).enumerate() {
                if now.to_bits() == start.to_bits() {
                    continue;
                }
                let shared = element_value(opt, table.dim(), i, cell.load());
                cell.store(if shared.to_bits() == start.to_bits() {
                    now
                } else {
                    shared + (now - start)
                });
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Adagrad;

    fn adagrad() -> Adagrad<f32> {
        Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        }
    }

    fn table(rows: usize, dim: usize) -> Table {
        let t = Table::new("t", rows, dim, &adagrad()).unwrap();
        for r in 0..rows {
            let w: Vec<f32> = (0..dim).map(|k| (r * 10 + k) as f32 / 4.0).collect();
            t.write_weights(r, &w);
        }
        t
    }

    #[test]
    fn rows_used_often_enough_in_a_counted_batch_are_copied_once_each() {
        let tables = [table(8, 2), table(8, 3)];
        let opt = adagrad();
        let mut local = Vec::new();
        // Counts in batches 1, 3, 5...
        let mut copies = LocalRows::new(2, 2, 1);
        // (table, row): row 5 of table 0 three times, row 5 of table 1 twice, others once.
        let rows = [(0, 5), (1, 5), (0, 1), (0, 5), (1, 5), (0, 5), (1, 7)];
        copies.plan(&opt, &tables, rows.iter().copied(), &mut local);
        assert_eq!(local, vec![0, 1, SHARED, 0, 1, 0, SHARED]);
        assert_eq!(copies.len(), 2);
        assert_eq!(copies.weights(0, 2), &[12.5, 12.75]);
        assert_eq!(copies.weights(1, 3), &[12.5, 12.75, 13.0]);
        copies.merge(&opt, &tables);
        // Batch 2 does not count: row 7 of table 1 stays shared however often it is used, and
        // the hot rows are copied where this batch uses them.
        let second = [(1, 7), (1, 7), (1, 7), (0, 5), (0, 2)];
        copies.plan(&opt, &tables, second.iter().copied(), &mut local);
        assert_eq!(local, vec![SHARED, SHARED, SHARED, 0, SHARED]);
        copies.merge(&opt, &tables);
        // Batch 3 counts again: row 7 of table 1 is the one hot row now.
        copies.plan(
            &opt,
            &tables,
            [(1, 7), (0, 5), (1, 7)].into_iter(),
            &mut local,
        );
        assert_eq!(local, vec![0, SHARED, 0]);
        assert_eq!(copies.len(), 1);
        assert_eq!(copies.weights(0, 3), &[17.5, 17.75, 18.0]);
        copies.merge(&opt, &tables);
        copies.plan(&opt, &tables, [(1, 7)].into_iter(), &mut local);
        copies.merge(&opt, &tables);
        // Many distinct rows (probing past collisions): none is hot at threshold 2, and the
        // plan leaves `local` empty.
        let many: Vec<(usize, usize)> = (0..1000).map(|i| (i % 2, i / 2)).collect();
        let big = [table(500, 1), table(500, 1)];
        copies.plan(&opt, &big, many.iter().copied(), &mut local);
        assert!(copies.is_empty() && local.is_empty());
        copies.merge(&opt, &big);
    }

    /// With a least share, a counted batch copies its hot rows only when their uses reach
    /// that share of the batch's: here 5 of 8 uses (row 3 five times, then three rows once).
    #[test]
    fn hot_rows_below_the_least_share_of_uses_stay_shared() {
        let opt = adagrad();
        let tables = [table(8, 2)];
        let rows = [
            (0, 3),
            (0, 3),
            (0, 1),
            (0, 3),
            (0, 2),
            (0, 3),
            (0, 4),
            (0, 3),
        ];
        for (share, copied) in [
            (0.0, true),
            (0.5, true),
            (0.625, true),
            (0.63, false),
            (1.0, false),
        ] {
            let mut copies = LocalRows::new(2, 1, 1);
            copies.set_min_share(share);
            let mut local = Vec::new();
            copies.plan(&opt, &tables, rows.iter().copied(), &mut local);
            assert_eq!(copies.len(), usize::from(copied), "share {share}");
            let expect = match copied {
                true => vec![0, 0, SHARED, 0, SHARED, 0, SHARED, 0],
                false => vec![],
            };
            assert_eq!(local, expect, "share {share}");
            copies.merge(&opt, &tables);
        }
    }

    /// A key's copy sits in one of the two entries of its pair: a third hot row whose key falls
    /// in a full pair stays shared, and every other row keeps its own copy.
    #[test]
    fn a_third_hot_row_of_a_pair_stays_shared() {
        let opt = adagrad();
        let tables = [table(4096, 1)];
        // Four hot rows make a map of 16 entries; three rows share a pair there, one does not.
        let pair = |row: usize| home(key(0, row), 15) >> 1;
        let same: Vec<usize> = (0..4096).filter(|&r| pair(r) == pair(0)).take(3).collect();
        let other = (0..4096).find(|&r| pair(r) != pair(0)).unwrap();
        let hot = [same[0], same[1], same[2], other];
        let rows: Vec<(usize, usize)> = hot.iter().flat_map(|&r| [(0, r), (0, r)]).collect();
        let mut copies = LocalRows::new(2, 1, 1);
        let mut local = Vec::new();
        copies.plan(&opt, &tables, rows.iter().copied(), &mut local);
        assert_eq!(copies.len(), 3);
        assert_eq!(local, vec![0, 0, 1, 1, SHARED, SHARED, 2, 2]);
        for (l, &r) in [0, 1, 2].into_iter().zip([same[0], same[1], other].iter()) {
            assert_eq!(copies.weights(l, 1), &[r as f32 * 10.0 / 4.0]);
        }
        copies.merge(&opt, &tables);
    }

    /// Each batch copies the hot rows afresh: what changed in the shared table between two
    /// batches (another worker's merge) is in the next batch's copy.
    #[test]
    fn every_batch_copies_the_shared_row_as_it_is_then() {
        let opt = crate::optim::Sgd { lr: 1.0f32 };
        let tables = [table(4, 1)];
        let step = tables[0].begin(&opt, true).unwrap();
        let mut copies = LocalRows::new(2, 100, 1);
        let mut local = Vec::new();
        copies.plan(&opt, &tables, [(0, 3), (0, 3)].into_iter(), &mut local);
        copies.update_row(&opt, &step, 0, 1, &[0.5]);
        copies.merge(&opt, &tables);
        assert_eq!(tables[0].row(3)[0].load(), 7.0);
        tables[0].update_row(&opt, &step, 3, &[1.0], 1.0);
        copies.plan(&opt, &tables, [(0, 3)].into_iter(), &mut local);
        assert_eq!(local, vec![0]);
        assert_eq!(copies.weights(0, 1), &[6.0]);
        copies.update_row(&opt, &step, 0, 1, &[2.0]);
        copies.merge(&opt, &tables);
        assert_eq!(tables[0].row(3)[0].load(), 4.0);
    }

    /// Copies merged every 3 batches: two batches step the same copy without writing it back
    /// or counting again, the third writes both batches' changes; a merge asked for earlier
    /// writes at once, and the next batch copies (and counts) afresh.
    #[test]
    fn copies_are_held_until_their_batches_are_done_or_a_merge_is_asked_for() {
        let opt = crate::optim::Sgd { lr: 1.0f32 };
        let tables = [table(8, 1)];
        let step = tables[0].begin(&opt, true).unwrap();
        // Counts every batch when free to: row 3 is hot in the first batch.
        let mut copies = LocalRows::new(2, 1, 3);
        let mut local = Vec::new();
        copies.plan(&opt, &tables, [(0, 3), (0, 3)].into_iter(), &mut local);
        copies.update_row(&opt, &step, local[0], 1, &[0.5]);
        copies.end_batch(&opt, &tables);
        assert!(copies.is_held());
        assert_eq!(tables[0].row(3)[0].load(), 7.5);
        // Row 5 is used twice but not counted while the copies are held; the copy of row 3 is
        // the one stepped in the first batch.
        copies.plan(
            &opt,
            &tables,
            [(0, 5), (0, 5), (0, 3)].into_iter(),
            &mut local,
        );
        assert_eq!(local, vec![SHARED, SHARED, 0]);
        assert_eq!(copies.weights(0, 1), &[7.0]);
        copies.update_row(&opt, &step, 0, 1, &[0.25]);
        copies.end_batch(&opt, &tables);
        assert_eq!(tables[0].row(3)[0].load(), 7.5);
        copies.plan(&opt, &tables, [(0, 3)].into_iter(), &mut local);
        copies.update_row(&opt, &step, 0, 1, &[0.25]);
        copies.end_batch(&opt, &tables);
        assert!(!copies.is_held());
        assert_eq!(tables[0].row(3)[0].load(), 6.5);
        // Counted again: row 5 is hot now, and a merge asked for after one batch writes it.
        copies.plan(&opt, &tables, [(0, 5), (0, 5)].into_iter(), &mut local);
        assert_eq!(local, vec![0, 0]);
        copies.update_row(&opt, &step, 0, 1, &[1.0]);
        copies.end_batch(&opt, &tables);
        assert_eq!(tables[0].row(5)[0].load(), 12.5);
        copies.merge(&opt, &tables);
        assert!(!copies.is_held());
        assert_eq!(tables[0].row(5)[0].load(), 11.5);
        // Nothing held: a second merge changes nothing.
        copies.merge(&opt, &tables);
        assert_eq!(tables[0].row(5)[0].load(), 11.5);
    }

    /// One thread: stepping the copy and merging gives the bits of stepping the shared row.
    #[test]
    fn one_worker_gets_the_per_instance_result() {
        let opt = adagrad();
        let (direct, staged) = ([table(4, 3)], [table(4, 3)]);
        let grads = [[0.5f32, -1.0, 0.25], [0.1, 0.2, -0.3], [-2.0, 0.0, 1.5]];
        let step = direct[0].begin(&opt, true).unwrap();
        for g in &grads {
            direct[0].update_row(&opt, &step, 2, g, 1.0);
        }
        let mut copies = LocalRows::new(2, 1, 1);
        let mut local = Vec::new();
        copies.plan(&opt, &staged, [(0, 2); 3].into_iter(), &mut local);
        for g in &grads {
            copies.update_row(&opt, &step, local[0], 3, g);
        }
        // Not written back before the merge.
        assert_eq!(staged[0].row(2)[0].load(), 5.0);
        copies.merge(&opt, &staged);
        let bits =
            |t: &Table| -> Vec<u32> { t.row(2).iter().map(|c| c.load().to_bits()).collect() };
        assert_eq!(bits(&staged[0]), bits(&direct[0]));
    }

    /// Two workers' copies of row 1 of a one-weight table, planned before either steps, then
    /// stepped with gradients 0.5 and 0.25; neither is merged yet.
    fn two_stepped_copies<O: Optimizer<f32>>(opt: &O, tables: &[Table]) -> [LocalRows; 2] {
        let step = tables[0].begin(opt, true).unwrap();
        let mut copies = [LocalRows::new(2, 1, 1), LocalRows::new(2, 1, 1)];
        let mut local = Vec::new();
        for c in &mut copies {
            c.plan(opt, tables, [(0, 1), (0, 1)].into_iter(), &mut local);
        }
        for (c, g) in copies.iter_mut().zip([0.5, 0.25]) {
            c.update_row(opt, &step, 0, 1, &[g]);
        }
        copies
    }

    /// Two workers' copies of one row: both changes end up in the shared row.
    #[test]
    fn changes_made_elsewhere_during_a_batch_are_kept() {
        let tables = [table(2, 1)];
        let opt = crate::optim::Sgd { lr: 1.0f32 };
        // Row 1 starts at 2.5; a steps it by -0.5, b by -0.25.
        let [mut a, mut b] = two_stepped_copies(&opt, &tables);
        a.merge(&opt, &tables);
        b.merge(&opt, &tables);
        assert_eq!(tables[0].row(1)[0].load(), 1.75);
    }

    /// A fresh Adagrad row stores a zero accumulator standing for the initial one: copies read it
    /// as the initial value and two workers' merged steps count it once.
    #[test]
    fn a_fresh_accumulator_is_counted_once_when_two_copies_merge() {
        let opt = adagrad();
        let tables = [Table::new("t", 2, 1, &opt).unwrap()];
        assert_eq!(tables[0].row(1)[1].load().to_bits(), 0);
        let [mut a, mut b] = two_stepped_copies(&opt, &tables);
        a.merge(&opt, &tables);
        // Alone, the first merge stores the copy's values: TensorFlow's bits.
        assert_eq!(tables[0].row(1)[1].load(), 0.1 + 0.5 * 0.5);
        b.merge(&opt, &tables);
        let acc = tables[0].row(1)[1].load();
        assert_eq!(acc, (0.1f32 + 0.5 * 0.5) + ((0.1 + 0.25 * 0.25) - 0.1));
        let w = -0.1 * 0.5 / (0.1f32 + 0.25).sqrt() - 0.1 * 0.25 / (0.1f32 + 0.0625).sqrt();
        assert!((tables[0].row(1)[0].load() - w).abs() < 1e-6);
        // The other row was never touched: still the stand-in zero.
        assert_eq!(tables[0].row(0)[1].load().to_bits(), 0);
    }
}
