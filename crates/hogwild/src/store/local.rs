//! A worker's private copies of the rows that one batch updates many times.
//!
//! Rows of low-cardinality features (a CTR model's airport, carrier or month) are read and
//! written by nearly every instance. Updated in the shared table instance by instance, their
//! cache lines travel between the cores on every instance of every thread, and the second thread
//! then costs more than it brings. [`LocalRows`] finds the rows a batch uses at least `min_uses`
//! times, copies each into the worker's memory once, lets the worker step the copy instance by
//! instance, and writes the change back once per batch ([`LocalRows::merge`]).
//!
//! Merging adds the copy's change to what the shared row holds then, so the other workers'
//! updates made during the batch are kept; an element that no other worker changed gets the
//! copy's value itself, so one thread gives exactly the per-instance result. The merge is a
//! relaxed load and store per element, racy in Hogwild's way (a concurrent write between the
//! two can be lost), not a compare-and-swap loop: it runs for every element of every hot row of
//! every batch.

use std::cell::Cell;

use super::{element_value, step_row, Table};
use crate::optim::Optimizer;

/// `LocalRows::slot` of a feature whose row stays in the shared table.
pub const SHARED: u32 = u32::MAX;

/// An entry of the per-batch hash map from (table, row) to uses or local copy: 16 bytes, so
/// that the map of a batch's features stays in the first cache levels.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// `table << 48 | row`.
    key: u64,
    /// The batch that wrote the entry (entries of other batches are empty).
    generation: u32,
    /// The uses so far, or [`COPIED`] with the copy's index once the row is copied.
    state: u32,
}

/// The bit of [`Entry::state`] that marks a copied row.
const COPIED: u32 = 1 << 31;

/// One local copy: its table and row, and where its elements start in the buffers.
#[derive(Debug, Clone, Copy)]
struct Copy {
    table: u32,
    row: usize,
    at: usize,
}

/// A worker's private copies of a batch's hot rows (see the module documentation).
#[derive(Debug, Default)]
pub struct LocalRows {
    entries: Vec<Entry>,
    generation: u32,
    /// Per feature of the planned batch: the entry holding its row.
    entry_of: Vec<u32>,
    copies: Vec<Copy>,
    /// The rows' elements (weights, then slots, as the table lays them out) when copied.
    start: Vec<f32>,
    /// The copies, stepped by the worker.
    now: Vec<f32>,
}

impl LocalRows {
    /// Plans a batch whose features are `rows` (table index into `tables`, row): every row used
    /// at least `min_uses` times is copied into the worker, and `local[k]` is set to the copy of
    /// feature `k`'s row, or [`SHARED`]. The copies of the previous batch must have been merged.
    /// A copy holds the slots' values as `opt` reads them ([`Optimizer::slot_value`]).
    pub fn plan<O: Optimizer<f32>>(
        &mut self,
        opt: &O,
        tables: &[Table],
        rows: impl ExactSizeIterator<Item = (usize, usize)>,
        min_uses: u32,
        local: &mut Vec<u32>,
    ) {
        self.copies.clear();
        self.start.clear();
        self.now.clear();
        local.clear();
        let features = rows.len();
        let capacity = (features + features / 2).next_power_of_two().max(16);
        if self.entries.len() < capacity || self.generation == u32::MAX {
            self.entries.clear();
            self.entries
                .resize(capacity.max(self.entries.len()), Entry::default());
            self.generation = 0;
        }
        self.generation += 1;
        let mask = self.entries.len() - 1;
        self.entry_of.clear();
        for (table, row) in rows {
            let key = (table as u64) << 48 | row as u64;
            // Rows are hashes or dense ids: a multiplicative mix spreads either.
            let mut at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask;
            loop {
                let entry = &mut self.entries[at];
                if entry.generation != self.generation {
                    *entry = Entry {
                        key,
                        generation: self.generation,
                        state: 0,
                    };
                }
                if entry.key == key {
                    if entry.state < COPIED {
                        entry.state += 1;
                        if entry.state >= min_uses && self.copies.len() < (COPIED - 1) as usize {
                            entry.state = COPIED | self.copies.len() as u32;
                            let at = self.start.len();
                            let t = &tables[table];
                            self.start.extend(
                                t.row(row)
                                    .iter()
                                    .enumerate()
                                    .map(|(i, c)| element_value(opt, t.dim(), i, c.load())),
                            );
                            self.copies.push(Copy {
                                table: table as u32,
                                row,
                                at,
                            });
                        }
                    }
                    break;
                }
                at = (at + 1) & mask;
            }
            self.entry_of.push(at as u32);
        }
        local.extend(self.entry_of.iter().map(|&at| {
            let state = self.entries[at as usize].state;
            if state >= COPIED {
                state & !COPIED
            } else {
                SHARED
            }
        }));
        self.now.extend_from_slice(&self.start);
    }

