//! SGD and Adagrad through the `Optimizer` trait (dense and sparse-row updates), against TF's
//! formulas and its tests' fixtures, and the trait path's error messages.

use hogwild::optim::{apply_dense, apply_sparse, Adagrad, AdamAsync, Real, Sgd, SlotState};

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

// TF's gradient_descent_test.py testBasic: one step, lr 3.0. numpy:
//     (np.array([1.0, 2.0]) - 3.0 * np.array([0.1, 0.1])).tolist()    # [0.7, 1.7]
//     (np.array([3.0, 4.0]) - 3.0 * np.array([0.01, 0.01])).tolist()  # [2.97, 3.97]
#[test]
fn sgd_basic_f32_f64() {
    fn run<T: Real>(tol: f64) {
        let c = |x: f64| num_traits::cast::<f64, T>(x).unwrap();
        let opt = Sgd { lr: c(3.0) };
        let mut var0 = [c(1.0), c(2.0)];
        let mut var1 = [c(3.0), c(4.0)];
        let mut s0 = SlotState::new(&opt, 2);
        let mut s1 = SlotState::new(&opt, 2);
        apply_dense(&opt, &mut var0, &mut s0, &[c(0.1), c(0.1)]).unwrap();
        apply_dense(&opt, &mut var1, &mut s1, &[c(0.01), c(0.01)]).unwrap();
        assert_close("var0", &var0, &[0.7, 1.7], tol);
        assert_close("var1", &var1, &[2.97, 3.97], tol);
        assert!(s0.slots.is_empty() && s0.scalars.is_empty());
    }
    run::<f32>(1e-6);
    run::<f64>(1e-6);
}

#[test]
fn sgd_sparse_rows_duplicates_apply_sequentially() {
    let opt = Sgd { lr: 0.5f64 };
    let mut var = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut s = SlotState::new(&opt, 6);
    apply_sparse(&opt, &mut var, &mut s, &[1.0, 2.0, 3.0, 4.0], &[2u64, 2], 2).unwrap();
    // SGD is linear: the two rows add up, 5 - 0.5*(1+3), 6 - 0.5*(2+4); rows 0 and 1 untouched.
    assert_eq!(var, [1.0, 2.0, 3.0, 4.0, 3.0, 3.0]);
}

// TF's adagrad_test.py testBasic (lr 3.0, initial_accumulator_value 0.1, 3 steps), TF's ApplyAdagrad
// rule `accum += g*g; var -= lr * g * rsqrt(accum)`. numpy, in each dtype:
//     def adagrad(var, g, steps, lr=3.0, acc0=0.1):
//         acc = np.full_like(var, acc0)
//         for _ in range(steps):
//             acc = acc + g * g
//             var = var - lr * g / np.sqrt(acc)
//         return var, acc
//     adagrad(np.array([1.0, 2.0], dt), np.array([0.1, 0.1], dt), 3)
//     adagrad(np.array([3.0, 4.0], dt), np.array([0.01, 0.01], dt), 3)
// float32: var0 [-1.6026098728179932, -0.6026099324226379], acc0 [0.12999999523162842] * 2,
//          var1 [2.715679168701172, 3.715679168701172], acc1 [0.10030000656843185] * 2
// float64: var0 [-1.6026097318555732, -0.6026097318555731], acc0 [0.13000000000000003] * 2,
//          var1 [2.7156791185802622, 3.7156791185802622], acc1 [0.10030000000000001] * 2
#[test]
fn adagrad_basic_f32_f64() {
    fn run<T: Real>(var0_ref: [f64; 2], var1_ref: [f64; 2], acc: [f64; 2], tol: f64) {
        let c = |x: f64| num_traits::cast::<f64, T>(x).unwrap();
        let opt = Adagrad {
            lr: c(3.0),
            initial_accumulator: c(0.1),
        };
        let mut var0 = [c(1.0), c(2.0)];
        let mut var1 = [c(3.0), c(4.0)];
        let mut s0 = SlotState::new(&opt, 2);
        let mut s1 = SlotState::new(&opt, 2);
        assert_close("initial accumulator", &s0.slots, &[0.1, 0.1], tol);
        for _ in 0..3 {
            apply_dense(&opt, &mut var0, &mut s0, &[c(0.1), c(0.1)]).unwrap();
            apply_dense(&opt, &mut var1, &mut s1, &[c(0.01), c(0.01)]).unwrap();
        }
        assert_close("var0", &var0, &var0_ref, tol);
        assert_close("var1", &var1, &var1_ref, tol);
        assert_close("acc0", &s0.slots, &[acc[0]; 2], tol);
        assert_close("acc1", &s1.slots, &[acc[1]; 2], tol);
    }
    run::<f32>(
        [-1.6026098728179932, -0.6026099324226379],
        [2.715679168701172, 3.715679168701172],
        [0.12999999523162842, 0.10030000656843185],
        1e-6,
    );
    run::<f64>(
        [-1.6026097318555732, -0.6026097318555731],
        [2.7156791185802622, 3.7156791185802622],
        [0.13000000000000003, 0.10030000000000001],
        1e-6,
    );
}

