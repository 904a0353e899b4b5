//! AdamAsync against DeepRec's test matrix (var0=[1,2], grad0=[0.1,0.1], var1=[3,4],
//! grad1=[0.01,0.01], lr 0.001, 3 steps, f16/f32/f64, powers checked each step), against
//! independent numpy references for the nesterov, RMSProp and lazy-sparse paths, and every error
//! path with its message. Tolerances as DeepRec's tests: 1e-6 for f32/f64, 1e-3 for f16.

use half::f16;
use hogwild::optim::{sum_duplicate_indices, AdamAsync, AdamAsyncState, AdamCoeffs, Real};
use hogwild::Error;

fn cast<T: Real>(x: f64) -> T {
    num_traits::cast(x).expect("test constants fit every float type")
}

fn vec_of<T: Real>(xs: &[f64]) -> Vec<T> {
    xs.iter().map(|&x| cast(x)).collect()
}

/// TF's `assertAllClose`: |actual - expected| <= tol + tol * |expected| for every element.
fn assert_close<T: Real>(what: &str, actual: &[T], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let a = a.to_f64_lossy();
        assert!(
            approx::abs_diff_eq!(a, e, epsilon = tol + tol * e.abs()),
            "{what}[{i}]: got {a}, expected {e} (tolerance {tol})"
        );
    }
}

fn bits<T: Real>(xs: &[T]) -> Vec<u64> {
    xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect()
}

fn deeprec_opt<T: Real>() -> AdamAsync<T> {
    AdamAsync::new(cast(0.001), cast(0.9), cast(0.999), cast(1e-8))
}

// Expected values: DeepRec's / TF's numpy reference, computed in each dtype (numpy 2):
//
//     def adam_update_numpy(param, g_t, t, m, v, alpha=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8):
//         alpha_t = alpha * np.sqrt(1 - beta2**t) / (1 - beta1**t)
//         m_t = beta1 * m + (1 - beta1) * g_t
//         v_t = beta2 * v + (1 - beta2) * g_t * g_t
//         param_t = param - alpha_t * m_t / (np.sqrt(v_t) + epsilon)
//         return param_t, m_t, v_t
//     for dt in (np.float16, np.float32, np.float64):
//         var0, var1 = np.array([1.0, 2.0], dt), np.array([3.0, 4.0], dt)
//         g0, g1 = np.array([0.1, 0.1], dt), np.array([0.01, 0.01], dt)
//         m0 = v0 = m1 = v1 = np.zeros(2, dt)
//         for t in range(1, 4):
//             var0, m0, v0 = adam_update_numpy(var0, g0, t, m0, v0)
//             var1, m1, v1 = adam_update_numpy(var1, g1, t, m1, v1)
//             print(t, [float(x) for x in var0], [float(x) for x in var1])
//
// Each entry: [var0 after step t, var1 after step t] for t = 1, 2, 3.
type Steps = [[[f64; 2]; 2]; 3];
const REF_F16: Steps = [
    [
        [0.9990011853562819, 1.999001185356282],
        [2.999083638324443, 3.999083638324443],
    ],
    [
        [0.9980029449255663, 1.9980029449255663],
        [2.9981676495869864, 3.9981676495869864],
    ],
    [
        [0.9970054033810799, 1.99700540338108],
        [2.9972513527143927, 3.9972513527143927],
    ],
];
const REF_F32: Steps = [
    [
        [0.999000003159153, 1.999000003159153],
        [2.999000031583261, 3.999000031583261],
    ],
    [
        [0.9980000053246967, 1.9980000053246967],
        [2.998000053950558, 3.998000053950558],
    ],
    [
        [0.9970000072000064, 1.9970000072000063],
        [2.9970000721440075, 3.9970000721440075],
    ],
];
const REF_F64: Steps = [
    [
        [0.9990000031622677, 1.9990000031622677],
        [2.9990000316217764, 3.9990000316217764],
    ],
    [
        [0.9980000053988899, 1.9980000053988898],
        [2.9980000539875484, 3.9980000539875484],
    ],
    [
        [0.9970000072255417, 1.9970000072255416],
        [2.997000072253766, 3.997000072253766],
    ],
];

