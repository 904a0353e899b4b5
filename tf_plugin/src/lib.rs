//! The bridge between the AdamAsync TensorFlow kernels (C++, `cc/kernels/`) and the core crate's
//! arithmetic (`hogwild::optim`), built with cxx.
//!
//! The C++ kernel validates shapes, takes TensorFlow's variable locks, computes the coefficients
//! once (`adam_coeffs`, `rmsprop_coeffs`), runs the element rule on each shard of the tensors
//! (`apply_dense`, `apply_sparse_rows`) and advances the beta powers once (`advance_powers`):
//! the functions of the `extern "Rust"` block of [`ffi`], which the C++ kernels call. There is
//! one bridged function per step; every tensor crosses as a [`ffi::Buffer`] (address and size
//! in bytes), which the private `cells` and `exclusive` check (whole elements, non-null,
//! aligned) before anything is read.
//!
//! # Exclusive and shared access
//!
//! TensorFlow's locking semantics decide whether another kernel may update the same variables
//! while this one runs; the kernel says which with [`ffi::Access`], and the two functions whose
//! cost depends on it take it:
//!
//! - **`Access::Exclusive`** (resource variables under exclusive locks: every dense
//!   `ResourceApplyAdamAsync`, and `ResourceSparseApplyAdamAsync` with `use_locking=True`; the
//!   kernel also checks that no two inputs share memory, and the bridge checks it again for the
//!   buffers it views as slices). No other kernel can reach the buffers, so var, m and v are
//!   viewed as `&mut [T]`, grad and the indices as slices, and they run the slice kernels
//!   ([`AdamCoeffs::apply_dense_chunk`], [`AdamCoeffs::apply_sparse_rows`]).
//! - **`Access::Shared`** (everything else: ref variables, `ApplyAdamAsync` /
//!   `SparseApplyAdamAsync`, locked or not, since an update with `use_locking=False` takes no lock
//!   and may run beside a locked one; sparse updates of resource variables under TensorFlow's
//!   shared locks). Two kernels may then update the same floats at once, and `&mut` slices of that
//!   memory would be undefined behaviour in Rust. The buffers are viewed as atomic cells
//!   ([`hogwild::store::SharedReal`], the store's atomic float family) and the core crate's shared
//!   kernels ([`AdamCoeffs::apply_dense_shared`], [`AdamCoeffs::apply_sparse_rows_shared`]) read
//!   and write every element atomically: with relaxed atomic loads and stores, or with aligned
//!   16-byte accesses that the processor makes atomic (x86-64 with AVX), a cache line at a time.
//!   Every input of the op is read that way (grad too, as a TF1 ref variable passed as an input
//!   shares its buffer); the indices are copied out once, then validated and used. No Rust
//!   reference other than cells points into a tensor buffer then, so kernels of this library
//!   running together are data-race-free. With one thread the two give the same bits (the shared
//!   kernels run the slice kernels' loops on local copies of each line). Under concurrency an
//!   element update can be lost (Hogwild), never torn.
//! - **Scalars and powers** take no flag: the hyper-parameters and powers are always loaded with
//!   relaxed atomic loads, and the powers advance with a compare-and-swap loop
//!   ([`hogwild::optim::advance_powers_shared`]). For a handful of one-element tensors that costs
//!   what plain accesses would, it is sound under either access, and it gives the sequential bits:
//!   every call advances the powers exactly once whatever the interleaving. DeepRec advances them
//!   with a plain load and store, which can lose an advance.
//!
//! What this does not cover: TensorFlow's own C++ ops that read a ref variable without its lock
//! (a forward pass reading weights while this kernel writes them) race in C++ with any writer,
//! stock or ours, as they do in stock TensorFlow.
//!
//! Half types: `Eigen::half` and `half::f16` are both IEEE binary16 and TensorFlow's `bfloat16`
//! and `half::bf16` are both the top 16 bits of an f32, so the reinterpretation keeps every bit.
//! The ops with DeepRec's signatures compute in the variable's type `T`; the V2 ops
//! (`...AdamAsyncV2`, `U = float`) pass float m, v, scalars and powers (`adam_coeffs` and
//! `advance_powers` with [`DType::F32`](ffi::DType::F32)) with f16 / bf16 var and grad, which
//! the core crate's mixed-precision kernels update in f32 ([`hogwild::optim::Widen`]).
//!
//! Errors: every bridged function returns `Result`; cxx turns an `Err` into a C++ `rust::Error`
//! exception, which the kernel turns into an `InvalidArgument` status. Each body also runs under
//! `catch_unwind`, so a panic becomes an error too and never unwinds into TensorFlow.
//!
//! Cost: shared access takes the time of exclusive access on a dense update (memory bound either
//! way) and about 1.3x on a sparse update of random rows, whose 16-byte copies keep fewer rows'
//! cache misses in flight than exclusive access's 64-byte ones (the core crate's
//! `optim/shared.rs`; docs/benchmarks.md has both paths in TensorFlow).

mod error;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use half::{bf16, f16};
use hogwild::optim::{self, AdamCoeffs, SparseIndex};
use hogwild::store::SharedReal;

pub use error::{Error, Result};

/// The cxx bridge: the types shared with the C++ kernels (namespace `adam_async` there) and the
/// Rust functions they call. Public because cxx generates it so; it is the C++ side's interface,
/// not a Rust API.
#[cxx::bridge(namespace = "adam_async")]
pub mod ffi {
    /// An element type: of var and grad (the op's `T`), of m, v, the scalars and powers (`T`,
    /// or the V2 ops' `U`).
    #[repr(u8)]
    enum DType {
        /// IEEE binary16 (`Eigen::half`, `half::f16`).
        F16 = 0,
        /// bfloat16, the top 16 bits of an f32 (`tensorflow::bfloat16`, `half::bf16`).
        BF16 = 1,
        /// f32.
        F32 = 2,
        /// f64.
        F64 = 3,
    }

    /// The element type of a sparse update's indices (the op's `Tindices`).
    #[repr(u8)]
    enum IndexType {
        /// int32 indices.
        I32 = 0,
        /// int64 indices.
        I64 = 1,
    }

    /// Whether other kernels may reach the tensors while this call runs.
    #[derive(Debug)]
    #[repr(u8)]
    enum Access {
        /// Nothing else reads or writes any of the call's buffers until it returns, and no two of
        /// them overlap: the kernel holds exclusive locks on the variables.
        Exclusive = 0,
        /// Other kernels may read and write the buffers at the same time, atomically or not at
        /// all: they are read and written with atomic accesses only.
        Shared = 1,
    }

