//! The bridge between the AdamAsync TensorFlow kernels (C++, `cc/kernels/`) and the core crate's
//! arithmetic (`hogwild::optim`), built with cxx.
//!
//! The C++ kernel validates shapes, takes TensorFlow's variable locks, computes the coefficients
//! once ([`ffi::adam_coeffs`]), runs the element rule on each shard of the tensors
//! ([`ffi::apply_dense_chunk`], [`ffi::apply_sparse_rows`]) and advances the beta powers once
//! ([`ffi::advance_powers`]).
//!
//! # Two paths: exclusive and shared
//!
//! TensorFlow's locking semantics decide whether another kernel may update the same variables
//! while this one runs, and the kernel picks the path from that:
//!
//! - **Exclusive path** (resource variables under exclusive locks: every dense
//!   `ResourceApplyAdamAsync`, and `ResourceSparseApplyAdamAsync` with `use_locking=True`; the
//!   kernel also checks that no two inputs share memory). No other kernel can reach the buffers, so
//!   they cross as byte slices (`&mut [u8]` for var, m, v and the powers) and run the slice
//!   kernels ([`AdamCoeffs::apply_dense_chunk`], [`AdamCoeffs::apply_sparse_rows`]). The bytes are
//!   reinterpreted with `bytemuck`, which checks length and alignment and returns an error instead
//!   of reading out of bounds.
//! - **Shared path** (everything else: ref variables, `ApplyAdamAsync` / `SparseApplyAdamAsync`,
//!   locked or not, since an update with `use_locking=False` takes no lock and may run beside a
//!   locked one; sparse updates of resource variables under TensorFlow's shared locks). Two kernels
//!   may then update the same floats at once, and `&mut` slices of that memory would be undefined
//!   behaviour in Rust. Each buffer crosses as a [`ffi::SharedTensor`] (address and size);
//!   `cells` checks size and alignment and views it as atomic cells
//!   ([`hogwild::optim::SharedReal`]), and the core crate's shared kernels
//!   ([`AdamCoeffs::apply_dense_shared`], [`AdamCoeffs::apply_sparse_rows_shared`]) read and write
//!   every element with relaxed atomic loads and stores. Every input of the op is read that way
//!   (grad and the hyper-parameters too, as a TF1 ref variable passed as an input shares its
//!   buffer); the indices are copied out once, then validated and used. No Rust reference points
//!   into a tensor buffer on this path, so kernels of this library running together are
//!   data-race-free. With one thread the two paths give the same bits (the shared kernels run the
//!   slice kernels' loops on local copies of up to [`hogwild::optim::CHUNK`] elements). Under
//!   concurrency an element update can be lost (Hogwild), never torn.
//! - **Powers**: on the shared path `beta1_power` and `beta2_power` advance with a
//!   compare-and-swap loop ([`hogwild::optim::advance_powers_shared`]), so every call advances them
//!   exactly once and the stored values equal the sequential ones whatever the interleaving.
//!   DeepRec advances them with a plain load and store, which can lose an advance.
//!
//! What this does not cover: TensorFlow's own C++ ops that read a ref variable without its lock
//! (a forward pass reading weights while this kernel writes them) race in C++ with any writer,
//! stock or ours, as they do in stock TensorFlow.
//!
//! Half types: `Eigen::half` and `half::f16` are both IEEE binary16 and TensorFlow's `bfloat16`
//! and `half::bf16` are both the top 16 bits of an f32, so the reinterpretation keeps every bit.
//!
//! Errors: every bridged function returns `Result`; cxx turns an `Err` into a C++ `rust::Error`
//! exception, which the kernel turns into an `InvalidArgument` status. Each body also runs under
//! `catch_unwind`, so a panic becomes an error too and never unwinds into TensorFlow.
//!
//! Cost: the shared path loads and stores every element with scalar atomic accesses around the
//! vectorised rule, about 2.5x the time of the exclusive path on a dense update (see
//! docs/benchmarks.md); sparse updates are dominated by the rows' random access either way.

mod error;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use half::{bf16, f16};
use hogwild::optim::{self, AdamCoeffs, SharedReal, SparseIndex};

pub use error::{Error, Result};

#[cxx::bridge(namespace = "adam_async")]
pub mod ffi {
    /// The element type of var, m, v, the scalars and grad (the op's `T`).
    #[repr(u8)]
    enum DType {
        F16 = 0,
        BF16 = 1,
        F32 = 2,
        F64 = 3,
    }

    /// The element type of a sparse update's indices (the op's `Tindices`).
    #[repr(u8)]
    enum IndexType {
        I32 = 0,
        I64 = 1,
    }

    /// A tensor's buffer that kernels on other threads may read and write while this call runs:
    /// its address and its size in bytes. Only the shared-path functions take it; they read and
    /// write it with atomic accesses alone.
    struct SharedTensor {
        data: *mut u8,
        bytes: usize,
    }

