// The AdamAsync op interfaces: DeepRec's names, input order, attrs, defaults and shape functions,
// so that graphs written for DeepRec run unchanged, and their V2 forms with float optimizer state
// for half variables (below). The kernels are in cc/kernels/.

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {
namespace {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// The shape of a ref/dense input, or of the variable behind a resource handle. A resource without
// shape information gives an unknown shape (not the scalar shape of the handle itself).
template <bool is_resource>
ShapeHandle ShapeOrHandleShape(InferenceContext* c, int input) {
  auto* handle_data = c->input_handle_shapes_and_types(input);
  if (handle_data != nullptr && !handle_data->empty() &&
      (*handle_data)[0].dtype != DT_INVALID) {
    return (*handle_data)[0].shape;
  }
  if (is_resource) return c->UnknownShape();
  return c->input(input);
}

// var, m, v merge; beta1_power .. epsilon are scalars; dense: grad merges with var; sparse:
// indices is a vector as long as grad's first dimension and grad[1:] merges with var[1:].
template <bool is_sparse, bool is_resource>
absl::Status AdamAsyncShapeFn(InferenceContext* c) {
  ShapeHandle unused;
  ShapeHandle s = ShapeOrHandleShape<is_resource>(c, 0);                       // var
  TF_RETURN_IF_ERROR(c->Merge(s, ShapeOrHandleShape<is_resource>(c, 1), &s));  // m
  TF_RETURN_IF_ERROR(c->Merge(s, ShapeOrHandleShape<is_resource>(c, 2), &s));  // v
  for (int input = 3; input <= 8; ++input) {  // beta1_power, beta2_power, lr, beta1, beta2, epsilon
    TF_RETURN_IF_ERROR(c->WithRank(c->input(input), 0, &unused));
  }
  const int grad_index = 9;
  ShapeHandle grad = ShapeOrHandleShape<is_resource>(c, grad_index);
  if (!is_sparse) {
    TF_RETURN_IF_ERROR(c->Merge(s, grad, &s));
  } else {
    ShapeHandle indices;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(grad_index + 1), 1, &indices));
    DimensionHandle unused_dim;
    TF_RETURN_IF_ERROR(c->Merge(c->Dim(indices, 0), c->Dim(grad, 0), &unused_dim));
    ShapeHandle grad_unknown_first;
    TF_RETURN_IF_ERROR(c->ReplaceDim(grad, 0, c->UnknownDim(), &grad_unknown_first));
    TF_RETURN_IF_ERROR(c->Merge(s, grad_unknown_first, &s));
  }
  if (c->num_outputs() > 0) c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("ApplyAdamAsync")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("beta1_power: Ref(T)")
    .Input("beta2_power: Ref(T)")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/false, /*is_resource=*/false>)
    .Doc(R"doc(
Updates var, m and v by AdamAsync and multiplies beta1_power / beta2_power by beta1 / beta2.

alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
m = m * beta1 + grad * (1 - beta1); v = v * beta2 + grad^2 * (1 - beta2)
var -= m * alpha / (sqrt(v) + epsilon)
)doc");

REGISTER_OP("SparseApplyAdamAsync")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("beta1_power: Ref(T)")
    .Input("beta2_power: Ref(T)")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("Tindices: {int32, int64}")
    .Attr("use_locking: bool = false")
    .Attr("apply_sparse_rmsprop: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/true, /*is_resource=*/false>)
    .Doc(R"doc(
AdamAsync on the rows of var named by indices (lazy Adam), or the RMSProp rule when
apply_sparse_rmsprop. Duplicate indices are applied one after the other.
)doc");

REGISTER_OP("ResourceApplyAdamAsync")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: resource")
    .Input("beta2_power: resource")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/false, /*is_resource=*/true>)
    .Doc("ApplyAdamAsync on resource variables.");