/// How a test feeds the gradient: DeepRec's dense op, or its sparse op with indices covering all
/// rows of a `[2]` variable (rows of one element), with int32 or int64 indices.
#[derive(Clone, Copy, Debug)]
enum Feed {
    Dense,
    SparseI32,
    SparseI64,
}

fn step<T: Real>(
    opt: &AdamAsync<T>,
    var: &mut [T],
    s: &mut AdamAsyncState<T>,
    g: &[T],
    feed: Feed,
) {
    match feed {
        Feed::Dense => opt.apply_dense(var, s, g),
        Feed::SparseI32 => opt.apply_sparse(var, s, g, &[0i32, 1], 1),
        Feed::SparseI64 => opt.apply_sparse(var, s, g, &[0i64, 1], 1),
    }
    .unwrap();
}

fn deeprec_basic<T: Real>(expected: &Steps, tol: f64, feed: Feed) {
    let opt = deeprec_opt::<T>();
    let (mut var0, mut var1) = (vec_of::<T>(&[1.0, 2.0]), vec_of::<T>(&[3.0, 4.0]));
    let (g0, g1) = (vec_of::<T>(&[0.1, 0.1]), vec_of::<T>(&[0.01, 0.01]));
    let mut s0 = AdamAsyncState::new(2, &opt);
    let mut s1 = AdamAsyncState::new(2, &opt);
    for (t, want) in (1..).zip(expected) {
        // The powers before step t are beta^t, each variable's own.
        for s in [&s0, &s1] {
            assert_close("beta1_power", &[s.beta1_power], &[0.9f64.powi(t)], tol);
            assert_close("beta2_power", &[s.beta2_power], &[0.999f64.powi(t)], tol);
        }
        step(&opt, &mut var0, &mut s0, &g0, feed);
        step(&opt, &mut var1, &mut s1, &g1, feed);
        assert_close(&format!("{feed:?} step {t} var0"), &var0, &want[0], tol);
        assert_close(&format!("{feed:?} step {t} var1"), &var1, &want[1], tol);
    }
    assert_close(
        "final beta1_power",
        &[s0.beta1_power],
        &[0.9f64.powi(4)],
        tol,
    );
    assert_close(
        "final beta2_power",
        &[s0.beta2_power],
        &[0.999f64.powi(4)],
        tol,
    );
}

#[test]
fn deeprec_basic_dense_and_sparse_f16_f32_f64() {
    for feed in [Feed::Dense, Feed::SparseI32, Feed::SparseI64] {
        deeprec_basic::<f16>(&REF_F16, 1e-3, feed);
        deeprec_basic::<f32>(&REF_F32, 1e-6, feed);
        deeprec_basic::<f64>(&REF_F64, 1e-6, feed);
    }
}

/// DeepRec's sharing test: one optimizer, two update "ops" (calls) applied alternately to the same
/// variables give the plain 3-step reference; every variable has its own powers, so a variable
/// updated more often than another does not move the other's powers.
fn deeprec_sharing<T: Real>(expected: &Steps, tol: f64) {
    let opt = deeprec_opt::<T>();
    let update = |var: &mut Vec<T>, s: &mut AdamAsyncState<T>, g: &[T]| {
        opt.apply_dense(var, s, g).unwrap();
    };
    let (mut var0, mut var1) = (vec_of::<T>(&[1.0, 2.0]), vec_of::<T>(&[3.0, 4.0]));
    let (g0, g1) = (vec_of::<T>(&[0.1, 0.1]), vec_of::<T>(&[0.01, 0.01]));
    let mut s0 = AdamAsyncState::new(2, &opt);
    let mut s1 = AdamAsyncState::new(2, &opt);
    let update2 = update;
    for (t, want) in expected.iter().enumerate() {
        if t % 2 == 0 {
            update(&mut var0, &mut s0, &g0);
            update(&mut var1, &mut s1, &g1);
        } else {
            update2(&mut var0, &mut s0, &g0);
            update2(&mut var1, &mut s1, &g1);
        }
        assert_close("shared var0", &var0, &want[0], tol);
        assert_close("shared var1", &var1, &want[1], tol);
    }
    // A third variable stepped once more than var0 leaves var0's powers alone.
    let mut var2 = vec_of::<T>(&[1.0, 2.0]);
    let mut s2 = AdamAsyncState::new(2, &opt);
    for _ in 0..4 {
        update(&mut var2, &mut s2, &g0);
    }
    assert_close(
        "var0 beta1_power",
        &[s0.beta1_power],
        &[0.9f64.powi(4)],
        tol,
    );
    assert_close(
        "var2 beta1_power",
        &[s2.beta1_power],
        &[0.9f64.powi(5)],
        tol,
    );
}

