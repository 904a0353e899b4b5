//! The ndarray entry points give the slice kernels' bits: on contiguous views of 1 to 3
//! dimensions, on views that are not contiguous or not row-major (transposed, sliced with a step,
//! column-major, mixed layouts), for every dtype and rule, dense and sparse, through AdamAsync and
//! through the generic `Optimizer` path; and every error path names the shapes and writes
//! nothing.

use half::f16;
use hogwild::optim::{
    apply_dense, apply_dense_view, apply_sparse, apply_sparse_view, Adagrad, AdamAsync,
    AdamAsyncState, AdamCoeffs, Real, Sgd, SlotState,
};
use hogwild::rng::{unit_f64, SplitMix64};
use hogwild::Error;
use ndarray::{s, Array, Array2, ArrayView2, IxDyn, ShapeBuilder};

/// `n` values uniform in `[-scale/2, scale/2)`, from `seed`.
fn values<T: Real>(seed: u64, n: usize, scale: f64) -> Vec<T> {
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|_| num_traits::cast((unit_f64(rng.next()) - 0.5) * scale).unwrap())
        .collect()
}

fn bits<T: Real>(xs: impl IntoIterator<Item = T>) -> Vec<u64> {
    xs.into_iter().map(|x| x.to_f64_lossy().to_bits()).collect()
}

fn cast<T: Real>(x: f64) -> T {
    num_traits::cast(x).unwrap()
}

fn opt<T: Real>(nesterov: bool, rmsprop: bool) -> AdamAsync<T> {
    AdamAsync {
        use_nesterov: nesterov,
        apply_sparse_rmsprop: rmsprop,
        ..AdamAsync::new(cast(0.01), cast(0.9), cast(0.99), cast(1e-3))
    }
}

/// Three dense steps through views of `shape` and through slices: same weights, moments and
/// powers, bit for bit.
fn dense_same_bits<T: Real>(shape: &[usize], nesterov: bool) {
    let n: usize = shape.iter().product();
    let opt = opt::<T>(nesterov, false);
    let var0 = values::<T>(1, n, 4.0);
    let mut var = Array::from_shape_vec(IxDyn(shape), var0.clone()).unwrap();
    let mut flat = var0;
    let mut state = AdamAsyncState::new(n, &opt);
    let mut flat_state = state.clone();
    for step in 0..3 {
        let g = values::<T>(10 + step, n, 1.0);
        let grad = Array::from_shape_vec(IxDyn(shape), g.clone()).unwrap();
        opt.apply_dense_view(var.view_mut(), &mut state, grad.view())
            .unwrap();
        opt.apply_dense(&mut flat, &mut flat_state, &g).unwrap();
    }
    let what = format!("{shape:?}, nesterov {nesterov}");
    assert_eq!(bits(var.iter().copied()), bits(flat), "{what}: var");
    assert_eq!(state, flat_state, "{what}: state");
}

#[test]
fn dense_views_of_any_dimension_give_the_slice_bits() {
    for shape in [&[7][..], &[3, 5], &[2, 3, 4]] {
        for nesterov in [false, true] {
            dense_same_bits::<f32>(shape, nesterov);
            dense_same_bits::<f64>(shape, nesterov);
            dense_same_bits::<f16>(shape, nesterov);
        }
    }
}

/// A dense step on `var` (any layout) against the slice kernel on its row-major copy.
fn check_dense_layout(name: &str, mut var: ndarray::ArrayViewMut2<f32>, grad: ArrayView2<f32>) {
    let opt = opt::<f32>(true, false);
    let mut flat: Vec<f32> = var.iter().copied().collect();
    let g: Vec<f32> = grad.iter().copied().collect();
    let mut state = AdamAsyncState::new(flat.len(), &opt);
    let mut flat_state = state.clone();
    state.v = values(5, flat.len(), 0.1)
        .iter()
        .map(|x: &f32| x.abs())
        .collect();
    flat_state.v = state.v.clone();
    opt.apply_dense_view(var.view_mut(), &mut state, grad)
        .unwrap();
    opt.apply_dense(&mut flat, &mut flat_state, &g).unwrap();
    assert_eq!(bits(var.iter().copied()), bits(flat), "{name}: var");
    assert_eq!(state, flat_state, "{name}: state");
}

