//! The field-aware factorization machine's arithmetic (Juan et al. 2016, as xLearn trains it).
//!
//! Each feature `i` of field `f_i` has a linear weight `w_i` and one factor vector `v_{i,f}`
//! (`dim` wide) for every field `f`: its row of the table is `[w_i, v_{i,0}, .., v_{i,F-1}]`,
//! the optimizer's slots beside it as the store lays out every row. With the instance's norm
//! `n = 1 / sum_i x_i^2` (xLearn's instance-wise normalization, on by default; `n = 1` with
//! `normalize = false`), the logit is
//! `b + sqrt(n) sum_i x_i w_i + n sum_{i<j} <v_{i,f_j}, v_{j,f_i}> x_i x_j`, and with
//! `g = p - y` a pair `(i, j)` adds `g n x_i x_j v_{j,f_i}` to the gradient of `v_{i,f_j}` (and
//! the mirror image to `v_{j,f_i}`); `w_i` gets `g sqrt(n) x_i`. The L2 penalty applies to the
//! weight and to the factor blocks the instance touched; the other blocks of a row (the fields
//! absent from the instance) and their slots are left as they are, as xLearn leaves them.

use std::ops::Range;

use super::{Ctr, CtrWorker, LocalBias, Steps};
use crate::models::dot;
use crate::optim::Optimizer;
use crate::store::{step_runs, Table, SHARED};

impl<O: Optimizer<f32>> Ctr<O> {
    /// The instance's norm `n`: `1 / sum_i x_i^2` (`V`: the values in `w.xs`, otherwise 1
    /// each), 1 without normalization or without features.
    #[inline(always)]
    fn ffm_norm<const V: bool>(&self, w: &CtrWorker) -> f32 {
        if !self.cfg.normalizes() || w.feats.is_empty() {
            return 1.0;
        }
        let squares = match V {
            true => w.xs.iter().map(|x| x * x).sum(),
            false => w.feats.len() as f32,
        };
        if squares > 0.0 {
            1.0 / squares
        } else {
            1.0
        }
    }

    /// The logit of `w.feats` (with `V`, of values `w.xs`; fields `w.fields`), reading their
    /// rows (or the worker's copies of them, `w.local`): in training whole rows, weights and
    /// slots, which [`Ctr::ffm_update`] steps; otherwise the weights alone. `K`: the factor
    /// size when the caller knows it at compile time (0 otherwise), so that the pair loops are
    /// unrolled into a few vector instructions.
    ///
    /// The rows are read into `w.vals`, one after the other; but an instance in training with
    /// `K` known whose features are each in a field and a row of their own (`w.in_place`, for
    /// [`Ctr::ffm_update_distinct`]) leaves the worker's copies where they are and reads the
    /// shared rows into the scratch part of the copies' buffer: the copies are then stepped in
    /// place, not copied out and back for every instance (a tenth of a 2-thread flights epoch).
    #[inline(always)]
    pub(super) fn ffm_forward<const V: bool, const K: usize>(
        &self,
        w: &mut CtrWorker,
        bias: f32,
    ) -> f32 {
        let table = &self.tables[0];
        let k = ffm_dim::<K>(self.dims[0]);
        let span = ffm_span(table, w.training);
        let n = w.feats.len();
        let norm = self.ffm_norm::<V>(w);
        w.in_place = K > 0 && w.training && distinct(&w.fields, &w.feats);
        w.offs.clear();
        let vals: &[f32] = if w.in_place {
            let copy = |f: usize| w.local.get(f).filter(|&&l| l != SHARED);
            w.offs
                .extend((0..n).map(|f| copy(f).map_or(usize::MAX, |&l| w.rows.offset(l))));
            let (buf, scratch) = w.rows.with_scratch(n * span);
            for (f, (at, &(_, row))) in w.offs.iter_mut().zip(&w.feats).enumerate() {
                if *at == usize::MAX {
                    *at = scratch + f * span;
                    table.read_row(row, &mut buf[*at..*at + span]);
                }
            }
            buf
        } else {
            w.vals.resize(n * span, 0.0);
            let rows = w.vals.chunks_exact_mut(span).zip(&w.feats).enumerate();
            for (f, (vals, &(_, row))) in rows {
                match w.local.get(f) {
                    Some(&l) if l != SHARED => vals.copy_from_slice(w.rows.weights(l, span)),
                    _ if w.training => table.read_row(row, vals),
                    _ => table.read_weights(row, vals),
                }
            }
            w.offs.extend((0..n).map(|f| f * span));
            &w.vals
        };
        let (offs, fields, xs) = (&w.offs[..], &w.fields[..], &w.xs[..]);
        let x = |i: usize| if V { xs[i] } else { 1.0 };
        let (mut linear, mut pairs) = (0.0f32, 0.0f32);
        for i in 0..n {
            let vi = &vals[offs[i]..offs[i] + span];
            linear += x(i) * vi[0];
            let fi = fields[i] as usize;
            for j in i + 1..n {
                let fj = fields[j] as usize;
                let vj = &vals[offs[j]..offs[j] + span];
                let (a, b) = (&vi[1 + fj * k..][..k], &vj[1 + fi * k..][..k]);
                pairs += x(i) * x(j) * dot(a, b);
            }
        }
        bias + norm.sqrt() * linear + norm * pairs
    }