#[test]
fn deeprec_sharing_f16_f32_f64() {
    deeprec_sharing::<f16>(&REF_F16, 1e-3);
    deeprec_sharing::<f32>(&REF_F32, 1e-6);
    deeprec_sharing::<f64>(&REF_F64, 1e-6);
}

/// DeepRec's repeated-indices test: `[[1], [2]]`, indices [1, 1] with rows 0.1, 0.1 against the
/// aggregated index [1] with row 0.2, 3 steps; the duplicates are summed first, as DeepRec's Python
/// optimizer does, and then the two updates agree bit for bit.
fn deeprec_repeated_indices<T: Real>() {
    let opt = deeprec_opt::<T>();
    let mut repeated = vec_of::<T>(&[1.0, 2.0]);
    let mut aggregated = repeated.clone();
    let mut s_rep = AdamAsyncState::new(2, &opt);
    let mut s_agg = AdamAsyncState::new(2, &opt);
    let (g, idx) = sum_duplicate_indices(&vec_of::<T>(&[0.1, 0.1]), &[1i64, 1], 1).unwrap();
    assert_eq!(idx, [1]);
    for _ in 0..3 {
        opt.apply_sparse(&mut repeated, &mut s_rep, &g, &idx, 1)
            .unwrap();
        opt.apply_sparse(
            &mut aggregated,
            &mut s_agg,
            &vec_of::<T>(&[0.2]),
            &[1i64],
            1,
        )
        .unwrap();
        assert_eq!(bits(&repeated), bits(&aggregated));
        assert_eq!(bits(&s_rep.m), bits(&s_agg.m));
        assert_eq!(bits(&s_rep.v), bits(&s_agg.v));
    }
    assert_eq!(repeated[0], cast(1.0), "row 0 is never touched");
}

#[test]
fn deeprec_repeated_indices_f16_f32_f64() {
    deeprec_repeated_indices::<f16>();
    deeprec_repeated_indices::<f32>();
    deeprec_repeated_indices::<f64>();
}

// Duplicates left in the indices apply one after the other; an independent numpy reference of
// that arithmetic (alpha computed once for the call, from the powers before it):
//
//     lr, b1, b2, eps = 0.001, 0.9, 0.999, 1e-8
//     var, m, v = 2.0, 0.0, 0.0
//     alpha = lr * np.sqrt(1 - b2) / (1 - b1)
//     for g in (0.1, 0.3):
//         m = m * b1 + g * (1 - b1); v = v * b2 + g * g * (1 - b2)
//         var = var - m * alpha / (np.sqrt(v) + eps)
//     print(repr(float(var)))   # 1.9977666544391728
#[test]
fn duplicate_indices_apply_sequentially() {
    let opt = deeprec_opt::<f64>();
    let mut var = vec![1.0f64, 2.0];
    let mut s = AdamAsyncState::new(2, &opt);
    opt.apply_sparse(&mut var, &mut s, &[0.1, 0.3], &[1u32, 1], 1)
        .unwrap();
    assert_close("var", &var, &[1.0, 1.9977666544391728], 1e-12);
    assert_close("beta1_power", &[s.beta1_power], &[0.81], 1e-15);
}

