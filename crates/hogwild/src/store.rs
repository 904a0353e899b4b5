//! The Hogwild store: parameter tables and their optimizer state, shared by every training thread
//! without locks.
//!
//! # Why shared mutable memory, and why it is sound
//!
//! Hogwild training (Niu, Recht, Ré, Wright 2011) lets every worker thread read and write the same
//! parameters with no locks: when updates are sparse, two threads rarely touch the same row, and the
//! rare collisions (one thread overwriting another's update of an element) cost less accuracy than
//! locks would cost time. This module is the only place in the crate where memory is deliberately
//! written by one thread while others may read or write it.
//!
//! Every element is an [`AtomicF32`], one of the atomic float cells of `store/atomic.rs`, the one
//! home of deliberately shared parameter memory (the TF plugin's shared-path kernels use the same
//! cells): its module documentation states what is atomic, with which orderings, and why Hogwild's
//! races are not undefined behaviour. In short, every access is a relaxed atomic load or store,
//! as cheap as a racy `f32` access on x86-64 and AArch64 but defined; an element's
//! read-modify-write (load weight and slots, apply the optimizer rule, store back) is *not*
//! atomic as a whole, so a concurrent update of the same element may be lost, which is exactly
//! Hogwild's contract. The `unsafe` code here is cache prefetch hints (to read, and to write with
//! `prefetchw`), which change no value, the ownership of the cells' memory (`cells.rs`: a
//! huge-page mapping for large tables), and copies of 16 bytes per instruction where the
//! processor makes that one atomic access (`bulk.rs`, x86-64 with AVX: the same effect as the
//! relaxed loop it replaces; the optimizer's shared-memory kernels copy cache lines that way); `Table` is `Send + Sync` because its fields are, and Miri checks
//! the tests (`make miri`).
//!
//! # Layout
//!
//! A table of `rows` rows of `dim` weights keeps each row's weights and their optimizer slots
//! together: row `r` occupies `stride = dim * (1 + slots)` consecutive elements, the `dim` weights
//! first, then slot 0 for each weight, then slot 1, and so on. An update of a row therefore touches
//! `stride * 4` consecutive bytes (two or three cache lines for dim 10 with AdamAsync) instead of one
//! random line per separate slot table, and a forward pass reads the weights alone, which lead the row.
//! There is one copy of every table; threads keep only small scratch buffers.
//!
//! Per-table scalars (AdamAsync's beta powers) are atomics too, advanced with a compare-and-swap loop
//! so no advance is lost when threads finish steps at the same time.

use crate::optim::Optimizer;
use crate::rng::{mix64, unit_f32};

mod atomic;
mod bulk;
mod cells;
mod local;
use crate::{Error, Result};
pub use atomic::{
    as_cells, cells_from_raw_parts, AtomicBF16, AtomicF16, AtomicF32, AtomicF64, SharedReal,
};
pub(crate) use bulk::{line_copy, ByCell, LineCopy, Lines};
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) use bulk::{Avx, Avx512, Sse};
use cells::Cells;
pub use local::{LocalRows, SHARED};

/// Most optimizer slots per element a table supports (AdamAsync uses 2).
pub const MAX_SLOTS: usize = 4;

/// One parameter table: `rows` rows of `dim` weights, each row followed by its optimizer slots, and
/// the table's optimizer scalars. See the module documentation for the layout and the sharing rules.
///
/// # Updating a table: one optimizer step
///
/// A model updates a table in steps, each of three calls, from any number of threads at once:
///
/// 1. [`Table::begin`]`(&opt, sparse)` reads the table's optimizer scalars (AdamAsync's beta
///    powers) and computes what the step needs once (AdamAsync's bias-corrected rate). `sparse`
///    says which rule applies, as TensorFlow's dense and sparse optimizer ops differ: `true` for a
///    step that updates the rows an instance uses (embeddings: AdamAsync's lazy sparse rule, or
///    RMSProp with `apply_sparse_rmsprop`), `false` for one that updates every weight it owns
///    (a dense layer: Nesterov momentum applies when asked).
/// 2. [`Table::update_row`]`(&opt, &step, row, grad, scale)` applies the rule to one row with
///    gradient `scale * grad`, as many rows and times as the step needs ([`Table::update_runs`]
///    for parts of a wide row). Each element's read-modify-write is Hogwild's: another thread's
///    concurrent update of the same element may be lost, none is torn.
/// 3. [`Table::finish`]`(&opt, sparse, touched)` ends the step and advances the scalars once,
///    however many threads finish steps at the same time. `touched` is the rows (or elements)
///    the step updated: a step that touched nothing (`touched = 0`) leaves AdamAsync's powers
///    where they are, as DeepRec's sparse op does for an empty gradient.
///
/// A model's batch is typically one step per table (the built-in models' is), so the scalars
/// advance once per batch, as a TensorFlow graph's do once per `minimize`.
///
/// ```
/// use hogwild::optim::AdamAsync;
/// use hogwild::Table;
///
/// let opt = AdamAsync::new(0.1f32, 0.9, 0.999, 1e-8);
/// let table = Table::new("embedding", 4, 2, &opt)?; // 4 rows of 2 weights (+ m, v slots)
/// assert_eq!((table.stride(), table.scalars()), (6, vec![0.9, 0.999]));
/// let step = table.begin(&opt, true)?;
/// table.update_row(&opt, &step, 3, &[1.0, -1.0], 1.0); // row 3 only: a lazy sparse update
/// table.finish(&opt, true, 1);
/// let mut row = [0.0f32; 2];
/// table.read_weights(3, &mut row);
/// assert!(row[0] < 0.0 && row[1] > 0.0); // moved against the gradient
/// table.read_weights(0, &mut row);
/// assert_eq!(row, [0.0, 0.0]); // untouched
/// assert!((table.scalars()[0] - 0.81).abs() < 1e-6); // beta1_power advanced once
/// # Ok::<(), hogwild::Error>(())
/// ```
#[derive(Debug)]
pub struct Table {
    name: String,
    rows: usize,
    dim: usize,
    slots: usize,
    stride: usize,
    data: Cells,
    scalars: Box<[AtomicF32]>,
    /// The row a fresh table holds everywhere (see [`Table::fill`]).
    fill: Box<[f32]>,
    /// Rows given to [`Table::prefer_base_pages`], which [`Table::touch_to_write`] touches.
    base_page_rows: std::ops::Range<usize>,
    /// How the model drew the rows' initial weights, when it did ([`Table::set_drawn`]).
    drawn: Option<Drawn>,
}