#[test]
fn dense_views_that_are_not_row_major_give_the_slice_bits() {
    let (rows, cols) = (6, 5);
    let data = values::<f32>(2, rows * cols, 4.0);
    let grad_rm = Array2::from_shape_vec((rows, cols), values(3, rows * cols, 1.0)).unwrap();
    let grad_cm =
        Array2::from_shape_vec((rows, cols).f(), grad_rm.t().iter().copied().collect()).unwrap();
    assert_eq!(grad_cm, grad_rm);

    // Column-major var and grad: equal strides, the slice kernel runs on the memory.
    let mut var = Array2::from_shape_vec((rows, cols).f(), data.clone()).unwrap();
    check_dense_layout("column-major", var.view_mut(), grad_cm.view());
    // Column-major var, row-major grad: element by element.
    let mut var = Array2::from_shape_vec((rows, cols).f(), data.clone()).unwrap();
    check_dense_layout("mixed layouts", var.view_mut(), grad_rm.view());
    // Every other row of a larger table, and a transposed grad.
    let mut big =
        Array2::from_shape_vec((2 * rows, cols), values(4, 2 * rows * cols, 4.0)).unwrap();
    let untouched = big.slice(s![1..;2, ..]).to_owned();
    let grad_t = grad_rm.t().to_owned();
    check_dense_layout("stepped rows", big.slice_mut(s![..;2, ..]), grad_t.t());
    assert_eq!(
        big.slice(s![1..;2, ..]),
        untouched,
        "rows between the view's"
    );
    // Reversed columns.
    let mut var = Array2::from_shape_vec((rows, cols), data).unwrap();
    check_dense_layout(
        "reversed columns",
        var.slice_mut(s![.., ..;-1]),
        grad_rm.view(),
    );
}

/// Sparse steps (duplicates included) on a `[rows, row_len]` view and on slices.
fn sparse_same_bits<T: Real>(rmsprop: bool, contiguous: bool) {
    let (rows, row_len) = (7, 5);
    let opt = opt::<T>(false, rmsprop);
    let var0 = values::<T>(6, rows * row_len, 4.0);
    // Non-contiguous: the table is every other column of a wider one.
    let mut wide = Array2::from_elem((rows, 2 * row_len), cast::<T>(9.0));
    let mut table = Array2::from_shape_vec((rows, row_len), var0.clone()).unwrap();
    let mut flat = var0;
    let mut state = AdamAsyncState::new(rows * row_len, &opt);
    let mut flat_state = state.clone();
    if !contiguous {
        wide.slice_mut(s![.., ..;2]).assign(&table);
    }
    let indices = [4u32, 0, 4, 6];
    for step in 0..3 {
        let g = values::<T>(20 + step, indices.len() * row_len, 1.0);
        let grad = Array2::from_shape_vec((indices.len(), row_len), g.clone()).unwrap();
        let view = if contiguous {
            table.view_mut()
        } else {
            wide.slice_mut(s![.., ..;2])
        };
        opt.apply_sparse_view(view, &mut state, grad.view(), &indices)
            .unwrap();
        opt.apply_sparse(&mut flat, &mut flat_state, &g, &indices, row_len)
            .unwrap();
    }
    if !contiguous {
        table = wide.slice(s![.., ..;2]).to_owned();
        assert!(wide.slice(s![.., 1..;2]).iter().all(|&x| x == cast(9.0)));
    }
    let what = format!("rmsprop {rmsprop}, contiguous {contiguous}");
    assert_eq!(bits(table.iter().copied()), bits(flat), "{what}: var");
    assert_eq!(state, flat_state, "{what}: state");
}

#[test]
fn sparse_views_give_the_slice_bits() {
    for rmsprop in [false, true] {
        for contiguous in [true, false] {
            sparse_same_bits::<f32>(rmsprop, contiguous);
            sparse_same_bits::<f64>(rmsprop, contiguous);
            sparse_same_bits::<f16>(rmsprop, contiguous);
        }
    }
}