// Nesterov, dense (DeepRec has no test of it). numpy:
//
//     def nesterov(var, g, steps):
//         m = np.zeros_like(var); v = np.zeros_like(var); b1p, b2p = b1, b2; out = []
//         for _ in range(steps):
//             alpha = lr * np.sqrt(1 - b2p) / (1 - b1p)
//             m = m * b1 + g * (1 - b1)
//             v = v * b2 + g * g * (1 - b2)
//             var = var - (g * (1 - b1) + b1 * m) * alpha / (np.sqrt(v) + eps)
//             b1p *= b1; b2p *= b2
//             out.append(var.copy())
//         return out
//     nesterov(np.array([1.0, 2.0]), np.array([0.1, 0.1]), 3)
//     nesterov(np.array([3.0, 4.0]), np.array([0.01, 0.01]), 3)
//     # lr, b1, b2, eps = 0.001, 0.9, 0.999, 1e-8
const NESTEROV_REF: Steps = [
    [
        [0.9981000060083085, 1.9981000060083085],
        [2.9981000600813754, 3.9981000600813754],
    ],
    [
        [0.9966736934089644, 1.9966736934089644],
        [2.996673776192555, 3.996673776192555],
    ],
    [
        [0.9954046920369554, 1.9954046920369553],
        [2.9954047956824157, 3.9954047956824157],
    ],
];

fn nesterov<T: Real>(tol: f64) {
    let opt = AdamAsync {
        use_nesterov: true,
        ..deeprec_opt::<T>()
    };
    let (mut var0, mut var1) = (vec_of::<T>(&[1.0, 2.0]), vec_of::<T>(&[3.0, 4.0]));
    let (g0, g1) = (vec_of::<T>(&[0.1, 0.1]), vec_of::<T>(&[0.01, 0.01]));
    let mut s0 = AdamAsyncState::new(2, &opt);
    let mut s1 = AdamAsyncState::new(2, &opt);
    for (t, want) in NESTEROV_REF.iter().enumerate() {
        opt.apply_dense(&mut var0, &mut s0, &g0).unwrap();
        opt.apply_dense(&mut var1, &mut s1, &g1).unwrap();
        assert_close(&format!("nesterov step {t} var0"), &var0, &want[0], tol);
        assert_close(&format!("nesterov step {t} var1"), &var1, &want[1], tol);
    }
}

#[test]
fn nesterov_dense_f32_f64() {
    nesterov::<f32>(1e-6);
    nesterov::<f64>(1e-6);
}

#[test]
fn nesterov_does_not_apply_to_sparse_updates() {
    let plain = deeprec_opt::<f64>();
    let nest = AdamAsync {
        use_nesterov: true,
        ..plain
    };
    let (mut a, mut b) = (vec![1.0f64, 2.0], vec![1.0f64, 2.0]);
    let (mut sa, mut sb) = (
        AdamAsyncState::new(2, &plain),
        AdamAsyncState::new(2, &nest),
    );
    for _ in 0..3 {
        plain
            .apply_sparse(&mut a, &mut sa, &[0.1, 0.2], &[0i32, 1], 1)
            .unwrap();
        nest.apply_sparse(&mut b, &mut sb, &[0.1, 0.2], &[0i32, 1], 1)
            .unwrap();
    }
    assert_eq!(bits(&a), bits(&b));
    assert_eq!(sa, sb);
}

// RMSProp sparse path: TF's SparseApplyRMSProp with ms=v, mom=m, rho=beta2, momentum=beta1
// (lr 0.01, beta1 0.5, beta2 0.9, epsilon 1e-6; epsilon inside the sqrt). numpy:
//
//     def rmsprop(var, rows, grads, lr=0.01, rho=0.9, momentum=0.5, eps=1e-6):
//         ms = np.zeros_like(var); mom = np.zeros_like(var); out = []
//         for r, g in zip(rows, grads):
//             for k, i in enumerate(r):
//                 ms[i] = rho * ms[i] + (1 - rho) * g[k] * g[k]
//                 mom[i] = momentum * mom[i] + lr * g[k] / np.sqrt(ms[i] + eps)
//                 var[i] = var[i] - mom[i]
//             out.append((var.copy(), mom.copy(), ms.copy()))
//         return out
//     var = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
//     rows = [[0, 2], [2], [0]]
//     grads = [np.array([[0.1, -0.2], [0.3, 0.4]]), np.array([[-0.5, 0.6]]), np.array([[0.7, 0.8]])]
//     for w, m, v in rmsprop(var, rows, grads): print(w.tolist(), m.tolist(), v.tolist())
const SPARSE_ROWS: [&[i64]; 3] = [&[0, 2], &[2], &[0]];
const SPARSE_GRADS: [&[f64]; 3] = [&[0.1, -0.2, 0.3, 0.4], &[-0.5, 0.6], &[0.7, 0.8]];
const RMSPROP_REF: [[[f64; 6]; 3]; 3] = [
    [
        [
            0.9683930229379493,
            2.031618824495613,
            3.0,
            4.0,
            4.96837898007285,
            5.968378211563765,
        ],
        [
            0.031606977062050706,
            -0.031618824495613033,
            0.0,
            0.0,
            0.03162101992714967,
            0.03162178843623501,
        ],
        [
            0.0009999999999999998,
            0.003999999999999999,
            0.0,
            0.0,
            0.008999999999999998,
            0.015999999999999997,
        ],
    ],
    [
        [
            0.9683930229379493,
            2.031618824495613,
            3.0,
            4.0,
            4.980050540471861,
            5.925841458290581,
        ],
        [
            0.031606977062050706,
            -0.031618824495613033,
            0.0,
            0.0,
            -0.011671560399011696,
            0.04253675327318447,
        ],
        [
            0.0009999999999999998,
            0.003999999999999999,
            0.0,
            0.0,
            0.03309999999999999,
            0.050399999999999986,
        ],
    ],
    [
        [
            0.9212535447207143,
            2.0166592335547318,
            3.0,
            4.0,
            4.980050540471861,
            5.925841458290581,
        ],
        [
            0.047139478217234985,
            0.014959590940881368,
            0.0,
            0.0,
            -0.011671560399011696,
            0.04253675327318447,
        ],
        [
            0.04989999999999998,
            0.0676,
            0.0,
            0.0,
            0.03309999999999999,
            0.050399999999999986,
        ],
    ],
];