    /// A tensor's buffer: its address and its size in bytes.
    struct Buffer {
        /// The first byte of the elements the call covers (the tensor's, or one shard's, in
        /// `tensor_data()`); not looked at when `bytes` is 0.
        data: *mut u8,
        /// Their size in bytes; the bridge refuses one that is not a whole number of elements.
        bytes: usize,
    }

    // Safety, for every function: each `Buffer` describes a live buffer of at least `bytes` bytes
    // that stays allocated until the call returns, and that everyone else accesses atomically or
    // not at all while it runs; with `Access::Exclusive`, not at all, and the buffers written do
    // not overlap any other buffer of the call.
    extern "Rust" {
        /// The per-call coefficients of one update, for one element type.
        type Coeffs;

        /// Validates the hyper-parameters and beta powers (one element of `dtype` each, loaded
        /// atomically) and computes the Adam coefficients.
        unsafe fn adam_coeffs(
            dtype: DType,
            lr: Buffer,
            beta1: Buffer,
            beta2: Buffer,
            epsilon: Buffer,
            beta1_power: Buffer,
            beta2_power: Buffer,
        ) -> Result<Box<Coeffs>>;

        /// The coefficients of the sparse RMSProp rule (the powers are not read).
        unsafe fn rmsprop_coeffs(
            dtype: DType,
            lr: Buffer,
            beta1: Buffer,
            beta2: Buffer,
            epsilon: Buffer,
        ) -> Result<Box<Coeffs>>;

        /// The dense rule on one shard: equal-length ranges of var, m, v and grad. var and grad
        /// have element type `dtype`, m and v the coefficients' type: the same, or f16 / bf16
        /// variables with float coefficients and moments (the V2 ops: computed in float, the
        /// weight rounded to `dtype` once).
        #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
        unsafe fn apply_dense(
            coeffs: &Coeffs,
            dtype: DType,
            access: Access,
            var: Buffer,
            m: Buffer,
            v: Buffer,
            grad: Buffer,
            use_nesterov: bool,
        ) -> Result<()>;

        /// The sparse rule (lazy Adam, or RMSProp when `rmsprop`) on the rows named by
        /// `indices`; the indices are read once, and every one is checked before anything is
        /// written. `dtype` as for `apply_dense`.
        #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
        unsafe fn apply_sparse_rows(
            coeffs: &Coeffs,
            dtype: DType,
            access: Access,
            var: Buffer,
            m: Buffer,
            v: Buffer,
            grad: Buffer,
            indices: Buffer,
            index_type: IndexType,
            row_len: usize,
            rmsprop: bool,
        ) -> Result<()>;

        /// `beta1_power *= beta1; beta2_power *= beta2`, each a one-element tensor, with a
        /// compare-and-swap loop on each power: exactly one advance per call, even when kernels
        /// advance the same powers at once.
        unsafe fn advance_powers(
            dtype: DType,
            beta1_power: Buffer,
            beta2_power: Buffer,
            beta1: Buffer,
            beta2: Buffer,
        ) -> Result<()>;
    }
}

use ffi::{Access, Buffer, DType, IndexType};

/// Coefficients of one element type.
enum AnyCoeffs {
    F16(AdamCoeffs<f16>),
    BF16(AdamCoeffs<bf16>),
    F32(AdamCoeffs<f32>),
    F64(AdamCoeffs<f64>),
}

/// The coefficients handed to C++ as an opaque box.
pub struct Coeffs(AnyCoeffs);

/// An element type the kernels support: its name and its slot in [`AnyCoeffs`].
trait Element: SharedReal + bytemuck::Pod {
    const NAME: &'static str;
    fn wrap(c: AdamCoeffs<Self>) -> AnyCoeffs;
}

macro_rules! element {
    ($t:ty, $variant:ident, $name:literal) => {
        impl Element for $t {
            const NAME: &'static str = $name;
            fn wrap(c: AdamCoeffs<Self>) -> AnyCoeffs {
                AnyCoeffs::$variant(c)
            }
        }
    };
}
element!(f16, F16, "half");
element!(bf16, BF16, "bfloat16");
element!(f32, F32, "float");
element!(f64, F64, "double");

impl AnyCoeffs {
    fn dtype_name(&self) -> &'static str {
        match self {
            AnyCoeffs::F16(_) => f16::NAME,
            AnyCoeffs::BF16(_) => bf16::NAME,
            AnyCoeffs::F32(_) => f32::NAME,
            AnyCoeffs::F64(_) => f64::NAME,
        }
    }
}

/// Calls `$f::<T>($args)` with `T` the Rust type of `$dtype`.
macro_rules! dispatch {
    ($dtype:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $dtype {
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            other => Err(Error::Unsupported { what: "dtype", code: other.repr }),
        }
    };
}

/// Runs `f`, turning a panic into an error so that it cannot unwind across the FFI boundary.
fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic with a non-string payload".to_string());
        Err(Error::Panic(message))
    })
}

/// A buffer that cannot hold elements of `dtype`.
fn buffer_error(
    tensor: &'static str,
    dtype: &'static str,
    len: usize,
    reason: impl Into<String>,
) -> Error {
    Error::Bytes {
        tensor,
        dtype,
        len,
        reason: reason.into(),
    }
}

/// The address of `b` as elements of `E` (named `dtype` in errors) and their number, after
/// checking that it holds whole elements at a non-null, aligned address; `None` for an empty
/// buffer (whose address is not looked at).
fn elements_of<E>(
    tensor: &'static str,
    dtype: &'static str,
    b: &Buffer,
) -> Result<Option<(*mut E, usize)>> {
    let size = std::mem::size_of::<E>();
    if !b.bytes.is_multiple_of(size) {
        return Err(buffer_error(
            tensor,
            dtype,
            b.bytes,
            "not a whole number of elements",
        ));
    }
    if b.bytes == 0 {
        return Ok(None);
    }
    let ptr = b.data.cast::<E>();
    if ptr.is_null() || !ptr.is_aligned() {
        return Err(buffer_error(
            tensor,
            dtype,
            b.bytes,
            format!("buffer at {ptr:p} is null or misaligned"),
        ));
    }
    Ok(Some((ptr, b.bytes / size)))
}