// Sparse Adagrad on rows of a [3, 2] variable, indices [2, 0, 2] applied in order (lr 0.1,
// initial accumulator 0.1). numpy:
//     var = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]); acc = np.full_like(var, 0.1)
//     for i, g in zip([2, 0, 2], [np.array([0.1, -0.2]), np.array([0.3, 0.4]), np.array([-0.5, 0.6])]):
//         acc[i] = acc[i] + g * g
//         var[i] = var[i] - 0.1 * g / np.sqrt(acc[i])
//     print(var.tolist(), acc.tolist())
#[test]
fn adagrad_sparse_rows() {
    let opt = Adagrad {
        lr: 0.1f64,
        initial_accumulator: 0.1,
    };
    let mut var = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut s = SlotState::new(&opt, 6);
    let g = [0.1, -0.2, 0.3, 0.4, -0.5, 0.6];
    apply_sparse(&opt, &mut var, &mut s, &g, &[2i32, 0, 2], 2).unwrap();
    assert_close(
        "var",
        &var,
        &[
            0.9311752798388315,
            1.9215535459447264,
            3.0,
            4.0,
            5.0531821988755565,
            5.968599434640099,
        ],
        1e-12,
    );
    assert_close("acc", &s.slots, &[0.19, 0.26, 0.1, 0.1, 0.36, 0.5], 1e-12);
    assert_eq!(&var[2..4], &[3.0, 4.0], "row 1 untouched");
}

#[test]
fn trait_path_errors() {
    let sgd = Sgd { lr: 0.1f32 };
    let mut var = [1.0f32, 2.0, 3.0, 4.0];
    let mut s = SlotState::new(&sgd, 4);
    let e = |r: hogwild::Result<()>| r.unwrap_err().to_string();
    assert_eq!(
        e(apply_dense(&sgd, &mut var, &mut s, &[0.1; 3])),
        "shape mismatch: grad vs var: expected 4, got 3"
    );
    assert_eq!(
        e(apply_dense(
            &sgd,
            &mut [],
            &mut SlotState::new(&sgd, 0),
            &[]
        )),
        "var is empty"
    );
    assert_eq!(
        e(apply_dense(
            &Sgd { lr: f32::NAN },
            &mut var,
            &mut s,
            &[0.1; 4]
        )),
        "invalid lr = NaN: must be finite"
    );
    assert_eq!(
        e(apply_sparse(&sgd, &mut var, &mut s, &[0.1; 2], &[2i64], 2)),
        "Index 2 at offset 0 in indices is out of range"
    );
    assert_eq!(
        e(apply_sparse(&sgd, &mut var, &mut s, &[0.1; 3], &[1i64], 2)),
        "shape mismatch: grad must be one row per index: expected 1 x 2, got 3"
    );
    assert_eq!(
        e(apply_sparse(&sgd, &mut var, &mut s, &[0.1; 3], &[0i64], 3)),
        "shape mismatch: row length vs var length: expected a positive divisor of 4, got 3"
    );
    assert_eq!(var, [1.0, 2.0, 3.0, 4.0], "nothing written");

    let ada = Adagrad {
        lr: 0.1f32,
        initial_accumulator: 0.0,
    };
    let mut s = SlotState::new(&ada, 4);
    assert_eq!(
        e(apply_dense(&ada, &mut var, &mut s, &[0.1; 4])),
        "invalid initial_accumulator = 0: must be positive"
    );
    let ada = Adagrad {
        initial_accumulator: f32::INFINITY,
        ..ada
    };
    assert_eq!(
        e(apply_sparse(&ada, &mut var, &mut s, &[], &[] as &[i32], 2)),
        "invalid initial_accumulator = inf: must be finite"
    );
    // State from another optimizer or another variable size.
    let adam = AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
    assert_eq!(
        e(apply_dense(&adam, &mut var, &mut SlotState::new(&adam, 3), &[0.1; 4])),
        "shape mismatch: optimizer state vs var: expected 4 x 2 slots and 2 scalars, got 6 slots and 2 scalars"
    );
    let mut bad = SlotState::new(&adam, 4);
    bad.scalars.pop();
    assert_eq!(
        e(apply_sparse(&adam, &mut var, &mut bad, &[0.1; 2], &[0i32], 2)),
        "shape mismatch: optimizer state vs var: expected 4 x 2 slots and 2 scalars, got 8 slots and 1 scalars"
    );
    assert_eq!(var, [1.0, 2.0, 3.0, 4.0], "nothing written");
}