fn rmsprop<T: Real>(tol: f64) {
    let opt = AdamAsync {
        apply_sparse_rmsprop: true,
        ..AdamAsync::new(cast::<T>(0.01), cast(0.5), cast(0.9), cast(1e-6))
    };
    let mut var = vec_of::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let mut s = AdamAsyncState::new(6, &opt);
    for (call, want) in RMSPROP_REF.iter().enumerate() {
        let g = vec_of::<T>(SPARSE_GRADS[call]);
        opt.apply_sparse(&mut var, &mut s, &g, SPARSE_ROWS[call], 2)
            .unwrap();
        assert_close(&format!("rmsprop call {call} var"), &var, &want[0], tol);
        assert_close(&format!("rmsprop call {call} m"), &s.m, &want[1], tol);
        assert_close(&format!("rmsprop call {call} v"), &s.v, &want[2], tol);
        // The powers are neither read nor changed.
        assert_eq!((s.beta1_power, s.beta2_power), (opt.beta1, opt.beta2));
    }
    assert_eq!(bits(&var[2..4]), bits(&vec_of::<T>(&[3.0, 4.0])));
}

#[test]
fn rmsprop_sparse_f32_f64() {
    rmsprop::<f32>(1e-6);
    rmsprop::<f64>(1e-6);
}

// Lazy sparse Adam with a per-variable step count (rows and grads as in the RMSProp test, lr 0.001,
// beta1 0.9, beta2 0.999, epsilon 1e-8). numpy:
//
//     def lazy_adam(var, rows, grads):
//         m = np.zeros_like(var); v = np.zeros_like(var); out = []
//         for t, (r, g) in enumerate(zip(rows, grads), start=1):
//             alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
//             for k, i in enumerate(r):
//                 m[i] = b1 * m[i] + (1 - b1) * g[k]
//                 v[i] = b2 * v[i] + (1 - b2) * g[k] * g[k]
//                 var[i] = var[i] - alpha * m[i] / (np.sqrt(v[i]) + eps)
//             out.append(var.copy())
//         return out
const LAZY_REF: [[f64; 6]; 3] = [
    [
        0.9990000031622677,
        2.000999998418864,
        3.0,
        4.0,
        4.999000001054092,
        5.999000000790569,
    ],
    [
        0.9990000031622677,
        2.000999998418864,
        3.0,
        4.0,
        4.9992935620996315,
        5.998009193960597,
    ],
    [
        0.9982862954480174,
        2.000519685803609,
        3.0,
        4.0,
        4.9992935620996315,
        5.998009193960597,
    ],
];