#[test]
fn coefficient_kernels_on_views_give_the_slice_bits() {
    let c = AdamCoeffs::new(0.01f32, 0.9, 0.99, 1e-3, 0.9, 0.99).unwrap();
    let (rows, cols) = (4, 6);
    let n = rows * cols;
    let (w0, m0, g) = (values(7, n, 4.0), values(8, n, 0.2), values(9, n, 1.0));
    let v0: Vec<f32> = values(10, n, 0.1).iter().map(|x: &f32| x.abs()).collect();
    let arr = |xs: &Vec<f32>| Array2::from_shape_vec((rows, cols), xs.clone()).unwrap();

    let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
    c.apply_dense_chunk(&mut w, &mut m, &mut v, &g, false)
        .unwrap();
    let (mut aw, mut am, mut av) = (arr(&w0), arr(&m0), arr(&v0));
    // Transposed views of all four: equal strides, not row-major.
    c.apply_dense_view(
        aw.view_mut().reversed_axes(),
        am.view_mut().reversed_axes(),
        av.view_mut().reversed_axes(),
        arr(&g).view().reversed_axes(),
        false,
    )
    .unwrap();
    assert_eq!(bits(aw.iter().copied()), bits(w));
    assert_eq!(bits(am.iter().copied()), bits(m));
    assert_eq!(bits(av.iter().copied()), bits(v));

    let indices = [3i64, 1, 3];
    let gs = values::<f32>(11, indices.len() * cols, 1.0);
    let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
    c.apply_sparse_rows(&mut w, &mut m, &mut v, &gs, &indices, cols, false)
        .unwrap();
    let (mut aw, mut am, mut av) = (arr(&w0), arr(&m0), arr(&v0));
    let grad = Array2::from_shape_vec((indices.len(), cols), gs).unwrap();
    c.apply_sparse_rows_view(
        aw.view_mut(),
        am.view_mut(),
        av.view_mut(),
        grad.view(),
        &indices,
        false,
    )
    .unwrap();
    assert_eq!(bits(aw.iter().copied()), bits(w));
    assert_eq!(bits(am.iter().copied()), bits(m));
    assert_eq!(bits(av.iter().copied()), bits(v));
}

/// The generic `Optimizer` path on views against slices, contiguous and transposed.
fn generic_same_bits<O: hogwild::optim::Optimizer<f32>>(name: &str, opt: O) {
    let (rows, cols) = (5, 3);
    let n = rows * cols;
    let var0 = values::<f32>(12, n, 4.0);
    let g = values::<f32>(13, n, 1.0);
    for transposed in [false, true] {
        let mut flat = var0.clone();
        let mut flat_state = SlotState::new(&opt, n);
        apply_dense(&opt, &mut flat, &mut flat_state, &g).unwrap();
        // The table stored column-major, seen as [rows, cols]: not row-major in memory.
        let mut state = SlotState::new(&opt, n);
        let mut var = Array2::from_shape_vec((rows, cols), var0.clone()).unwrap();
        let grad = Array2::from_shape_vec((rows, cols), g.clone()).unwrap();
        if transposed {
            let mut var_t = var.t().as_standard_layout().into_owned();
            apply_dense_view(
                &opt,
                var_t.view_mut().reversed_axes(),
                &mut state,
                grad.view(),
            )
            .unwrap();
            var = var_t.t().to_owned();
        } else {
            apply_dense_view(&opt, var.view_mut(), &mut state, grad.view()).unwrap();
        }
        assert_eq!(
            bits(var.iter().copied()),
            bits(flat.clone()),
            "{name} dense, transposed {transposed}"
        );
        assert_eq!(
            state, flat_state,
            "{name} dense state, transposed {transposed}"
        );

        let indices = [2usize, 4, 2];
        let gs = &g[..indices.len() * cols];
        apply_sparse(&opt, &mut flat, &mut flat_state, gs, &indices, cols).unwrap();
        let grad = Array2::from_shape_vec((indices.len(), cols), gs.to_vec()).unwrap();
        if transposed {
            let mut var_t = var.t().as_standard_layout().into_owned();
            apply_sparse_view(
                &opt,
                var_t.view_mut().reversed_axes(),
                &mut state,
                grad.view(),
                &indices,
            )
            .unwrap();
            var = var_t.t().to_owned();
        } else {
            apply_sparse_view(&opt, var.view_mut(), &mut state, grad.view(), &indices).unwrap();
        }
        assert_eq!(
            bits(var.iter().copied()),
            bits(flat),
            "{name} sparse, transposed {transposed}"
        );
        assert_eq!(
            state, flat_state,
            "{name} sparse state, transposed {transposed}"
        );
    }
}

#[test]
fn generic_optimizers_on_views_give_the_slice_bits() {
    generic_same_bits("sgd", Sgd { lr: 0.1f32 });
    generic_same_bits(
        "adagrad",
        Adagrad {
            lr: 0.1f32,
            initial_accumulator: 0.1,
        },
    );
    generic_same_bits("adam_async", opt::<f32>(false, false));
}