    /// Applies one instance's gradient `g` (`p - y`, times the instance's weight) to its rows
    /// (or the worker's copies of them) as read by [`Ctr::ffm_forward`], with the L2 penalty
    /// `l2`, and `g` to the worker's copy of the bias: gathers every touched block's gradient
    /// from the pairs (in `w.grad`, a row's `width` per feature), then steps each row's runs of
    /// touched elements. `K` as for [`Ctr::ffm_forward`].
    ///
    /// A shared row is stepped in `w.vals`, where the forward pass read it with its slots, and
    /// its runs written back; but when two of the instance's features share a row (two ids
    /// hashed to one), the later ones read their row again from the store, where the earlier
    /// feature's step is. A worker's copy is stepped where it is.
    #[inline(always)]
    pub(super) fn ffm_update<const V: bool, const K: usize>(
        &self,
        w: &mut CtrWorker,
        steps: &Steps<O::Step>,
        bias: &mut LocalBias,
        g: f32,
        l2: f32,
    ) {
        if K > 0 && w.in_place {
            return self.ffm_update_distinct::<V, K>(w, steps, bias, g, l2);
        }
        let table = &self.tables[0];
        let (width, k) = (table.dim(), ffm_dim::<K>(self.dims[0]));
        let (span, count) = (table.stride(), (width - 1) / k);
        let n = w.feats.len();
        let norm = self.ffm_norm::<V>(w);
        w.grad.clear();
        w.grad.resize(n * width, 0.0);
        w.touched.clear();
        w.touched.resize(n * count, false);
        // Plain slices: the loops then keep their pointers in registers instead of reloading
        // them from the worker after every store.
        let (vals, grad, touched) = (&mut w.vals[..], &mut w.grad[..], &mut w.touched[..]);
        let (fields, xs) = (&w.fields[..], &w.xs[..]);
        let x = |i: usize| if V { xs[i] } else { 1.0 };
        for i in 0..n {
            let fi = fields[i] as usize;
            for j in i + 1..n {
                let fj = fields[j] as usize;
                let c = g * norm * x(i) * x(j);
                // v_{i,f_j} and v_{j,f_i}: each one's gradient is the other, times c.
                let (a, b) = (1 + fj * k, 1 + fi * k);
                let (va, vb) = (&vals[i * span + a..][..k], &vals[j * span + b..][..k]);
                add_scaled::<K>(c, vb, &mut grad[i * width + a..][..k]);
                add_scaled::<K>(c, va, &mut grad[j * width + b..][..k]);
                touched[i * count + fj] = true;
                touched[j * count + fi] = true;
            }
        }
        let root = norm.sqrt();
        let step = &steps.tables[0];
        for (i, &(_, row)) in w.feats.iter().enumerate() {
            let vals = &mut vals[i * span..(i + 1) * span];
            let grad = &mut grad[i * width..(i + 1) * width];
            grad[0] = g * root * x(i) + l2 * vals[0];
            let touched = &touched[i * count..(i + 1) * count];
            for (f, _) in touched.iter().enumerate().filter(|(_, &t)| t) {
                let block = 1 + f * k..1 + (f + 1) * k;
                for (gr, &v) in grad[block.clone()].iter_mut().zip(&vals[block]) {
                    *gr += l2 * v;
                }
            }
            touched_runs(touched, k, &mut w.runs);
            match w.local.get(i) {
                Some(&l) if l != SHARED => {
                    w.rows.update_runs(&self.opt, step, l, width, grad, &w.runs);
                }
                _ if w.feats[..i].iter().any(|&(_, r)| r == row) => {
                    w.scratch.resize(span, 0.0);
                    table.update_runs(&self.opt, step, row, grad, &w.runs, &mut w.scratch);
                }
                _ => {
                    step_runs(&self.opt, step, width, vals, grad, &w.runs);
                    table.write_runs(row, vals, &w.runs);
                }
            }
        }
        self.step_bias(steps, bias, g);
    }

