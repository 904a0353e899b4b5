//! The optimizer trait: an update rule applied element by element, with per-element state slots
//! stored beside each parameter and a few per-variable scalars.
//!
//! The same rule drives plain slices (`apply_dense`, `apply_sparse` here) and the Hogwild store's
//! shared rows, where a row's weights and their slots sit together in memory.

use super::{check_sparse, row_range, AdamCoeffs, AdamRule, Real, SparseIndex};
use crate::{Error, Result};

/// An update rule. `SLOTS` state values per parameter element (SGD 0, Adagrad 1, AdamAsync 2) and
/// `SCALARS` per-variable values (AdamAsync's two beta powers).
pub trait Optimizer<T: Real>: Send + Sync {
    /// State values stored beside each parameter element.
    const SLOTS: usize;
    /// Per-variable scalar state values.
    const SCALARS: usize;
    /// What a call computes once, before touching elements.
    type Step: Copy + Send + Sync;

    /// Initial value of state slot `slot` (e.g. Adagrad's initial accumulator).
    fn slot_init(&self, slot: usize) -> T;
    /// The value a fresh Hogwild table stores in slot `slot`: [`Optimizer::slot_init`], unless
    /// [`Optimizer::element`] reads that stored value as the initial one. Adagrad reads a zero
    /// accumulator (which no update leaves) as its initial accumulator, so that a fresh table is
    /// all zeros: its memory is mapped zero pages, first touched by the training workers in
    /// parallel instead of by a fill pass over every row before training.
    fn slot_fill(&self, slot: usize) -> T {
        self.slot_init(slot)
    }
    /// The value slot `slot` holds when it stores `stored`: `stored` itself, except where
    /// [`Optimizer::slot_fill`] stores a stand-in for the initial value (Adagrad's zero). Code
    /// that adds changes to a slot from elsewhere (a worker's private copy of a row) reads through
    /// this, so that the initial value is counted once.
    #[inline(always)]
    fn slot_value(&self, _slot: usize, stored: T) -> T {
        stored
    }
    /// Initial per-variable scalars, `SCALARS` of them.
    fn init_scalars(&self, scalars: &mut [T]);
    /// Validates the hyper-parameters and scalars and computes the per-call step.
    fn begin(&self, scalars: &[T], sparse: bool) -> Result<Self::Step>;
    /// Updates the scalars after a call that touched `touched` rows or elements.
    fn finish(&self, scalars: &mut [T], sparse: bool, touched: usize);
    /// The rule for one element; `slots` holds `SLOTS` values.
    fn element(&self, step: &Self::Step, w: &mut T, slots: &mut [T], g: T);
    /// [`Optimizer::element`] on each of `w.len()` consecutive elements of a row held as plain
    /// floats: weight `w[i]`, its slot `s` at `slots[s * stride + i]`, gradient `g[i]`. The
    /// same arithmetic and bits as the element rule; a rule whose elements are independent of
    /// each other (Adagrad's) overrides it with a loop the compiler steps several elements per
    /// instruction.
    #[inline(always)]
    fn elements(&self, step: &Self::Step, w: &mut [T], slots: &mut [T], stride: usize, g: &[T]) {
        let mut state = [T::zero(); crate::store::MAX_SLOTS];
        for (i, (w, &g)) in w.iter_mut().zip(g).enumerate() {
            for (s, x) in state.iter_mut().enumerate().take(Self::SLOTS) {
                *x = slots[s * stride + i];
            }
            self.element(step, w, &mut state[..Self::SLOTS], g);
            for (s, &x) in state.iter().enumerate().take(Self::SLOTS) {
                slots[s * stride + i] = x;
            }
        }
    }
    /// [`Optimizer::elements`] on two runs, `a` and `b` (each weights, their slots from the
    /// run's start with slot `s` a `stride` further on, gradients): the same bits as one run
    /// after the other, which is what it does unless the rule packs two short runs together
    /// (Adagrad, [`Real::adagrad_pair`]).
    #[inline(always)]
    fn elements_pair(
        &self,
        step: &Self::Step,
        a: (&mut [T], &mut [T], &[T]),
        b: (&mut [T], &mut [T], &[T]),
        stride: usize,
    ) {
        self.elements(step, a.0, a.1, stride, a.2);
        self.elements(step, b.0, b.1, stride, b.2);
    }
    /// `Some(lr)` when [`Optimizer::element`] is exactly `w - lr * g` with no slots (plain
    /// SGD), so that a shared row can be stepped several elements per instruction; `None`
    /// for any other rule.
    #[inline(always)]
    fn plain_lr(&self, _step: &Self::Step) -> Option<T> {
        None
    }
    /// The learning rate.
    fn lr(&self) -> T;
    /// The same optimizer with learning rate `lr` (a schedule's rate for one call).
    fn with_lr(&self, lr: T) -> Self
    where
        Self: Sized;
}