    extern "Rust" {
        /// The per-call coefficients of one update, for one element type.
        type Coeffs;

        /// Validates the hyper-parameters and beta powers (one element each, as raw bytes of
        /// `dtype`) and computes the Adam coefficients.
        fn adam_coeffs(
            dtype: DType,
            lr: &[u8],
            beta1: &[u8],
            beta2: &[u8],
            epsilon: &[u8],
            beta1_power: &[u8],
            beta2_power: &[u8],
        ) -> Result<Box<Coeffs>>;

        /// The coefficients of the sparse RMSProp rule (the powers are not read).
        fn rmsprop_coeffs(
            dtype: DType,
            lr: &[u8],
            beta1: &[u8],
            beta2: &[u8],
            epsilon: &[u8],
        ) -> Result<Box<Coeffs>>;

        /// The dense rule on one shard: equal-length byte ranges of var, m, v and grad.
        fn apply_dense_chunk(
            coeffs: &Coeffs,
            var: &mut [u8],
            m: &mut [u8],
            v: &mut [u8],
            grad: &[u8],
            use_nesterov: bool,
        ) -> Result<()>;

        /// The sparse rule (lazy Adam, or RMSProp when `rmsprop`) on the rows named by
        /// `indices`; every index is checked before anything is written.
        #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
        fn apply_sparse_rows(
            coeffs: &Coeffs,
            var: &mut [u8],
            m: &mut [u8],
            v: &mut [u8],
            grad: &[u8],
            indices: &[u8],
            index_type: IndexType,
            row_len: usize,
            rmsprop: bool,
        ) -> Result<()>;

        /// `beta1_power *= beta1; beta2_power *= beta2`, each a one-element tensor.
        fn advance_powers(
            dtype: DType,
            beta1_power: &mut [u8],
            beta2_power: &mut [u8],
            beta1: &[u8],
            beta2: &[u8],
        ) -> Result<()>;

        // The shared path: for kernels that do not hold an exclusive lock on the variables. Every
        // element of every tensor is read and written with relaxed atomic accesses; no Rust
        // reference points into the buffers. Safety, for each: every `SharedTensor` describes a
        // live buffer of at least `bytes` bytes that stays allocated until the call returns and
        // that everyone else accesses atomically or not at all while it runs.

        /// [`adam_coeffs`] with every scalar (one element of `dtype` each) loaded atomically.
        unsafe fn adam_coeffs_shared(
            dtype: DType,
            lr: SharedTensor,
            beta1: SharedTensor,
            beta2: SharedTensor,
            epsilon: SharedTensor,
            beta1_power: SharedTensor,
            beta2_power: SharedTensor,
        ) -> Result<Box<Coeffs>>;

        /// [`rmsprop_coeffs`] with every scalar loaded atomically.
        unsafe fn rmsprop_coeffs_shared(
            dtype: DType,
            lr: SharedTensor,
            beta1: SharedTensor,
            beta2: SharedTensor,
            epsilon: SharedTensor,
        ) -> Result<Box<Coeffs>>;

        /// [`apply_dense_chunk`] on buffers other kernels may update at the same time.
        unsafe fn apply_dense_shared(
            coeffs: &Coeffs,
            var: SharedTensor,
            m: SharedTensor,
            v: SharedTensor,
            grad: SharedTensor,
            use_nesterov: bool,
        ) -> Result<()>;

        /// [`apply_sparse_rows`] on buffers other kernels may update at the same time; the
        /// indices are copied out (atomically) once, then validated, then applied.
        #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
        unsafe fn apply_sparse_rows_shared(
            coeffs: &Coeffs,
            var: SharedTensor,
            m: SharedTensor,
            v: SharedTensor,
            grad: SharedTensor,
            indices: SharedTensor,
            index_type: IndexType,
            row_len: usize,
            rmsprop: bool,
        ) -> Result<()>;

        /// [`advance_powers`] with a compare-and-swap loop on each power: exactly one advance per
        /// call, even when kernels advance the same powers at once.
        unsafe fn advance_powers_shared(
            dtype: DType,
            beta1_power: SharedTensor,
            beta2_power: SharedTensor,
            beta1: SharedTensor,
            beta2: SharedTensor,
        ) -> Result<()>;
    }
}

use ffi::{DType, IndexType, SharedTensor};

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
    fn unwrap(c: &AnyCoeffs) -> Option<&AdamCoeffs<Self>>;
}

macro_rules! element {
    ($t:ty, $variant:ident, $name:literal) => {
        impl Element for $t {
            const NAME: &'static str = $name;
            fn wrap(c: AdamCoeffs<Self>) -> AnyCoeffs {
                AnyCoeffs::$variant(c)
            }
            fn unwrap(c: &AnyCoeffs) -> Option<&AdamCoeffs<Self>> {
                match c {
                    AnyCoeffs::$variant(c) => Some(c),
                    _ => None,
                }
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

fn bytes_error(
    tensor: &'static str,
    dtype: &'static str,
    len: usize,
    e: impl std::fmt::Debug,
) -> Error {
    Error::Bytes {
        tensor,
        dtype,
        len,
        reason: format!("{e:?}"),
    }
}

/// A shared tensor's buffer that cannot hold elements of `dtype`.
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

/// Reads a one-element tensor's bytes as a `T`.
fn scalar<T: Element>(tensor: &'static str, bytes: &[u8]) -> Result<T> {
    bytemuck::try_pod_read_unaligned(bytes)
        .map_err(|e| bytes_error(tensor, T::NAME, bytes.len(), e))
}

fn elements<'a, T: bytemuck::Pod>(
    tensor: &'static str,
    name: &'static str,
    bytes: &'a [u8],
) -> Result<&'a [T]> {
    bytemuck::try_cast_slice(bytes).map_err(|e| bytes_error(tensor, name, bytes.len(), e))
}

fn elements_mut<'a, T: Element>(tensor: &'static str, bytes: &'a mut [u8]) -> Result<&'a mut [T]> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| bytes_error(tensor, T::NAME, len, e))
}