    /// [`Ctr::ffm_update`] for an instance whose features are each in a field and a row of
    /// their own (the usual CTR instance: one feature per field), with the factor size `K`
    /// known at compile time: the same bits by a shorter way. Each block `v_{i,f_j}` is then
    /// touched by pair `(i, j)` alone, so the pair's two blocks are stepped as soon as their
    /// gradients are known, in the rows the forward pass read, by one call of the optimizer
    /// for both ([`Optimizer::elements_pair`]: Adagrad's square roots and divisions, which
    /// bound this loop, then go eight lanes at a time at factor size 4 where the build targets
    /// AVX). There is no gradient buffer to clear and gather into and no per-row pass over the
    /// touched blocks, and each block is stepped where it lies in the row.
    ///
    /// Each shared row is written back whole, weights and slots, by one copy: writing its
    /// touched runs alone (four copies a row, each with unaligned ends) made a flights epoch
    /// a fifth slower. The untouched blocks (the feature's own field, fields the instance
    /// lacks) are written as they were read; at several threads that can undo another
    /// thread's step of them made in between, as a concurrent step of a touched block can be
    /// lost anyway (Hogwild's contract, `store.rs`). The rows that both threads keep
    /// stepping are the hot ones, which are the worker's own copies ([`crate::store::LocalRows`]).
    #[inline(always)]
    fn ffm_update_distinct<const V: bool, const K: usize>(
        &self,
        w: &mut CtrWorker,
        steps: &Steps<O::Step>,
        bias: &mut LocalBias,
        g: f32,
        l2: f32,
    ) {
        let table = &self.tables[0];
        let (width, span) = (table.dim(), table.stride());
        // Where a block's first slot is in the slots that follow a row's weights (none: SGD).
        let slot = |at: usize| at.min(width * O::SLOTS);
        let n = w.feats.len();
        let norm = self.ffm_norm::<V>(w);
        let root = norm.sqrt();
        let step = &steps.tables[0];
        let (buf, scratch) = w.rows.with_scratch(n * span);
        let (offs, fs, xs) = (&w.offs[..], &w.fields[..], &w.xs[..]);
        let x = |i: usize| if V { xs[i] } else { 1.0 };
        let row = |at: usize| at..at + span;
        for i in 0..n {
            let b = 1 + fs[i] as usize * K;
            let cx = g * norm * x(i);
            {
                let (wi, si) = buf[row(offs[i])].split_at_mut(width);
                let l = g * root * x(i) + l2 * wi[0];
                self.opt.elements(step, &mut wi[..1], si, width, &[l]);
            }
            for j in i + 1..n {
                // Distinct rows (`w.in_place`), so never overlapping ranges of the buffer.
                let [ri, rj] = buf
                    .get_disjoint_mut([row(offs[i]), row(offs[j])])
                    .expect("the rows of distinct features");
                let ((wi, si), (wj, sj)) = (ri.split_at_mut(width), rj.split_at_mut(width));
                let a = 1 + fs[j] as usize * K;
                let c = cx * x(j);
                let (va, vb) = (block_mut::<K>(wi, a), block_mut::<K>(wj, b));
                // v_{i,f_j} and v_{j,f_i}: each one's gradient is the other, times c, and the
                // L2 penalty on itself (as `ffm_update` sums them: c v, then + l2 v).
                let (mut ga, mut gb) = ([0.0f32; K], [0.0f32; K]);
                for t in 0..K {
                    ga[t] = c * vb[t] + l2 * va[t];
                    gb[t] = c * va[t] + l2 * vb[t];
                }
                let (sa, sb) = (&mut si[slot(a)..], &mut sj[slot(b)..]);
                self.opt
                    .elements_pair(step, (va, sa, &ga), (vb, sb, &gb), width);
            }
        }
        for (&(_, r), &at) in w.feats.iter().zip(offs) {
            if at >= scratch {
                table.write_row(r, &buf[row(at)]);
            }
        }
        self.step_bias(steps, bias, g);
    }
}