/// Initial weights drawn from a seeded generator: weights `from..dim` of row `r` uniform in
/// `[-scale, scale]`, from a stream seeded by `seed` and `r` alone. Any row's start can so be
/// drawn again at any time, which lets a checkpoint store only the rows training moved from it:
/// a hashed factor table of which a small data set uses a few hundred rows saves as those rows,
/// not as every row (`checkpoint.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drawn {
    /// The generator's seed.
    pub seed: u64,
    /// The half-width of the uniform range.
    pub scale: f32,
    /// The first weight drawn in a row (those before it start at zero).
    pub from: usize,
}

impl Drawn {
    /// Draws row `r`'s weights into `weights[from..]`; the others are left as they are.
    #[inline]
    pub fn draw(&self, r: usize, weights: &mut [f32]) {
        let mut s = mix64(self.seed ^ r as u64);
        for x in weights.iter_mut().skip(self.from) {
            s = mix64(s);
            *x = (unit_f32(s) * 2.0 - 1.0) * self.scale;
        }
    }
}

impl Table {
    /// A table for optimizer `opt`: weights zero, slots as the optimizer stores its initial values
    /// ([`Optimizer::slot_fill`]; zero for SGD, Adagrad and AdamAsync, so that the table's pages
    /// are first touched by training, in parallel, not by a pass here), scalars initialised by the
    /// optimizer.
    pub fn new<O: Optimizer<f32>>(name: &str, rows: usize, dim: usize, opt: &O) -> Result<Self> {
        let mut scalars = vec![0.0f32; O::SCALARS];
        opt.init_scalars(&mut scalars);
        let mut table = Self::with_layout(name, rows, dim, O::SLOTS, &scalars)?;
        let fill: Vec<f32> = (0..1 + O::SLOTS)
            .flat_map(|s| {
                let init = if s == 0 { 0.0 } else { opt.slot_fill(s - 1) };
                std::iter::repeat_n(init, dim)
            })
            .collect();
        table.fill_with(&fill);
        Ok(table)
    }

    /// Sets every row of a fresh table to `fill` (a row of [`Table::stride`] elements), which
    /// becomes the table's [`Table::fill`]. A zero row writes nothing: a fresh table's memory is
    /// zero already, and writing it would touch every page.
    pub(crate) fn fill_with(&mut self, fill: &[f32]) {
        assert_eq!(fill.len(), self.stride, "a fill row of {}", self.stride);
        let table = &*self;
        if fill.iter().any(|x| x.to_bits() != 0) {
            in_row_ranges(self.rows, |range| {
                for r in range {
                    bulk::store(table.row(r), fill);
                }
            });
        }
        self.fill = fill.into();
    }

    /// A zero-filled table with `slots` slots per weight and the given scalars (used when loading).
    pub fn with_layout(
        name: &str,
        rows: usize,
        dim: usize,
        slots: usize,
        scalars: &[f32],
    ) -> Result<Self> {
        if rows == 0 || dim == 0 {
            return Err(Error::InvalidTable {
                table: name.to_string(),
                reason: format!("needs at least one row and one column, got {rows} x {dim}"),
            });
        }
        if slots > MAX_SLOTS {
            return Err(Error::InvalidTable {
                table: name.to_string(),
                reason: format!(
                    "{slots} optimizer slots per weight, at most {MAX_SLOTS} supported"
                ),
            });
        }
        let stride = dim * (1 + slots);
        let len = rows
            .checked_mul(stride)
            .ok_or_else(|| Error::InvalidTable {
                table: name.to_string(),
                reason: format!("{rows} x {stride} elements overflow the address space"),
            })?;
        let data = Cells::zeroed(len).ok_or_else(|| Error::InvalidTable {
            table: name.to_string(),
            reason: format!(
                "cannot allocate {rows} x {stride} elements ({:.1} GiB)",
                len as f64 * 4.0 / (1u64 << 30) as f64
            ),
        })?;
        Ok(Self {
            name: name.to_string(),
            rows,
            dim,
            slots,
            stride,
            data,
            scalars: scalars.iter().map(|&x| AtomicF32::new(x)).collect(),
            fill: vec![0.0; stride].into(),
            base_page_rows: 0..0,
            drawn: None,
        })
    }

    /// Records that the rows' weights start as `drawn` draws them over the fill row (their
    /// slots as the fill row's); [`Table::write_drawn`] writes them.
    pub fn set_drawn(&mut self, drawn: Drawn) {
        assert!(drawn.from <= self.dim, "drawn from weight {}", drawn.from);
        self.drawn = Some(drawn);
    }

    /// How the rows' initial weights were drawn ([`Table::set_drawn`]), if they were.
    pub fn drawn(&self) -> Option<&Drawn> {
        self.drawn.as_ref()
    }

    /// Writes every row's drawn weights ([`Table::set_drawn`]; nothing without), in parallel.
    pub fn write_drawn(&self) {
        let Some(drawn) = self.drawn else { return };
        in_row_ranges(self.rows, |range| {
            let mut weights = self.fill[..self.dim].to_vec();
            for r in range {
                drawn.draw(r, &mut weights);
                self.write_weights(r, &weights);
            }
        });
    }

    /// Row `row` as the table started: the fill row with the drawn weights, if any.
    pub fn start_row(&self, row: usize, out: &mut [f32]) {
        out[..self.stride].copy_from_slice(&self.fill);
        if let Some(drawn) = &self.drawn {
            drawn.draw(row, &mut out[..self.dim]);
        }
    }