fn lazy<T: Real>(tol: f64) {
    let opt = deeprec_opt::<T>();
    let mut var = vec_of::<T>(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let mut s = AdamAsyncState::new(6, &opt);
    for (call, want) in LAZY_REF.iter().enumerate() {
        let g = vec_of::<T>(SPARSE_GRADS[call]);
        opt.apply_sparse(&mut var, &mut s, &g, SPARSE_ROWS[call], 2)
            .unwrap();
        assert_close(&format!("lazy call {call} var"), &var, want, tol);
        // An empty update changes nothing, powers included.
        let before = (var.clone(), s.clone());
        opt.apply_sparse(&mut var, &mut s, &[], &[] as &[i64], 2)
            .unwrap();
        assert_eq!((&var, &s), (&before.0, &before.1));
    }
    // Row 1 was never named: var, m and v untouched.
    assert_eq!(bits(&var[2..4]), bits(&vec_of::<T>(&[3.0, 4.0])));
    assert_eq!(bits(&s.m[2..4]), bits(&[T::zero(); 2]));
    assert_eq!(bits(&s.v[2..4]), bits(&[T::zero(); 2]));
    assert_close("beta1_power", &[s.beta1_power], &[0.9f64.powi(4)], tol);
    assert_close("beta2_power", &[s.beta2_power], &[0.999f64.powi(4)], tol);
}

#[test]
fn lazy_sparse_f32_f64() {
    lazy::<f32>(1e-6);
    lazy::<f64>(1e-6);
}

#[test]
fn bf16_runs_the_same_rule() {
    // bf16 keeps 8 significant bits: DeepRec's beta2 = 0.999 rounds to 1 and is refused.
    let bf = |x: f64| half::bf16::from_f64(x);
    let opt = AdamAsync::new(bf(0.001), bf(0.9), bf(0.999), bf(1e-8));
    let mut var = vec![bf(1.0), bf(2.0)];
    let mut s = AdamAsyncState::new(2, &opt);
    let e = opt
        .apply_dense(&mut var, &mut s, &[bf(0.1); 2])
        .unwrap_err();
    assert_eq!(e.to_string(), "invalid beta2 = 1: must be in [0, 1)");
    // With beta2 = 0.99 (0.98828125 in bf16) and lr = 0.01 (a step of 0.001 is below half a bf16
    // ulp at 1.0 and rounds away) it tracks the same rule run in f64 on the same bf16-rounded
    // inputs, to bf16 precision.
    let opt = AdamAsync {
        lr: bf(0.01),
        beta2: bf(0.99),
        ..opt
    };
    let wide = AdamAsync::new(
        opt.lr.to_f64(),
        opt.beta1.to_f64(),
        opt.beta2.to_f64(),
        opt.epsilon.to_f64(),
    );
    let mut s = AdamAsyncState::new(2, &opt);
    let mut var64 = vec![1.0f64, 2.0];
    let mut s64 = AdamAsyncState::new(2, &wide);
    for _ in 0..3 {
        opt.apply_dense(&mut var, &mut s, &[bf(0.1); 2]).unwrap();
        wide.apply_dense(&mut var64, &mut s64, &[bf(0.1).to_f64(); 2])
            .unwrap();
    }
    assert!(var[0].to_f64() < 1.0);
    assert_close("bf16 var", &var, &var64, 1e-2);
    assert_close(
        "bf16 beta1_power",
        &[s.beta1_power],
        &[s64.beta1_power],
        1e-2,
    );
}

// ---- errors: each path, its exact message, and nothing written ----

fn err_dense(
    opt: &AdamAsync<f64>,
    var: &mut [f64],
    s: &mut AdamAsyncState<f64>,
    g: &[f64],
) -> String {
    let before = format!("{var:?} {s:?}");
    let e = opt.apply_dense(var, s, g).unwrap_err();
    assert_eq!(format!("{var:?} {s:?}"), before, "nothing written on {e}");
    e.to_string()
}

fn err_sparse<I: hogwild::optim::SparseIndex>(
    opt: &AdamAsync<f64>,
    var: &mut [f64],
    s: &mut AdamAsyncState<f64>,
    g: &[f64],
    idx: &[I],
    row_len: usize,
) -> String {
    let before = format!("{var:?} {s:?}");
    let e = opt.apply_sparse(var, s, g, idx, row_len).unwrap_err();
    assert_eq!(format!("{var:?} {s:?}"), before, "nothing written on {e}");
    e.to_string()
}

#[test]
fn shape_errors() {
    let opt = deeprec_opt::<f64>();
    let mut var = vec![1.0, 2.0, 3.0, 4.0];
    let mut s = AdamAsyncState::new(4, &opt);
    assert_eq!(
        err_dense(&opt, &mut var, &mut s, &[0.1; 3]),
        "shape mismatch: grad vs var: expected 4, got 3"
    );
    let mut short = AdamAsyncState::new(3, &opt);
    assert_eq!(
        err_dense(&opt, &mut var, &mut short, &[0.1; 4]),
        "shape mismatch: m vs var: expected 4, got 3"
    );
    short.m.push(0.0);
    assert_eq!(
        err_dense(&opt, &mut var, &mut short, &[0.1; 4]),
        "shape mismatch: v vs var: expected 4, got 3"
    );
    assert_eq!(
        err_dense(&opt, &mut [], &mut AdamAsyncState::new(0, &opt), &[]),
        "var is empty"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 3], &[0i64, 1], 2),
        "shape mismatch: grad must be one row per index: expected 2 x 2, got 3"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[], &[] as &[i64], 0),
        "shape mismatch: row length vs var length: expected a positive divisor of 4, got 0"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 3], &[0i64], 3),
        "shape mismatch: row length vs var length: expected a positive divisor of 4, got 3"
    );
    assert_eq!(
        err_sparse(
            &opt,
            &mut [],
            &mut AdamAsyncState::new(0, &opt),
            &[],
            &[] as &[i64],
            1
        ),
        "var is empty"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut short, &[0.1; 2], &[0i64], 2),
        "shape mismatch: v vs var: expected 4, got 3"
    );
    // A row count times row length that overflows usize is a shape error, not a panic.
    let huge = vec![0i32; 3];
    let e = AdamCoeffs::new(0.1, 0.9, 0.999, 1e-8, 0.9, 0.999)
        .unwrap()
        .apply_sparse_rows(
            &mut var,
            &mut s.m,
            &mut s.v,
            &[0.1; 4],
            &huge,
            usize::MAX / 2,
            false,
        )
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
}

