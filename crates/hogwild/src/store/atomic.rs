//! The atomic float cells that hold every deliberately shared parameter: [`AtomicF32`],
//! [`AtomicF64`], [`AtomicF16`] and [`AtomicBF16`], and the [`SharedReal`] trait that names a
//! float type's cell.
//!
//! The Hogwild store's tables ([`crate::store::Table`]: weights, slots, scalars) and the TF
//! plugin's shared-path kernels ([`crate::optim::AdamCoeffs::apply_dense_shared`] and friends, on
//! TensorFlow's buffers) both keep their shared memory in these cells, so the rules below are
//! stated, and checked by Miri (`make miri` runs `store::`), once.
//!
//! # What is atomic, and with which orderings
//!
//! - A cell is `#[repr(transparent)]` over the standard atomic integer of its float's size
//!   (`AtomicU16`, `AtomicU32`, `AtomicU64`) and holds the float's bits. Size and alignment equal
//!   the float's (asserted at compile time), and every bit pattern is valid for both, so memory
//!   holding floats can be viewed as cells ([`as_cells`], [`cells_from_raw_parts`]).
//! - [`load`](AtomicF32::load) and [`store`](AtomicF32::store) are single atomic accesses with
//!   `Ordering::Relaxed`: a load sees some value that some thread stored, whole, never a torn or
//!   invented one. They compile to plain moves on x86-64 and AArch64, so they cost what racy
//!   float accesses would. Relaxed publishes nothing else: no cell orders any other memory, and
//!   none needs to (a training step reads whatever the parameters hold).
//! - [`update`](AtomicF32::update) replaces the value with `f(old)` by a compare-and-swap loop
//!   (`AcqRel` on success): no concurrent update is lost. It is for per-table scalars (AdamAsync's
//!   beta powers), which every step advances; a failed exchange backs off
//!   ([`crossbeam_utils::Backoff`]) so that threads finishing steps together do not keep
//!   stealing the line from each other.
//! - A run of cells, or a cache line of them, may be copied 16 bytes at a time where the
//!   processor makes an aligned 16-byte access one atomic access (`bulk.rs`, x86-64 with AVX):
//!   the same effect as the relaxed loop.
//!
//! # Why Hogwild's races are not undefined behaviour here
//!
//! A data race, in Rust's (C++'s) sense, is two accesses to the same memory from two threads, at
//! least one a write, not both atomic, with no happens-before between them: that is undefined
//! behaviour. Every access to a cell is atomic, so threads that read and write the same parameter
//! at once race only in the everyday sense: an element's read-modify-write (load the weight and
//! its slots, apply the optimizer rule, store them back) is not atomic as a whole, so a concurrent
//! update of the same element may be overwritten and lost. That is exactly Hogwild's contract
//! (Niu, Recht, Ré, Wright 2011) and what TensorFlow's unlocked updates do; the result is some
//! interleaving of whole loads and stores, never a value nobody wrote. Cells are `Send + Sync`
//! because their atomic integers are; no `unsafe impl` is needed.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::Backoff;
use half::{bf16, f16};

use crate::optim::Real;

mod sealed {
    /// Keeps [`super::SharedReal`] to the four types whose cell layout is checked below.
    pub trait Sealed {}
}

/// A [`Real`] with an atomic cell type, so that kernels can work on memory other threads access
/// at the same time (the store's tables, the plugin's shared path).
///
/// Layout guarantee: `Self::Cell` is `#[repr(transparent)]` over the standard atomic integer of
/// `Self`'s size (`AtomicU16`, `AtomicU32`, `AtomicU64`), which has the in-memory representation of
/// that integer; its size and alignment equal `Self`'s (checked at compile time), and every bit
/// pattern is valid for both. So memory holding `[Self]` can be viewed as `[Self::Cell]`
/// ([`as_cells`], [`cells_from_raw_parts`]). Sealed: implemented for f32, f64, f16 and bf16 only.
pub trait SharedReal: Real + sealed::Sealed {
    /// The atomic cell holding one element's bits.
    type Cell: Send + Sync + std::fmt::Debug;
    /// A new cell holding `x`.
    fn cell(x: Self) -> Self::Cell;
    /// The cell's value (relaxed load).
    fn load(cell: &Self::Cell) -> Self;
    /// Replaces the cell's value (relaxed store).
    fn store(cell: &Self::Cell, x: Self);
    /// Replaces the value with `f(old)` atomically (a compare-and-swap loop); returns the new value.
    fn update(cell: &Self::Cell, f: impl Fn(Self) -> Self) -> Self;

