# Checks the JSON and Markdown reports written by outcomes.test.
import json
import sys

report = json.load(open(sys.argv[1]))
tests = {t["name"]: t for t in report["tests"]}
assert len(tests) == 16, sorted(tests)

def expect(name, outcome, in_scope=True):
    t = tests[name]
    assert t["outcome"] == outcome, (name, t)
    assert t["in_scope"] == in_scope, (name, t)

expect("test_add_pass", "passed")
expect("test_add_within_tolerance", "passed")
expect("test_abs_nan_pass", "passed")
# Training mode, but ratio 0 draws nothing: in scope (whatever the importer makes of it).
assert tests["test_dropout_zero_ratio"]["in_scope"]
expect("test_add_fail", "failed")
expect("test_add_int_fail", "failed")
expect("test_add_shape_fail", "failed")
expect("test_unknown_op", "unsupported")
expect("test_no_model", "unsupported")
expect("test_wrong_input_dtype", "error")
expect("test_max_uint64_ok", "passed")
expect("test_max_uint64_wrong", "failed")
expect("test_abs_bf16_as_uint16", "passed")
# Out of scope, decided from the models: a string input, a random op, Dropout in training mode.
assert not tests["test_string_input"]["in_scope"]
assert "strings" in tests["test_string_input"]["scope_reason"]
expect("test_random_like", tests["test_random_like"]["outcome"], in_scope=False)
assert "RandomUniformLike" in tests["test_random_like"]["scope_reason"]
assert not tests["test_dropout_training"]["in_scope"]
assert "Dropout" in tests["test_dropout_training"]["scope_reason"]
# The int failure's largest |error| is 7 (17 expected, 10 computed).
assert tests["test_add_int_fail"]["max_abs_error"] == 7, tests["test_add_int_fail"]
assert abs(tests["test_add_fail"]["max_abs_error"] - 1.0) < 1e-6, tests["test_add_fail"]
# u64: 2^64 - 1 against 5, not -1 against 5.
assert tests["test_max_uint64_wrong"]["max_abs_error"] > 1.8e19, tests["test_max_uint64_wrong"]

(folder,) = report["folders"]
assert folder["folder"] == "fake" and folder["total"] == 16
assert folder["failed"] == 4
assert folder["passed"] == sum(t["outcome"] == "passed" for t in tests.values())
assert folder["in_scope"] == 13, folder
assert folder["in_scope_passed"] == sum(
    t["outcome"] == "passed" and t["in_scope"] for t in tests.values())

md = open(sys.argv[2]).read()
assert md.startswith("# ONNX conformance")
for needle in ("### fake: failed (4)", "| test_add_fail | yes |", "### fake: out of scope (3)",
               "| test_no_model |", "| test_wrong_input_dtype | yes |"):
    assert needle in md, needle
print("reports ok")