#[test]
fn index_errors() {
    let opt = deeprec_opt::<f64>();
    let mut var = vec![1.0, 2.0, 3.0, 4.0];
    let mut s = AdamAsyncState::new(4, &opt);
    // A valid index before the bad one: nothing is written (checked by err_sparse).
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 4], &[1i32, 2], 2),
        "Index 2 at offset 1 in indices is out of range"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 2], &[-1i64], 2),
        "Index -1 at offset 0 in indices is out of range"
    );
    // Huge indices: no overflow in row * row_len.
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 4], &[0i64, i64::MAX], 2),
        "Index 9223372036854775807 at offset 1 in indices is out of range"
    );
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 2], &[u32::MAX], 2),
        "Index 4294967295 at offset 0 in indices is out of range"
    );
    let e = opt
        .apply_sparse(&mut var, &mut s, &[0.1; 2], &[usize::MAX / 2], 2)
        .unwrap_err();
    assert_eq!(
        e,
        Error::IndexOutOfRange {
            index: (usize::MAX / 2) as i128,
            offset: 0,
            rows: 2
        }
    );
    // u64 ids above i64::MAX are reported as written.
    assert_eq!(
        err_sparse(&opt, &mut var, &mut s, &[0.1; 2], &[u64::MAX], 2),
        "Index 18446744073709551615 at offset 0 in indices is out of range"
    );
    // The same checks guard the RMSProp path.
    let rms = AdamAsync {
        apply_sparse_rmsprop: true,
        ..opt
    };
    assert_eq!(
        err_sparse(&rms, &mut var, &mut s, &[0.1; 2], &[7i32], 2),
        "Index 7 at offset 0 in indices is out of range"
    );
}

