// CPU kernels of the AdamAsync ops (interfaces in cc/ops/adam_async_ops.cc).
//
// One kernel template serves DeepRec's ops, where every tensor has the variable's type T, and the
// V2 ops, whose m, v, beta powers and hyper-parameters have type U = float while var and grad are
// half, bfloat16 or float: the Rust side computes in float and rounds the weight to T once.
//
// Each kernel takes TensorFlow's variable locks (the helpers of stock training ops), validates every
// input, then hands the tensors to the Rust core through the cxx bridge (tf_plugin/src/lib.rs):
// coefficients once, the element rule on each shard, the powers once. Every tensor crosses as a
// Buffer (address and size); the update calls say whether the kernel holds exclusive locks on
// resource variables (Access::Exclusive: the Rust side views the buffers as slices) or other
// kernels may update the same variables at once (Access::Shared: atomics only).
// A Rust error arrives as rust::Error and becomes an InvalidArgument status; nothing aborts.

#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
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

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Eigen::half> || std::is_same_v<T, bfloat16>;

// The common part of all kernels: locks inputs 0..4 with TensorFlow's semantics (exclusive for
// dense resource updates, shared for sparse resource updates unless use_locking, none for ref
// variables unless use_locking) and checks the shapes shared by dense and sparse ops. T is the
// type of var and grad; U that of m, v, the powers and the hyper-parameters (T for DeepRec's ops).
template <typename T, typename U>
class AdamAsyncOpBase : public OpKernel {
 public:
  explicit AdamAsyncOpBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_locking", &use_exclusive_lock_));
  }

 protected:
  static constexpr adam_async::DType kDType = RustDType<T>::value;
  static constexpr adam_async::DType kParamDType = RustDType<U>::value;

  // Resource inputs must hold variables of their type, T or U (TensorFlow's helpers would
  // CHECK-fail, i.e. abort, on a mismatch). Called before any lock is taken.
  absl::Status CheckResourceDTypes(OpKernelContext* ctx) {
    for (int i = 0; i < 5; ++i) {
      if (ctx->input_dtype(i) != DT_RESOURCE) continue;
      core::RefCountPtr<Var> var;
      TF_RETURN_IF_ERROR(LookupResource(ctx, HandleFromInput(ctx, i), &var));
      const DataType held = var->tensor()->dtype();
      const bool is_param = i >= 1 && !std::is_same_v<T, U>;
      const DataType want = is_param ? DataTypeToEnum<U>::v() : DataTypeToEnum<T>::v();
      if (held != want) {
        return InvalidArg(kInputNames[i], " holds ", DataTypeString(held), " but the op's ",
                          is_param ? "U" : "T", " is ", DataTypeString(want));
      }
    }
    return absl::OkStatus();
  }

  // MaybeLockVariableInputMutexesInOrder<CPUDevice, T> on inputs 0..4. For the V2 ops it is that
  // helper's logic with one change: a sparse update switches each resource variable to
  // copy-on-read mode with a copy of its own element type, where the helper would copy m, v and
  // the powers as T and CHECK-fail (abort) on their type U.
  // Variables' mutexes are tsl::mutex, which TensorFlow's headers mark deprecated while its own
  // helpers still use them: the warning says nothing about this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  VariableInputLockHolder LockInputs(OpKernelContext* ctx, bool sparse) {
    if constexpr (std::is_same_v<T, U>) {
      return MaybeLockVariableInputMutexesInOrder<CPUDevice, T>(ctx, use_exclusive_lock_, sparse,
                                                                {0, 1, 2, 3, 4});
    } else {
      bool any_resource = false;
      for (int i = 0; i < 5; ++i) any_resource |= ctx->input_dtype(i) == DT_RESOURCE;
      if (!use_exclusive_lock_ && !any_resource) return VariableInputLockHolder({}, {}, {});
      std::vector<Var*> vars;
      std::vector<tsl::mutex*> mutexes;
      std::vector<int> acquire_order;
      for (int i = 0; i < 5; ++i) {
        Var* var;
        tsl::mutex* mutex = GetTrainingVariableMutex<CPUDevice, T>(ctx, i, &var);
        if (var) {
          vars.push_back(var);
          if (sparse) {
            (i == 0 ? EnsureSparseVariableAccess<CPUDevice, T>(ctx, var)
                    : EnsureSparseVariableAccess<CPUDevice, U>(ctx, var))
                .IgnoreError();
          }
        }
        // Each mutex once, even when inputs share a variable.
        if (std::find(mutexes.begin(), mutexes.end(), mutex) == mutexes.end()) {
          acquire_order.push_back(mutexes.size());
          mutexes.push_back(mutex);
        }
      }
      // In address order, as every TensorFlow training op locks, so that no two ops deadlock.
      std::sort(acquire_order.begin(), acquire_order.end(),
                [&mutexes](int a, int b) { return mutexes[a] < mutexes[b]; });
      auto locks = std::make_unique<std::vector<tsl::mutex_lock>>();
      auto shared_locks = std::make_unique<std::vector<tsl::tf_shared_lock>>();
      locks->reserve(acquire_order.size());
      for (int acquire : acquire_order) {
        tsl::mutex* mu = mutexes[acquire];
        if (mu == nullptr) continue;
        if (!sparse || use_exclusive_lock_) {
          locks->emplace_back(*mu);
        } else {
          shared_locks->emplace_back(*mu);
        }
      }
      return VariableInputLockHolder(std::move(vars), std::move(locks), std::move(shared_locks));
    }
  }