    /// Backs rows `rows` with base pages instead of huge pages (call it before they are touched;
    /// small tables are unaffected). For a large region of wide rows that training touches
    /// sparsely, such as hashed bigram buckets at dim 100: a huge page is zeroed whole at its
    /// first touch, so a small data set touching a few rows in each of 400 huge pages zeroes all
    /// 800 MB of them (seconds on a VM), while with base pages it zeroes only the 4 KiB pages it
    /// uses. Narrow rows keep huge pages, where the page walks saved matter more.
    /// Their first touch should then be a write ([`Table::touch_to_write`]).
    pub fn prefer_base_pages(&mut self, rows: std::ops::Range<usize>) {
        let rows = rows.start.min(self.rows)..rows.end.min(self.rows);
        self.data
            .prefer_base_pages(rows.start * self.stride..rows.end * self.stride);
        self.base_page_rows = rows;
    }

    /// The table's name (used in checkpoints and error messages).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Weights per row.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Optimizer slots per weight.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// Elements per row: the weights and their slots.
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// Number of optimizer scalars.
    pub fn num_scalars(&self) -> usize {
        self.scalars.len()
    }
    /// Bytes held by the weights, slots and scalars.
    pub fn memory_bytes(&self) -> usize {
        (self.data.len() + self.scalars.len()) * std::mem::size_of::<AtomicF32>()
    }

    /// The row a fresh table holds everywhere: zero weights and the slots' fresh values
    /// ([`Table::new`]), zeros ([`Table::with_layout`]), or a loaded checkpoint's. Models that
    /// draw their initial weights write them over it ([`Table::set_drawn`]). Checkpoints list
    /// only the rows that differ from their start ([`Table::start_row`]) when that is smaller
    /// than writing every row.
    pub fn fill(&self) -> &[f32] {
        &self.fill
    }

    /// All elements, row after row (weights then slots); for checkpoints.
    pub fn elements(&self) -> &[AtomicF32] {
        &self.data
    }

    /// Row `row`'s weights and slots (panics when `row >= rows`; callers check ids first).
    #[inline(always)]
    pub fn row(&self, row: usize) -> &[AtomicF32] {
        &self.data[row * self.stride..(row + 1) * self.stride]
    }

    /// Row `row`'s weights alone.
    #[inline(always)]
    pub fn weights(&self, row: usize) -> &[AtomicF32] {
        let start = row * self.stride;
        &self.data[start..start + self.dim]
    }

    /// Copies row `row`'s weights into `out`, as many as fit (`dim` when `out` is that long).
    #[inline]
    pub fn read_weights(&self, row: usize, out: &mut [f32]) {
        let n = self.dim.min(out.len());
        bulk::load(&self.weights(row)[..n], &mut out[..n]);
    }

    /// Copies row `row`'s weights and slots ([`Table::stride`] elements) into `out`.
    #[inline]
    pub fn read_row(&self, row: usize, out: &mut [f32]) {
        bulk::load(self.row(row), &mut out[..self.stride]);
    }

    /// Writes the elements `runs` of row `row`'s weights, and the same elements of each slot,
    /// from `values` (a whole row as [`Table::read_row`] reads it); the other elements are left
    /// alone. For a row read, stepped outside the store and written back: an update of one of
    /// the runs by another thread in between is lost, as with any Hogwild step.
    #[inline]
    pub fn write_runs(&self, row: usize, values: &[f32], runs: &[std::ops::Range<usize>]) {
        let cells = self.row(row);
        for run in runs {
            for s in 0..=self.slots {
                let range = s * self.dim + run.start..s * self.dim + run.end;
                bulk::store(&cells[range.clone()], &values[range]);
            }
        }
    }

    /// Writes row `row`'s weights and slots from `values`.
    #[inline]
    pub fn write_row(&self, row: usize, values: &[f32]) {
        bulk::store(self.row(row), &values[..self.stride]);
    }

    /// Writes row `row`'s weights from `values`, as many as it holds (`dim` when it is that
    /// long); slots are left alone.
    #[inline]
    pub fn write_weights(&self, row: usize, values: &[f32]) {
        let n = self.dim.min(values.len());
        bulk::store(&self.weights(row)[..n], &values[..n]);
    }

    /// Asks the CPU to start fetching the cache lines of row `row`'s weights, so that a read a
    /// little later finds them in cache instead of waiting on memory (panics when `row >= rows`).
    /// Random rows of a table much larger than the cache cost a memory latency each; a model that
    /// knows its next rows (word2vec's next pairs, a CTR model's next instance) prefetches them
    /// while it computes on the current ones. A hint only: it reads and writes nothing.
    #[inline(always)]
    pub fn prefetch_weights(&self, row: usize) {
        self.for_each_line(row, prefetch);
    }

    /// [`Table::prefetch_weights`] for the whole row, its optimizer slots too: for a row that
    /// will be read and then stepped by the optimizer ([`Table::update_runs`]).
    #[inline(always)]
    pub fn prefetch_row(&self, row: usize) {
        let cells = self.row(row);
        for cell in cells.iter().step_by(16).chain(cells.last()) {
            prefetch(cell);
        }
    }

