//! Copying a run of cells to and from plain `f32`s, four elements per instruction where the
//! processor guarantees that is atomic.
//!
//! A relaxed atomic load or store is one scalar instruction, and the compiler may not merge
//! atomics into vector instructions. A model that copies whole rows in and out (word2vec moves
//! six 100-float rows per pair) then spends as long copying as computing: with vector copies a
//! word2vec epoch on GCIDE trained in 9.5 s instead of 12.5 s (1 thread).
//!
//! On x86-64 processors with AVX, Intel and AMD guarantee that an aligned 16-byte load or store
//! by `vmovaps` is one atomic access (Intel SDM vol. 3A, "Guaranteed Atomic Operations"; AMD APM
//! vol. 2, "Memory Access Atomicity"). Such an access is stronger than what it stands for here,
//! four relaxed atomic accesses of the four `AtomicU32` cells it covers, so the copy below does
//! exactly what the portable loop does, with the same result whatever other threads do. It runs
//! the aligned 16-byte middle of a run through inline assembly and the unaligned ends, other
//! processors, other architectures and Miri through the portable loop.

use super::AtomicF32;

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

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::{__m128, _mm_loadu_ps, _mm_storeu_ps};

    use super::AtomicF32;

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
            let v: __m128;
            // SAFETY: cells `i..i + 4` are in bounds (`i + 4 <= n`) and start on a 16-byte
            // boundary (`head` skipped to it, and 4 cells are 16 bytes), so this is an aligned
            // 16-byte load, one atomic access on an AVX processor: each of the four cells is read
            // whole, as a relaxed atomic load reads it. The pointer comes from the shared slice,
            // whose cells allow reads through shared references; nothing else is touched.
            unsafe {
                asm!(
                    "vmovaps {v}, xmmword ptr [{p}]",
                    p = in(reg) base.add(i),
                    v = out(xmm_reg) v,
                    options(nostack, preserves_flags, readonly),
                );
            }
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
            // SAFETY: cells `i..i + 4` are in bounds and 16-byte aligned (as in `load`), so this
            // is one atomic 16-byte store on an AVX processor: each cell is written whole, as a
            // relaxed atomic store writes it. The cells are atomics (interior mutability), so
            // writing them through a pointer derived from a shared reference is allowed.
            unsafe {
                asm!(
                    "vmovaps xmmword ptr [{p}], {v}",
                    p = in(reg) base.add(i),
                    v = in(xmm_reg) v,
                    options(nostack, preserves_flags),
                );
            }
            i += 4;
        }
        for k in i..n {
            cells[k].store(values[k]);
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