    /// Number of rows copied for the planned batch.
    pub fn len(&self) -> usize {
        self.copies.len()
    }

    /// Whether the planned batch copied no row.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Copy `local`'s weights (the first `dim` elements).
    #[inline]
    pub fn weights(&self, local: u32, dim: usize) -> &[f32] {
        let at = self.copies[local as usize].at;
        &self.now[at..at + dim]
    }

    /// Applies `opt`'s rule to copy `local` (of a table of `dim` weights) with gradient `grad`,
    /// element by element as [`Table::update_row`] does on a shared row (the same code).
    #[inline]
    pub fn update_row<O: Optimizer<f32>>(
        &mut self,
        opt: &O,
        step: &O::Step,
        local: u32,
        dim: usize,
        grad: &[f32],
    ) {
        let at = self.copies[local as usize].at;
        let row = Cell::from_mut(&mut self.now[at..at + dim * (1 + O::SLOTS)]).as_slice_of_cells();
        step_row(
            opt,
            step,
            dim,
            grad,
            1.0,
            |i| row[i].get(),
            |i, x| row[i].set(x),
        );
    }

    /// Writes the copies' changes back to `tables` (see the module documentation), reading the
    /// shared slots as `opt` does.
    pub fn merge<O: Optimizer<f32>>(&mut self, opt: &O, tables: &[Table]) {
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
        self.copies.clear();
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
    fn rows_used_often_enough_are_copied_once_each() {
        let tables = [table(8, 2), table(8, 3)];
        // (table, row): row 5 of table 0 three times, row 5 of table 1 twice, others once.
        let rows = [(0, 5), (1, 5), (0, 1), (0, 5), (1, 5), (0, 5), (1, 7)];
        let mut local = Vec::new();
        let mut copies = LocalRows::default();
        let opt = adagrad();
        copies.plan(&opt, &tables, rows.iter().copied(), 2, &mut local);
        assert_eq!(local, vec![0, 1, SHARED, 0, 1, 0, SHARED]);
        assert_eq!(copies.len(), 2);
        assert_eq!(copies.weights(0, 2), &[12.5, 12.75]);
        assert_eq!(copies.weights(1, 3), &[12.5, 12.75, 13.0]);
        copies.merge(&opt, &tables);
        // A higher threshold, and the next batch's plan starts afresh.
        copies.plan(&opt, &tables, rows.iter().copied(), 3, &mut local);
        assert_eq!(local, vec![0, SHARED, SHARED, 0, SHARED, 0, SHARED]);
        copies.merge(&opt, &tables);
        copies.plan(&opt, &tables, [(1, 7), (1, 7)].into_iter(), 2, &mut local);
        assert_eq!(local, vec![0, 0]);
        assert_eq!(copies.weights(0, 3), &[17.5, 17.75, 18.0]);
        copies.merge(&opt, &tables);
        // Many distinct rows (probing past collisions): all shared at threshold 2.
        let many: Vec<(usize, usize)> = (0..1000).map(|i| (i % 2, i / 2)).collect();
        let big = [table(500, 1), table(500, 1)];
        copies.plan(&opt, &big, many.iter().copied(), 2, &mut local);
        assert!(copies.is_empty() && local.iter().all(|&l| l == SHARED));
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
        let mut copies = LocalRows::default();
        let mut local = Vec::new();
        copies.plan(&opt, &staged, [(0, 2); 3].into_iter(), 2, &mut local);
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
        let mut copies = [LocalRows::default(), LocalRows::default()];
        let mut local = Vec::new();
        for c in &mut copies {
            c.plan(opt, tables, [(0, 1), (0, 1)].into_iter(), 2, &mut local);
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
