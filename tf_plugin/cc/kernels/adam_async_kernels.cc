// CPU kernels of the AdamAsync ops (interfaces in cc/ops/adam_async_ops.cc).
//
// Each kernel takes TensorFlow's variable locks (the helpers of stock training ops), validates every
// input, then hands the tensors to the Rust core through the cxx bridge (tf_plugin/src/lib.rs):
// coefficients once, the element rule on each shard, the powers once. Every tensor crosses as a
// Buffer (address and size); the update calls say whether the kernel holds exclusive locks on
// resource variables (Access::Exclusive: the Rust side views the buffers as slices) or other
// kernels may update the same variables at once (Access::Shared: atomics only).
// A Rust error arrives as rust::Error and becomes an InvalidArgument status; nothing aborts.

#define EIGEN_USE_THREADS

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hogwild-tf-plugin/src/lib.rs.h"
#include "absl/strings/str_cat.h"
#include "rust/cxx.h"
#include "tensorflow/core/framework/bfloat16.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/kernels/training_op_helpers.h"

namespace tensorflow {
namespace {

using CPUDevice = Eigen::ThreadPoolDevice;

template <typename T>
struct RustDType;
template <>
struct RustDType<Eigen::half> {
  static constexpr adam_async::DType value = adam_async::DType::F16;
};
template <>
struct RustDType<bfloat16> {
  static constexpr adam_async::DType value = adam_async::DType::BF16;
};
template <>
struct RustDType<float> {
  static constexpr adam_async::DType value = adam_async::DType::F32;
};
template <>
struct RustDType<double> {
  static constexpr adam_async::DType value = adam_async::DType::F64;
};

template <typename Tindex>
struct RustIndexType;
template <>
struct RustIndexType<int32_t> {
  static constexpr adam_async::IndexType value = adam_async::IndexType::I32;
};
template <>
struct RustIndexType<int64_t> {
  static constexpr adam_async::IndexType value = adam_async::IndexType::I64;
};

template <typename... Args>
absl::Status InvalidArg(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status InternalErr(const Args&... args) {
  return absl::InternalError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status FailedPrecondition(const Args&... args) {
  return absl::FailedPreconditionError(absl::StrCat(args...));
}

// Elements [begin, end) of a tensor's buffer. Under Access::Shared other kernels may update it
// while this one runs, and the Rust side reads and writes it with atomics only.
template <typename T>
adam_async::Buffer Buf(const Tensor& t, int64_t begin, int64_t end) {
  auto* data = reinterpret_cast<uint8_t*>(const_cast<char*>(t.tensor_data().data()));
  return adam_async::Buffer{data + begin * sizeof(T),
                            static_cast<size_t>((end - begin) * sizeof(T))};
}
inline adam_async::Buffer Buf(const Tensor& t) {
  const auto data = t.tensor_data();
  return adam_async::Buffer{reinterpret_cast<uint8_t*>(const_cast<char*>(data.data())),
                            data.size()};
}

// Whether the byte ranges of two tensors overlap (empty tensors overlap nothing).
inline bool Overlap(const Tensor& a, const Tensor& b) {
  const auto x = a.tensor_data();
  const auto y = b.tensor_data();
  if (x.empty() || y.empty()) return false;
  const uintptr_t x0 = reinterpret_cast<uintptr_t>(x.data());
  const uintptr_t y0 = reinterpret_cast<uintptr_t>(y.data());
  return x0 < y0 + y.size() && y0 < x0 + x.size();
}

// Runs a bridged call; a Rust error becomes an InvalidArgument status.
template <typename F>
absl::Status CallRust(const char* what, F&& f) {
  try {
    f();
    return absl::OkStatus();
  } catch (const rust::Error& e) {
    return InvalidArg(what, ": ", e.what());
  } catch (const std::exception& e) {
    return InternalErr(what, ": ", e.what());
  }
}

constexpr const char* kInputNames[] = {"var", "m", "v", "beta1_power", "beta2_power"};

// The common part of all four kernels: locks inputs 0..4 with TensorFlow's semantics (exclusive
// for dense resource updates, shared for sparse resource updates unless use_locking, none for ref
// variables unless use_locking) and checks the shapes shared by dense and sparse ops.
template <typename T>
class AdamAsyncOpBase : public OpKernel {
 public:
  explicit AdamAsyncOpBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_locking", &use_exclusive_lock_));
  }

 protected:
  // Resource inputs must hold variables of type T (TensorFlow's helpers would CHECK-fail, i.e.
  // abort, on a mismatch). Called before any lock is taken.
  absl::Status CheckResourceDTypes(OpKernelContext* ctx) {
    for (int i = 0; i < 5; ++i) {
      if (ctx->input_dtype(i) != DT_RESOURCE) continue;
      core::RefCountPtr<Var> var;
      TF_RETURN_IF_ERROR(LookupResource(ctx, HandleFromInput(ctx, i), &var));
      const DataType held = var->tensor()->dtype();
      if (held != DataTypeToEnum<T>::v()) {
        return InvalidArg(kInputNames[i], " holds ", DataTypeString(held), " but the op's T is ",
                          DataTypeString(DataTypeToEnum<T>::v()));
      }
    }
    return absl::OkStatus();
  }

  // Reads the five variable inputs under the locks `lock` holds; checks initialisation and shapes.
  absl::Status GetVariables(OpKernelContext* ctx, bool sparse, Tensor vars[5]) {
    for (int i = 0; i < 5; ++i) {
      TF_RETURN_IF_ERROR(GetInputTensorFromVariable<CPUDevice, T>(ctx, i, use_exclusive_lock_,
                                                                  sparse, &vars[i]));
      if (!vars[i].IsInitialized()) {
        return FailedPrecondition("Attempting to use uninitialized variables: ",
                                          kInputNames[i], " (", requested_input(i), ")");
      }
    }
    for (int i = 1; i < 3; ++i) {
      if (!vars[0].shape().IsSameSize(vars[i].shape())) {
        return InvalidArg("var and ", kInputNames[i],
                                       " do not have the same shape: ",
                                       vars[0].shape().DebugString(), " vs ",
                                       vars[i].shape().DebugString());
      }
    }
    for (int i = 3; i < 5; ++i) {
      const Tensor& p = vars[i];
      if (p.dims() > 1 || p.NumElements() != 1) {
        return InvalidArg(kInputNames[i],
                                       " must have exactly one element (shape [] or [1]), got "
                                       "shape ",
                                       p.shape().DebugString());
      }
    }
    return absl::OkStatus();
  }

  // Access::Exclusive when this kernel alone reaches var, m, v and the powers while it runs, so
  // that the Rust side may take var, m and v as `&mut` slices (the fast path): only for resource
  // variables under exclusive locks (dense updates always; sparse updates with use_locking) whose
  // five buffers overlap neither each other nor any other input. Ref variables never qualify: an update with
  // use_locking=False takes no lock, so it may run beside a locked one on the same variable.
  // Everything else takes shared access: atomic accesses only, sound under any concurrency.
  adam_async::Access GetAccess(OpKernelContext* ctx, bool sparse, const Tensor vars[5],
                               std::initializer_list<const Tensor*> others) const {
    constexpr auto kShared = adam_async::Access::Shared;
    if (ctx->input_dtype(0) != DT_RESOURCE) return kShared;
    if (sparse && !use_exclusive_lock_) return kShared;
    for (int i = 0; i < 5; ++i) {
      for (int j = i + 1; j < 5; ++j) {
        if (Overlap(vars[i], vars[j])) return kShared;
      }
      for (const Tensor* other : others) {
        if (Overlap(vars[i], *other)) return kShared;
      }
    }
    return adam_async::Access::Exclusive;
  }

  // lr, beta1, beta2, epsilon (inputs 5..8) must be scalars.
  absl::Status CheckScalars(OpKernelContext* ctx) {
    constexpr const char* names[] = {"lr", "beta1", "beta2", "epsilon"};
    for (int i = 0; i < 4; ++i) {
      const Tensor& t = ctx->input(5 + i);
      if (!TensorShapeUtils::IsScalar(t.shape())) {
        return InvalidArg(names[i], " is not a scalar: ", t.shape().DebugString());
      }
    }
    return absl::OkStatus();
  }

  bool use_exclusive_lock_;
};

template <typename T>
class AdamAsyncDenseOp : public AdamAsyncOpBase<T> {
 public:
  explicit AdamAsyncDenseOp(OpKernelConstruction* ctx) : AdamAsyncOpBase<T>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_nesterov", &use_nesterov_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, this->CheckResourceDTypes(ctx));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(
        ctx, this->use_exclusive_lock_, /*sparse=*/false, {0, 1, 2, 3, 4});
    Tensor t[5];
    OP_REQUIRES_OK(ctx, this->GetVariables(ctx, /*sparse=*/false, t));
    OP_REQUIRES_OK(ctx, this->CheckScalars(ctx));
    const Tensor& grad = ctx->input(9);
    OP_REQUIRES(ctx, t[0].shape().IsSameSize(grad.shape()),
                InvalidArg("var and grad do not have the same shape: ",
                                        t[0].shape().DebugString(), " vs ",
                                        grad.shape().DebugString()));

    constexpr auto dtype = RustDType<T>::value;
    const Tensor& lr = ctx->input(5);
    const Tensor& beta1 = ctx->input(6);
    const Tensor& beta2 = ctx->input(7);
    const Tensor& epsilon = ctx->input(8);
    const adam_async::Access access =
        this->GetAccess(ctx, /*sparse=*/false, t, {&lr, &beta1, &beta2, &epsilon, &grad});
    std::optional<rust::Box<adam_async::Coeffs>> coeffs;
    OP_REQUIRES_OK(ctx, CallRust("AdamAsync", [&] {
                     coeffs.emplace(adam_async::adam_coeffs(dtype, Buf(lr), Buf(beta1),
                                                            Buf(beta2), Buf(epsilon), Buf(t[3]),
                                                            Buf(t[4])));
                   }));

    const int64_t n = t[0].NumElements();
    if (n > 0) {
      std::mutex status_mu;
      absl::Status shard_status;
      const bool nesterov = use_nesterov_;
      auto shard = [&](Eigen::Index begin, Eigen::Index end) {
        absl::Status s = CallRust("AdamAsync", [&] {
          adam_async::apply_dense(**coeffs, access, Buf<T>(t[0], begin, end),
                                  Buf<T>(t[1], begin, end), Buf<T>(t[2], begin, end),
                                  Buf<T>(grad, begin, end), nesterov);
        });
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(status_mu);
          shard_status.Update(s);
        }
      };
      // Per element: loads var, m, v, grad; stores var, m, v; about a sqrt and a division.
      const Eigen::TensorOpCost cost(4 * sizeof(T), 3 * sizeof(T), 20);
      ctx->eigen_cpu_device().parallelFor(n, cost, shard);
      OP_REQUIRES_OK(ctx, shard_status);
    }
    OP_REQUIRES_OK(ctx, CallRust("AdamAsync", [&] {
                     adam_async::advance_powers(dtype, Buf(t[3]), Buf(t[4]), Buf(beta1),
                                                Buf(beta2));
                   }));
    MaybeForwardRefInputToRefOutput(ctx, 0, 0);
  }