    /// [`Table::prefetch_weights`] for a row about to be written: the lines are asked for with
    /// the intent to write (`prefetchw` on x86-64), so they arrive owned by this core and the
    /// write does not wait for the other cores to give up their copies. A row that two threads
    /// keep training otherwise crosses between them twice per update, once to be read and once
    /// to be owned; on a two-core VM whose cores sit far apart (a round trip of 310 ns instead
    /// of 60) that doubled cost was a 2-thread word2vec epoch's largest (docs/benchmarks.md).
    #[inline(always)]
    pub fn prefetch_weights_to_write(&self, row: usize) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if *HAS_PREFETCHW {
            self.for_each_line(row, prefetchw);
            return;
        }
        self.prefetch_weights(row);
    }

    /// Calls `f` on one element of each cache line of row `row`'s weights.
    #[inline(always)]
    fn for_each_line(&self, row: usize, f: impl Fn(&AtomicF32)) {
        let weights = self.weights(row);
        // One element per 64-byte line (16 elements), and the last element, whose line the
        // stride may miss when the row does not start on a line boundary.
        for cell in weights.iter().step_by(16).chain(weights.last()) {
            f(cell);
        }
    }

    /// For a row about to be read and then updated: when it lies among the rows given to
    /// [`Table::prefer_base_pages`], writes every memory page of its weights without changing a
    /// value, one atomic write per 4 KiB the row spans ([`AtomicF32::touch_to_write`]); other rows
    /// are left alone. A base page read first is mapped to the kernel's shared zero page and
    /// faults again at the first write, which also flushes it from the other cores' TLBs; a page
    /// written first faults once. Huge pages fault once per 2 MiB, where the touch measured as
    /// pure cost (bag-of-words at dim 10, bbc: 0.15 s without, 0.18-0.19 s with). Values and
    /// concurrent updates are unaffected (each touch rewrites what the cell holds, atomically).
    #[inline(always)]
    pub fn touch_to_write(&self, row: usize) {
        /// The smallest base page of the platforms Linux runs on.
        const PAGE_CELLS: usize = (4 << 10) / std::mem::size_of::<AtomicF32>();
        if !self.base_page_rows.contains(&row) {
            return;
        }
        let weights = self.weights(row);
        let Some(first) = weights.first() else {
            return;
        };
        first.touch_to_write();
        // The first cell of each later page (cells are 4-byte aligned, so pages start on cells).
        let into_page = weights.as_ptr() as usize % (4 << 10) / std::mem::size_of::<AtomicF32>();
        for cell in weights
            .iter()
            .skip(PAGE_CELLS - into_page)
            .step_by(PAGE_CELLS)
        {
            cell.touch_to_write();
        }
    }

    /// `out += scale * weights(row)`.
    #[inline(always)]
    pub fn add_weights_to(&self, row: usize, scale: f32, out: &mut [f32]) {
        let n = self.dim.min(out.len());
        bulk::add_to(&self.weights(row)[..n], scale, &mut out[..n]);
    }

    /// The dot product of row `row`'s weights with `x`.
    #[inline(always)]
    pub fn dot(&self, row: usize, x: &[f32]) -> f32 {
        let n = self.dim.min(x.len());
        bulk::dot(&self.weights(row)[..n], &x[..n])
    }

    /// The current scalars.
    pub fn scalars(&self) -> Vec<f32> {
        self.scalars.iter().map(AtomicF32::load).collect()
    }

    /// Overwrites the scalars (length must match).
    pub fn set_scalars(&self, values: &[f32]) -> Result<()> {
        if values.len() != self.scalars.len() {
            return Err(Error::ShapeMismatch {
                what: format!("scalars of table {}", self.name),
                expected: self.scalars.len().to_string(),
                got: values.len().to_string(),
            });
        }
        for (s, &v) in self.scalars.iter().zip(values) {
            s.store(v);
        }
        Ok(())
    }

    /// Checks that `opt`'s state fits this table's layout.
    pub fn check_optimizer<O: Optimizer<f32>>(&self) -> Result<()> {
        if O::SLOTS != self.slots || O::SCALARS != self.scalars.len() {
            return Err(Error::ShapeMismatch {
                what: format!("optimizer state of table {}", self.name),
                expected: format!("{} slots and {} scalars", O::SLOTS, O::SCALARS),
                got: format!("{} slots and {} scalars", self.slots, self.scalars.len()),
            });
        }
        Ok(())
    }

    /// Starts an optimizer step: reads the scalars and computes the per-step values (see
    /// [Updating a table](Table#updating-a-table-one-optimizer-step)). `sparse` picks the
    /// optimizer's sparse rule (rows an instance uses) or its dense one (every weight).
    #[inline]
    pub fn begin<O: Optimizer<f32>>(&self, opt: &O, sparse: bool) -> Result<O::Step> {
        let mut scalars = [0.0f32; MAX_SLOTS];
        for (s, cell) in scalars.iter_mut().zip(self.scalars.iter()) {
            *s = cell.load();
        }
        opt.begin(&scalars[..self.scalars.len()], sparse)
    }

    /// Applies `opt`'s rule to row `row` with gradient `scale * grad` (`dim` long): each weight and
    /// its slots are loaded into locals, updated, and stored back (plain SGD's rule 16 bytes at a
    /// time where the processor allows, `bulk::sgd_step`: the same arithmetic, the same bits).
    #[inline(always)]
    pub fn update_row<O: Optimizer<f32>>(
        &self,
        opt: &O,
        step: &O::Step,
        row: usize,
        grad: &[f32],
        scale: f32,
    ) {
        let cells = self.row(row);
        if let Some(lr) = opt.plain_lr(step) {
            bulk::sgd_step(&cells[..self.dim], &grad[..self.dim], scale, lr);
            return;
        }
        step_row(
            opt,
            step,
            self.dim,
            &grad[..self.dim],
            scale,
            |i| cells[i].load(),
            |i, x| cells[i].store(x),
        );
    }

    /// Applies `opt`'s rule to the weights `runs` of row `row` (and their slots) with gradient
    /// `grad` (`dim` long, read at the runs), as [`Table::update_row`] does to a whole row: for
    /// models whose instances touch a few runs of a wide row (a field-aware factorization
    /// machine's factor blocks), which leaves the other elements and their slots as they are
    /// (a lazy sparse update, as for rows no instance touches). The row's weights and slots are
    /// copied into `scratch` (at least [`Table::stride`] long; 16 bytes per access, as
    /// `read_weights` does), stepped there as plain floats, several at a time
    /// ([`Optimizer::elements`]), and the runs copied back: the element rule's arithmetic and
    /// bits, with the loads and stores of a row grouped (a concurrent update in between can be
    /// lost, as with any Hogwild step).
    #[inline(always)]
    pub fn update_runs<O: Optimizer<f32>>(
        &self,
        opt: &O,
        step: &O::Step,
        row: usize,
        grad: &[f32],
        runs: &[std::ops::Range<usize>],
        scratch: &mut [f32],
    ) {
        let cells = self.row(row);
        let dim = self.dim;
        if let Some(lr) = opt.plain_lr(step) {
            for run in runs {
                bulk::sgd_step(&cells[run.clone()], &grad[run.clone()], 1.0, lr);
            }
            return;
        }
        let buf = &mut scratch[..self.stride];
        bulk::load(cells, buf);
        step_runs(opt, step, dim, buf, grad, runs);
        self.write_runs(row, buf, runs);
    }

    /// Ends an optimizer step that touched `touched` rows or elements (0: the step changed nothing,
    /// and AdamAsync's powers stay where they are; `sparse` as given to [`Table::begin`]):
    /// advances the scalars with a
    /// compare-and-swap loop per scalar, so concurrent steps each advance them once. Each scalar's new
    /// value may depend on the scalars' current values (all of AdamAsync's do on their own only).
    pub fn finish<O: Optimizer<f32>>(&self, opt: &O, sparse: bool, touched: usize) {
        let n = self.scalars.len();
        if n == 0 {
            return;
        }
        for i in 0..n {
            self.scalars[i].update(|old_i| {
                let mut current = [0.0f32; MAX_SLOTS];
                for (j, (c, cell)) in current.iter_mut().zip(self.scalars.iter()).enumerate() {
                    *c = if j == i { old_i } else { cell.load() };
                }
                opt.finish(&mut current[..n], sparse, touched);
                current[i]
            });
        }
    }
}