/// One variable's optimizer state for slice updates: `SLOTS` state vectors, element-major
/// (`slots[i * SLOTS + s]` is slot `s` of element `i`), and the per-variable scalars.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotState<T> {
    /// The slots, element-major.
    pub slots: Vec<T>,
    /// The per-variable scalars.
    pub scalars: Vec<T>,
}

impl<T: Real> SlotState<T> {
    /// Fresh state for a variable of `len` elements.
    pub fn new<O: Optimizer<T>>(opt: &O, len: usize) -> Self {
        let mut slots = Vec::with_capacity(len * O::SLOTS);
        for _ in 0..len {
            slots.extend((0..O::SLOTS).map(|s| opt.slot_init(s)));
        }
        let mut scalars = vec![T::zero(); O::SCALARS];
        opt.init_scalars(&mut scalars);
        Self { slots, scalars }
    }
}

/// A dense step of `opt` on `var` with `state` from [`SlotState::new`].
pub fn apply_dense<T: Real, O: Optimizer<T>>(
    opt: &O,
    var: &mut [T],
    state: &mut SlotState<T>,
    grad: &[T],
) -> Result<()> {
    if var.is_empty() {
        return Err(Error::Empty { what: "var" });
    }
    check_state::<T, O>(var.len(), state)?;
    if grad.len() != var.len() {
        return Err(Error::ShapeMismatch {
            what: "grad vs var".into(),
            expected: var.len().to_string(),
            got: grad.len().to_string(),
        });
    }
    let step = opt.begin(&state.scalars, false)?;
    // In bounds: `check_state` proved `state.slots.len() == var.len() * SLOTS`.
    run_elements(opt, &step, var.iter_mut(), grad, &mut state.slots);
    opt.finish(&mut state.scalars, false, var.len());
    Ok(())
}

/// A sparse step of `opt`: `grad` holds one `row_len` row per entry of `indices`; rows apply in
/// order (duplicates sequentially). Every index is validated before anything is written.
pub fn apply_sparse<T: Real, O: Optimizer<T>, I: SparseIndex>(
    opt: &O,
    var: &mut [T],
    state: &mut SlotState<T>,
    grad: &[T],
    indices: &[I],
    row_len: usize,
) -> Result<()> {
    check_state::<T, O>(var.len(), state)?;
    let rows = check_sparse(var.len(), row_len, grad, indices)?;
    let step = opt.begin(&state.scalars, true)?;
    let slots = O::SLOTS;
    let grad_rows = grad.chunks_exact(row_len);
    for (offset, (&index, g)) in indices.iter().zip(grad_rows).enumerate() {
        // Already validated by `check_sparse`; an error here is impossible, not a fallback.
        let range = row_range(index, offset, rows, row_len)?;
        // In bounds: the row ends at most at `var.len()`, and `check_state` proved
        // `state.slots.len() == var.len() * SLOTS`.
        let s = &mut state.slots[range.start * slots..range.end * slots];
        run_elements(opt, &step, &mut var[range], g, s);
    }
    opt.finish(&mut state.scalars, true, indices.len());
    Ok(())
}

/// `opt`'s rule on each weight of `var` with its gradient from `grad`, in order, the `i`-th
/// taking slots `i * SLOTS..(i + 1) * SLOTS` of `slots`: the one element loop of the slice and
/// the view paths.
///
/// # Panics
/// When `slots` holds fewer than `SLOTS` values per weight (callers check with [`check_state`]).
#[inline(always)]
pub(super) fn run_elements<'w, 'g, T: Real + 'w + 'g, O: Optimizer<T>>(
    opt: &O,
    step: &O::Step,
    var: impl IntoIterator<Item = &'w mut T>,
    grad: impl IntoIterator<Item = &'g T>,
    slots: &mut [T],
) {
    let n = O::SLOTS;
    for (i, (w, &g)) in var.into_iter().zip(grad).enumerate() {
        opt.element(step, w, &mut slots[i * n..(i + 1) * n], g);
    }
}

