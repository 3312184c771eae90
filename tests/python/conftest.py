"""Shared helpers of the Python tests (tests/python): run by CTest as `python` with the
module of the build (PYTHONPATH=BUILD/python), or by hand:
PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python"""

import os

import numpy as np
import pytest

import kiln

# The CPU target where the build has it; a build without it (-DKILN_CPU=OFF) runs the tests on
# the reference interpreter, and skips the ones that need compiled code to be quick.
# KILN_TEST_BACKEND=interp runs them so in any build.
BACKEND = os.environ.get("KILN_TEST_BACKEND") or ("cpu" if "cpu" in kiln.backends() else "interp")


@pytest.fixture
def backend():
    return BACKEND


def needs_cpu():
    return pytest.mark.skipif(BACKEND != "cpu",
                              reason="the tests run on the interpreter (a build without the CPU "
                                     "target, or KILN_TEST_BACKEND=interp), too slow for whole "
                                     "networks")


def write_kir(tmp_path, text, name="model.kir"):
    path = tmp_path / name
    path.write_text(text)
    return path


def binary_kir(op, dtype, shape=(2, 3)):
    """A function of two inputs %x and %y that returns one elementwise op of them."""
    t = f"{dtype}[{','.join(map(str, shape))}]"
    return (f"func @main(%x: {t}, %y: {t}) -> ({t}) {{\n"
            f"  %z = {t} {op}(%x, %y)\n"
            f"  return %z\n}}\n")


def random_array(rng, dtype, shape):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)