#[test]
fn hyper_parameter_errors() {
    let base = deeprec_opt::<f64>();
    let mut var = vec![1.0, 2.0];
    let cases: [(AdamAsync<f64>, &str); 9] = [
        (
            AdamAsync {
                lr: f64::NAN,
                ..base
            },
            "invalid lr = NaN: must be finite",
        ),
        (
            AdamAsync {
                lr: f64::INFINITY,
                ..base
            },
            "invalid lr = inf: must be finite",
        ),
        (
            AdamAsync { beta1: 1.0, ..base },
            "invalid beta1 = 1: must be in [0, 1)",
        ),
        (
            AdamAsync {
                beta1: -0.5,
                ..base
            },
            "invalid beta1 = -0.5: must be in [0, 1)",
        ),
        (
            AdamAsync {
                beta2: f64::NAN,
                ..base
            },
            "invalid beta2 = NaN: must be finite",
        ),
        (
            AdamAsync { beta2: 1.5, ..base },
            "invalid beta2 = 1.5: must be in [0, 1)",
        ),
        (
            AdamAsync {
                epsilon: -1.0,
                ..base
            },
            "invalid epsilon = -1: must not be negative",
        ),
        (
            AdamAsync {
                epsilon: f64::NEG_INFINITY,
                ..base
            },
            "invalid epsilon = -inf: must be finite",
        ),
        (
            AdamAsync {
                epsilon: f64::NAN,
                apply_sparse_rmsprop: true,
                ..base
            },
            "invalid epsilon = NaN: must be finite",
        ),
    ];
    for (opt, msg) in cases {
        let mut s = AdamAsyncState::new(2, &base);
        assert_eq!(err_dense(&opt, &mut var, &mut s, &[0.1; 2]), msg);
        assert_eq!(
            err_sparse(&opt, &mut var, &mut s, &[0.1; 2], &[0i32], 2),
            msg
        );
        // Validation does not depend on there being work to do.
        assert_eq!(
            err_sparse(&opt, &mut var, &mut s, &[], &[] as &[i32], 2),
            msg
        );
    }
    // Corrupt powers in the state.
    for (b1p, b2p, msg) in [
        (1.0, 0.5, "invalid beta1_power = 1: must be in [0, 1)"),
        (f64::NAN, 0.5, "invalid beta1_power = NaN: must be finite"),
        (0.5, -0.25, "invalid beta2_power = -0.25: must be in [0, 1)"),
    ] {
        let mut s = AdamAsyncState::new(2, &base);
        s.beta1_power = b1p;
        s.beta2_power = b2p;
        assert_eq!(err_dense(&base, &mut var, &mut s, &[0.1; 2]), msg);
        assert_eq!(
            err_sparse(&base, &mut var, &mut s, &[0.1; 2], &[0i32], 2),
            msg
        );
        // The RMSProp rule does not read the powers.
        let rms = AdamAsync {
            apply_sparse_rmsprop: true,
            ..base
        };
        rms.apply_sparse(&mut var, &mut s, &[0.1; 2], &[0i32], 2)
            .unwrap();
    }
    // A step size that overflows the float type (f16 max is 65504).
    let opt = AdamAsync::new(f16::from_f32(60000.0), f16::ZERO, f16::ZERO, f16::ZERO);
    let mut var16 = vec_of::<f16>(&[1.0]);
    let mut s = AdamAsyncState::new(1, &opt);
    s.beta1_power = f16::from_f32(0.5);
    let e = opt
        .apply_dense(&mut var16, &mut s, &[f16::ONE])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid lr = 60000: step size lr * sqrt(1 - beta2_power) / (1 - beta1_power) overflows"
    );
    assert_eq!(var16, vec_of::<f16>(&[1.0]));
}

#[test]
fn sum_duplicate_indices_errors_and_order() {
    let (g, idx) =
        sum_duplicate_indices(&[1.0f32, 2.0, 10.0, 20.0, 100.0, 200.0], &[5u64, 3, 5], 2).unwrap();
    assert_eq!(idx, [5, 3]);
    assert_eq!(g, [101.0, 202.0, 10.0, 20.0]);
    assert_eq!(
        sum_duplicate_indices(&[1.0f32; 3], &[0i32, 1], 2)
            .unwrap_err()
            .to_string(),
        "shape mismatch: grad must be one row per index: expected 2 x 2, got 3"
    );
    assert_eq!(
        sum_duplicate_indices(&[] as &[f32], &[] as &[i32], 0)
            .unwrap_err()
            .to_string(),
        "shape mismatch: row length: expected a positive length, got 0"
    );
}