 private:
  bool use_nesterov_;
};

template <typename T, typename Tindex>
class AdamAsyncSparseOp : public AdamAsyncOpBase<T> {
 public:
  explicit AdamAsyncSparseOp(OpKernelConstruction* ctx) : AdamAsyncOpBase<T>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("apply_sparse_rmsprop", &rmsprop_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, this->CheckResourceDTypes(ctx));
    auto locks = MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(
        ctx, this->use_exclusive_lock_, /*sparse=*/true, {0, 1, 2, 3, 4});
    Tensor t[5];
    OP_REQUIRES_OK(ctx, this->GetVariables(ctx, /*sparse=*/true, t));
    OP_REQUIRES_OK(ctx, this->CheckScalars(ctx));
    const Tensor& grad = ctx->input(9);
    const Tensor& indices = ctx->input(10);
    const Tensor& var = t[0];
    OP_REQUIRES(ctx, TensorShapeUtils::IsVectorOrHigher(var.shape()),
                InvalidArg("var must be at least 1 dimensional, got shape ",
                                        var.shape().DebugString()));
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(indices.shape()),
                InvalidArg("indices must be one-dimensional, got shape ",
                                        indices.shape().DebugString()));
    const int64_t n = indices.dim_size(0);
    OP_REQUIRES(ctx, grad.dims() >= 1 && grad.dim_size(0) == n,
                InvalidArg("grad must have one row per index: grad shape ",
                                        grad.shape().DebugString(), ", indices shape ",
                                        indices.shape().DebugString()));
    for (int d = 1; d < var.dims(); ++d) {
      OP_REQUIRES(ctx, grad.dims() == var.dims() && var.dim_size(d) == grad.dim_size(d),
                  InvalidArg("var and grad must match in all dimensions but the "
                                          "first: var shape ",
                                          var.shape().DebugString(), ", grad shape ",
                                          grad.shape().DebugString()));
    }
    OP_REQUIRES(ctx, grad.dims() == var.dims(),
                InvalidArg("var and grad must have the same rank: var shape ",
                                        var.shape().DebugString(), ", grad shape ",
                                        grad.shape().DebugString()));

    if (n > 0) {
      const int64_t row_len = var.dim_size(0) > 0 ? var.NumElements() / var.dim_size(0) : 0;
      const Tensor& lr = ctx->input(5);
      const Tensor& beta1 = ctx->input(6);
      const Tensor& beta2 = ctx->input(7);
      const Tensor& epsilon = ctx->input(8);
      const adam_async::Access access = this->GetAccess(
          ctx, /*sparse=*/true, t, {&lr, &beta1, &beta2, &epsilon, &grad, &indices});
      constexpr auto dtype = RustDType<T>::value;
      OP_REQUIRES_OK(ctx, CallRust("SparseAdamAsync", [&] {
                       rust::Box<adam_async::Coeffs> coeffs =
                           rmsprop_ ? adam_async::rmsprop_coeffs(dtype, Buf(lr), Buf(beta1),
                                                                 Buf(beta2), Buf(epsilon))
                                    : adam_async::adam_coeffs(dtype, Buf(lr), Buf(beta1),
                                                              Buf(beta2), Buf(epsilon),
                                                              Buf(t[3]), Buf(t[4]));
                       // Reads the indices once and validates every one before writing; rows
                       // apply in order.
                       adam_async::apply_sparse_rows(*coeffs, access, Buf(t[0]), Buf(t[1]),
                                                     Buf(t[2]), Buf(grad), Buf(indices),
                                                     RustIndexType<Tindex>::value,
                                                     static_cast<size_t>(row_len), rmsprop_);
                       if (!rmsprop_) {
                         adam_async::advance_powers(dtype, Buf(t[3]), Buf(t[4]), Buf(beta1),
                                                    Buf(beta2));
                       }
                     }));
    }
    MaybeForwardRefInputToRefOutput(ctx, 0, 0);
  }

 private:
  bool rmsprop_;
};