pub(super) fn check_state<T: Real, O: Optimizer<T>>(
    len: usize,
    state: &SlotState<T>,
) -> Result<()> {
    if len.checked_mul(O::SLOTS) != Some(state.slots.len()) || state.scalars.len() != O::SCALARS {
        return Err(Error::ShapeMismatch {
            what: "optimizer state vs var".into(),
            expected: format!("{len} x {} slots and {} scalars", O::SLOTS, O::SCALARS),
            got: format!(
                "{} slots and {} scalars",
                state.slots.len(),
                state.scalars.len()
            ),
        });
    }
    Ok(())
}

/// Plain SGD: `w -= lr * g`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd<T> {
    /// The learning rate.
    pub lr: T,
}

impl<T: Real> Optimizer<T> for Sgd<T> {
    const SLOTS: usize = 0;
    const SCALARS: usize = 0;
    type Step = T;

    fn slot_init(&self, _slot: usize) -> T {
        T::zero()
    }
    fn init_scalars(&self, _scalars: &mut [T]) {}
    fn begin(&self, _scalars: &[T], _sparse: bool) -> Result<T> {
        finite("lr", self.lr)?;
        Ok(self.lr)
    }
    fn finish(&self, _scalars: &mut [T], _sparse: bool, _touched: usize) {}
    #[inline(always)]
    fn element(&self, lr: &T, w: &mut T, _slots: &mut [T], g: T) {
        *w = *w - *lr * g;
    }
    #[inline(always)]
    fn plain_lr(&self, lr: &T) -> Option<T> {
        Some(*lr)
    }
    fn lr(&self) -> T {
        self.lr
    }
    fn with_lr(&self, lr: T) -> Self {
        Self { lr }
    }
}

/// Adagrad (TensorFlow's form): `acc += g*g; w -= lr * g / sqrt(acc)`, the accumulator starting at
/// `initial_accumulator` (TensorFlow's default 0.1).
///
/// A stored accumulator of zero reads as `initial_accumulator`: updates only add squares to a
/// positive start, so no update leaves a zero, and a fresh table stores zeros
/// ([`Optimizer::slot_fill`]). The arithmetic, and so every bit, is TensorFlow's either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adagrad<T> {
    /// The learning rate.
    pub lr: T,
    /// The accumulator's start.
    pub initial_accumulator: T,
}

impl<T: Real> Optimizer<T> for Adagrad<T> {
    const SLOTS: usize = 1;
    const SCALARS: usize = 0;
    type Step = T;

    fn slot_init(&self, _slot: usize) -> T {
        self.initial_accumulator
    }
    fn slot_fill(&self, _slot: usize) -> T {
        T::zero()
    }
    #[inline(always)]
    fn slot_value(&self, _slot: usize, stored: T) -> T {
        if stored == T::zero() {
            self.initial_accumulator
        } else {
            stored
        }
    }
    fn init_scalars(&self, _scalars: &mut [T]) {}
    fn begin(&self, _scalars: &[T], _sparse: bool) -> Result<T> {
        finite("lr", self.lr)?;
        finite("initial_accumulator", self.initial_accumulator)?;
        if self.initial_accumulator <= T::zero() {
            return Err(Error::InvalidHyperParameter {
                name: "initial_accumulator",
                value: self.initial_accumulator.to_f64_lossy(),
                reason: "must be positive",
            });
        }
        Ok(self.lr)
    }
    fn finish(&self, _scalars: &mut [T], _sparse: bool, _touched: usize) {}
    #[inline(always)]
    fn element(&self, lr: &T, w: &mut T, slots: &mut [T], g: T) {
        let acc = self.slot_value(0, slots[0]) + g * g;
        slots[0] = acc;
        *w = *w - *lr * g / acc.sqrt();
    }
    /// The element rule over the three slices, several elements at a time where the float
    /// type can ([`Real::adagrad_run`]: the same arithmetic, so the same bits).
    #[inline(always)]
    fn elements(&self, lr: &T, w: &mut [T], slots: &mut [T], _stride: usize, g: &[T]) {
        let n = w.len();
        T::adagrad_run(w, &mut slots[..n], &g[..n], *lr, self.initial_accumulator);
    }
    #[inline(always)]
    fn elements_pair(
        &self,
        lr: &T,
        a: (&mut [T], &mut [T], &[T]),
        b: (&mut [T], &mut [T], &[T]),
        _stride: usize,
    ) {
        let (n, m) = (a.0.len(), b.0.len());
        let a = (a.0, &mut a.1[..n], &a.2[..n]);
        let b = (b.0, &mut b.1[..m], &b.2[..m]);
        T::adagrad_pair(a, b, *lr, self.initial_accumulator);
    }
    fn lr(&self) -> T {
        self.lr
    }
    fn with_lr(&self, lr: T) -> Self {
        Self { lr, ..*self }
    }
}