fn coeffs_of<T: Element>(coeffs: &Coeffs) -> Result<&AdamCoeffs<T>> {
    T::unwrap(&coeffs.0).ok_or(Error::DTypeMismatch {
        coeffs: coeffs.0.dtype_name(),
        tensors: T::NAME,
    })
}

fn adam_coeffs(
    dtype: DType,
    lr: &[u8],
    beta1: &[u8],
    beta2: &[u8],
    epsilon: &[u8],
    beta1_power: &[u8],
    beta2_power: &[u8],
) -> Result<Box<Coeffs>> {
    fn typed<T: Element>(s: [&[u8]; 6]) -> Result<Box<Coeffs>> {
        let c = AdamCoeffs::<T>::new(
            scalar("lr", s[0])?,
            scalar("beta1", s[1])?,
            scalar("beta2", s[2])?,
            scalar("epsilon", s[3])?,
            scalar("beta1_power", s[4])?,
            scalar("beta2_power", s[5])?,
        )?;
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [lr, beta1, beta2, epsilon, beta1_power, beta2_power];
    guard(|| dispatch!(dtype, typed(s)))
}

fn rmsprop_coeffs(
    dtype: DType,
    lr: &[u8],
    beta1: &[u8],
    beta2: &[u8],
    epsilon: &[u8],
) -> Result<Box<Coeffs>> {
    fn typed<T: Element>(s: [&[u8]; 4]) -> Result<Box<Coeffs>> {
        let c = AdamCoeffs::<T>::new_rmsprop(
            scalar("lr", s[0])?,
            scalar("beta1", s[1])?,
            scalar("beta2", s[2])?,
            scalar("epsilon", s[3])?,
        )?;
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [lr, beta1, beta2, epsilon];
    guard(|| dispatch!(dtype, typed(s)))
}

/// The tensors of one update, as bytes.
struct Tensors<'a> {
    var: &'a mut [u8],
    m: &'a mut [u8],
    v: &'a mut [u8],
    grad: &'a [u8],
}

fn apply_dense_chunk(
    coeffs: &Coeffs,
    var: &mut [u8],
    m: &mut [u8],
    v: &mut [u8],
    grad: &[u8],
    use_nesterov: bool,
) -> Result<()> {
    fn typed<T: Element>(c: &Coeffs, t: Tensors, use_nesterov: bool) -> Result<()> {
        coeffs_of::<T>(c)?.apply_dense_chunk(
            elements_mut("var", t.var)?,
            elements_mut("m", t.m)?,
            elements_mut("v", t.v)?,
            elements("grad", T::NAME, t.grad)?,
            use_nesterov,
        )?;
        Ok(())
    }
    let t = Tensors { var, m, v, grad };
    guard(|| match &coeffs.0 {
        AnyCoeffs::F16(_) => typed::<f16>(coeffs, t, use_nesterov),
        AnyCoeffs::BF16(_) => typed::<bf16>(coeffs, t, use_nesterov),
        AnyCoeffs::F32(_) => typed::<f32>(coeffs, t, use_nesterov),
        AnyCoeffs::F64(_) => typed::<f64>(coeffs, t, use_nesterov),
    })
}

#[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
fn apply_sparse_rows(
    coeffs: &Coeffs,
    var: &mut [u8],
    m: &mut [u8],
    v: &mut [u8],
    grad: &[u8],
    indices: &[u8],
    index_type: IndexType,
    row_len: usize,
    rmsprop: bool,
) -> Result<()> {
    fn typed<T: Element, I: SparseIndex + bytemuck::Pod>(
        c: &Coeffs,
        t: Tensors,
        indices: &[u8],
        index_name: &'static str,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        coeffs_of::<T>(c)?.apply_sparse_rows(
            elements_mut("var", t.var)?,
            elements_mut("m", t.m)?,
            elements_mut("v", t.v)?,
            elements("grad", T::NAME, t.grad)?,
            elements::<I>("indices", index_name, indices)?,
            row_len,
            rmsprop,
        )?;
        Ok(())
    }
    fn by_index<T: Element>(
        c: &Coeffs,
        t: Tensors,
        indices: &[u8],
        index_type: IndexType,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        match index_type {
            IndexType::I32 => typed::<T, i32>(c, t, indices, "int32", row_len, rmsprop),
            IndexType::I64 => typed::<T, i64>(c, t, indices, "int64", row_len, rmsprop),
            other => Err(Error::Unsupported {
                what: "index type",
                code: other.repr,
            }),
        }
    }
    let t = Tensors { var, m, v, grad };
    guard(|| match &coeffs.0 {
        AnyCoeffs::F16(_) => by_index::<f16>(coeffs, t, indices, index_type, row_len, rmsprop),
        AnyCoeffs::BF16(_) => by_index::<bf16>(coeffs, t, indices, index_type, row_len, rmsprop),
        AnyCoeffs::F32(_) => by_index::<f32>(coeffs, t, indices, index_type, row_len, rmsprop),
        AnyCoeffs::F64(_) => by_index::<f64>(coeffs, t, indices, index_type, row_len, rmsprop),
    })
}

