//! The memory behind a table: zero-filled [`AtomicF32`] cells, backed by transparent huge pages
//! when the table is large.
//!
//! Training reads and writes rows at random. With 4 KiB pages every row of a table larger than
//! the TLB's reach (a few MiB) costs a page walk besides the cache miss, twice as long under a
//! hypervisor's nested paging; with 2 MiB pages an 80 MiB table needs 40 TLB entries. Linux gives
//! huge pages to anonymous memory marked `MADV_HUGEPAGE` (the usual `madvise` setting of
//! `/sys/kernel/mm/transparent_hugepage/enabled`), so a large table is its own 2 MiB-aligned
//! anonymous mapping marked so before any page is touched. The mapping reads as zeros and pages
//! are only backed when first written, so a fresh table costs no time and no memory until the
//! model's startup fills it (in parallel, for the models that do). Elsewhere, under Miri, and for
//! small tables the cells come from the global allocator, zeroed.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

use super::AtomicF32;

/// The cache line size of x86-64 and most AArch64 processors.
const CACHE_LINE: usize = 64;
/// The huge page size of x86-64 and AArch64 Linux with 4 KiB base pages.
const HUGE_PAGE: usize = 2 << 20;
/// A multiple of every base page size Linux uses (4, 16 or 64 KiB).
#[cfg(all(target_os = "linux", not(miri)))]
const BASE_PAGE: usize = 64 << 10;

/// Zero-initialised cells owned like a `Box<[AtomicF32]>`.
pub(super) struct Cells {
    ptr: NonNull<AtomicF32>,
    len: usize,
    source: Source,
}

/// Where the cells' memory came from, which says how to give it back.
enum Source {
    Heap(Layout),
    #[cfg_attr(any(miri, not(target_os = "linux")), allow(dead_code))]
    Mapped {
        base: *mut libc::c_void,
        bytes: usize,
    },
}

// SAFETY: `Cells` owns its memory exclusively (like a `Box<[AtomicF32]>`, which is Send) and hands
// out only `&[AtomicF32]`; `AtomicF32` is `Send + Sync`, so moving the owner to another thread is
// sound. The raw pointers are never shared outside the struct.
unsafe impl Send for Cells {}
// SAFETY: shared access is only through `&[AtomicF32]`, whose elements are atomics (Sync).
unsafe impl Sync for Cells {}

impl Cells {
    /// `len` zero cells; `None` when `len` cells do not fit in the address space or the memory
    /// cannot be had.
    pub(super) fn zeroed(len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<AtomicF32>())?;
        if bytes >= HUGE_PAGE {
            if let Some(cells) = Self::mapped(len, bytes) {
                return Some(cells);
            }
        }
        // Cache-line aligned, so that rows whose stride is a multiple of 4 cells start on the
        // 16-byte boundaries that whole-row copies (`bulk.rs`) move four cells at a time from.
        let layout = Layout::array::<AtomicF32>(len.max(1))
            .ok()?
            .align_to(CACHE_LINE)
            .ok()?;
        // SAFETY: the layout's size is at least one element, so not zero.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw.cast::<AtomicF32>())?;
        Some(Self {
            ptr,
            len,
            source: Source::Heap(layout),
        })
    }

    /// A 2 MiB-aligned anonymous mapping advised for huge pages, or `None` when the system
    /// refuses (the caller falls back to the heap).
    #[cfg(all(target_os = "linux", not(miri)))]
    fn mapped(len: usize, bytes: usize) -> Option<Self> {
        // Whole base pages only: the last, partial huge page stays in base pages (the kernel
        // uses a huge page only where one fits entirely), so RSS does not grow by the rounding.
        let bytes = bytes.checked_next_multiple_of(BASE_PAGE)?;
        // Map one huge page more than needed, then unmap the unaligned head and the tail.
        let over = bytes.checked_add(HUGE_PAGE)?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing aliases no
        // existing memory; the result is checked for MAP_FAILED before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let head = start.next_multiple_of(HUGE_PAGE) - start;
        let tail = over - head - bytes;
        // SAFETY: both ranges lie inside the mapping just made ([start, start + over)), are
        // page-aligned (the mapping and the huge page size are), and nothing refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap(raw.cast::<u8>().add(head + bytes).cast(), tail);
            }
        }
        // SAFETY: `head` is inside the mapping, so the sum stays in the same allocation.
        let base = unsafe { raw.cast::<u8>().add(head) }.cast::<libc::c_void>();
        // SAFETY: the range is exactly the remaining mapping; the advice only changes how the
        // kernel backs it. A refusal (THP disabled) leaves ordinary pages, which is still correct.
        unsafe {
            libc::madvise(base, bytes, libc::MADV_HUGEPAGE);
        }
        Some(Self {
            ptr: NonNull::new(base.cast::<AtomicF32>())?,
            len,
            source: Source::Mapped { base, bytes },
        })
    }

    #[cfg(any(miri, not(target_os = "linux")))]
    fn mapped(_len: usize, _bytes: usize) -> Option<Self> {
        None
    }

    /// Asks the kernel to back cells `range` (of a huge-page mapping; a no-op otherwise) with base
    /// pages: the whole base pages inside the range, before any of them is touched. For rows used
    /// sparsely, where a first touch would zero a whole 2 MiB page for one row.
    #[cfg(all(target_os = "linux", not(miri)))]
    pub(super) fn prefer_base_pages(&self, range: std::ops::Range<usize>) {
        let Source::Mapped { base, bytes } = self.source else {
            return;
        };
        let size = std::mem::size_of::<AtomicF32>();
        let start = (range.start * size).next_multiple_of(BASE_PAGE);
        let end = (range.end.min(self.len) * size).min(bytes) / BASE_PAGE * BASE_PAGE;
        if start < end {
            // SAFETY: `start..end` lies inside the mapping (`end <= bytes`) and is page-aligned;
            // the advice only changes how the kernel backs pages, not their contents (zero until
            // written), and a refusal leaves huge pages, which is still correct.
            unsafe {
                libc::madvise(
                    base.cast::<u8>().add(start).cast(),
                    end - start,
                    libc::MADV_NOHUGEPAGE,
                );
            }
        }
    }

    #[cfg(any(miri, not(target_os = "linux")))]
    pub(super) fn prefer_base_pages(&self, _range: std::ops::Range<usize>) {}
}