/// Element `i` of a row of `dim` weights laid out as a table's (the weights, then each slot's
/// `dim` values) as `opt` reads it: a weight as stored, a slot through
/// [`Optimizer::slot_value`]. For code that copies a row out and adds its changes back (a
/// worker's private copies), so that a slot's stored stand-in is counted once.
#[inline(always)]
pub(crate) fn element_value<O: Optimizer<f32>>(opt: &O, dim: usize, i: usize, stored: f32) -> f32 {
    if i < dim {
        stored
    } else {
        opt.slot_value(i / dim - 1, stored)
    }
}

/// Applies `opt`'s rule with gradient `scale * grad` to the first `grad.len()` weights of one
/// row laid out as a table's (`dim` weights, then each slot's `dim` values), reached through
/// `load` and `store` by element index: each weight and its slots are loaded into locals,
/// updated, and stored back ([`Table::update_row`]): the arithmetic, and so the bits, of
/// [`step_runs`] on a worker's private copy ([`LocalRows::update_row`]).
#[inline(always)]
pub(crate) fn step_row<O: Optimizer<f32>>(
    opt: &O,
    step: &O::Step,
    dim: usize,
    grad: &[f32],
    scale: f32,
    load: impl Fn(usize) -> f32,
    store: impl Fn(usize, f32),
) {
    let mut slots = [0.0f32; MAX_SLOTS];
    for (i, &g) in grad.iter().enumerate() {
        let mut w = load(i);
        for (s, v) in slots.iter_mut().enumerate().take(O::SLOTS) {
            *v = load(dim * (1 + s) + i);
        }
        opt.element(step, &mut w, &mut slots[..O::SLOTS], g * scale);
        store(i, w);
        for (s, &v) in slots.iter().enumerate().take(O::SLOTS) {
            store(dim * (1 + s) + i, v);
        }
    }
}

/// Applies `opt`'s rule to the elements `runs` of one row held as plain floats, laid out as a
/// table's (`dim` weights, then each slot's `dim` values), with gradient `grad` (`dim` long,
/// read at the runs): [`Optimizer::elements`] on each run. The shared rows
/// ([`Table::update_runs`]) and a worker's private copies ([`LocalRows::update_runs`]) both step
/// through here, so that they give the same bits.
#[inline(always)]
pub(crate) fn step_runs<O: Optimizer<f32>>(
    opt: &O,
    step: &O::Step,
    dim: usize,
    row: &mut [f32],
    grad: &[f32],
    runs: &[std::ops::Range<usize>],
) {
    let (weights, slots) = row[..dim * (1 + O::SLOTS)].split_at_mut(dim);
    for run in runs {
        let (w, g) = (&mut weights[run.clone()], &grad[run.clone()]);
        // Without slots (SGD) the slice is empty.
        let slots = &mut slots[run.start.min(dim * O::SLOTS)..];
        opt.elements(step, w, slots, dim, g);
    }
}

/// Runs `f` over `0..rows` split into one contiguous range per thread of rayon's pool (one per
/// core unless `RAYON_NUM_THREADS` says otherwise; ranges of at least 2^16 rows: a smaller table
/// is one range, run on this thread). For filling a table whose rows are computed independently,
/// so that the result does not depend on the split: writing every row of a table much larger
/// than the cache is memory-bound, and the first write of each page also pays for the kernel
/// zeroing it.
pub(crate) fn in_row_ranges(rows: usize, f: impl Fn(std::ops::Range<usize>) + Sync) {
    map_ranges(rows, 1 << 16, f);
}

/// Runs `f` over `0..n` split into one contiguous range per thread of rayon's pool (ranges of at
/// least `min`) and returns the results in the ranges' order.
pub(crate) fn map_ranges<T: Send>(
    n: usize,
    min: usize,
    f: impl Fn(std::ops::Range<usize>) -> T + Sync,
) -> Vec<T> {
    in_ranges(n, min, rayon::current_num_threads(), f)
}

/// [`map_ranges`] with at most `threads` ranges. The split is fixed (equal contiguous ranges, not
/// rayon's adaptive splitting) so that each range is one long sequential pass over memory and a
/// checkpoint part is one run of the file. This thread runs the first range itself, as a
/// blocked caller would waste a core, and rayon's pool the others, on threads that outlive the
/// call instead of threads spawned per call.
fn in_ranges<T: Send>(
    n: usize,
    min: usize,
    threads: usize,
    f: impl Fn(std::ops::Range<usize>) -> T + Sync,
) -> Vec<T> {
    let threads = threads.min(n.div_ceil(min.max(1))).max(1);
    let range = |t: usize| t * n / threads..(t + 1) * n / threads;
    if threads == 1 {
        return vec![f(range(0))];
    }
    let mut results: Vec<Option<T>> = (0..threads).map(|_| None).collect();
    let (first, others) = results.split_at_mut(1);
    let (f, range) = (&f, &range);
    // A panic in `f` is a bug of the caller's: the scope propagates it to this thread once every
    // range has ended.
    rayon::in_place_scope(|s| {
        for (t, slot) in others.iter_mut().enumerate() {
            s.spawn(move |_| *slot = Some(f(range(t + 1))));
        }
        first[0] = Some(f(range(0)));
    });
    results
        .into_iter()
        .map(|r| r.expect("the scope ran every range"))
        .collect()
}