/// Whether each of the instance's features is in a field of its own (fields below 64) and a
/// row of its own.
#[inline(always)]
pub(super) fn distinct(fields: &[u32], feats: &[(usize, usize)]) -> bool {
    let mut seen = 0u64;
    for &f in fields {
        match 1u64.checked_shl(f) {
            Some(bit) if seen & bit == 0 => seen |= bit,
            _ => return false,
        }
    }
    let mut rows = feats.iter().enumerate().skip(1);
    rows.all(|(i, &(_, row))| feats[..i].iter().all(|&(_, r)| r != row))
}

/// The `K` factors of a row's weights `w` from element `at`.
#[inline(always)]
fn block_mut<const K: usize>(w: &mut [f32], at: usize) -> &mut [f32; K] {
    let block = &mut w[at..at + K];
    block.try_into().expect("a block of K")
}

/// Elements per feature in `w.vals`: whole rows in training, the weights otherwise.
#[inline(always)]
fn ffm_span(table: &Table, training: bool) -> usize {
    if training {
        table.stride()
    } else {
        table.dim()
    }
}

/// The runs of adjacent elements of a row to step: the weight, then each touched block (of
/// `k` elements; `touched[f]` for block `f`), merged where adjacent, into `runs`.
#[inline(always)]
fn touched_runs(touched: &[bool], k: usize, runs: &mut Vec<Range<usize>>) {
    runs.clear();
    let mut run = 0..1;
    for (f, _) in touched.iter().enumerate().filter(|(_, &t)| t) {
        let block = 1 + f * k..1 + (f + 1) * k;
        if block.start != run.end {
            runs.push(run.clone());
            run.start = block.start;
        }
        run.end = block.end;
    }
    runs.push(run);
}

/// The factor size `K` when it is known at compile time (not 0), else `dim`.
#[inline(always)]
fn ffm_dim<const K: usize>(dim: usize) -> usize {
    if K > 0 {
        K
    } else {
        dim
    }
}

/// `y += c * x` over `k` elements (`K` of them when `K` is not 0: then as fixed-size arrays,
/// which the compiler steps in one or two vector instructions).
#[inline(always)]
fn add_scaled<const K: usize>(c: f32, x: &[f32], y: &mut [f32]) {
    match (<[f32; K]>::try_from(x), <&mut [f32; K]>::try_from(&mut *y)) {
        (Ok(x), Ok(y)) if K > 0 => {
            for (y, x) in y.iter_mut().zip(x) {
                *y += c * x;
            }
        }
        _ => {
            for (y, &x) in y.iter_mut().zip(x) {
                *y += c * x;
            }
        }
    }
}