/// Views a buffer as cells of `T`, after checking that it holds whole, aligned elements.
///
/// # Safety
///
/// `b.data` is valid for reads and writes of `b.bytes` bytes until the bridged call that received
/// `b` returns (`'a` must not outlive it), and during that time nothing reaches those bytes but
/// atomic accesses (see the module documentation).
unsafe fn cells<'a, T: Element>(tensor: &'static str, b: &Buffer) -> Result<&'a [T::Cell]> {
    let Some((ptr, len)) = elements_of::<T>(tensor, T::NAME, b)? else {
        return Ok(&[]);
    };
    // SAFETY:
    // - non-null and aligned for `T`, `len` whole elements: checked by `elements_of`;
    // - valid for reads and writes of `len` elements until the call returns, which bounds `'a`:
    //   this function's contract (the kernel holds references to the tensors, so TensorFlow keeps
    //   the buffers alive while the call runs); a TensorFlow buffer's size fits `isize`;
    // - only atomic accesses during `'a`: this function's contract; the returned cells are atomic
    //   and this bridge makes no other reference into the buffer under shared access.
    Ok(unsafe { hogwild::store::cells_from_raw_parts::<T>(ptr, len) })
}

/// Views a buffer as a slice of `E` that this call alone accesses, after checking that it holds
/// whole, aligned elements.
///
/// # Safety
///
/// `b.data` is valid for reads and writes of `b.bytes` bytes until the bridged call that received
/// `b` returns (`'a` must not outlive it), nothing else reads or writes those bytes meanwhile
/// (`Access::Exclusive`), and no other view made by the call overlaps them ([`disjoint`]).
unsafe fn exclusive<'a, E: bytemuck::Pod>(
    tensor: &'static str,
    dtype: &'static str,
    b: &Buffer,
) -> Result<&'a mut [E]> {
    let Some((ptr, len)) = elements_of::<E>(tensor, dtype, b)? else {
        return Ok(&mut []);
    };
    // SAFETY:
    // - non-null and aligned for `E`, `len` whole elements: checked by `elements_of`; any bits
    //   are a valid `E` (`Pod`);
    // - valid for `len` elements until the call returns, which bounds `'a`: this function's
    //   contract; a TensorFlow buffer's size fits `isize`;
    // - unique: nothing else reaches the bytes meanwhile and no other view of the call overlaps
    //   them, this function's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Checks that no two of `buffers` (name, buffer) overlap, which `Access::Exclusive` views as
/// separate slices need; the kernel checks it too, this keeps the bridge sound on its own.
fn disjoint(buffers: &[(&'static str, &Buffer)]) -> Result<()> {
    let span = |b: &Buffer| (b.data as usize, (b.data as usize).saturating_add(b.bytes));
    for (i, &(a_name, a)) in buffers.iter().enumerate() {
        for &(b_name, b) in &buffers[i + 1..] {
            let ((a0, a1), (b0, b1)) = (span(a), span(b));
            if a.bytes > 0 && b.bytes > 0 && a0 < b1 && b0 < a1 {
                return Err(Error::Overlap {
                    first: a_name,
                    second: b_name,
                });
            }
        }
    }
    Ok(())
}

/// Loads a one-element buffer atomically.
///
/// # Safety
///
/// As for [`cells`].
unsafe fn scalar<T: Element>(tensor: &'static str, b: &Buffer) -> Result<T> {
    // SAFETY: the caller meets `cells`' contract; the view ends with this function.
    let x = unsafe { one::<T>(tensor, b)? };
    Ok(T::load(x))
}

/// Views a one-element buffer as a cell.
///
/// # Safety
///
/// As for [`cells`].
unsafe fn one<'a, T: Element>(tensor: &'static str, b: &Buffer) -> Result<&'a T::Cell> {
    // SAFETY: the caller meets `cells`' contract, and bounds `'a` as it requires.
    match unsafe { cells::<T>(tensor, b)? } {
        [x] => Ok(x),
        _ => Err(buffer_error(
            tensor,
            T::NAME,
            b.bytes,
            "not exactly one element",
        )),
    }
}

/// An index type and its atomic cell (same size and alignment on every supported target).
trait IndexCell: SparseIndex + bytemuck::Pod {
    type Cell;
    fn load(cell: &Self::Cell) -> Self;
}
impl IndexCell for i32 {
    type Cell = AtomicI32;
    fn load(cell: &AtomicI32) -> i32 {
        cell.load(Ordering::Relaxed)
    }
}
impl IndexCell for i64 {
    type Cell = AtomicI64;
    fn load(cell: &AtomicI64) -> i64 {
        cell.load(Ordering::Relaxed)
    }
}
const _: () = assert!(
    std::mem::size_of::<AtomicI32>() == 4
        && std::mem::align_of::<AtomicI32>() == std::mem::align_of::<i32>()
        && std::mem::size_of::<AtomicI64>() == 8
        && std::mem::align_of::<AtomicI64>() == std::mem::align_of::<i64>()
);

/// Copies a buffer of indices out with relaxed loads, so that they are validated and used as one
/// snapshot.
///
/// # Safety
///
/// As for [`cells`].
unsafe fn indices_of<I: IndexCell>(name: &'static str, b: &Buffer) -> Result<Vec<I>> {
    let Some((ptr, len)) = elements_of::<I::Cell>("indices", name, b)? else {
        return Ok(Vec::new());
    };
    // SAFETY:
    // - layout: `I::Cell` is the standard atomic of `I`, with `I`'s size and alignment (asserted
    //   above) and the in-memory representation of `I`;
    // - non-null, aligned, `len` whole elements: checked by `elements_of`; valid for `len`
    //   elements until the call returns, and accessed only atomically meanwhile: this function's
    //   contract;
    // - the slice does not outlive this function.
    let view = unsafe { std::slice::from_raw_parts(ptr, len) };
    Ok(view.iter().map(I::load).collect())
}

