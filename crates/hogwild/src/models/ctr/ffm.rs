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

use super::{Ctr, CtrWorker, LocalBias, Steps};
use crate::models::dot;
use crate::optim::Optimizer;
use crate::store::SHARED;

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
    /// rows (or the worker's copies of them, `w.local`) into `w.vals`. `K`: the factor size
    /// when the caller knows it at compile time ([`Ctr::ffm_dim`]; 0 otherwise), so that the
    /// pair loops are unrolled into a few vector instructions.
    #[inline(always)]
    pub(super) fn ffm_forward<const V: bool, const K: usize>(
        &self,
        w: &mut CtrWorker,
        bias: f32,
    ) -> f32 {
        let table = &self.tables[0];
        let (width, k) = (table.dim(), ffm_dim::<K>(self.dims[0]));
        let n = w.feats.len();
        w.vals.resize(n * width, 0.0);
        let rows = w.vals.chunks_exact_mut(width).zip(&w.feats).enumerate();
        for (f, (vals, &(_, row))) in rows {
            match w.local.get(f) {
                Some(&l) if l != SHARED => vals.copy_from_slice(w.rows.weights(l, width)),
                _ => table.read_weights(row, vals),
            }
        }
        let norm = self.ffm_norm::<V>(w);
        let (vals, fields, xs) = (&w.vals[..], &w.fields[..], &w.xs[..]);
        let x = |i: usize| if V { xs[i] } else { 1.0 };
        let (mut linear, mut pairs) = (0.0f32, 0.0f32);
        for i in 0..n {
            let vi = &vals[i * width..(i + 1) * width];
            linear += x(i) * vi[0];
            let fi = fields[i] as usize;
            for j in i + 1..n {
                let fj = fields[j] as usize;
                let vj = &vals[j * width..(j + 1) * width];
                let (a, b) = (&vi[1 + fj * k..][..k], &vj[1 + fi * k..][..k]);
                pairs += x(i) * x(j) * dot(a, b);
            }
        }
        bias + norm.sqrt() * linear + norm * pairs
    }

    /// Applies one instance's gradient `g` (`p - y`, times the instance's weight) to its rows
    /// (or the worker's copies of them) as read by [`Ctr::ffm_forward`], with the L2 penalty
    /// `l2`, and `g` to the worker's copy of the bias: each row's weight and touched factor
    /// blocks, stepped as the runs of adjacent ones in one call per row. `K` as for
    /// [`Ctr::ffm_forward`].
    #[inline(always)]
    pub(super) fn ffm_update<const V: bool, const K: usize>(
        &self,
        w: &mut CtrWorker,
        steps: &Steps<O::Step>,
        bias: &mut LocalBias,
        g: f32,
        l2: f32,
    ) {
        let table = &self.tables[0];
        let (width, k) = (table.dim(), ffm_dim::<K>(self.dims[0]));
        let count = (width - 1) / k;
        let n = w.feats.len();
        let norm = self.ffm_norm::<V>(w);
        w.grad.clear();
        w.grad.resize(n * width, 0.0);
        w.touched.clear();
        w.touched.resize(n * count, false);
        w.scratch.resize(table.stride(), 0.0);
        // Plain slices: the loops then keep their pointers in registers instead of reloading
        // them from the worker after every store.
        let (vals, grad, touched) = (&w.vals[..], &mut w.grad[..], &mut w.touched[..]);
        let (fields, xs) = (&w.fields[..], &w.xs[..]);
        let x = |i: usize| if V { xs[i] } else { 1.0 };
        for i in 0..n {
            let fi = fields[i] as usize;
            for j in i + 1..n {
                let fj = fields[j] as usize;
                let c = g * norm * x(i) * x(j);
                // v_{i,f_j} and v_{j,f_i}: each one's gradient is the other, times c.
                let (a, b) = (i * width + 1 + fj * k, j * width + 1 + fi * k);
                let (va, vb) = (&vals[a..][..k], &vals[b..][..k]);
                // Split at row j: the two blocks are then disjoint to the compiler too, which
                // steps each in a few vector instructions.
                let (row_i, row_j) = grad.split_at_mut(j * width);
                for (gr, &v) in row_i[a..][..k].iter_mut().zip(vb) {
                    *gr += c * v;
                }
                for (gr, &v) in row_j[b - j * width..][..k].iter_mut().zip(va) {
                    *gr += c * v;
                }
                touched[i * count + fj] = true;
                touched[j * count + fi] = true;
            }
        }
        let root = norm.sqrt();
        let step = &steps.tables[0];
        for (i, &(_, row)) in w.feats.iter().enumerate() {
            let vals = &vals[i * width..(i + 1) * width];
            let grad = &mut grad[i * width..(i + 1) * width];
            grad[0] = g * root * x(i) + l2 * vals[0];
            // The runs of adjacent elements to step: the weight, then each touched block.
            w.runs.clear();
            let mut run = 0..1;
            let blocks = touched[i * count..(i + 1) * count].iter().enumerate();
            for (f, _) in blocks.filter(|(_, &t)| t) {
                let block = 1 + f * k..1 + (f + 1) * k;
                for (gr, &v) in grad[block.clone()].iter_mut().zip(&vals[block.clone()]) {
                    *gr += l2 * v;
                }
                if block.start != run.end {
                    w.runs.push(run.clone());
                    run.start = block.start;
                }
                run.end = block.end;
            }
            w.runs.push(run);
            match w.local.get(i) {
                Some(&l) if l != SHARED => {
                    w.rows.update_runs(&self.opt, step, l, width, grad, &w.runs);
                }
                _ => table.update_runs(&self.opt, step, row, grad, &w.runs, &mut w.scratch),
            }
        }
        self.step_bias(steps, bias, g);
    }
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
