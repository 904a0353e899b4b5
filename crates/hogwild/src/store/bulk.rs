//! Copying cells to and from plain values 16 bytes per instruction, where the processor
//! guarantees that such an access is atomic: runs of `f32` cells ([`load`], [`store`]) and the
//! loops over a row that models run most ([`dot`], [`add_to`], plain SGD's [`sgd_step`]) for
//! the store's rows, and whole cache lines of any cell type ([`LineCopy`]) for the optimizer's
//! shared-memory kernels (`optim/shared.rs`).
//!
//! A relaxed atomic load or store is one scalar instruction, and the compiler may not merge
//! atomics into vector instructions. A model that copies whole rows in and out (word2vec moves
//! six 100-float rows per pair) then spends as long copying as computing: with vector copies a
//! word2vec epoch on GCIDE trained in 9.5 s instead of 12.5 s (1 thread). The optimizer's shared
//! kernels lose more: with one relaxed access per element, dense AdamAsync steps and sparse ones
//! over random rows take about 3.4x the time of the same kernels on `&mut` slices, with line
//! copies 1.0x (dense) and 1.3x (sparse; `benches/optim.rs`). A classifier's output layer is
//! read twice and stepped once per instance, every row of it (45 classes of 101 weights on
//! WordNet's glosses): with one scalar atomic per element, and a dot product summed one
//! element after another, 5 epochs took 3.7-4.0 s of CPU, with these loops 1.7-1.8 s.
//!
//! On x86-64 processors with AVX, Intel and AMD guarantee that an aligned 16-byte load or store
//! by `vmovaps` is one atomic access (Intel SDM vol. 3A, "Guaranteed Atomic Operations"; AMD APM
//! vol. 2, "Memory Access Atomicity"). Such an access is stronger than what it stands for here,
//! one relaxed atomic access of each of the cells it covers (four `AtomicU32`, two `AtomicU64`
//! or eight `AtomicU16`, each naturally aligned inside the 16 bytes), so the copies below do
//! exactly what the portable loops do, with the same result whatever other threads do. Wider
//! accesses (32 or 64 bytes) carry no such guarantee, not even per element, so none is used,
//! though one 64-byte access per line would be cheaper still. Only the `vmovaps` instructions in
//! the assembly touch memory; the other instructions there move registers. Runs go through inline
//! assembly for their aligned 16-byte middle and through the portable loop for the unaligned
//! ends, other processors, other architectures and Miri.

use super::AtomicF32;
use super::SharedReal;

/// How a kernel copies a line (64 bytes) of cells into a line of values and back: [`ByCell`]
/// everywhere, and on x86-64 with AVX (outside Miri, which runs no inline assembly) four 16-byte
/// accesses, assembled into vector registers for code compiled for the build target ([`Sse`]),
/// AVX2 ([`Avx`]) or AVX-512F ([`Avx512`]). Each hands the values over in registers: writing each
/// 16 bytes
/// into a local line instead made the compiler spill the lines to the stack and reload them in
/// pieces of another size, which stalls on store forwarding (the sparse shared kernel ran 2.5x
/// slower).
pub(crate) trait LineCopy {
    /// Whether [`LineCopy::load`] and [`LineCopy::store`] copy whole lines; when false the
    /// kernels copy cell by cell and never call them.
    const LINES: bool;

    /// The line of values the line of `cells` holds.
    ///
    /// # Safety
    ///
    /// `cells` is one line long (`size_of::<T::Line>()` bytes) and starts on a 16-byte boundary,
    /// and the processor has what the type needs ([`line_copy`] says which apply).
    unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line;

    /// Stores `line` into the line of `cells`.
    ///
    /// # Safety
    ///
    /// As for [`LineCopy::load`].
    unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line);
}

/// One relaxed atomic access per cell (the portable copy: the kernels do it themselves).
pub(crate) struct ByCell;

impl LineCopy for ByCell {
    const LINES: bool = false;

    #[inline(always)]
    unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
        let mut line = T::ZERO_LINE;
        for (x, cell) in line.as_mut().iter_mut().zip(cells) {
            *x = T::load(cell);
        }
        line
    }

    #[inline(always)]
    unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
        for (cell, &x) in cells.iter().zip(line.as_ref()) {
            T::store(cell, x);
        }
    }
}

/// Which code the shared kernels run on this processor: compiled for AVX-512F, AVX2 or the build
/// target with 16-byte line copies ([`Avx512`], [`Avx`], [`Sse`]; AVX is required for any), or
/// cell by cell ([`ByCell`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines {
    ByCell,
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    Sse,
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    Avx2,
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    Avx512,
}

