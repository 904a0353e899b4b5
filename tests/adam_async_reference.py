"""numpy references for the AdamAsync tests (not collected: no test_ prefix)."""

import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Tolerances of DeepRec's tests: 1e-3 for half, 1e-6 otherwise.
TOLERANCE = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-6}


def assert_allclose(actual, expected, dtype, what):
    """dtype-aware closeness, naming what is compared."""
    tol = TOLERANCE[np.dtype(dtype).type]
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol, err_msg=what)


def adam_step(param, g, m, v, t, alpha=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """Step t (1-based) of Adam, as in DeepRec's and stock TF's adam tests:
    alpha_t = alpha * sqrt(1 - beta2**t) / (1 - beta1**t); m_t = beta1*m + (1-beta1)*g;
    v_t = beta2*v + (1-beta2)*g*g; param_t = param - alpha_t * m_t / (sqrt(v_t) + epsilon)."""
    alpha_t = alpha * np.sqrt(1 - beta2**t) / (1 - beta1**t)
    m_t = beta1 * m + (1 - beta1) * g
    v_t = beta2 * v + (1 - beta2) * g * g
    return param - alpha_t * m_t / (np.sqrt(v_t) + epsilon), m_t, v_t


def lazy_adam_step(param, m, v, t, rows, grad_rows, **hyper):
    """Lazy (sparse) Adam: the dense rule on the named rows only; t counts this variable's steps."""
    param, m, v = param.copy(), m.copy(), v.copy()
    for r, g in zip(rows, grad_rows):
        param[r], m[r], v[r] = adam_step(param[r], g, m[r], v[r], t, **hyper)
    return param, m, v