    /// One 64-byte cache line of values (`[Self; 64 / size_of::<Self>()]`): the unit in which the
    /// shared-memory optimizer kernels copy cells into registers and back (`optim/shared.rs`).
    type Line: Copy + AsRef<[Self]> + AsMut<[Self]>;
    /// A line of zeros.
    const ZERO_LINE: Self::Line;
}

/// Defines an atomic float cell over the atomic integer of the float's size, and its
/// [`SharedReal`] implementation.
macro_rules! atomic_float {
    ($(#[$doc:meta])* $name:ident, $float:ty, $atomic:ty, $zero:expr) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        #[repr(transparent)]
        pub struct $name($atomic);

        impl $name {
            /// A new cell holding `x`.
            pub fn new(x: $float) -> Self {
                Self(<$atomic>::new(x.to_bits()))
            }

            /// The current value (relaxed).
            #[inline(always)]
            pub fn load(&self) -> $float {
                <$float>::from_bits(self.0.load(Ordering::Relaxed))
            }

            /// Replaces the value (relaxed).
            #[inline(always)]
            pub fn store(&self, x: $float) {
                self.0.store(x.to_bits(), Ordering::Relaxed)
            }

            /// Writes the cell without changing its value: one atomic compare-and-swap of zero
            /// for zero, which a processor performs as a write (x86-64's `lock cmpxchg` writes
            /// back the old value when the comparison fails). For memory not yet touched: see
            /// `Table::touch_to_write`.
            #[inline(always)]
            pub fn touch_to_write(&self) {
                let _ = self.0.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
            }

            /// Replaces the value with `f(old)` atomically, retrying (after a back-off) when
            /// another thread got there first; returns the new value.
            pub fn update(&self, f: impl Fn($float) -> $float) -> $float {
                let backoff = Backoff::new();
                let mut old = self.0.load(Ordering::Relaxed);
                loop {
                    let new = f(<$float>::from_bits(old)).to_bits();
                    match self
                        .0
                        .compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed)
                    {
                        Ok(_) => return <$float>::from_bits(new),
                        Err(seen) => old = seen,
                    }
                    backoff.spin();
                }
            }
        }

        impl sealed::Sealed for $float {}

        impl SharedReal for $float {
            type Cell = $name;
            fn cell(x: Self) -> $name {
                <$name>::new(x)
            }
            #[inline(always)]
            fn load(cell: &$name) -> Self {
                cell.load()
            }
            #[inline(always)]
            fn store(cell: &$name, x: Self) {
                cell.store(x)
            }
            fn update(cell: &$name, f: impl Fn(Self) -> Self) -> Self {
                cell.update(f)
            }

            type Line = [$float; 64 / std::mem::size_of::<$float>()];
            const ZERO_LINE: Self::Line = [$zero; 64 / std::mem::size_of::<$float>()];
        }

        // The layout guarantee of `SharedReal`: a target where it fails does not compile.
        const _: () = assert!(
            std::mem::size_of::<$name>() == std::mem::size_of::<$float>()
                && std::mem::align_of::<$name>() == std::mem::align_of::<$float>()
                && std::mem::size_of::<<$float as SharedReal>::Line>() == 64
        );
    };
}

atomic_float!(
    /// An `f32` shared between threads: relaxed atomic loads and stores of its bits (the store's
    /// element type).
    AtomicF32,
    f32,
    AtomicU32,
    0.0
);
atomic_float!(
    /// An `f64` shared between threads: relaxed atomic loads and stores of its bits.
    AtomicF64,
    f64,
    AtomicU64,
    0.0
);
atomic_float!(
    /// An IEEE binary16 (`half::f16`) shared between threads: relaxed atomic loads and stores of its
    /// bits.
    AtomicF16,
    f16,
    AtomicU16,
    f16::ZERO
);
atomic_float!(
    /// A bfloat16 (`half::bf16`) shared between threads: relaxed atomic loads and stores of its bits.
    AtomicBF16,
    bf16,
    AtomicU16,
    bf16::ZERO
);

/// Views an exclusively borrowed slice as cells, to hand a plain buffer to the shared kernels (and
/// to threads) for the duration of the borrow.
pub fn as_cells<T: SharedReal>(x: &mut [T]) -> &[T::Cell] {
    // SAFETY:
    // - layout: `T::Cell` has `T`'s size and alignment and every bit pattern is valid for both
    //   (`SharedReal`'s guarantee, asserted at compile time), so `x.len()` elements of `T` are
    //   `x.len()` valid cells at the same address;
    // - aliasing: the returned borrow keeps `x` uniquely borrowed for its whole lifetime, so the
    //   memory is reached only through these cells, whose every access is atomic.
    unsafe { std::slice::from_raw_parts(x.as_mut_ptr().cast::<T::Cell>(), x.len()) }
}