fn shape_error(what: &str, expected: &str, got: &str) -> Error {
    Error::ShapeMismatch {
        what: what.into(),
        expected: expected.into(),
        got: got.into(),
    }
}

#[test]
fn errors_name_the_shapes_and_write_nothing() {
    let opt = opt::<f32>(false, false);
    let var0 = Array2::from_shape_vec((3, 2), vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let mut var = var0.clone();
    let fresh = AdamAsyncState::new(6, &opt);
    let mut state = fresh.clone();

    // Same length, other shape.
    let err = opt
        .apply_dense_view(var.view_mut(), &mut state, Array2::zeros((2, 3)).view())
        .unwrap_err();
    assert_eq!(err, shape_error("grad vs var", "[3, 2]", "[2, 3]"));
    assert_eq!(
        err.to_string(),
        "shape mismatch: grad vs var: expected [3, 2], got [2, 3]"
    );

    // State of another variable.
    let mut short = AdamAsyncState::new(4, &opt);
    let err = opt
        .apply_dense_view(var.view_mut(), &mut short, Array2::zeros((3, 2)).view())
        .unwrap_err();
    assert_eq!(
        err,
        shape_error("optimizer state m vs var", "6 elements", "4")
    );

    // Moments of another shape, at the coefficient level.
    let c = opt.coeffs(&state).unwrap();
    let (mut m, mut v) = (Array2::zeros((3, 2)), Array2::zeros((2, 3)));
    let err = c
        .apply_dense_view(
            var.view_mut(),
            m.view_mut(),
            v.view_mut(),
            Array2::zeros((3, 2)).view(),
            false,
        )
        .unwrap_err();
    assert_eq!(err, shape_error("v vs var", "[3, 2]", "[2, 3]"));

    // Sparse: a gradient row of another width, too few rows, an index out of range.
    let err = opt
        .apply_sparse_view(
            var.view_mut(),
            &mut state,
            Array2::zeros((1, 3)).view(),
            &[0i64],
        )
        .unwrap_err();
    assert_eq!(
        err,
        shape_error("grad must be one row per index", "[1, 2]", "[1, 3]")
    );
    let err = opt
        .apply_sparse_view(
            var.view_mut(),
            &mut state,
            Array2::zeros((1, 2)).view(),
            &[0i64, 1],
        )
        .unwrap_err();
    assert_eq!(
        err,
        shape_error("grad must be one row per index", "[2, 2]", "[1, 2]")
    );
    let grad = Array2::from_elem((2, 2), 0.1f32);
    let err = opt
        .apply_sparse_view(var.view_mut(), &mut state, grad.view(), &[0i64, 3])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Index 3 at offset 1 in indices is out of range"
    );
    // Not row-major: the same checks before the element path writes anything.
    let err = opt
        .apply_sparse_view(
            var.view_mut().reversed_axes(),
            &mut AdamAsyncState::new(6, &opt),
            Array2::from_elem((2, 3), 0.1f32).view(),
            &[0i64, 2],
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Index 2 at offset 1 in indices is out of range"
    );

    // An empty table, a bad hyper-parameter.
    let mut empty = Array2::<f32>::zeros((0, 2));
    let err = opt
        .apply_sparse_view(
            empty.view_mut(),
            &mut AdamAsyncState::new(0, &opt),
            Array2::zeros((0, 2)).view(),
            &[] as &[i64],
        )
        .unwrap_err();
    assert_eq!(err, Error::Empty { what: "var" });
    let bad = AdamAsync { beta1: 1.0, ..opt };
    let err = bad
        .apply_dense_view(var.view_mut(), &mut state, Array2::zeros((3, 2)).view())
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidHyperParameter { name: "beta1", .. }),
        "{err}"
    );

    // Generic path: state for another length, grad of another shape.
    let sgd = Sgd { lr: 0.1f32 };
    let err = apply_dense_view(
        &sgd,
        var.view_mut(),
        &mut SlotState::new(&sgd, 6),
        Array2::zeros((6, 1)).view(),
    )
    .unwrap_err();
    assert_eq!(err, shape_error("grad vs var", "[3, 2]", "[6, 1]"));
    let ada = Adagrad {
        lr: 0.1f32,
        initial_accumulator: 0.1,
    };
    let err = apply_dense_view(
        &ada,
        var.view_mut().reversed_axes(),
        &mut SlotState::new(&ada, 5),
        Array2::zeros((2, 3)).view(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");

    assert_eq!(var, var0, "nothing written");
    assert_eq!(state, fresh, "state untouched");
}
