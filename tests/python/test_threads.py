"""One executable serving several Python threads at once (the GIL is released while it runs)."""

import threading

import numpy as np

import kiln
from conftest import write_kir

KIR = ("func @main(%x: f32[32,64], %w: f32[64,64]) -> (f32[32,64]) {\n"
       "  %m = f32[32,64] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}\n"
       "  %t = f32[32,64] tanh(%m)\n"
       "  return %t\n}\n")


def test_four_threads_one_executable(tmp_path, backend):
    exe = kiln.compile(write_kir(tmp_path, KIR), backend=backend, threads=1)
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    errors = []

    def worker(seed):
        local = np.random.default_rng(seed)
        try:
            for _ in range(25):
                x = local.standard_normal((32, 64)).astype(np.float32)
                got = exe(x, w)
                # float32 sums of 64 products in another order: within a few ulps of float64.
                np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) @ w), rtol=1e-5,
                                           atol=1e-5)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