impl Deref for Cells {
    type Target = [AtomicF32];

    #[inline(always)]
    fn deref(&self) -> &[AtomicF32] {
        // SAFETY: `ptr` points to `len` initialised cells (zero bits are a valid `AtomicF32`: it
        // is a transparent `AtomicU32`), owned by `self` for as long as the borrow lasts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Cells {
    fn drop(&mut self) {
        match self.source {
            // SAFETY: the pointer came from `alloc_zeroed` with this very layout and is freed once.
            Source::Heap(layout) => unsafe { dealloc(self.ptr.as_ptr().cast(), layout) },
            #[cfg(all(target_os = "linux", not(miri)))]
            // SAFETY: `base..base + bytes` is the mapping made in `mapped`, unmapped once; no
            // reference into it outlives `self`.
            Source::Mapped { base, bytes } => unsafe {
                libc::munmap(base, bytes);
            },
            #[cfg(any(miri, not(target_os = "linux")))]
            Source::Mapped { .. } => {}
        }
    }
}

impl fmt::Debug for Cells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            Source::Heap(_) => "heap",
            Source::Mapped { .. } => "huge-page mapping",
        };
        write!(f, "Cells({} cells, {source})", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_tables_start_at_zero_and_keep_their_writes() {
        // Under Miri only the heap path runs; the large case is too slow there.
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 3, 1000]
        } else {
            &[1, 3, 1000, HUGE_PAGE / 4, 3 * HUGE_PAGE / 4 + 5]
        };
        for &len in sizes {
            let cells = Cells::zeroed(len).unwrap();
            assert_eq!(cells.len(), len);
            assert!(cells.iter().all(|c| c.load() == 0.0), "len {len}");
            cells[0].store(1.5);
            cells[len - 1].store(-2.5);
            assert_eq!(cells[0].load(), if len == 1 { -2.5 } else { 1.5 });
            assert_eq!(cells[len - 1].load(), -2.5);
        }
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn large_tables_are_huge_page_aligned_mappings() {
        let cells = Cells::zeroed(HUGE_PAGE).unwrap();
        assert!(matches!(cells.source, Source::Mapped { .. }), "{cells:?}");
        assert_eq!(cells.as_ptr() as usize % HUGE_PAGE, 0);
        let small = Cells::zeroed(16).unwrap();
        assert!(matches!(small.source, Source::Heap(_)), "{small:?}");
    }

    /// The `VmFlags` of the mapping that holds `addr`, from /proc/self/smaps.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.to_string();
                }
            }
        }
        panic!("no mapping holds {addr:#x}")
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn base_pages_are_asked_for_the_inner_whole_pages_of_a_range_only() {
        let len = 4 * HUGE_PAGE; // 8 MiB of cells: four huge pages of bytes
        let cells = Cells::zeroed(len).unwrap();
        let base = cells.as_ptr() as usize;
        let cell = std::mem::size_of::<AtomicF32>();
        // From one cell past the first huge page to the end.
        cells.prefer_base_pages(HUGE_PAGE / cell + 1..len);
        let before = vm_flags(base);
        assert!(
            before.contains(" hg"),
            "the head keeps MADV_HUGEPAGE: {before}"
        );
        assert!(!before.contains(" nh"), "{before}");
        let after = vm_flags(base + HUGE_PAGE + BASE_PAGE);
        assert!(
            after.contains(" nh"),
            "the rest is MADV_NOHUGEPAGE: {after}"
        );
        // The partial page at the range's start keeps the advice it had.
        assert!(!vm_flags(base + HUGE_PAGE).contains(" nh"));
        // A range past the end, or on the heap, changes nothing and does not fail.
        cells.prefer_base_pages(len..len + 10);
        let small = Cells::zeroed(16).unwrap();
        small.prefer_base_pages(0..16);
        cells[len - 1].store(1.0);
        assert_eq!(cells[len - 1].load(), 1.0);
    }

    #[test]
    fn sizes_beyond_the_address_space_or_memory_are_refused() {
        assert!(Cells::zeroed(usize::MAX / 2).is_none());
        if !cfg!(miri) {
            // 2^60 bytes: a valid size no system can map.
            assert!(Cells::zeroed(1 << 58).is_none());
        }
    }

    #[test]
    fn cells_move_between_threads() {
        let cells = Cells::zeroed(64).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| cells[7].store(3.0));
        });
        let moved = std::thread::spawn(move || cells[7].load()).join().unwrap();
        assert_eq!(moved, 3.0);
    }
}