#pragma GCC diagnostic pop

  // Reads the five variable inputs under the locks `lock` holds; checks initialisation and shapes.
  absl::Status GetVariables(OpKernelContext* ctx, bool sparse, Tensor vars[5]) {
    for (int i = 0; i < 5; ++i) {
      TF_RETURN_IF_ERROR(
          i == 0 ? GetInputTensorFromVariable<CPUDevice, T>(ctx, i, use_exclusive_lock_, sparse,
                                                            &vars[i])
                 : GetInputTensorFromVariable<CPUDevice, U>(ctx, i, use_exclusive_lock_, sparse,
                                                            &vars[i]));
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

  // The Adam coefficients from lr, beta1, beta2, epsilon and the powers, validated by the Rust
  // side. DeepRec's ops on half variables take these in the half type, where Adam's defaults can
  // round to invalid values (bfloat16 rounds beta2 = 0.999 to 1): the error then says so.
  absl::Status ComputeCoeffs(OpKernelContext* ctx, const char* what, const Tensor vars[5],
                             std::optional<rust::Box<adam_async::Coeffs>>* coeffs) {
    absl::Status s = CallRust(what, [&] {
      coeffs->emplace(adam_async::adam_coeffs(kParamDType, Buf(ctx->input(5)),
                                              Buf(ctx->input(6)), Buf(ctx->input(7)),
                                              Buf(ctx->input(8)), Buf(vars[3]), Buf(vars[4])));
    });
    if (s.ok() || !kIsHalf<U>) return s;
    return InvalidArg(s.message(), " (lr, beta1, beta2, epsilon and the beta powers are ",
                      DataTypeString(DataTypeToEnum<U>::v()),
                      " here; the AdamAsyncV2 ops take them as float, as the adam_async "
                      "optimizers do for half variables)");
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

template <typename T, typename U = T>
class AdamAsyncDenseOp : public AdamAsyncOpBase<T, U> {
 public:
  explicit AdamAsyncDenseOp(OpKernelConstruction* ctx) : AdamAsyncOpBase<T, U>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("use_nesterov", &use_nesterov_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, this->CheckResourceDTypes(ctx));
    auto locks = this->LockInputs(ctx, /*sparse=*/false);
    Tensor t[5];
    OP_REQUIRES_OK(ctx, this->GetVariables(ctx, /*sparse=*/false, t));
    OP_REQUIRES_OK(ctx, this->CheckScalars(ctx));
    const Tensor& grad = ctx->input(9);
    OP_REQUIRES(ctx, t[0].shape().IsSameSize(grad.shape()),
                InvalidArg("var and grad do not have the same shape: ",
                                        t[0].shape().DebugString(), " vs ",
                                        grad.shape().DebugString()));

    const Tensor& lr = ctx->input(5);
    const Tensor& beta1 = ctx->input(6);
    const Tensor& beta2 = ctx->input(7);
    const Tensor& epsilon = ctx->input(8);
    const adam_async::Access access =
        this->GetAccess(ctx, /*sparse=*/false, t, {&lr, &beta1, &beta2, &epsilon, &grad});
    std::optional<rust::Box<adam_async::Coeffs>> coeffs;
    OP_REQUIRES_OK(ctx, this->ComputeCoeffs(ctx, "AdamAsync", t, &coeffs));

    const int64_t n = t[0].NumElements();
    if (n > 0) {
      std::mutex status_mu;
      absl::Status shard_status;
      const bool nesterov = use_nesterov_;
      auto shard = [&](Eigen::Index begin, Eigen::Index end) {
        absl::Status s = CallRust("AdamAsync", [&] {
          adam_async::apply_dense(**coeffs, this->kDType, access, Buf<T>(t[0], begin, end),
                                  Buf<U>(t[1], begin, end), Buf<U>(t[2], begin, end),
                                  Buf<T>(grad, begin, end), nesterov);
        });
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(status_mu);
          shard_status.Update(s);
        }
      };
      // Per element: loads var, m, v, grad; stores var, m, v; about a sqrt and a division.
      const Eigen::TensorOpCost cost(2 * sizeof(T) + 2 * sizeof(U), sizeof(T) + 2 * sizeof(U),
                                     20);
      ctx->eigen_cpu_device().parallelFor(n, cost, shard);
      OP_REQUIRES_OK(ctx, shard_status);
    }
    OP_REQUIRES_OK(ctx, CallRust("AdamAsync", [&] {
                     adam_async::advance_powers(this->kParamDType, Buf(t[3]), Buf(t[4]),
                                                Buf(beta1), Buf(beta2));
                   }));
    MaybeForwardRefInputToRefOutput(ctx, 0, 0);
  }

 private:
  bool use_nesterov_;
};

template <typename T, typename Tindex, typename U = T>
class AdamAsyncSparseOp : public AdamAsyncOpBase<T, U> {
 public:
  explicit AdamAsyncSparseOp(OpKernelConstruction* ctx) : AdamAsyncOpBase<T, U>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("apply_sparse_rmsprop", &rmsprop_));
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, this->CheckResourceDTypes(ctx));
    auto locks = this->LockInputs(ctx, /*sparse=*/true);
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
      std::optional<rust::Box<adam_async::Coeffs>> coeffs;
      if (rmsprop_) {
        OP_REQUIRES_OK(ctx, CallRust("SparseAdamAsync", [&] {
                         coeffs.emplace(adam_async::rmsprop_coeffs(
                             this->kParamDType, Buf(lr), Buf(beta1), Buf(beta2), Buf(epsilon)));
                       }));
      } else {
        OP_REQUIRES_OK(ctx, this->ComputeCoeffs(ctx, "SparseAdamAsync", t, &coeffs));
      }
      OP_REQUIRES_OK(ctx, CallRust("SparseAdamAsync", [&] {
                       // Reads the indices once and validates every one before writing; rows
                       // apply in order.
                       adam_async::apply_sparse_rows(**coeffs, this->kDType, access, Buf(t[0]),
                                                     Buf(t[1]), Buf(t[2]), Buf(grad),
                                                     Buf(indices), RustIndexType<Tindex>::value,
                                                     static_cast<size_t>(row_len), rmsprop_);
                       if (!rmsprop_) {
                         adam_async::advance_powers(this->kParamDType, Buf(t[3]), Buf(t[4]),
                                                    Buf(beta1), Buf(beta2));
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

// The V2 ops: float m, v, powers and hyper-parameters (U) for var and grad of type T.
#define REGISTER_V2_SPARSE(T, Tindex)                                                        \
  REGISTER_KERNEL_BUILDER(Name("SparseApplyAdamAsyncV2")                                     \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<float>("U")                                    \
                              .TypeConstraint<Tindex>("Tindices"),                           \
                          AdamAsyncSparseOp<T, Tindex, float>);                              \
  REGISTER_KERNEL_BUILDER(Name("ResourceSparseApplyAdamAsyncV2")                             \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<float>("U")                                    \
                              .TypeConstraint<Tindex>("Tindices"),                           \
                          AdamAsyncSparseOp<T, Tindex, float>);

#define REGISTER_V2(T)                                                                       \
  REGISTER_KERNEL_BUILDER(Name("ApplyAdamAsyncV2")                                           \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<float>("U"),                                   \
                          AdamAsyncDenseOp<T, float>);                                       \
  REGISTER_KERNEL_BUILDER(Name("ResourceApplyAdamAsyncV2")                                   \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<float>("U"),                                   \
                          AdamAsyncDenseOp<T, float>);                                       \
  REGISTER_V2_SPARSE(T, int32_t)                                                             \
  REGISTER_V2_SPARSE(T, int64_t)

REGISTER_V2(Eigen::half)
REGISTER_V2(bfloat16)
REGISTER_V2(float)

#undef REGISTER_V2
#undef REGISTER_V2_SPARSE
#undef REGISTER_ALL
#undef REGISTER_SPARSE
#undef REGISTER_DENSE

}  // namespace
}  // namespace tensorflow