/// AdamAsync as a rule: slots m, v; scalars beta1_power, beta2_power. Dense steps follow
/// `use_nesterov`, sparse steps are lazy Adam or, with `apply_sparse_rmsprop`, RMSProp, exactly as
/// [`AdamAsync::apply_dense`](super::AdamAsync::apply_dense) and
/// [`AdamAsync::apply_sparse`](super::AdamAsync::apply_sparse), with the same bits.
impl<T: Real> Optimizer<T> for super::AdamAsync<T> {
    const SLOTS: usize = 2;
    const SCALARS: usize = 2;
    type Step = (AdamCoeffs<T>, AdamRule);

    fn slot_init(&self, _slot: usize) -> T {
        T::zero()
    }
    fn init_scalars(&self, scalars: &mut [T]) {
        if let [b1p, b2p, ..] = scalars {
            *b1p = self.beta1;
            *b2p = self.beta2;
        }
    }
    fn begin(&self, scalars: &[T], sparse: bool) -> Result<Self::Step> {
        if sparse && self.apply_sparse_rmsprop {
            let c = AdamCoeffs::new_rmsprop(self.lr, self.beta1, self.beta2, self.epsilon)?;
            return Ok((c, AdamRule::RmsProp));
        }
        let &[b1p, b2p] = scalars else {
            return Err(Error::ShapeMismatch {
                what: "AdamAsync scalars (beta1_power, beta2_power)".into(),
                expected: "2".into(),
                got: scalars.len().to_string(),
            });
        };
        let c = AdamCoeffs::new(self.lr, self.beta1, self.beta2, self.epsilon, b1p, b2p)?;
        // Nesterov momentum applies to dense updates only (DeepRec's sparse ops have no switch).
        let rule = AdamRule::dense(!sparse && self.use_nesterov);
        Ok((c, rule))
    }
    fn finish(&self, scalars: &mut [T], sparse: bool, touched: usize) {
        if (sparse && self.apply_sparse_rmsprop) || touched == 0 {
            return;
        }
        if let [b1p, b2p, ..] = scalars {
            super::advance_powers(b1p, b2p, self.beta1, self.beta2);
        }
    }
    /// # Panics
    /// When `slots` holds fewer than 2 values (the trait's contract is `SLOTS` values).
    #[inline(always)]
    fn element(&self, step: &Self::Step, w: &mut T, slots: &mut [T], g: T) {
        let (c, rule) = step;
        let (m, v) = slots.split_at_mut(1);
        match rule {
            AdamRule::Adam => super::adam_async_element::<T, false>(w, &mut m[0], &mut v[0], g, c),
            AdamRule::Nesterov => {
                super::adam_async_element::<T, true>(w, &mut m[0], &mut v[0], g, c)
            }
            AdamRule::RmsProp => super::rmsprop_element(w, &mut m[0], &mut v[0], g, c),
        }
    }
    fn lr(&self) -> T {
        self.lr
    }
    fn with_lr(&self, lr: T) -> Self {
        Self { lr, ..*self }
    }
}

fn finite<T: Real>(name: &'static str, x: T) -> Result<()> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidHyperParameter {
            name,
            value: x.to_f64_lossy(),
            reason: "must be finite",
        })
    }
}