fn advance_powers(
    dtype: DType,
    beta1_power: &mut [u8],
    beta2_power: &mut [u8],
    beta1: &[u8],
    beta2: &[u8],
) -> Result<()> {
    fn one<'a, T: Element>(tensor: &'static str, bytes: &'a mut [u8]) -> Result<&'a mut T> {
        let len = bytes.len();
        match elements_mut::<T>(tensor, bytes)? {
            [x] => Ok(x),
            _ => Err(bytes_error(tensor, T::NAME, len, "not exactly one element")),
        }
    }
    fn typed<T: Element>(p1: &mut [u8], p2: &mut [u8], b1: &[u8], b2: &[u8]) -> Result<()> {
        let (b1, b2) = (scalar::<T>("beta1", b1)?, scalar::<T>("beta2", b2)?);
        optim::advance_powers(
            one::<T>("beta1_power", p1)?,
            one::<T>("beta2_power", p2)?,
            b1,
            b2,
        );
        Ok(())
    }
    guard(|| dispatch!(dtype, typed(beta1_power, beta2_power, beta1, beta2)))
}

/// Views a shared tensor's buffer as cells of `T`, after checking that it holds whole, aligned
/// elements.
///
/// # Safety
///
/// `t.data` is valid for reads and writes of `t.bytes` bytes until the bridged call that received
/// `t` returns (`'a` must not outlive it), and during that time nothing reaches those bytes but
/// atomic accesses (see the module documentation).
unsafe fn cells<'a, T: Element>(tensor: &'static str, t: &SharedTensor) -> Result<&'a [T::Cell]> {
    let size = std::mem::size_of::<T>();
    if !t.bytes.is_multiple_of(size) {
        return Err(buffer_error(
            tensor,
            T::NAME,
            t.bytes,
            "not a whole number of elements",
        ));
    }
    if t.bytes == 0 {
        return Ok(&[]);
    }
    let ptr = t.data.cast::<T>();
    if ptr.is_null() || !ptr.is_aligned() {
        return Err(buffer_error(
            tensor,
            T::NAME,
            t.bytes,
            format!("buffer at {ptr:p} is null or misaligned"),
        ));
    }
    // SAFETY:
    // - non-null and aligned for `T`: checked just above;
    // - valid for reads and writes of `t.bytes / size` elements until the call returns, which
    //   bounds `'a`: this function's contract (the kernel holds references to the tensors, so
    //   TensorFlow keeps the buffers alive while the call runs); a TensorFlow buffer's size fits
    //   `isize`;
    // - only atomic accesses during `'a`: this function's contract; the returned cells are atomic
    //   and this bridge makes no other reference into the buffer on the shared path.
    Ok(unsafe { optim::cells_from_raw_parts::<T>(ptr, t.bytes / size) })
}