/// The memory the kernel says is available for new allocations (`MemAvailable` in
/// `/proc/meminfo`), if it says.
pub fn available_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Prefetches the cache line holding `value` into every cache level (a no-op off x86-64 and
/// under Miri, which does not model caches).
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `_mm_prefetch` is a hint that never faults and neither reads nor writes memory in
    // the language's sense (it changes no value and cannot race); the pointer comes from a live
    // reference, and SSE, the intrinsic's only requirement, is part of the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = value;
}

/// Prefetches the cache line holding `value` to be written (`prefetchw`). Callers check
/// [`HAS_PREFETCHW`] first, once per row.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn prefetchw<T>(value: &T) {
    // SAFETY: the callers checked that the processor has `prefetchw` (`HAS_PREFETCHW`). Like
    // `_mm_prefetch` it is a hint that never faults and neither reads nor writes memory in the
    // language's sense (it moves a cache line, changing no value), hence `readonly`; the pointer
    // comes from a live reference.
    unsafe {
        std::arch::asm!(
            "prefetchw byte ptr [{p}]",
            p = in(reg) std::ptr::from_ref(value),
            options(nostack, preserves_flags, readonly),
        );
    }
}

/// Whether the processor has `prefetchw`: CPUID leaf 0x8000_0001, ECX bit 8 (`PRFCHW`, named
/// 3DNowPrefetch on AMD), which Intel and AMD processors both report.
#[cfg(all(target_arch = "x86_64", not(miri)))]
static HAS_PREFETCHW: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    use std::arch::x86_64::{__cpuid, CpuidResult};
    // SAFETY: `cpuid` exists on every x86-64 processor and only reads identification registers
    // (the intrinsic is safe to call from Rust 1.89 on, hence the `allow`).
    #[allow(unused_unsafe)]
    let leaf = |n: u32| -> CpuidResult { unsafe { __cpuid(n) } };
    leaf(0x8000_0000).eax >= 0x8000_0001 && leaf(0x8000_0001).ecx & (1 << 8) != 0
});

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::optim::{apply_sparse, Adagrad, AdamAsync, Sgd, SlotState};
    use approx::assert_relative_eq;

    /// The store's rule on shared rows gives the same bits as the slice kernel `apply_sparse`.
    fn same_as_slices<O: Optimizer<f32>>(opt: O) {
        let (rows, dim) = (3, 4);
        let table = Table::new("t", rows, dim, &opt).unwrap();
        let mut var = vec![0.0f32; rows * dim];
        for r in 0..rows {
            let w: Vec<f32> = (0..dim)
                .map(|i| (r * dim + i) as f32 * 0.25 - 1.0)
                .collect();
            table.write_weights(r, &w);
            var[r * dim..(r + 1) * dim].copy_from_slice(&w);
        }
        let mut state = SlotState::new(&opt, var.len());
        let grads: [(usize, [f32; 4]); 3] = [
            (2, [0.5, -0.25, 1.0, 0.0]),
            (0, [0.1, 0.2, 0.3, 0.4]),
            (2, [-1.0, 0.5, 0.25, 2.0]),
        ];
        for (row, g) in grads {
            apply_sparse(&opt, &mut var, &mut state, &g, &[row], dim).unwrap();
            let step = table.begin(&opt, true).unwrap();
            table.update_row(&opt, &step, row, &g, 1.0);
            table.finish(&opt, true, 1);
        }
        let mut got = vec![0.0f32; dim];
        for r in 0..rows {
            table.read_weights(r, &mut got);
            assert_eq!(&got[..], &var[r * dim..(r + 1) * dim], "row {r}");
            for s in 0..O::SLOTS {
                for i in 0..dim {
                    let cell = opt.slot_value(s, table.row(r)[dim * (1 + s) + i].load());
                    assert_eq!(cell, state.slots[(r * dim + i) * O::SLOTS + s]);
                }
            }
        }
        assert_eq!(table.scalars(), state.scalars);
    }

    #[test]
    fn sgd_rows_match_slice_kernel() {
        same_as_slices(Sgd { lr: 0.1f32 });
    }

    #[test]
    fn adagrad_rows_match_slice_kernel() {
        same_as_slices(Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        });
    }

    #[test]
    fn adam_async_rows_match_slice_kernel() {
        same_as_slices(AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8));
    }

    /// `update_runs` gives each element of the runs the element rule's bits (twice, so that the
    /// stepped slots are read back) and leaves every other weight and slot as it was stored.
    fn runs_step_like_elements<O: Optimizer<f32>>(opt: O) {
        let dim = 6;
        let t = Table::new("t", 2, dim, &opt).unwrap();
        let start: Vec<f32> = (0..dim).map(|i| i as f32 * 0.3 - 0.7).collect();
        t.write_weights(1, &start);
        let grad = [0.5, -1.0, 0.25, 2.0, -0.5, 0.125];
        let runs = [0..2, 3..5];
        let mut scratch = vec![0.0f32; t.stride()];
        for _ in 0..2 {
            let step = t.begin(&opt, true).unwrap();
            t.update_runs(&opt, &step, 1, &grad, &runs, &mut scratch);
            t.finish(&opt, true, 1);
        }
        let step = t.begin(&opt, true).unwrap();
        let row: Vec<f32> = t.row(1).iter().map(AtomicF32::load).collect();
        for i in 0..dim {
            let stepped = runs.iter().any(|r| r.contains(&i));
            let (mut w, mut slots) = (start[i], [0.0f32; MAX_SLOTS]);
            for (s, x) in slots.iter_mut().enumerate().take(O::SLOTS) {
                *x = opt.slot_fill(s);
            }
            if stepped {
                for _ in 0..2 {
                    opt.element(&step, &mut w, &mut slots[..O::SLOTS], grad[i]);
                }
            }
            assert_eq!(row[i].to_bits(), w.to_bits(), "weight {i}");
            for (s, x) in slots.iter().enumerate().take(O::SLOTS) {
                assert_eq!(
                    row[dim * (1 + s) + i].to_bits(),
                    x.to_bits(),
                    "slot {s} of {i}"
                );
            }
        }
    }

    #[test]
    fn runs_of_a_row_step_like_its_elements() {
        runs_step_like_elements(Sgd { lr: 0.1f32 });
        runs_step_like_elements(Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        });
        let mut rms = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
        rms.apply_sparse_rmsprop = true;
        runs_step_like_elements(rms);
    }

    #[test]
    fn layout_interleaves_weights_and_slots_per_row() {
        let opt = Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.5,
        };
        let t = Table::new("emb", 2, 3, &opt).unwrap();
        assert_eq!((t.stride(), t.slots(), t.elements().len()), (6, 1, 12));
        t.write_weights(1, &[1.0, 2.0, 3.0]);
        let row: Vec<f32> = t.row(1).iter().map(AtomicF32::load).collect();
        // A fresh accumulator stores zero, which Adagrad reads as its initial 0.5.
        assert_eq!(row, vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        assert_eq!(opt.slot_value(0, row[3]), 0.5);
        let step = t.begin(&opt, true).unwrap();
        t.update_row(&opt, &step, 1, &[1.0, 0.0, -2.0], 1.0);
        let row: Vec<f32> = t.row(1).iter().map(AtomicF32::load).collect();
        assert_eq!(&row[3..], &[1.5, 0.5, 4.5]);
        assert_eq!(t.memory_bytes(), 12 * 4);
    }

    #[test]
    fn bad_layouts_are_refused() {
        let e = Table::with_layout("emb", 0, 3, 0, &[]).unwrap_err();
        assert!(e.to_string().contains("table emb"), "{e}");
        let e = Table::with_layout("emb", 2, 3, MAX_SLOTS + 1, &[]).unwrap_err();
        assert!(e.to_string().contains("optimizer slots"), "{e}");
        let t = Table::with_layout("emb", 2, 3, 0, &[]).unwrap();
        assert!(t.check_optimizer::<AdamAsync<f32>>().is_err());
        assert!(t.set_scalars(&[1.0]).is_err());
        let e = Table::with_layout("emb", usize::MAX / 2, 3, 0, &[]).unwrap_err();
        assert!(e.to_string().contains("overflow the address space"), "{e}");
        if !cfg!(miri) {
            // 2^40 rows of 64: 256 TiB, more than any machine maps.
            let e = Table::with_layout("emb", 1 << 40, 64, 0, &[]).unwrap_err();
            assert!(
                e.to_string().contains("table emb") && e.to_string().contains("cannot allocate"),
                "{e}"
            );
        }
    }

    // The powers after k finished steps are beta^(k+1): 0.9^(1+2*50) and 0.999^(1+2*50), from
    // numpy: `np.float32(0.9) ** 101`, computed here in f32 by repeated multiplication instead.
    #[test]
    fn concurrent_finishes_advance_powers_once_each() {
        let opt = AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8);
        let table = Table::new("t", 1, 1, &opt).unwrap();
        let steps = if cfg!(miri) { 5 } else { 50 };
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..steps {
                        table.finish(&opt, true, 1);
                    }
                });
            }
        });
        let (mut b1, mut b2) = (0.9f32, 0.999f32);
        for _ in 0..2 * steps {
            b1 *= 0.9;
            b2 *= 0.999;
        }
        let got = table.scalars();
        assert_eq!(got, vec![b1, b2]);
    }

    // Two threads update disjoint rows concurrently and one shared row: disjoint rows end exactly
    // where a single thread would put them; the shared row moved (some updates may be lost).
    #[test]
    fn concurrent_updates_are_defined_and_disjoint_rows_exact() {
        let opt = Sgd { lr: 0.5f32 };
        let table = Table::new("t", 3, 2, &opt).unwrap();
        let steps = if cfg!(miri) { 4 } else { 200 };
        std::thread::scope(|s| {
            for t in 0..2usize {
                let table = &table;
                let opt = &opt;
                s.spawn(move || {
                    for _ in 0..steps {
                        let step = table.begin(opt, true).unwrap();
                        table.update_row(opt, &step, t, &[1.0, -1.0], 1.0);
                        table.update_row(opt, &step, 2, &[1.0, 1.0], 0.5);
                        let mut seen = [0.0f32; 2];
                        table.read_weights(2, &mut seen);
                        assert!(seen[0] <= 0.0);
                    }
                });
            }
        });
        let mut got = [0.0f32; 2];
        for t in 0..2 {
            table.read_weights(t, &mut got);
            assert_relative_eq!(got[0], -0.5 * steps as f32);
            assert_relative_eq!(got[1], 0.5 * steps as f32);
        }
        table.read_weights(2, &mut got);
        assert!(
            got[0] < 0.0 && got[0] >= -0.25 * 2.0 * steps as f32,
            "{got:?}"
        );
    }

    // A prefetch is only a hint: rows of every width (shorter than a line, spanning lines) keep
    // their values, and a row past the end is refused like any other access.
    #[test]
    fn prefetch_changes_nothing_and_checks_the_row() {
        for dim in [1, 3, 16, 17, 100] {
            let t = Table::with_layout("t", 3, dim, 1, &[]).unwrap();
            let values: Vec<f32> = (0..dim).map(|i| i as f32 - 2.5).collect();
            t.write_weights(1, &values);
            for r in 0..3 {
                t.prefetch_weights(r);
                t.prefetch_weights_to_write(r);
            }
            let mut got = vec![0.0f32; dim];
            t.read_weights(1, &mut got);
            assert_eq!(got, values, "dim {dim}");
        }
        let t = Table::with_layout("t", 2, 4, 0, &[]).unwrap();
        let out_of_range = std::panic::catch_unwind(|| t.prefetch_weights(2));
        assert!(out_of_range.is_err());
        let out_of_range = std::panic::catch_unwind(|| t.prefetch_weights_to_write(2));
        assert!(out_of_range.is_err());
    }

    // A touch writes each cell back as it is, atomically: rows of every width (within a page,
    // across pages) keep their values, and updates racing with touches all land.
    #[test]
    fn touch_to_write_changes_nothing_and_loses_no_update() {
        for dim in [1, 3, 100, 1100, 2500] {
            let mut t = Table::with_layout("t", 3, dim, 0, &[]).unwrap();
            t.prefer_base_pages(0..3);
            let values: Vec<f32> = (0..dim).map(|i| i as f32 - 2.5).collect();
            t.write_weights(1, &values);
            for r in 0..3 {
                t.touch_to_write(r);
            }
            let mut got = vec![0.0f32; dim];
            t.read_weights(1, &mut got);
            assert_eq!(got, values, "dim {dim}");
            t.read_weights(0, &mut got);
            assert!(got.iter().all(|&x| x == 0.0), "dim {dim}");
        }
        let (dim, adds) = (1100, if cfg!(miri) { 3 } else { 200 });
        let mut t = Table::with_layout("t", 1, dim, 0, &[]).unwrap();
        t.prefer_base_pages(0..1);
        let t = t;
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..adds {
                    t.weights(0).iter().for_each(|c| {
                        c.update(|x| x + 1.0);
                    });
                }
            });
            s.spawn(|| {
                for _ in 0..adds {
                    t.touch_to_write(0);
                }
            });
        });
        let mut got = vec![0.0f32; dim];
        t.read_weights(0, &mut got);
        assert!(got.iter().all(|&x| x == adds as f32), "{got:?}");
    }

    /// Minor page faults of the calling thread so far.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn thread_minor_faults() -> i64 {
        // SAFETY: `getrusage` fills the `rusage` it is given, a plain C struct for which zero bits
        // are valid; RUSAGE_THREAD asks for the calling thread's counts.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
            usage
        };
        usage.ru_minflt
    }

    // What the touch is for: in a region of base pages that nothing has touched, a row read and
    // then updated costs two page faults per page (the zero page, then its replacement); touched
    // to write first, one. Rows outside that region are not touched.
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn a_touched_row_faults_once_per_page() {
        let (rows, dim) = (4096, 1024); // 16 MiB: mapped memory, 4 KiB per row
        let mut t = Table::with_layout("t", rows, dim, 0, &[]).unwrap();
        t.prefer_base_pages(0..3000);
        let mut sum = vec![0.0f32; dim];
        let ones = vec![1.0f32; dim];
        let mut faults = |row: usize, touch: bool| {
            let before = thread_minor_faults();
            if touch {
                t.touch_to_write(row);
            }
            t.add_weights_to(row, 1.0, &mut sum);
            t.write_weights(row, &ones);
            thread_minor_faults() - before
        };
        // Once on both paths first, so that the code they run is paged in before anything is
        // counted.
        faults(100, false);
        faults(200, true);
        // Rows in the middle, away from the ends the kernel may back with huge pages; a row spans
        // one or two pages.
        let (read_first, touched_first) = (faults(1500, false), faults(2500, true));
        assert!(
            (1..=2).contains(&touched_first) && read_first == 2 * touched_first,
            "read first: {read_first} faults, touched first: {touched_first}"
        );
        // Outside the base-page rows the touch does nothing: a row there asked to be touched
        // faults as often as one read first (rows 3200 and 3700 lie in different 2 MiB pages, so
        // each is a first touch, huge page or not).
        let (asked, untouched) = (faults(3200, true), faults(3700, false));
        assert_eq!(asked, untouched, "outside the base-page rows");
    }

    #[test]
    fn dot_and_add_read_weights() {
        let t = Table::with_layout("t", 1, 3, 2, &[]).unwrap();
        t.write_weights(0, &[1.0, 2.0, 3.0]);
        assert_eq!(t.dot(0, &[1.0, 1.0, 2.0]), 9.0);
        let mut out = [1.0f32; 3];
        t.add_weights_to(0, 0.5, &mut out);
        assert_eq!(out, [1.5, 2.0, 2.5]);
    }

    // One range per core (rayon's pool, unless the user sets its size), not one per training
    // thread. Not under Miri, nor the next test: rayon's deque (crossbeam-epoch) violates
    // Stacked Borrows (crossbeam-rs/crossbeam#545), and they run no unsafe code of this crate.
    #[test]
    #[cfg_attr(miri, ignore = "rayon's crossbeam-epoch fails Stacked Borrows")]
    fn row_ranges_are_one_per_core() {
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let lens = map_ranges(10 * cores, 1, |range| range.len());
            assert_eq!(lens, vec![10; cores]);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "rayon's crossbeam-epoch fails Stacked Borrows")]
    fn row_ranges_cover_every_row_once() {
        for (rows, min_rows, threads) in
            [(0, 4, 3), (1, 4, 3), (10, 4, 3), (11, 4, 8), (1000, 16, 4)]
        {
            let seen: Vec<AtomicU32> = (0..rows).map(|_| AtomicU32::new(0)).collect();
            let calls = AtomicU32::new(0);
            let starts = in_ranges(rows, min_rows, threads, |range| {
                calls.fetch_add(1, Ordering::Relaxed);
                for r in range.clone() {
                    seen[r].fetch_add(1, Ordering::Relaxed);
                }
                range.start
            });
            assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
            assert!(
                seen.iter().all(|n| n.load(Ordering::Relaxed) == 1),
                "{rows} rows"
            );
            let want = threads.min(rows.div_ceil(min_rows)).max(1);
            assert_eq!(calls.load(Ordering::Relaxed) as usize, want, "{rows} rows");
        }
    }
}