#define REGISTER_DENSE(T)                                                                    \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("ApplyAdamAsync").Device(DEVICE_CPU).TypeConstraint<T>("T"),                      \
      AdamAsyncDenseOp<T>);                                                                  \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("ResourceApplyAdamAsync").Device(DEVICE_CPU).TypeConstraint<T>("T"),              \
      AdamAsyncDenseOp<T>);

#define REGISTER_SPARSE(T, Tindex)                                                           \
  REGISTER_KERNEL_BUILDER(Name("SparseApplyAdamAsync")                                       \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<Tindex>("Tindices"),                           \
                          AdamAsyncSparseOp<T, Tindex>);                                     \
  REGISTER_KERNEL_BUILDER(Name("ResourceSparseApplyAdamAsync")                               \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<Tindex>("Tindices"),                           \
                          AdamAsyncSparseOp<T, Tindex>);

#define REGISTER_ALL(T)         \
  REGISTER_DENSE(T)             \
  REGISTER_SPARSE(T, int32_t)   \
  REGISTER_SPARSE(T, int64_t)

REGISTER_ALL(Eigen::half)
REGISTER_ALL(bfloat16)
REGISTER_ALL(float)
REGISTER_ALL(double)

#undef REGISTER_ALL
#undef REGISTER_SPARSE
#undef REGISTER_DENSE

}  // namespace
}  // namespace tensorflow