/// The [`Lines`] this processor allows, the widest first.
#[inline(always)]
pub(crate) fn line_copy() -> Lines {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx") {
            if has!("avx512f") {
                return Lines::Avx512;
            }
            if has!("avx2") {
                return Lines::Avx2;
            }
            return Lines::Sse;
        }
    }
    Lines::ByCell
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) use x86::{Avx, Avx512, Sse};

/// Copies `cells` into `out`, element by element a relaxed atomic load (lengths must match).
#[inline(always)]
pub(crate) fn load(cells: &[AtomicF32], out: &mut [f32]) {
    assert_eq!(cells.len(), out.len(), "bulk load of unequal lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (checked just above) and the lengths are equal.
        unsafe { x86::load(cells, out) };
        return;
    }
    for (o, c) in out.iter_mut().zip(cells) {
        *o = c.load();
    }
}

/// Copies `values` into `cells`, element by element a relaxed atomic store (lengths must match).
#[inline(always)]
pub(crate) fn store(cells: &[AtomicF32], values: &[f32]) {
    assert_eq!(cells.len(), values.len(), "bulk store of unequal lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (checked just above) and the lengths are equal.
        unsafe { x86::store(cells, values) };
        return;
    }
    for (c, &v) in cells.iter().zip(values) {
        c.store(v);
    }
}

/// `out += scale * cells`, each cell read by a relaxed atomic load (lengths must match).
#[inline(always)]
pub(crate) fn add_to(cells: &[AtomicF32], scale: f32, out: &mut [f32]) {
    assert_eq!(cells.len(), out.len(), "bulk add of unequal lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if cells.len() >= MIN_RUN && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (checked just above) and the lengths are equal.
        unsafe { x86::add_to(cells, scale, out) };
        return;
    }
    for (o, c) in out.iter_mut().zip(cells) {
        *o += scale * c.load();
    }
}

/// The shortest run that [`dot`], [`add_to`] and [`sgd_step`] hand to their vector code: a
/// shorter one (a 10-wide row) is mostly unaligned ends, and the inlined element loop is
/// faster than the call (the bag-of-words model at dim 10 trained BBC about 20 % slower).
const MIN_RUN: usize = 16;

/// The dot product of `cells` and `x`, each cell read by a relaxed atomic load (lengths must
/// match). Summed in eight running sums, not one after another: a single sum waits on each
/// addition in turn.
#[inline(always)]
pub(crate) fn dot(cells: &[AtomicF32], x: &[f32]) -> f32 {
    assert_eq!(cells.len(), x.len(), "bulk dot of unequal lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if cells.len() >= MIN_RUN && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (checked just above) and the lengths are equal.
        return unsafe { x86::dot(cells, x) };
    }
    let mut sums = [0.0f32; 8];
    for (k, (c, &x)) in cells.iter().zip(x).enumerate() {
        sums[k % 8] += c.load() * x;
    }
    sums.iter().sum()
}