REGISTER_OP("ResourceSparseApplyAdamAsync")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: resource")
    .Input("beta2_power: resource")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Attr("T: numbertype")
    .Attr("Tindices: {int32, int64}")
    .Attr("use_locking: bool = false")
    .Attr("apply_sparse_rmsprop: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/true, /*is_resource=*/true>)
    .Doc("SparseApplyAdamAsync on resource variables.");

// The V2 ops: DeepRec's ops with the optimizer's state (m, v, the beta powers) and the
// hyper-parameters of type U (float) while var and grad are T. In a half type Adam's defaults do
// not survive: bfloat16 rounds beta2 = 0.999 and its powers to 1, float16 rounds epsilon = 1e-8 to
// 0 and (1 - beta2) * grad^2 to 0 for gradients below about 0.008. DeepRec's signatures give every
// input the variable's type, and graphs written for them must stay valid, so the float inputs need
// ops of their own (as stock FusedBatchNormV2 added U beside T).

constexpr char kV2Doc[] = R"doc(
AdamAsync with m, v, the beta powers and the hyper-parameters in U (float) for var and grad of
type T (half, bfloat16, float). The update is computed in U from var and grad widened exactly;
var is rounded to T once, m, v and the powers stay in U. With T = float it is the op without V2.
)doc";

REGISTER_OP("ApplyAdamAsyncV2")
    .Input("var: Ref(T)")
    .Input("m: Ref(U)")
    .Input("v: Ref(U)")
    .Input("beta1_power: Ref(U)")
    .Input("beta2_power: Ref(U)")
    .Input("lr: U")
    .Input("beta1: U")
    .Input("beta2: U")
    .Input("epsilon: U")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {half, bfloat16, float}")
    .Attr("U: {float} = DT_FLOAT")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/false, /*is_resource=*/false>)
    .Doc(kV2Doc);

REGISTER_OP("SparseApplyAdamAsyncV2")
    .Input("var: Ref(T)")
    .Input("m: Ref(U)")
    .Input("v: Ref(U)")
    .Input("beta1_power: Ref(U)")
    .Input("beta2_power: Ref(U)")
    .Input("lr: U")
    .Input("beta1: U")
    .Input("beta2: U")
    .Input("epsilon: U")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Output("out: Ref(T)")
    .Attr("T: {half, bfloat16, float}")
    .Attr("U: {float} = DT_FLOAT")
    .Attr("Tindices: {int32, int64}")
    .Attr("use_locking: bool = false")
    .Attr("apply_sparse_rmsprop: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/true, /*is_resource=*/false>)
    .Doc(kV2Doc);

REGISTER_OP("ResourceApplyAdamAsyncV2")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: resource")
    .Input("beta2_power: resource")
    .Input("lr: U")
    .Input("beta1: U")
    .Input("beta2: U")
    .Input("epsilon: U")
    .Input("grad: T")
    .Attr("T: {half, bfloat16, float}")
    .Attr("U: {float} = DT_FLOAT")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/false, /*is_resource=*/true>)
    .Doc(kV2Doc);

REGISTER_OP("ResourceSparseApplyAdamAsyncV2")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: resource")
    .Input("beta2_power: resource")
    .Input("lr: U")
    .Input("beta1: U")
    .Input("beta2: U")
    .Input("epsilon: U")
    .Input("grad: T")
    .Input("indices: Tindices")
    .Attr("T: {half, bfloat16, float}")
    .Attr("U: {float} = DT_FLOAT")
    .Attr("Tindices: {int32, int64}")
    .Attr("use_locking: bool = false")
    .Attr("apply_sparse_rmsprop: bool = false")
    .SetShapeFn(AdamAsyncShapeFn</*is_sparse=*/true, /*is_resource=*/true>)
    .Doc(kV2Doc);

}  // namespace tensorflow

// The TensorFlow version this library was compiled against (tf.__version__ of the Python that ran
// tf_plugin/build.sh), for the Python loader's check.
#ifndef ADAM_ASYNC_TF_VERSION
#error "build with -DADAM_ASYNC_TF_VERSION=\"<tf.__version__>\" (tf_plugin/build.sh does)"
#endif
extern "C" __attribute__((visibility("default"))) const char* adam_async_built_for_tf() {
  return ADAM_ASYNC_TF_VERSION;
}