/// Loads a one-element shared tensor.
///
/// # Safety
///
/// As for [`cells`].
unsafe fn scalar_shared<T: Element>(tensor: &'static str, t: &SharedTensor) -> Result<T> {
    // SAFETY: the caller meets `cells`' contract; the view ends with this function.
    match unsafe { cells::<T>(tensor, t)? } {
        [x] => Ok(T::load(x)),
        _ => Err(buffer_error(
            tensor,
            T::NAME,
            t.bytes,
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

/// Copies a shared tensor of indices out with relaxed loads, so that they are validated and used
/// as one snapshot.
///
/// # Safety
///
/// As for [`cells`].
unsafe fn indices_shared<I: IndexCell>(name: &'static str, t: &SharedTensor) -> Result<Vec<I>> {
    let size = std::mem::size_of::<I>();
    if !t.bytes.is_multiple_of(size) {
        return Err(buffer_error(
            "indices",
            name,
            t.bytes,
            "not a whole number of elements",
        ));
    }
    if t.bytes == 0 {
        return Ok(Vec::new());
    }
    let ptr = t.data.cast::<I::Cell>();
    if ptr.is_null() || !ptr.is_aligned() {
        return Err(buffer_error(
            "indices",
            name,
            t.bytes,
            format!("buffer at {ptr:p} is null or misaligned"),
        ));
    }
    // SAFETY:
    // - layout: `I::Cell` is the standard atomic of `I`, with `I`'s size and alignment (asserted
    //   above) and the in-memory representation of `I`;
    // - non-null, aligned: checked just above; valid for `t.bytes / size` elements until the call
    //   returns, and accessed only atomically meanwhile: this function's contract;
    // - the slice does not outlive this function.
    let view = unsafe { std::slice::from_raw_parts(ptr, t.bytes / size) };
    Ok(view.iter().map(I::load).collect())
}

/// # Safety
///
/// Every `SharedTensor` meets [`cells`]' contract.
unsafe fn adam_coeffs_shared(
    dtype: DType,
    lr: SharedTensor,
    beta1: SharedTensor,
    beta2: SharedTensor,
    epsilon: SharedTensor,
    beta1_power: SharedTensor,
    beta2_power: SharedTensor,
) -> Result<Box<Coeffs>> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&SharedTensor; 6]) -> Result<Box<Coeffs>> {
        // SAFETY: the enclosing function's contract covers every tensor of `s`.
        let c = unsafe {
            AdamCoeffs::<T>::new(
                scalar_shared("lr", s[0])?,
                scalar_shared("beta1", s[1])?,
                scalar_shared("beta2", s[2])?,
                scalar_shared("epsilon", s[3])?,
                scalar_shared("beta1_power", s[4])?,
                scalar_shared("beta2_power", s[5])?,
            )?
        };
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [&lr, &beta1, &beta2, &epsilon, &beta1_power, &beta2_power];
    // SAFETY: this function's contract covers every tensor of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

/// # Safety
///
/// Every `SharedTensor` meets [`cells`]' contract.
unsafe fn rmsprop_coeffs_shared(
    dtype: DType,
    lr: SharedTensor,
    beta1: SharedTensor,
    beta2: SharedTensor,
    epsilon: SharedTensor,
) -> Result<Box<Coeffs>> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&SharedTensor; 4]) -> Result<Box<Coeffs>> {
        // SAFETY: the enclosing function's contract covers every tensor of `s`.
        let c = unsafe {
            AdamCoeffs::<T>::new_rmsprop(
                scalar_shared("lr", s[0])?,
                scalar_shared("beta1", s[1])?,
                scalar_shared("beta2", s[2])?,
                scalar_shared("epsilon", s[3])?,
            )?
        };
        Ok(Box::new(Coeffs(T::wrap(c))))
    }
    let s = [&lr, &beta1, &beta2, &epsilon];
    // SAFETY: this function's contract covers every tensor of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

/// The tensors of one shared-path update.
struct SharedTensors {
    var: SharedTensor,
    m: SharedTensor,
    v: SharedTensor,
    grad: SharedTensor,
}

/// # Safety
///
/// Every `SharedTensor` meets [`cells`]' contract.
unsafe fn apply_dense_shared(
    coeffs: &Coeffs,
    var: SharedTensor,
    m: SharedTensor,
    v: SharedTensor,
    grad: SharedTensor,
    use_nesterov: bool,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(c: &Coeffs, t: &SharedTensors, use_nesterov: bool) -> Result<()> {
        // SAFETY: the enclosing function's contract covers every tensor of `t`; the views end
        // with this function.
        let (var, m, v, grad) = unsafe {
            (
                cells::<T>("var", &t.var)?,
                cells::<T>("m", &t.m)?,
                cells::<T>("v", &t.v)?,
                cells::<T>("grad", &t.grad)?,
            )
        };
        coeffs_of::<T>(c)?.apply_dense_shared(var, m, v, grad, use_nesterov)?;
        Ok(())
    }
    let t = SharedTensors { var, m, v, grad };
    // SAFETY: this function's contract covers every tensor of `t`.
    guard(|| unsafe {
        match &coeffs.0 {
            AnyCoeffs::F16(_) => typed::<f16>(coeffs, &t, use_nesterov),
            AnyCoeffs::BF16(_) => typed::<bf16>(coeffs, &t, use_nesterov),
            AnyCoeffs::F32(_) => typed::<f32>(coeffs, &t, use_nesterov),
            AnyCoeffs::F64(_) => typed::<f64>(coeffs, &t, use_nesterov),
        }
    })
}

/// # Safety
///
/// Every `SharedTensor` meets [`cells`]' contract.
#[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
unsafe fn apply_sparse_rows_shared(
    coeffs: &Coeffs,
    var: SharedTensor,
    m: SharedTensor,
    v: SharedTensor,
    grad: SharedTensor,
    indices: SharedTensor,
    index_type: IndexType,
    row_len: usize,
    rmsprop: bool,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element, I: IndexCell>(
        c: &Coeffs,
        t: &SharedTensors,
        indices: &SharedTensor,
        index_name: &'static str,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        // SAFETY: the enclosing function's contract covers every tensor; the views end with this
        // function.
        let (var, m, v, grad, indices) = unsafe {
            (
                cells::<T>("var", &t.var)?,
                cells::<T>("m", &t.m)?,
                cells::<T>("v", &t.v)?,
                cells::<T>("grad", &t.grad)?,
                indices_shared::<I>(index_name, indices)?,
            )
        };
        let c = coeffs_of::<T>(c)?;
        c.apply_sparse_rows_shared(var, m, v, grad, &indices, row_len, rmsprop)?;
        Ok(())
    }
    /// # Safety
    /// As for the enclosing function.
    unsafe fn by_index<T: Element>(
        c: &Coeffs,
        t: &SharedTensors,
        indices: &SharedTensor,
        index_type: IndexType,
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        // SAFETY: the enclosing function's contract covers every tensor.
        unsafe {
            match index_type {
                IndexType::I32 => typed::<T, i32>(c, t, indices, "int32", row_len, rmsprop),
                IndexType::I64 => typed::<T, i64>(c, t, indices, "int64", row_len, rmsprop),
                other => Err(Error::Unsupported {
                    what: "index type",
                    code: other.repr,
                }),
            }
        }
    }
    let t = SharedTensors { var, m, v, grad };
    let (i, it) = (&indices, index_type);
    // SAFETY: this function's contract covers every tensor.
    guard(|| unsafe {
        match &coeffs.0 {
            AnyCoeffs::F16(_) => by_index::<f16>(coeffs, &t, i, it, row_len, rmsprop),
            AnyCoeffs::BF16(_) => by_index::<bf16>(coeffs, &t, i, it, row_len, rmsprop),
            AnyCoeffs::F32(_) => by_index::<f32>(coeffs, &t, i, it, row_len, rmsprop),
            AnyCoeffs::F64(_) => by_index::<f64>(coeffs, &t, i, it, row_len, rmsprop),
        }
    })
}

/// # Safety
///
/// Every `SharedTensor` meets [`cells`]' contract.
unsafe fn advance_powers_shared(
    dtype: DType,
    beta1_power: SharedTensor,
    beta2_power: SharedTensor,
    beta1: SharedTensor,
    beta2: SharedTensor,
) -> Result<()> {
    /// # Safety
    /// As for the enclosing function.
    unsafe fn one<'a, T: Element>(tensor: &'static str, t: &SharedTensor) -> Result<&'a T::Cell> {
        // SAFETY: the enclosing function's contract; the caller ends the view before returning.
        match unsafe { cells::<T>(tensor, t)? } {
            [x] => Ok(x),
            _ => Err(buffer_error(
                tensor,
                T::NAME,
                t.bytes,
                "not exactly one element",
            )),
        }
    }
    /// # Safety
    /// As for the enclosing function.
    unsafe fn typed<T: Element>(s: [&SharedTensor; 4]) -> Result<()> {
        // SAFETY: the enclosing function's contract covers every tensor of `s`; the views end
        // with this function.
        unsafe {
            let (b1, b2) = (
                scalar_shared::<T>("beta1", s[2])?,
                scalar_shared::<T>("beta2", s[3])?,
            );
            let (p1, p2) = (
                one::<T>("beta1_power", s[0])?,
                one::<T>("beta2_power", s[1])?,
            );
            optim::advance_powers_shared::<T>(p1, p2, b1, b2);
        }
        Ok(())
    }
    let s = [&beta1_power, &beta2_power, &beta1, &beta2];
    // SAFETY: this function's contract covers every tensor of `s`.
    guard(|| unsafe { dispatch!(dtype, typed(s)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn bytes<T: bytemuck::Pod>(x: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(x).to_vec()
    }

    // The bridge must give the bits of the core crate's own `AdamAsync::apply_dense`.
    #[test]
    fn dense_bridge_matches_the_core_crate() {
        let opt = optim::AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
        let mut want = vec![1.0f32, 2.0, -3.0];
        let mut state = optim::AdamAsyncState::new(3, &opt);
        opt.apply_dense(&mut want, &mut state, &[0.1, -0.2, 0.3])
            .unwrap();

        let s = |x: f32| bytes(&[x]);
        let c = adam_coeffs(
            DType::F32,
            &s(0.001),
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .unwrap();
        let (mut var, mut m, mut v) = (
            bytes(&[1.0f32, 2.0, -3.0]),
            bytes(&[0f32; 3]),
            bytes(&[0f32; 3]),
        );
        apply_dense_chunk(
            &c,
            &mut var,
            &mut m,
            &mut v,
            &bytes(&[0.1f32, -0.2, 0.3]),
            false,
        )
        .unwrap();
        let (mut p1, mut p2) = (s(0.9), s(0.999));
        advance_powers(DType::F32, &mut p1, &mut p2, &s(0.9), &s(0.999)).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&var), want.as_slice());
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&m), state.m.as_slice());
        assert_relative_eq!(bytemuck::cast_slice::<u8, f32>(&p1)[0], state.beta1_power);
    }

    #[test]
    fn out_of_range_index_is_an_error_and_writes_nothing() {
        let s = |x: f64| bytes(&[x]);
        let c = adam_coeffs(
            DType::F64,
            &s(0.1),
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .unwrap();
        let mut var = bytes(&[1.0f64, 2.0]);
        let (mut m, mut v) = (bytes(&[0f64; 2]), bytes(&[0f64; 2]));
        let err = apply_sparse_rows(
            &c,
            &mut var,
            &mut m,
            &mut v,
            &bytes(&[1.0f64, 1.0]),
            &bytes(&[0i64, 2]),
            IndexType::I64,
            1,
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Index 2 at offset 1 in indices is out of range"
        );
        assert_eq!(var, bytes(&[1.0f64, 2.0]));
    }

    #[test]
    fn wrong_byte_lengths_and_types_are_errors() {
        let s = |x: f32| bytes(&[x]);
        let err = adam_coeffs(
            DType::F32,
            &[0u8; 3],
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .starts_with("lr: 3 bytes cannot be read as float"),
            "{err}"
        );

        let c = rmsprop_coeffs(DType::F32, &s(0.1), &s(0.9), &s(0.9), &s(1e-8)).unwrap();
        let (mut a, mut b, mut d) = (vec![0u8; 6], vec![0u8; 6], vec![0u8; 6]);
        let err = apply_dense_chunk(&c, &mut a, &mut b, &mut d, &[0u8; 6], false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("var: 6 bytes cannot be read as float"),
            "{err}"
        );

        let mut one = bytes(&[0f64]);
        let (mut b, mut d) = (bytes(&[0f64]), bytes(&[0f64]));
        let c64 = rmsprop_coeffs(DType::F64, &s(0.1), &s(0.9), &s(0.9), &s(1e-8));
        assert!(c64.is_err(), "f32 scalars read as f64 must fail");
        let err = apply_sparse_rows(
            &c,
            &mut one,
            &mut b,
            &mut d,
            &[0u8; 8],
            &[0u8; 4],
            IndexType { repr: 7 },
            1,
            false,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "unsupported index type code 7");

        let err = adam_coeffs(
            DType { repr: 9 },
            &s(0.1),
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .err()
        .unwrap();
        assert_eq!(err.to_string(), "unsupported dtype code 9");

        let (mut p1, mut p2) = (bytes(&[0.9f32, 0.9]), s(0.999));
        let err = advance_powers(DType::F32, &mut p1, &mut p2, &s(0.9), &s(0.999)).unwrap_err();
        assert!(err.to_string().contains("not exactly one element"), "{err}");
    }

    /// A plain buffer handed to the shared path.
    fn shared<T>(x: &mut [T]) -> SharedTensor {
        SharedTensor {
            data: x.as_mut_ptr().cast(),
            bytes: std::mem::size_of_val(x),
        }
    }

    // The shared path gives the bits of the slice path: dense, nesterov, sparse with duplicates,
    // rmsprop and the powers.
    #[test]
    fn shared_path_matches_the_slice_path() {
        let s = |x: f64| bytes(&[x]);
        let (mut lr, mut b1, mut b2, mut eps) = ([0.01f64], [0.9f64], [0.999f64], [1e-8f64]);
        let (mut p1, mut p2) = ([0.9f64], [0.999f64]);
        let var0: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin()).collect();
        let grad: Vec<f64> = (0..24).map(|i| (i as f64 * 0.11).cos()).collect();
        for nesterov in [false, true] {
            let c = adam_coeffs(
                DType::F64,
                &s(0.01),
                &s(0.9),
                &s(0.999),
                &s(1e-8),
                &s(0.9),
                &s(0.999),
            )
            .unwrap();
            let (mut var, mut m, mut v) =
                (bytes(&var0), bytes(&[0.1f64; 24]), bytes(&[0.2f64; 24]));
            apply_dense_chunk(&c, &mut var, &mut m, &mut v, &bytes(&grad), nesterov).unwrap();

            // SAFETY: every tensor is a live local buffer, untouched by anything else during the
            // call.
            let cs = unsafe {
                adam_coeffs_shared(
                    DType::F64,
                    shared(&mut lr),
                    shared(&mut b1),
                    shared(&mut b2),
                    shared(&mut eps),
                    shared(&mut p1),
                    shared(&mut p2),
                )
            }
            .unwrap();
            let (mut svar, mut sm, mut sv, mut sg) = (
                var0.clone(),
                vec![0.1f64; 24],
                vec![0.2f64; 24],
                grad.clone(),
            );
            // SAFETY: as above.
            unsafe {
                apply_dense_shared(
                    &cs,
                    shared(&mut svar),
                    shared(&mut sm),
                    shared(&mut sv),
                    shared(&mut sg),
                    nesterov,
                )
            }
            .unwrap();
            assert_eq!(bytes(&svar), var, "nesterov {nesterov}: var");
            assert_eq!(bytes(&sm), m, "nesterov {nesterov}: m");
            assert_eq!(bytes(&sv), v, "nesterov {nesterov}: v");
        }

        let indices = [5i32, 0, 5, 2];
        for rmsprop in [false, true] {
            let c = if rmsprop {
                rmsprop_coeffs(DType::F64, &s(0.01), &s(0.9), &s(0.999), &s(1e-8)).unwrap()
            } else {
                adam_coeffs(
                    DType::F64,
                    &s(0.01),
                    &s(0.9),
                    &s(0.999),
                    &s(1e-8),
                    &s(0.9),
                    &s(0.999),
                )
                .unwrap()
            };
            let (mut var, mut m, mut v) =
                (bytes(&var0), bytes(&[0.0f64; 24]), bytes(&[0.0f64; 24]));
            let g = bytes(&grad[..16]);
            apply_sparse_rows(
                &c,
                &mut var,
                &mut m,
                &mut v,
                &g,
                &bytes(&indices),
                IndexType::I32,
                4,
                rmsprop,
            )
            .unwrap();
            let (mut svar, mut sm, mut sv) = (var0.clone(), vec![0.0f64; 24], vec![0.0f64; 24]);
            let (mut sg, mut si) = (grad[..16].to_vec(), indices);
            // SAFETY: every tensor is a live local buffer, untouched by anything else during the
            // call.
            unsafe {
                apply_sparse_rows_shared(
                    &c,
                    shared(&mut svar),
                    shared(&mut sm),
                    shared(&mut sv),
                    shared(&mut sg),
                    shared(&mut si),
                    IndexType::I32,
                    4,
                    rmsprop,
                )
            }
            .unwrap();
            assert_eq!(bytes(&svar), var, "rmsprop {rmsprop}: var");
            assert_eq!(bytes(&sm), m, "rmsprop {rmsprop}: m");
            assert_eq!(bytes(&sv), v, "rmsprop {rmsprop}: v");
        }

        let (mut q1, mut q2) = (s(0.9), s(0.999));
        advance_powers(DType::F64, &mut q1, &mut q2, &s(0.9), &s(0.999)).unwrap();
        // SAFETY: every tensor is a live local buffer, untouched by anything else during the call.
        unsafe {
            advance_powers_shared(
                DType::F64,
                shared(&mut p1),
                shared(&mut p2),
                shared(&mut b1),
                shared(&mut b2),
            )
        }
        .unwrap();
        assert_eq!((bytes(&p1), bytes(&p2)), (q1, q2));
    }

    #[test]
    fn bad_shared_tensors_are_errors() {
        let s = |x: f32| bytes(&[x]);
        let c = adam_coeffs(
            DType::F32,
            &s(0.1),
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .unwrap();
        let mut words = vec![0u32; 9];
        let (mut m, mut v, mut g) = (vec![0f32; 4], vec![0f32; 4], vec![0f32; 4]);
        // One byte past an aligned address: misaligned for f32.
        let misaligned = SharedTensor {
            // SAFETY: offset 1 stays inside the 36-byte buffer.
            data: unsafe { words.as_mut_ptr().cast::<u8>().add(1) },
            bytes: 16,
        };
        // SAFETY: the buffers are live locals, untouched by anything else during the call; the
        // misaligned view lies inside `words`.
        let err = unsafe {
            apply_dense_shared(
                &c,
                misaligned,
                shared(&mut m),
                shared(&mut v),
                shared(&mut g),
                false,
            )
        }
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("var: 16 bytes cannot be read as float elements (buffer at"),
            "{err}"
        );
        assert!(err.to_string().ends_with("is null or misaligned)"), "{err}");

        let partial = SharedTensor {
            data: words.as_mut_ptr().cast(),
            bytes: 6,
        };
        // SAFETY: as above; 6 bytes lie inside `words`.
        let err = unsafe {
            apply_dense_shared(
                &c,
                shared(&mut m),
                partial,
                shared(&mut v),
                shared(&mut g),
                false,
            )
        }
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "m: 6 bytes cannot be read as float elements (not a whole number of elements)"
        );

        let null = SharedTensor {
            data: std::ptr::null_mut(),
            bytes: 4,
        };
        // SAFETY: the null buffer is refused before any access; the others are live locals.
        let err = unsafe {
            adam_coeffs_shared(
                DType::F32,
                null,
                shared(&mut m[..1]),
                shared(&mut v[..1]),
                shared(&mut g[..1]),
                shared(&mut words[..1]),
                shared(&mut words[1..2]),
            )
        }
        .err()
        .unwrap();
        assert!(err.to_string().starts_with("lr: 4 bytes"), "{err}");

        // SAFETY: live local buffers; two elements where one is required.
        let err = unsafe {
            advance_powers_shared(
                DType::F32,
                shared(&mut m[..2]),
                shared(&mut v[..1]),
                shared(&mut g[..1]),
                shared(&mut g[1..2]),
            )
        }
        .unwrap_err();
        assert!(err.to_string().contains("not exactly one element"), "{err}");

        // Out-of-range index: an error naming it, nothing written.
        let (mut var, mut grad, mut idx) = (vec![1f32; 4], vec![1f32; 2], [0i64, 9]);
        // SAFETY: live local buffers, untouched by anything else during the call.
        let err = unsafe {
            apply_sparse_rows_shared(
                &c,
                shared(&mut var),
                shared(&mut m),
                shared(&mut v),
                shared(&mut grad),
                shared(&mut idx),
                IndexType::I64,
                1,
                false,
            )
        }
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Index 9 at offset 1 in indices is out of range"
        );
        assert_eq!(var, [1.0; 4]);
        // SAFETY: as above.
        let err = unsafe {
            apply_sparse_rows_shared(
                &c,
                shared(&mut var),
                shared(&mut m),
                shared(&mut v),
                shared(&mut grad),
                shared(&mut idx),
                IndexType { repr: 5 },
                1,
                false,
            )
        }
        .unwrap_err();
        assert_eq!(err.to_string(), "unsupported index type code 5");
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
        let s = |x: f32| bytes(&[f16::from_f32(x)]);
        let c = adam_coeffs(
            DType::F16,
            &s(0.001),
            &s(0.9),
            &s(0.999),
            &s(1e-8),
            &s(0.9),
            &s(0.999),
        )
        .unwrap();
        let mut var = bytes(&[f16::from_f32(1.0)]);
        let (mut m, mut v) = (bytes(&[f16::ZERO]), bytes(&[f16::ZERO]));
        apply_dense_chunk(&c, &mut var, &mut m, &mut v, &s(0.1), false).unwrap();
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
        assert_eq!(var, bytes(&want));
    }
}