/// Plain SGD's step of `cells` with gradient `scale * grad`: each cell becomes
/// `cell - lr * (grad * scale)`, one relaxed load and one relaxed store per cell (as the
/// element rule through the store's rows; a concurrent store between the two can be lost).
/// Lengths must match.
#[inline(always)]
pub(crate) fn sgd_step(cells: &[AtomicF32], grad: &[f32], scale: f32, lr: f32) {
    assert_eq!(cells.len(), grad.len(), "bulk step of unequal lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if cells.len() >= MIN_RUN && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the processor has AVX (checked just above) and the lengths are equal.
        unsafe { x86::sgd_step(cells, grad, scale, lr) };
        return;
    }
    for (c, &g) in cells.iter().zip(grad) {
        c.store(c.load() - lr * (g * scale));
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::{
        __m128, _mm_add_ps, _mm_loadu_ps, _mm_mul_ps, _mm_set1_ps, _mm_setzero_ps, _mm_storeu_ps,
        _mm_sub_ps,
    };

    use super::{AtomicF32, LineCopy, SharedReal};

    /// The four 16-byte pieces of the line of cells at `cells`, each loaded by one aligned
    /// `vmovaps`.
    ///
    /// Not `#[target_feature]`: it inlines into every variant (AVX-512, AVX2, build target), and
    /// its only AVX instructions are in the assembly, which the callers vouch for.
    ///
    /// # Safety
    /// The processor supports AVX; `cells` starts on a 16-byte boundary and is 64 bytes long.
    #[inline(always)]
    unsafe fn load4<C>(cells: &[C]) -> [__m128; 4] {
        let (a, b, c, d): (__m128, __m128, __m128, __m128);
        // SAFETY: the four 16-byte ranges lie inside the 64-byte line (the contract) and start
        // on 16-byte boundaries (the line does), so each is an aligned 16-byte `vmovaps` load,
        // one atomic access on an AVX processor: each cell it covers (2, 4 or 8 bytes, naturally
        // aligned, so never split by a 16-byte boundary) is read whole, as a relaxed atomic load
        // reads it. The pointer comes from the shared slice of cells, which allows reads; nothing
        // else is touched.
        unsafe {
            asm!(
                "vmovaps {a}, xmmword ptr [{p}]",
                "vmovaps {b}, xmmword ptr [{p} + 16]",
                "vmovaps {c}, xmmword ptr [{p} + 32]",
                "vmovaps {d}, xmmword ptr [{p} + 48]",
                p = in(reg) cells.as_ptr(),
                a = out(xmm_reg) a,
                b = out(xmm_reg) b,
                c = out(xmm_reg) c,
                d = out(xmm_reg) d,
                options(nostack, preserves_flags, readonly),
            );
        }
        [a, b, c, d]
    }

    /// Stores four 16-byte pieces into the line of cells at `cells`, each by one aligned
    /// `vmovaps`.
    ///
    /// # Safety
    /// As for [`load4`].
    #[inline(always)]
    unsafe fn store4<C>(cells: &[C], [a, b, c, d]: [__m128; 4]) {
        // SAFETY: as in `load4`, four aligned 16-byte `vmovaps` stores inside the line of cells,
        // each one atomic access on an AVX processor that writes every cell it covers whole, as
        // a relaxed atomic store writes it. The cells are atomics (interior mutability), so
        // writing them through a pointer derived from a shared reference is allowed.
        unsafe {
            asm!(
                "vmovaps xmmword ptr [{p}], {a}",
                "vmovaps xmmword ptr [{p} + 16], {b}",
                "vmovaps xmmword ptr [{p} + 32], {c}",
                "vmovaps xmmword ptr [{p} + 48], {d}",
                p = in(reg) cells.as_ptr(),
                a = in(xmm_reg) a,
                b = in(xmm_reg) b,
                c = in(xmm_reg) c,
                d = in(xmm_reg) d,
                options(nostack, preserves_flags),
            );
        }
    }

    /// Line copies for code compiled for the build target on an AVX processor: the values as four
    /// 16-byte registers.
    pub(crate) struct Sse;

    impl LineCopy for Sse {
        const LINES: bool = true;

        /// # Safety
        /// As for [`LineCopy::load`]; the processor supports AVX.
        #[inline(always)]
        unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
            // SAFETY: the contract (AVX, aligned, one line).
            let regs = unsafe { load4(cells) };
            // SAFETY: both are 64 bytes (`SharedReal` asserts it of every line), and any bits
            // are a valid line of floats (`SharedReal`'s types accept every bit pattern).
            unsafe { std::mem::transmute_copy::<[__m128; 4], T::Line>(&regs) }
        }

        /// # Safety
        /// As for [`LineCopy::store`]; the processor supports AVX.
        #[inline(always)]
        unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
            // SAFETY: both are 64 bytes; any bits are valid registers.
            let regs = unsafe { std::mem::transmute_copy::<T::Line, [__m128; 4]>(line) };
            // SAFETY: the contract (AVX, aligned, one line).
            unsafe { store4(cells, regs) }
        }
    }

    /// Line copies for code compiled for AVX2: the values as two 32-byte registers.
    pub(crate) struct Avx;

    impl LineCopy for Avx {
        const LINES: bool = true;

        /// # Safety
        /// As for [`LineCopy::load`]; the processor supports AVX (the caller's code is compiled
        /// for AVX2).
        #[inline(always)]
        unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
            // SAFETY: the contract.
            unsafe { avx::load::<T>(cells) }
        }

        /// # Safety
        /// As for [`LineCopy::store`]; the processor supports AVX.
        #[inline(always)]
        unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
            // SAFETY: the contract.
            unsafe { avx::store::<T>(cells, line) }
        }
    }

    /// Line copies for code compiled for AVX-512F: the values as one 64-byte register.
    pub(crate) struct Avx512;

    impl LineCopy for Avx512 {
        const LINES: bool = true;

        /// # Safety
        /// As for [`LineCopy::load`]; the processor supports AVX-512F and AVX.
        #[inline(always)]
        unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
            // SAFETY: the contract.
            unsafe { avx512::load::<T>(cells) }
        }

        /// # Safety
        /// As for [`LineCopy::store`]; the processor supports AVX-512F and AVX.
        #[inline(always)]
        unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
            // SAFETY: the contract.
            unsafe { avx512::store::<T>(cells, line) }
        }
    }

    /// The 64-byte register is assembled inside the assembly block (`vinsertf32x4`), since the
    /// AVX-512 intrinsics that would do it in Rust need Rust 1.89, beyond the workspace's
    /// minimum; only the four `vmovaps` in each block touch memory.
    mod avx512 {
        use std::arch::asm;
        use std::arch::x86_64::__m512;

        use super::SharedReal;

        /// # Safety
        /// As for `LineCopy::load`; the processor supports AVX-512F and AVX.
        #[inline]
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
            let line: __m512;
            // SAFETY: as in `load4`: four aligned 16-byte `vmovaps` loads inside the line of
            // cells (the contract), each one atomic access on an AVX processor that reads every
            // cell it covers whole, as a relaxed atomic load reads it; the `vinsertf32x4` only
            // move registers. The pointer comes from the shared slice of cells, which allows
            // reads; nothing else is touched.
            unsafe {
                asm!(
                    "vmovaps {a}, xmmword ptr [{p}]",
                    "vmovaps {b}, xmmword ptr [{p} + 16]",
                    "vmovaps {c}, xmmword ptr [{p} + 32]",
                    "vmovaps {d}, xmmword ptr [{p} + 48]",
                    "vinsertf32x4 {line}, {a:z}, {b}, 1",
                    "vinsertf32x4 {line}, {line}, {c}, 2",
                    "vinsertf32x4 {line}, {line}, {d}, 3",
                    p = in(reg) cells.as_ptr(),
                    a = out(xmm_reg) _,
                    b = out(xmm_reg) _,
                    c = out(xmm_reg) _,
                    d = out(xmm_reg) _,
                    line = out(zmm_reg) line,
                    options(nostack, preserves_flags, readonly),
                );
            }
            // SAFETY: both are 64 bytes (`SharedReal` asserts it of every line), and any bits
            // are a valid line of floats.
            unsafe { std::mem::transmute_copy::<__m512, T::Line>(&line) }
        }

        /// # Safety
        /// As for `LineCopy::store`; the processor supports AVX-512F and AVX.
        #[inline]
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
            // SAFETY: both are 64 bytes; any bits are a valid register.
            let line = unsafe { std::mem::transmute_copy::<T::Line, __m512>(line) };
            // SAFETY: as in `store4`: four aligned 16-byte `vmovaps` stores inside the line of
            // cells, each one atomic access on an AVX processor that writes every cell it covers
            // whole, as a relaxed atomic store writes it; the `vextractf32x4` only move
            // registers. The cells are atomics (interior mutability), so writing them through a
            // pointer derived from a shared reference is allowed.
            unsafe {
                asm!(
                    "vextractf32x4 {a}, {line}, 0",
                    "vextractf32x4 {b}, {line}, 1",
                    "vextractf32x4 {c}, {line}, 2",
                    "vextractf32x4 {d}, {line}, 3",
                    "vmovaps xmmword ptr [{p}], {a}",
                    "vmovaps xmmword ptr [{p} + 16], {b}",
                    "vmovaps xmmword ptr [{p} + 32], {c}",
                    "vmovaps xmmword ptr [{p} + 48], {d}",
                    p = in(reg) cells.as_ptr(),
                    line = in(zmm_reg) line,
                    a = out(xmm_reg) _,
                    b = out(xmm_reg) _,
                    c = out(xmm_reg) _,
                    d = out(xmm_reg) _,
                    options(nostack, preserves_flags),
                );
            }
        }
    }

    mod avx {
        use std::arch::x86_64::{
            __m256, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm256_set_m128,
        };

        use super::{load4, store4, SharedReal};

        /// # Safety
        /// As for `LineCopy::load`; the processor supports AVX.
        #[inline]
        #[target_feature(enable = "avx")]
        pub(super) unsafe fn load<T: SharedReal>(cells: &[T::Cell]) -> T::Line {
            // SAFETY: the contract (AVX, aligned, one line).
            let [a, b, c, d] = unsafe { load4(cells) };
            let halves = [_mm256_set_m128(b, a), _mm256_set_m128(d, c)];
            // SAFETY: both are 64 bytes (`SharedReal` asserts it of every line), and any bits
            // are a valid line of floats.
            unsafe { std::mem::transmute_copy::<[__m256; 2], T::Line>(&halves) }
        }

        /// # Safety
        /// As for `LineCopy::store`; the processor supports AVX.
        #[inline]
        #[target_feature(enable = "avx")]
        pub(super) unsafe fn store<T: SharedReal>(cells: &[T::Cell], line: &T::Line) {
            // SAFETY: both are 64 bytes; any bits are valid registers.
            let [lo, hi] = unsafe { std::mem::transmute_copy::<T::Line, [__m256; 2]>(line) };
            let regs = [
                _mm256_castps256_ps128(lo),
                _mm256_extractf128_ps::<1>(lo),
                _mm256_castps256_ps128(hi),
                _mm256_extractf128_ps::<1>(hi),
            ];
            // SAFETY: the contract (AVX, aligned, one line).
            unsafe { store4(cells, regs) }
        }
    }

    /// The four cells at `p`, read by one aligned 16-byte `vmovaps`.
    ///
    /// # Safety
    /// The processor supports AVX, and the four cells from `p` lie inside one slice of cells
    /// and start on a 16-byte boundary.
    #[inline(always)]
    unsafe fn load16(p: *const AtomicF32) -> __m128 {
        let v: __m128;
        // SAFETY: by the contract an aligned 16-byte load inside the slice, one atomic access
        // on an AVX processor: each of the four cells is read whole, as a relaxed atomic load
        // reads it. The pointer comes from a shared slice of cells, which allow reads through
        // shared references; nothing else is touched.
        unsafe {
            asm!(
                "vmovaps {v}, xmmword ptr [{p}]",
                p = in(reg) p,
                v = out(xmm_reg) v,
                options(nostack, preserves_flags, readonly),
            );
        }
        v
    }

    /// Stores `v` into the four cells at `p` by one aligned 16-byte `vmovaps`.
    ///
    /// # Safety
    /// As for [`load16`].
    #[inline(always)]
    unsafe fn store16(p: *const AtomicF32, v: __m128) {
        // SAFETY: by the contract one atomic 16-byte store on an AVX processor: each cell is
        // written whole, as a relaxed atomic store writes it. The cells are atomics (interior
        // mutability), so writing them through a pointer derived from a shared reference is
        // allowed.
        unsafe {
            asm!(
                "vmovaps xmmword ptr [{p}], {v}",
                p = in(reg) p,
                v = in(xmm_reg) v,
                options(nostack, preserves_flags),
            );
        }
    }

    /// Cells before the first 16-byte boundary of `cells` (at most `cells.len()`).
    #[inline(always)]
    fn head(cells: &[AtomicF32]) -> usize {
        let misaligned = cells.as_ptr() as usize & 15;
        // Cells are 4-byte aligned, so `misaligned` is 0, 4, 8 or 12.
        (((16 - misaligned) & 15) / 4).min(cells.len())
    }

    /// # Safety
    /// The processor must support AVX, and `out.len() == cells.len()`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn load(cells: &[AtomicF32], out: &mut [f32]) {
        let n = cells.len();
        let mut i = head(cells);
        for k in 0..i {
            out[k] = cells[k].load();
        }
        let base = cells.as_ptr();
        while i + 4 <= n {
            // SAFETY: cells `i..i + 4` are in bounds (`i + 4 <= n`) and start on a 16-byte
            // boundary (`head` skipped to it, and 4 cells are 16 bytes); the processor has AVX.
            let v = unsafe { load16(base.add(i)) };
            // SAFETY: `i + 4 <= n == out.len()`, so the 16 bytes written are inside `out`.
            unsafe { _mm_storeu_ps(out.as_mut_ptr().add(i), v) };
            i += 4;
        }
        for k in i..n {
            out[k] = cells[k].load();
        }
    }

    /// # Safety
    /// The processor must support AVX, and `values.len() == cells.len()`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn store(cells: &[AtomicF32], values: &[f32]) {
        let n = cells.len();
        let mut i = head(cells);
        for k in 0..i {
            cells[k].store(values[k]);
        }
        let base = cells.as_ptr();
        while i + 4 <= n {
            // SAFETY: `i + 4 <= n == values.len()`, so the 16 bytes read are inside `values`.
            let v = unsafe { _mm_loadu_ps(values.as_ptr().add(i)) };
            // SAFETY: cells `i..i + 4` are in bounds and 16-byte aligned, as in `load`.
            unsafe { store16(base.add(i), v) };
            i += 4;
        }
        for k in i..n {
            cells[k].store(values[k]);
        }
    }

    /// # Safety
    /// The processor must support AVX, and `out.len() == cells.len()`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn add_to(cells: &[AtomicF32], scale: f32, out: &mut [f32]) {
        let n = cells.len();
        let mut i = head(cells);
        for k in 0..i {
            out[k] += scale * cells[k].load();
        }
        let base = cells.as_ptr();
        let scale4 = _mm_set1_ps(scale);
        while i + 4 <= n {
            // SAFETY: cells `i..i + 4` are in bounds and 16-byte aligned, as in `load`.
            let v = unsafe { load16(base.add(i)) };
            // SAFETY: `i + 4 <= n == out.len()`, so the 16 bytes read and written are in `out`.
            unsafe {
                let o = out.as_mut_ptr().add(i);
                _mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), _mm_mul_ps(scale4, v)));
            }
            i += 4;
        }
        for k in i..n {
            out[k] += scale * cells[k].load();
        }
    }

    /// # Safety
    /// The processor must support AVX, and `x.len() == cells.len()`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn dot(cells: &[AtomicF32], x: &[f32]) -> f32 {
        let n = cells.len();
        let mut i = head(cells);
        let mut edge = 0.0f32;
        for k in 0..i {
            edge += cells[k].load() * x[k];
        }
        let base = cells.as_ptr();
        let (mut a, mut b) = (_mm_setzero_ps(), _mm_setzero_ps());
        while i + 8 <= n {
            // SAFETY: cells `i..i + 8` are in bounds and start on a 16-byte boundary, as in
            // `load`, so both runs of four are.
            let (v, w) = unsafe { (load16(base.add(i)), load16(base.add(i + 4))) };
            // SAFETY: `i + 8 <= n == x.len()`, so the 32 bytes read are inside `x`.
            let (xv, xw) = unsafe {
                (
                    _mm_loadu_ps(x.as_ptr().add(i)),
                    _mm_loadu_ps(x.as_ptr().add(i + 4)),
                )
            };
            a = _mm_add_ps(a, _mm_mul_ps(v, xv));
            b = _mm_add_ps(b, _mm_mul_ps(w, xw));
            i += 8;
        }
        for k in i..n {
            edge += cells[k].load() * x[k];
        }
        let mut sums = [0.0f32; 4];
        // SAFETY: `sums` is 16 bytes.
        unsafe { _mm_storeu_ps(sums.as_mut_ptr(), _mm_add_ps(a, b)) };
        (sums[0] + sums[2]) + (sums[1] + sums[3]) + edge
    }

    /// # Safety
    /// The processor must support AVX, and `grad.len() == cells.len()`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn sgd_step(cells: &[AtomicF32], grad: &[f32], scale: f32, lr: f32) {
        let n = cells.len();
        let mut i = head(cells);
        for k in 0..i {
            cells[k].store(cells[k].load() - lr * (grad[k] * scale));
        }
        let base = cells.as_ptr();
        let (scale4, lr4) = (_mm_set1_ps(scale), _mm_set1_ps(lr));
        while i + 4 <= n {
            // SAFETY: cells `i..i + 4` are in bounds and 16-byte aligned, as in `load`.
            let w = unsafe { load16(base.add(i)) };
            // SAFETY: `i + 4 <= n == grad.len()`, so the 16 bytes read are inside `grad`.
            let g = unsafe { _mm_loadu_ps(grad.as_ptr().add(i)) };
            let out = _mm_sub_ps(w, _mm_mul_ps(lr4, _mm_mul_ps(g, scale4)));
            // SAFETY: the same cells.
            unsafe { store16(base.add(i), out) };
            i += 4;
        }
        for k in i..n {
            cells[k].store(cells[k].load() - lr * (grad[k] * scale));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn cells(n: usize) -> Vec<AtomicF32> {
        (0..n)
            .map(|i| AtomicF32::new(i as f32 * 0.5 - 3.0))
            .collect()
    }

    #[test]
    fn load_and_store_match_the_element_loop_at_every_offset_and_length() {
        let all = cells(64);
        for start in 0..8 {
            for len in 0..40 {
                let run = &all[start..start + len];
                let mut got = vec![f32::NAN; len];
                load(run, &mut got);
                let want: Vec<f32> = run.iter().map(AtomicF32::load).collect();
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "load start {start} len {len}"
                );

                let target = cells(64);
                let values: Vec<f32> = (0..len).map(|i| -(i as f32) - 0.25).collect();
                store(&target[start..start + len], &values);
                for (i, c) in target.iter().enumerate() {
                    let want = if (start..start + len).contains(&i) {
                        values[i - start]
                    } else {
                        i as f32 * 0.5 - 3.0
                    };
                    assert_eq!(
                        c.load().to_bits(),
                        want.to_bits(),
                        "store start {start} len {len}: cell {i}"
                    );
                }
            }
        }
    }

    /// Two lines of `T` cells starting on a 64-byte boundary, holding distinct bit patterns.
    fn two_lines<T: SharedReal>() -> (Vec<T::Cell>, usize) {
        let per_line = std::mem::size_of::<T::Line>() / std::mem::size_of::<T>();
        let cells: Vec<T::Cell> = (0..4 * per_line)
            .map(|i| T::cell(T::from(i as f64 * 0.25 - 3.0).unwrap()))
            .collect();
        let start = (64 - cells.as_ptr() as usize % 64) % 64 / std::mem::size_of::<T>();
        (cells, start)
    }

    /// Every line copy this processor allows reads and writes what the cell-by-cell copy does.
    fn line_copies_match_the_cell_copy<T: SharedReal>(name: &str) {
        let per_line = std::mem::size_of::<T::Line>() / std::mem::size_of::<T>();
        let bits =
            |xs: &[T]| -> Vec<u64> { xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect() };
        let copies: Vec<(&str, LineCopyFns<T>)> = line_copies::<T>();
        for (copy, (load, store)) in copies {
            let (cells, start) = two_lines::<T>();
            // A line at a 64-byte boundary and one 16 bytes past it (a 16-byte boundary).
            for first in [start, start + 16 / std::mem::size_of::<T>()] {
                let line = &cells[first..first + per_line];
                // SAFETY: one line, 16-byte aligned; `line_copies` lists only the copies this
                // processor allows.
                let got = unsafe { load(line) };
                // SAFETY: as above.
                let want = unsafe { ByCell::load::<T>(line) };
                assert_eq!(
                    bits(got.as_ref()),
                    bits(want.as_ref()),
                    "{name} {copy}: load"
                );
                let mut doubled = want;
                for x in doubled.as_mut() {
                    *x = *x + *x;
                }
                let before: Vec<T> = cells.iter().map(T::load).collect();
                // SAFETY: as above.
                unsafe { store(line, &doubled) };
                for (i, cell) in cells.iter().enumerate() {
                    let want = if (first..first + per_line).contains(&i) {
                        doubled.as_ref()[i - first]
                    } else {
                        before[i]
                    };
                    assert_eq!(
                        T::load(cell).to_f64_lossy().to_bits(),
                        want.to_f64_lossy().to_bits(),
                        "{name} {copy}: store, cell {i}"
                    );
                }
            }
        }
    }

    type LineCopyFns<T> = (
        unsafe fn(&[<T as SharedReal>::Cell]) -> <T as SharedReal>::Line,
        unsafe fn(&[<T as SharedReal>::Cell], &<T as SharedReal>::Line),
    );

    /// The line copies this processor allows, by name.
    fn line_copies<T: SharedReal>() -> Vec<(&'static str, LineCopyFns<T>)> {
        let by_cell: LineCopyFns<T> = (ByCell::load::<T>, ByCell::store::<T>);
        let mut all = vector_copies::<T>();
        all.insert(0, ("by cell", by_cell));
        all
    }

    /// The 16-byte line copies this processor allows (none under Miri or off x86-64).
    fn vector_copies<T: SharedReal>() -> Vec<(&'static str, LineCopyFns<T>)> {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            let lines = line_copy();
            let mut all: Vec<(&str, LineCopyFns<T>)> = Vec::new();
            if lines != Lines::ByCell {
                all.push(("sse", (Sse::load::<T>, Sse::store::<T>)));
            }
            if matches!(lines, Lines::Avx2 | Lines::Avx512) {
                all.push(("avx", (Avx::load::<T>, Avx::store::<T>)));
            }
            if lines == Lines::Avx512 {
                all.push(("avx512", (Avx512::load::<T>, Avx512::store::<T>)));
            }
            all
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        Vec::new()
    }

    #[test]
    fn line_copies_match_the_cell_copy_for_every_type() {
        line_copies_match_the_cell_copy::<f32>("f32");
        line_copies_match_the_cell_copy::<f64>("f64");
        line_copies_match_the_cell_copy::<half::f16>("f16");
        line_copies_match_the_cell_copy::<half::bf16>("bf16");
    }

    /// Two writers store whole lines of one pattern each while a reader copies the line, with
    /// every copy this processor allows: every element read is one of the values written, never
    /// a mix of two.
    #[test]
    fn concurrent_line_copies_see_only_whole_elements() {
        let (cells, start) = two_lines::<f32>();
        let line = &cells[start..start + 16];
        let patterns = [f32::from_bits(0x3f80_0000), f32::from_bits(0xc0a5_5a5a)];
        let initial: Vec<u32> = line.iter().map(|c| c.load().to_bits()).collect();
        let rounds = if cfg!(miri) { 20 } else { 20_000 };
        for (copy, (load, store)) in line_copies::<f32>() {
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                for &p in &patterns {
                    let stop = &stop;
                    s.spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            // SAFETY: one 64-byte-aligned line; a copy this processor allows.
                            unsafe { store(line, &[p; 16]) };
                        }
                    });
                }
                for _ in 0..rounds {
                    // SAFETY: as above.
                    let got = unsafe { load(line) };
                    for (i, x) in got.iter().enumerate() {
                        assert!(
                            patterns.iter().any(|p| p.to_bits() == x.to_bits())
                                || x.to_bits() == initial[i],
                            "{copy}: element {i} read as {:#x}",
                            x.to_bits()
                        );
                    }
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
    }

    #[test]
    fn dot_add_to_and_sgd_step_match_the_element_loop_at_every_offset_and_length() {
        for start in 0..8 {
            for len in 0..40 {
                let all = cells(64);
                let run = &all[start..start + len];
                let mut got = vec![1.5f32; len];
                add_to(run, -0.75, &mut got);
                let want: Vec<f32> = run.iter().map(|c| 1.5 + -0.75 * c.load()).collect();
                assert_eq!(got, want, "add_to at offset {start}, length {len}");

                let grad: Vec<f32> = (0..len).map(|i| i as f32 * 0.3 - 1.7).collect();
                // Summed in another order than one after another: within rounding of the
                // exact sum.
                let terms = run
                    .iter()
                    .zip(&grad)
                    .map(|(c, &g)| c.load() as f64 * g as f64);
                let (exact, size) = terms.fold((0.0, 0.0), |(s, a), t| (s + t, a + t.abs()));
                let got = dot(run, &grad) as f64;
                assert!(
                    (got - exact).abs() <= 1e-6 * size,
                    "dot at offset {start}, length {len}: {got} against {exact}"
                );

                let want: Vec<f32> = run
                    .iter()
                    .zip(&grad)
                    .map(|(c, g)| c.load() - 0.05 * (g * 1.3))
                    .collect();
                sgd_step(run, &grad, 1.3, 0.05);
                let got: Vec<f32> = run.iter().map(AtomicF32::load).collect();
                assert_eq!(got, want, "sgd_step at offset {start}, length {len}");
            }
        }
    }

    /// Two threads step the same run by +1 per call: every cell ends at a whole number of
    /// steps (never a torn mix of two stores), at most one per call of each thread.
    #[test]
    fn concurrent_sgd_steps_store_whole_elements() {
        let run: Vec<AtomicF32> = (0..37).map(|i| AtomicF32::new(i as f32)).collect();
        let rounds = if cfg!(miri) { 10 } else { 20_000 };
        std::thread::scope(|s| {
            for _ in 0..2 {
                let run = &run;
                s.spawn(move || {
                    let grad = vec![1.0f32; run.len()];
                    for _ in 0..rounds {
                        sgd_step(run, &grad, 1.0, -1.0);
                    }
                });
            }
        });
        for (i, c) in run.iter().enumerate() {
            let steps = c.load() - i as f32;
            assert!(
                steps == steps.trunc() && (1.0..=2.0 * rounds as f32).contains(&steps),
                "cell {i} moved by {steps}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "unequal lengths")]
    fn load_of_unequal_lengths_panics() {
        load(&cells(4), &mut [0.0; 3]);
    }

    #[test]
    #[should_panic(expected = "unequal lengths")]
    fn store_of_unequal_lengths_panics() {
        store(&cells(4), &[0.0; 5]);
    }

    /// Two writers store whole runs of one value each while a reader copies the run: every
    /// element read is one of the values written, never a mix of two.
    #[test]
    fn concurrent_copies_see_only_whole_elements() {
        let run = cells(37);
        let patterns = [f32::from_bits(0x3f80_0000), f32::from_bits(0xc0a5_5a5a)];
        let stop = AtomicBool::new(false);
        let rounds = if cfg!(miri) { 20 } else { 20_000 };
        std::thread::scope(|s| {
            for &p in &patterns {
                let (run, stop) = (&run[1..], &stop);
                s.spawn(move || {
                    let values = vec![p; run.len()];
                    while !stop.load(Ordering::Relaxed) {
                        store(run, &values);
                    }
                });
            }
            let mut out = vec![0.0f32; 36];
            for _ in 0..rounds {
                load(&run[1..], &mut out);
                for (i, x) in out.iter().enumerate() {
                    let initial = (i + 1) as f32 * 0.5 - 3.0;
                    assert!(
                        patterns.iter().any(|p| p.to_bits() == x.to_bits())
                            || x.to_bits() == initial.to_bits(),
                        "element {i} read as {:#x}",
                        x.to_bits()
                    );
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
}