/// Views `len` elements of `T` at `ptr` as cells; for memory owned outside Rust (a TensorFlow
/// tensor's buffer) that other threads may access while the view lives.
///
/// # Safety
///
/// - `ptr` is non-null, aligned for `T`, and valid for reads and writes of `len` elements for the
///   whole of `'a`; `len * size_of::<T>()` is at most `isize::MAX`;
/// - during `'a`, no Rust reference other than cells points into that memory, and every access to
///   it from any thread is atomic (these cells, other such views, or the C++ equivalent); a
///   non-atomic concurrent access elsewhere would be a data race.
pub unsafe fn cells_from_raw_parts<'a, T: SharedReal>(ptr: *mut T, len: usize) -> &'a [T::Cell] {
    // SAFETY:
    // - layout: `T::Cell` has `T`'s size and alignment (`SharedReal`'s guarantee), so `ptr` is
    //   aligned for cells and `len` cells span the `len` elements the caller vouches for;
    // - validity and lifetime: the caller guarantees `ptr` is non-null and valid for `len`
    //   elements during `'a`, with a size that fits `isize`;
    // - aliasing: the caller guarantees that nothing but atomic accesses reaches the memory during
    //   `'a`, which is what a shared slice of cells (atomics are `UnsafeCell`s) permits.
    unsafe { std::slice::from_raw_parts(ptr.cast::<T::Cell>(), len) }
}

#[cfg(test)]
mod tests {
    //! Run under Miri by `make miri` (`cargo +nightly miri test -p hogwild-train --lib store::`).

    use super::*;

    fn round_trip<T: SharedReal>(values: &[T]) {
        for &x in values {
            let cell = T::cell(x);
            assert_eq!(
                T::load(&cell).to_f64_lossy().to_bits(),
                x.to_f64_lossy().to_bits()
            );
            T::store(&cell, x + x);
            assert_eq!(T::load(&cell), x + x);
            let two = T::one() + T::one();
            assert_eq!(T::update(&cell, |v| v * two), (x + x) * two);
        }
    }

    #[test]
    fn every_cell_keeps_its_floats_bits() {
        round_trip(&[0.0f32, -1.5, f32::MAX, f32::MIN_POSITIVE]);
        round_trip(&[0.0f64, -1.5, 1e300]);
        round_trip(&[f16::ZERO, f16::from_f32(-1.5), f16::from_f32(3.0)]);
        round_trip(&[bf16::ZERO, bf16::from_f32(-1.5), bf16::from_f32(3.0)]);
        // NaN payloads and negative zero survive a store and a load.
        let cell = AtomicF32::new(f32::from_bits(0x7fc0_1234));
        assert_eq!(cell.load().to_bits(), 0x7fc0_1234);
        cell.store(-0.0);
        assert_eq!(cell.load().to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn views_of_plain_buffers_share_their_memory() {
        let mut xs = vec![1.5f32, -2.0, 3.25];
        {
            let view = as_cells(&mut xs);
            view[1].store(7.0);
            assert_eq!(view[0].load(), 1.5);
        }
        assert_eq!(xs, [1.5, 7.0, 3.25]);

        let mut ys = vec![0.5f64; 4];
        let ptr = ys.as_mut_ptr();
        {
            // SAFETY: `ptr` comes from a live Vec of 4 f64 (non-null, aligned, valid), which is
            // not touched through any other reference while `view` lives.
            let view = unsafe { cells_from_raw_parts::<f64>(ptr, 4) };
            view[3].update(|x| x * 4.0);
        }
        assert_eq!(ys, [0.5, 0.5, 0.5, 2.0]);

        let mut hs = vec![bf16::from_f32(1.0); 2];
        as_cells(&mut hs)[0].store(bf16::from_f32(-2.0));
        assert_eq!(hs, [bf16::from_f32(-2.0), bf16::from_f32(1.0)]);
    }

    // Threads update one cell with the compare-and-swap loop and store to another at once: no
    // update is lost (Miri checks there is no data race), and a load sees only values stored.
    #[test]
    fn concurrent_updates_lose_nothing_and_loads_see_whole_values() {
        let (threads, steps) = if cfg!(miri) { (3, 5) } else { (4, 1000) };
        let counter = AtomicF64::new(0.0);
        let shared = AtomicF32::new(1.0);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (counter, shared) = (&counter, &shared);
                s.spawn(move || {
                    for _ in 0..steps {
                        counter.update(|x| x + 1.0);
                        shared.store(t as f32 + 1.0);
                        let seen = shared.load();
                        assert!((1..=threads).any(|k| seen == k as f32), "{seen}");
                    }
                });
            }
        });
        assert_eq!(counter.load(), (threads * steps) as f64);
    }
}