/// # Safety
///
/// Every `Buffer` meets [`cells`]' contract.
unsafe fn adam_coeffs(
    dtype: DType,
    lr: Buffer,
    beta1: Buffer,
    beta2: Buffer,
    epsilon: Buffer,
    beta1_power: Buffer,
    beta2_power: Buffer,
) -> Result<Box<Coeffs>> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&Buffer; 6]) -> Result<Box<Coeffs>> {
        // SAFETY: the enclosing function's contract covers every buffer of `s`.
        let c = unsafe {
            AdamCoeffs::<T>::new(
                scalar("lr", s[0])?,
                scalar("beta1", s[1])?,
                scalar("beta2", s[2])?,
                scalar("epsilon", s[3])?,
                scalar("beta1_power", s[4])?,
                scalar("beta2_power", s[5])?,
            )?
        };
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [&lr, &beta1, &beta2, &epsilon, &beta1_power, &beta2_power];
    // SAFETY: this function's contract covers every buffer of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

/// # Safety
///
/// Every `Buffer` meets [`cells`]' contract.
unsafe fn rmsprop_coeffs(
    dtype: DType,
    lr: Buffer,
    beta1: Buffer,
    beta2: Buffer,
    epsilon: Buffer,
) -> Result<Box<Coeffs>> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&Buffer; 4]) -> Result<Box<Coeffs>> {
        // SAFETY: the enclosing function's contract covers every buffer of `s`.
        let c = unsafe {
            AdamCoeffs::<T>::new_rmsprop(
                scalar("lr", s[0])?,
                scalar("beta1", s[1])?,
                scalar("beta2", s[2])?,
                scalar("epsilon", s[3])?,
            )?
        };
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [&lr, &beta1, &beta2, &epsilon];
    // SAFETY: this function's contract covers every buffer of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

/// The tensors of one update.
struct Tensors {
    var: Buffer,
    m: Buffer,
    v: Buffer,
    grad: Buffer,
}

impl Tensors {
    fn named(&self) -> [(&'static str, &Buffer); 4] {
        [
            ("var", &self.var),
            ("m", &self.m),
            ("v", &self.v),
            ("grad", &self.grad),
        ]
    }

    /// var and grad as slices of `S`, m and v as slices of `C` (`Access::Exclusive`).
    ///
    /// # Safety
    ///
    /// Each buffer meets [`exclusive`]'s contract, disjointness included ([`disjoint`]).
    unsafe fn exclusive<'a, S: Element, C: Element>(&self) -> Result<Slices<'a, S, C>> {
        // SAFETY: this function's contract, for each buffer.
        unsafe {
            Ok((
                exclusive::<S>("var", S::NAME, &self.var)?,
                exclusive::<C>("m", C::NAME, &self.m)?,
                exclusive::<C>("v", C::NAME, &self.v)?,
                exclusive::<S>("grad", S::NAME, &self.grad)?,
            ))
        }
    }

    /// var and grad as cells of `S`, m and v as cells of `C` (`Access::Shared`).
    ///
    /// # Safety
    ///
    /// Each buffer meets [`cells`]' contract.
    unsafe fn cells<'a, S: Element, C: Element>(&self) -> Result<Cells<'a, S, C>> {
        // SAFETY: this function's contract, for each buffer.
        unsafe {
            Ok((
                cells::<S>("var", &self.var)?,
                cells::<C>("m", &self.m)?,
                cells::<C>("v", &self.v)?,
                cells::<S>("grad", &self.grad)?,
            ))
        }
    }
}

/// var, m, v and grad for exclusive access: var and grad of `S`, m and v of `C`.
type Slices<'a, S, C> = (&'a mut [S], &'a mut [C], &'a mut [C], &'a mut [S]);
/// var, m, v and grad for shared access: var and grad cells of `S`, m and v cells of `C`.
type Cells<'a, S, C> = (
    &'a [<S as SharedReal>::Cell],
    &'a [<C as SharedReal>::Cell],
    &'a [<C as SharedReal>::Cell],
    &'a [<S as SharedReal>::Cell],
);

/// How a variable of `Self` is updated with coefficients (and m, v) of `C`: the core crate's
/// kernels of `C` when `C` is `Self` (DeepRec's ops), its mixed-precision kernels (computed in
/// f32, the weight rounded once) for f16 and bf16 variables with f32 state (the V2 ops).
trait Update<C: Element>: Element {
    fn dense(c: &AdamCoeffs<C>, t: Slices<'_, Self, C>, nesterov: bool) -> hogwild::Result<()>;
    fn dense_shared(
        c: &AdamCoeffs<C>,
        t: Cells<'_, Self, C>,
        nesterov: bool,
    ) -> hogwild::Result<()>;
    fn sparse<I: SparseIndex>(
        c: &AdamCoeffs<C>,
        t: Slices<'_, Self, C>,
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> hogwild::Result<()>;
    fn sparse_shared<I: SparseIndex>(
        c: &AdamCoeffs<C>,
        t: Cells<'_, Self, C>,
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> hogwild::Result<()>;
}

impl<T: Element> Update<T> for T {
    fn dense(
        c: &AdamCoeffs<T>,
        (w, m, v, g): Slices<'_, T, T>,
        nesterov: bool,
    ) -> hogwild::Result<()> {
        c.apply_dense_chunk(w, m, v, g, nesterov)
    }
    fn dense_shared(
        c: &AdamCoeffs<T>,
        (w, m, v, g): Cells<'_, T, T>,
        nesterov: bool,
    ) -> hogwild::Result<()> {
        c.apply_dense_shared(w, m, v, g, nesterov)
    }
    fn sparse<I: SparseIndex>(
        c: &AdamCoeffs<T>,
        (w, m, v, g): Slices<'_, T, T>,
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> hogwild::Result<()> {
        c.apply_sparse_rows(w, m, v, g, indices, row_len, rmsprop)
    }
    fn sparse_shared<I: SparseIndex>(
        c: &AdamCoeffs<T>,
        (w, m, v, g): Cells<'_, T, T>,
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> hogwild::Result<()> {
        c.apply_sparse_rows_shared(w, m, v, g, indices, row_len, rmsprop)
    }
}

macro_rules! mixed_update {
    ($t:ty) => {
        impl Update<f32> for $t {
            fn dense(
                c: &AdamCoeffs<f32>,
                (w, m, v, g): Slices<'_, $t, f32>,
                nesterov: bool,
            ) -> hogwild::Result<()> {
                c.apply_dense_mixed(w, m, v, g, nesterov)
            }
            fn dense_shared(
                c: &AdamCoeffs<f32>,
                (w, m, v, g): Cells<'_, $t, f32>,
                nesterov: bool,
            ) -> hogwild::Result<()> {
                c.apply_dense_mixed_shared::<$t>(w, m, v, g, nesterov)
            }
            fn sparse<I: SparseIndex>(
                c: &AdamCoeffs<f32>,
                (w, m, v, g): Slices<'_, $t, f32>,
                indices: &[I],
                row_len: usize,
                rmsprop: bool,
            ) -> hogwild::Result<()> {
                c.apply_sparse_rows_mixed(w, m, v, g, indices, row_len, rmsprop)
            }
            fn sparse_shared<I: SparseIndex>(
                c: &AdamCoeffs<f32>,
                (w, m, v, g): Cells<'_, $t, f32>,
                indices: &[I],
                row_len: usize,
                rmsprop: bool,
            ) -> hogwild::Result<()> {
                c.apply_sparse_rows_mixed_shared::<$t, I>(w, m, v, g, indices, row_len, rmsprop)
            }
        }
    };
}
mixed_update!(f16);
mixed_update!(bf16);

/// Calls `$f::<C, S>(c, $args)` with `c: &AdamCoeffs<C>` the coefficients of `$coeffs` (the type
/// of m and v too) and `S` the Rust type of the variable's `$dtype`: the same type, or f16 / bf16
/// with f32 coefficients. Any other pair is an error.
macro_rules! dispatch_update {
    ($coeffs:expr, $dtype:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match (&$coeffs.0, $dtype) {
            (AnyCoeffs::F16(c), DType::F16) => $f::<f16, f16>(c, $($arg),*),
            (AnyCoeffs::BF16(c), DType::BF16) => $f::<bf16, bf16>(c, $($arg),*),
            (AnyCoeffs::F32(c), DType::F32) => $f::<f32, f32>(c, $($arg),*),
            (AnyCoeffs::F64(c), DType::F64) => $f::<f64, f64>(c, $($arg),*),
            (AnyCoeffs::F32(c), DType::F16) => $f::<f32, f16>(c, $($arg),*),
            (AnyCoeffs::F32(c), DType::BF16) => $f::<f32, bf16>(c, $($arg),*),
            (c, dtype) => Err(match dtype_name(dtype) {
                Some(tensors) => Error::DTypeMismatch { coeffs: c.dtype_name(), tensors },
                None => Error::Unsupported { what: "dtype", code: dtype.repr },
            }),
        }
    };
}

/// The name of a dtype the bridge knows.
fn dtype_name(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F16 => Some(f16::NAME),
        DType::BF16 => Some(bf16::NAME),
        DType::F32 => Some(f32::NAME),
        DType::F64 => Some(f64::NAME),
        _ => None,
    }
}

/// # Safety
///
/// Every `Buffer` meets [`cells`]' contract, and with `Access::Exclusive` [`exclusive`]'s but
/// for the overlap, which is checked here.
#[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
unsafe fn apply_dense(
    coeffs: &Coeffs,
    dtype: DType,
    access: Access,
    var: Buffer,
    m: Buffer,
    v: Buffer,
    grad: Buffer,
    use_nesterov: bool,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<C: Element, S: Update<C>>(
        c: &AdamCoeffs<C>,
        access: Access,
        t: &Tensors,
        use_nesterov: bool,
    ) -> Result<()> {
        if access == Access::Exclusive {
            disjoint(&t.named())?;
            // SAFETY: the enclosing function's contract (exclusive access), and the buffers are
            // disjoint (checked just above); the views end with this function.
            let views = unsafe { t.exclusive::<S, C>()? };
            S::dense(c, views, use_nesterov)?;
            return Ok(());
        }
        // SAFETY: the enclosing function's contract covers every buffer of `t`; the views end
        // with this function.
        let cells = unsafe { t.cells::<S, C>()? };
        S::dense_shared(c, cells, use_nesterov)?;
        Ok(())
    }
    let t = Tensors { var, m, v, grad };
    check_access(access)?;
    // SAFETY: this function's contract covers every buffer of `t`.
    guard(|| unsafe { dispatch_update!(coeffs, dtype, typed(access, &t, use_nesterov)) })
}

/// Refuses an `Access` value that is neither variant (a C++ enum value out of range).
fn check_access(access: Access) -> Result<()> {
    match access {
        Access::Exclusive | Access::Shared => Ok(()),
        other => Err(Error::Unsupported {
            what: "access",
            code: other.repr,
        }),
    }
}

/// # Safety
///
/// Every `Buffer` meets [`cells`]' contract, and with `Access::Exclusive` [`exclusive`]'s but
/// for the overlap, which is checked here.
#[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
unsafe fn apply_sparse_rows(
    coeffs: &Coeffs,
    dtype: DType,
    access: Access,
    var: Buffer,
    m: Buffer,
    v: Buffer,
    grad: Buffer,
    indices: Buffer,
    index_type: IndexType,
    row_len: usize,
    rmsprop: bool,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<C: Element, S: Update<C>, I: IndexCell>(
        c: &AdamCoeffs<C>,
        access: Access,
        t: &Tensors,
        indices: &Buffer,
        index_name: &'static str,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        if access == Access::Exclusive {
            let [var, m, v, grad] = t.named();
            disjoint(&[var, m, v, grad, ("indices", indices)])?;
            // SAFETY: the enclosing function's contract (exclusive access), and the buffers are
            // disjoint (checked just above); the views end with this function.
            let (views, indices) = unsafe {
                (
                    t.exclusive::<S, C>()?,
                    exclusive::<I>("indices", index_name, indices)?,
                )
            };
            S::sparse(c, views, indices, row_len, rmsprop)?;
            return Ok(());
        }
        // SAFETY: the enclosing function's contract covers every buffer; the views end with this
        // function.
        let (cells, indices) =
            unsafe { (t.cells::<S, C>()?, indices_of::<I>(index_name, indices)?) };
        S::sparse_shared(c, cells, &indices, row_len, rmsprop)?;
        Ok(())
    }
    /// # Safety
    /// As for the enclosing function.
    unsafe fn by_index<C: Element, S: Update<C>>(
        c: &AdamCoeffs<C>,
        access: Access,
        t: &Tensors,
        indices: &Buffer,
        index_type: IndexType,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        let (i, a) = (indices, access);
        // SAFETY: the enclosing function's contract covers every buffer.
        unsafe {
            match index_type {
                IndexType::I32 => typed::<C, S, i32>(c, a, t, i, "int32", row_len, rmsprop),
                IndexType::I64 => typed::<C, S, i64>(c, a, t, i, "int64", row_len, rmsprop),
                other => Err(Error::Unsupported {
                    what: "index type",
                    code: other.repr,
                }),
            }
        }
    }
    let t = Tensors { var, m, v, grad };
    check_access(access)?;
    let (i, it) = (&indices, index_type);
    // SAFETY: this function's contract covers every buffer.
    guard(|| unsafe {
        dispatch_update!(coeffs, dtype, by_index(access, &t, i, it, row_len, rmsprop))
    })
}

/// # Safety
///
/// Every `Buffer` meets [`cells`]' contract.
unsafe fn advance_powers(
    dtype: DType,
    beta1_power: Buffer,
    beta2_power: Buffer,
    beta1: Buffer,
    beta2: Buffer,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&Buffer; 4]) -> Result<()> {
        // SAFETY: the enclosing function's contract covers every buffer of `s`; the views end
        // with this function.
        unsafe {
            let (b1, b2) = (scalar::<T>("beta1", s[2])?, scalar::<T>("beta2", s[3])?);
            let (p1, p2) = (
                one::<T>("beta1_power", s[0])?,
                one::<T>("beta2_power", s[1])?,
            );
            optim::advance_powers_shared::<T>(p1, p2, b1, b2);
        }
        Ok(())
    }
    let s = [&beta1_power, &beta2_power, &beta1, &beta2];
    // SAFETY: this function's contract covers every buffer of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    /// A plain buffer handed to the bridge.
    fn buf<T>(x: &mut [T]) -> Buffer {
        Buffer {
            data: x.as_mut_ptr().cast(),
            bytes: std::mem::size_of_val(x),
        }
    }

    /// The coefficients' own element type: what the tensors of a plain (not mixed) call are.
    fn own(c: &Coeffs) -> DType {
        match c.0 {
            AnyCoeffs::F16(_) => DType::F16,
            AnyCoeffs::BF16(_) => DType::BF16,
            AnyCoeffs::F32(_) => DType::F32,
            AnyCoeffs::F64(_) => DType::F64,
        }
    }

    /// [`apply_dense`] on local buffers of the coefficients' own type: four distinct `&mut`
    /// borrows, so live for the call, reached by nothing else meanwhile, and disjoint.
    fn dense<E>(
        c: &Coeffs,
        access: Access,
        tensors: [&mut [E]; 4],
        use_nesterov: bool,
    ) -> Result<()> {
        dense_as(c, own(c), access, tensors, use_nesterov)
    }

    /// [`dense`] with all four tensors of one element type, named `dtype`.
    fn dense_as<E>(
        c: &Coeffs,
        dtype: DType,
        access: Access,
        [var, m, v, grad]: [&mut [E]; 4],
        use_nesterov: bool,
    ) -> Result<()> {
        // SAFETY: the buffers are distinct live `&mut` borrows (see `dense`).
        unsafe {
            apply_dense(
                c,
                dtype,
                access,
                buf(var),
                buf(m),
                buf(v),
                buf(grad),
                use_nesterov,
            )
        }
    }

    /// [`apply_sparse_rows`] on local buffers, as for [`dense`].
    #[allow(clippy::too_many_arguments)] // the bridged function's inputs
    fn sparse<E, I>(
        c: &Coeffs,
        access: Access,
        [var, m, v, grad]: [&mut [E]; 4],
        indices: &mut [I],
        index_type: IndexType,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        // SAFETY: the buffers are distinct live `&mut` borrows (see `dense`).
        unsafe {
            apply_sparse_rows(
                c,
                own(c),
                access,
                buf(var),
                buf(m),
                buf(v),
                buf(grad),
                buf(indices),
                index_type,
                row_len,
                rmsprop,
            )
        }
    }

    /// The coefficients of AdamAsync at step 1 in `T`.
    fn adam<T: Element + DTypeOf>(lr: f64) -> Box<Coeffs> {
        let t = |x: f64| [T::from(x).unwrap()];
        let (mut lr, mut b1, mut b2) = (t(lr), t(0.9), t(0.999));
        let (mut eps, mut p1, mut p2) = (t(1e-8), t(0.9), t(0.999));
        // SAFETY: every buffer is a live local, untouched by anything else during the call.
        unsafe {
            adam_coeffs(
                T::DTYPE,
                buf(&mut lr),
                buf(&mut b1),
                buf(&mut b2),
                buf(&mut eps),
                buf(&mut p1),
                buf(&mut p2),
            )
        }
        .unwrap()
    }

    trait DTypeOf {
        const DTYPE: DType;
    }
    impl DTypeOf for f16 {
        const DTYPE: DType = DType::F16;
    }
    impl DTypeOf for f32 {
        const DTYPE: DType = DType::F32;
    }
    impl DTypeOf for f64 {
        const DTYPE: DType = DType::F64;
    }

    // The bridge must give the bits of the core crate's own `AdamAsync::apply_dense`, under
    // either access.
    #[test]
    fn dense_bridge_matches_the_core_crate() {
        let opt = optim::AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
        let mut want = vec![1.0f32, 2.0, -3.0];
        let mut state = optim::AdamAsyncState::new(3, &opt);
        opt.apply_dense(&mut want, &mut state, &[0.1, -0.2, 0.3])
            .unwrap();

        for access in [Access::Exclusive, Access::Shared] {
            let c = adam::<f32>(0.001);
            let (mut var, mut m, mut v) = ([1.0f32, 2.0, -3.0], [0f32; 3], [0f32; 3]);
            let mut grad = [0.1f32, -0.2, 0.3];
            dense(&c, access, [&mut var, &mut m, &mut v, &mut grad], false).unwrap();
            let (mut p1, mut p2, mut b1, mut b2) = ([0.9f32], [0.999f32], [0.9f32], [0.999f32]);
            // SAFETY: every buffer is a live local, untouched by anything else during the call.
            unsafe {
                advance_powers(
                    DType::F32,
                    buf(&mut p1),
                    buf(&mut p2),
                    buf(&mut b1),
                    buf(&mut b2),
                )
            }
            .unwrap();
            assert_eq!(var.as_slice(), want.as_slice(), "{access:?}");
            assert_eq!(m.as_slice(), state.m.as_slice(), "{access:?}");
            assert_relative_eq!(p1[0], state.beta1_power);
        }
    }

    #[test]
    fn out_of_range_index_is_an_error_and_writes_nothing() {
        for access in [Access::Exclusive, Access::Shared] {
            let c = adam::<f64>(0.1);
            let mut var = [1.0f64, 2.0];
            let (mut m, mut v, mut g) = ([0f64; 2], [0f64; 2], [1.0f64; 2]);
            let mut idx = [0i64, 2];
            let err = sparse(
                &c,
                access,
                [&mut var, &mut m, &mut v, &mut g],
                &mut idx,
                IndexType::I64,
                1,
                false,
            )
            .unwrap_err();
            assert_eq!(
                err.to_string(),
                "Index 2 at offset 1 in indices is out of range",
                "{access:?}"
            );
            assert_eq!(var, [1.0, 2.0], "{access:?}");
        }
    }

    #[test]
    fn wrong_lengths_and_types_are_errors() {
        let s = |x: f32| [x];
        let (mut b1, mut b2, mut eps) = (s(0.9), s(0.999), s(1e-8));
        let (mut p1, mut p2) = (s(0.9), s(0.999));
        let mut short = [0u8; 3];
        // SAFETY: live local buffers, untouched by anything else during the call.
        let err = unsafe {
            adam_coeffs(
                DType::F32,
                buf(&mut short),
                buf(&mut b1),
                buf(&mut b2),
                buf(&mut eps),
                buf(&mut p1),
                buf(&mut p2),
            )
        }
        .err()
        .unwrap();
        assert_eq!(
            err.to_string(),
            "lr: 3 bytes cannot be read as float elements (not a whole number of elements)"
        );

        let mut lr = s(0.1);
        // SAFETY: as above.
        let c = unsafe {
            rmsprop_coeffs(
                DType::F32,
                buf(&mut lr),
                buf(&mut b1),
                buf(&mut b1.clone()),
                buf(&mut eps),
            )
        }
        .unwrap();
        // SAFETY: as above: f32 buffers of one element (4 bytes) read as f64 must fail.
        let c64 = unsafe {
            rmsprop_coeffs(
                DType::F64,
                buf(&mut lr),
                buf(&mut b1),
                buf(&mut b2),
                buf(&mut eps),
            )
        };
        assert!(c64.is_err(), "f32 scalars read as f64 must fail");

        for access in [Access::Exclusive, Access::Shared] {
            let (mut a, mut b, mut d, mut g) = ([0u16; 3], [0u16; 3], [0u16; 3], [0u16; 3]);
            let err = dense(&c, access, [&mut a, &mut b, &mut d, &mut g], false).unwrap_err();
            assert_eq!(
                err.to_string(),
                "var: 6 bytes cannot be read as float elements (not a whole number of elements)",
                "{access:?}"
            );

            let (mut one, mut b, mut d, mut g) = ([0f32], [0f32], [0f32], [0f32]);
            let mut idx = [0i32];
            let err = sparse(
                &c,
                access,
                [&mut one, &mut b, &mut d, &mut g],
                &mut idx,
                IndexType { repr: 7 },
                1,
                false,
            )
            .unwrap_err();
            assert_eq!(err.to_string(), "unsupported index type code 7");

            // The coefficients' type must be the tensors'.
            let c64 = adam::<f64>(0.1);
            let err = dense(&c64, access, [&mut one, &mut b, &mut d, &mut g], false).unwrap_err();
            assert_eq!(
                err.to_string(),
                "var: 4 bytes cannot be read as double elements (not a whole number of elements)"
            );
        }

        // SAFETY: as above.
        let err = unsafe {
            adam_coeffs(
                DType { repr: 9 },
                buf(&mut lr),
                buf(&mut b1),
                buf(&mut b2),
                buf(&mut eps),
                buf(&mut p1),
                buf(&mut p2),
            )
        }
        .err()
        .unwrap();
        assert_eq!(err.to_string(), "unsupported dtype code 9");

        let (mut var, mut m, mut v, mut g) = ([0f32], [0f32], [0f32], [0f32]);
        let err = dense(
            &c,
            Access { repr: 4 },
            [&mut var, &mut m, &mut v, &mut g],
            false,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "unsupported access code 4");

        let mut two = [0.9f32, 0.9];
        // SAFETY: as above.
        let err = unsafe {
            advance_powers(
                DType::F32,
                buf(&mut two),
                buf(&mut p2),
                buf(&mut b1),
                buf(&mut b2),
            )
        }
        .unwrap_err();
        assert!(err.to_string().contains("not exactly one element"), "{err}");
    }

    // Shared access gives the bits of exclusive access: dense, nesterov, sparse with duplicates,
    // rmsprop.
    #[test]
    fn shared_access_gives_the_exclusive_bits() {
        let var0: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin()).collect();
        let grad0: Vec<f64> = (0..24).map(|i| (i as f64 * 0.11).cos()).collect();
        let run_dense = |access: Access, nesterov: bool| {
            let c = adam::<f64>(0.01);
            let (mut var, mut m, mut v) = (var0.clone(), vec![0.1f64; 24], vec![0.2f64; 24]);
            let mut grad = grad0.clone();
            dense(&c, access, [&mut var, &mut m, &mut v, &mut grad], nesterov).unwrap();
            (var, m, v)
        };
        for nesterov in [false, true] {
            assert_eq!(
                run_dense(Access::Shared, nesterov),
                run_dense(Access::Exclusive, nesterov),
                "nesterov {nesterov}"
            );
        }

        let run_sparse = |access: Access, rmsprop: bool| {
            let c = if rmsprop {
                let (mut lr, mut b1, mut b2, mut eps) = ([0.01f64], [0.9f64], [0.999f64], [1e-8]);
                // SAFETY: every buffer is a live local, untouched by anything else during the call.
                unsafe {
                    rmsprop_coeffs(
                        DType::F64,
                        buf(&mut lr),
                        buf(&mut b1),
                        buf(&mut b2),
                        buf(&mut eps),
                    )
                }
                .unwrap()
            } else {
                adam::<f64>(0.01)
            };
            let (mut var, mut m, mut v) = (var0.clone(), vec![0.0f64; 24], vec![0.0f64; 24]);
            let (mut g, mut idx) = (grad0[..16].to_vec(), [5i32, 0, 5, 2]);
            sparse(
                &c,
                access,
                [&mut var, &mut m, &mut v, &mut g],
                &mut idx,
                IndexType::I32,
                4,
                rmsprop,
            )
            .unwrap();
            (var, m, v)
        };
        for rmsprop in [false, true] {
            let exclusive = run_sparse(Access::Exclusive, rmsprop);
            assert_eq!(
                run_sparse(Access::Shared, rmsprop),
                exclusive,
                "rmsprop {rmsprop}"
            );
            // Rows 1, 3 and 4 are not named: untouched.
            assert_eq!(exclusive.0[4..8], var0[4..8], "rmsprop {rmsprop}");
        }
    }

    #[test]
    fn bad_buffers_are_errors() {
        let c = adam::<f32>(0.1);
        let mut words = vec![0u32; 9];
        let (mut m, mut v, mut g) = (vec![0f32; 4], vec![0f32; 4], vec![0f32; 4]);
        for access in [Access::Exclusive, Access::Shared] {
            // One byte past an aligned address: misaligned for f32.
            let misaligned = Buffer {
                // SAFETY: offset 1 stays inside the 36-byte buffer.
                data: unsafe { words.as_mut_ptr().cast::<u8>().add(1) },
                bytes: 16,
            };
            // SAFETY: the buffers are live locals, untouched by anything else during the call
            // and disjoint; the misaligned view lies inside `words`.
            let err = unsafe {
                apply_dense(
                    &c,
                    DType::F32,
                    access,
                    misaligned,
                    buf(&mut m),
                    buf(&mut v),
                    buf(&mut g),
                    false,
                )
            }
            .unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("var: 16 bytes cannot be read as float elements (buffer at"),
                "{access:?}: {err}"
            );
            assert!(err.to_string().ends_with("is null or misaligned)"), "{err}");
        }

        let null = Buffer {
            data: std::ptr::null_mut(),
            bytes: 4,
        };
        // SAFETY: the null buffer is refused before any access; the others are live locals.
        let err = unsafe {
            adam_coeffs(
                DType::F32,
                null,
                buf(&mut m[..1]),
                buf(&mut v[..1]),
                buf(&mut g[..1]),
                buf(&mut words[..1]),
                buf(&mut words[1..2]),
            )
        }
        .err()
        .unwrap();
        assert!(err.to_string().starts_with("lr: 4 bytes"), "{err}");

        // Exclusive access to overlapping buffers is refused before anything is written; shared
        // access to them is sound (every access atomic) and runs.
        let mut var = vec![1f32; 4];
        let whole = buf(&mut var);
        // SAFETY: the buffers are live locals, untouched by anything else during the call; the
        // overlap is refused before any view is made.
        let err = unsafe {
            apply_dense(
                &c,
                DType::F32,
                Access::Exclusive,
                Buffer { ..whole },
                buf(&mut m),
                Buffer { ..whole },
                buf(&mut g),
                false,
            )
        }
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "var and v share memory, which exclusive access rules out"
        );
        assert_eq!(var, [1.0; 4]);
        let whole = buf(&mut var);
        let mut grad = [3.0f32; 2];
        let mut idx = [0i64, 1];
        // SAFETY: live locals accessed only through this call's atomics (shared access).
        unsafe {
            apply_sparse_rows(
                &c,
                DType::F32,
                Access::Shared,
                Buffer { ..whole },
                buf(&mut m),
                whole,
                buf(&mut grad),
                buf(&mut idx),
                IndexType::I64,
                1,
                false,
            )
        }
        .unwrap();
        // Rows 0 and 1 hold what was stored last (v's new value, beta2 + (1 - beta2) * 9);
        // rows 2 and 3 are not named.
        assert!(
            var[..2].iter().all(|&x| x > 1.0 && x.is_finite()),
            "{var:?}"
        );
        assert_eq!(var[2..], [1.0; 2]);
    }

    #[test]
    fn panics_become_errors() {
        let err = guard::<()>(|| panic!("boom")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "internal error in the AdamAsync kernel: boom"
        );
    }

    // Half types keep every bit through the bridge: f16 arithmetic of the core crate.
    #[test]
    fn half_tensors_round_trip() {
        let c = adam::<f16>(0.001);
        let mut var = [f16::from_f32(1.0)];
        let (mut m, mut v, mut g) = ([f16::ZERO], [f16::ZERO], [f16::from_f32(0.1)]);
        dense(
            &c,
            Access::Exclusive,
            [&mut var, &mut m, &mut v, &mut g],
            false,
        )
        .unwrap();
        let opt = optim::AdamAsync::new(
            f16::from_f32(0.001),
            f16::from_f32(0.9),
            f16::from_f32(0.999),
            f16::from_f32(1e-8),
        );
        let mut want = vec![f16::from_f32(1.0)];
        let mut state = optim::AdamAsyncState::new(1, &opt);
        opt.apply_dense(&mut want, &mut state, &[f16::from_f32(0.1)])
            .unwrap();
        assert_eq!(var.to_vec(), want);
    }

    // f16 and bf16 variables with float coefficients and moments (the V2 ops) run the core
    // crate's mixed kernels, under either access; any other pair of types is refused before
    // anything is read.
    #[test]
    fn half_variables_with_float_state_run_the_mixed_kernels() {
        fn check<S: Element + hogwild::optim::Widen<f32>>(dtype: DType) {
            let to = |x: f32| S::from(x).unwrap();
            // Small weights: bf16's spacing at 1.0 (2^-8) would round a step of lr = 0.001 away.
            let var0 = [to(0.1), to(-0.2), to(0.05)];
            let grad = [to(0.1), to(0.0), to(-0.3)];
            let c = adam::<f32>(0.001);
            let (mut want, mut wm, mut wv) = (var0, [0f32; 3], [0f32; 3]);
            let AnyCoeffs::F32(core) = &c.0 else {
                unreachable!("adam::<f32> gives float coefficients")
            };
            core.apply_dense_mixed(&mut want, &mut wm, &mut wv, &grad, false)
                .unwrap();
            for access in [Access::Exclusive, Access::Shared] {
                let (mut var, mut m, mut v, mut g) = (var0, [0f32; 3], [0f32; 3], grad);
                // SAFETY: distinct live local borrows, untouched by anything else meanwhile.
                unsafe {
                    apply_dense(
                        &c,
                        dtype,
                        access,
                        buf(&mut var),
                        buf(&mut m),
                        buf(&mut v),
                        buf(&mut g),
                        false,
                    )
                }
                .unwrap();
                assert_eq!((var, m, v), (want, wm, wv), "{} {access:?}", S::NAME);
                let (mut var, mut m, mut v, mut g) = (var0, [0f32; 3], [0f32; 3], grad);
                let mut idx = [0i32, 1, 2];
                // SAFETY: as above.
                unsafe {
                    apply_sparse_rows(
                        &c,
                        dtype,
                        access,
                        buf(&mut var),
                        buf(&mut m),
                        buf(&mut v),
                        buf(&mut g),
                        buf(&mut idx),
                        IndexType::I32,
                        1,
                        false,
                    )
                }
                .unwrap();
                // Every row named once: the dense bits.
                assert_eq!((var, m, v), (want, wm, wv), "sparse {} {access:?}", S::NAME);
            }
            // Adam's first step moves every element with a gradient by lr against its sign.
            assert!(want[0] < var0[0] && want[2] > var0[2], "{}", S::NAME);
            assert_eq!(
                want[1],
                var0[1],
                "{}: zero gradient, finite, unmoved",
                S::NAME
            );
        }
        check::<f16>(DType::F16);
        check::<bf16>(DType::BF16);

        // m and v must have the coefficients' type: half moments are too short.
        let c = adam::<f32>(0.1);
        let (mut var, mut m, mut v, mut g) =
            ([f16::ONE; 2], [f16::ZERO; 2], [0f32; 2], [f16::ONE; 2]);
        // SAFETY: distinct live local borrows, untouched by anything else meanwhile.
        let err = unsafe {
            apply_dense(
                &c,
                DType::F16,
                Access::Shared,
                buf(&mut var),
                buf(&mut m),
                buf(&mut v),
                buf(&mut g),
                false,
            )
        }
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: m vs var: expected 2, got 1"
        );

        let (mut var, mut m, mut v, mut g) = ([f16::ONE], [f16::ZERO], [f16::ZERO], [f16::ONE]);
        let err = dense_as(
            &adam::<f64>(0.1),
            DType::F16,
            Access::Exclusive,
            [&mut var, &mut m, &mut v, &mut g],
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "coefficients computed for double, tensors are half"
        );
        let err = dense_as(
            &adam::<f16>(0.1),
            DType::F32,
            Access::Shared,
            [&mut var, &mut m, &mut v, &mut g],
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "coefficients computed for half, tensors are float"
        );
        let err = dense_as(
            &adam::<f32>(0.1),
            DType { repr: 9 },
            Access::Shared,
            [&mut var, &mut m, &mut v, &mut g],
            false,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "unsupported dtype code 9");
        assert_eq!(var, [f16::ONE], "nothing written");
    }
}
