# lit configuration for Kiln: .kir tests run through kiln-opt / kiln and FileCheck.
import os
import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.kiln_obj_root

# The build's targets as features: a test that compiles for the CPU target says
# "REQUIRES: cpu-target".
for feature in config.kiln_features.replace(";", " ").split():
    config.available_features.add(feature)

# The host's AVX-512, which the CPU target's inverted-residual block needs: a test of the plan
# the CPU target makes of one says "REQUIRES: avx512f".
try:
    with open("/proc/cpuinfo") as cpuinfo:
        if " avx512f" in cpuinfo.read():
            config.available_features.add("avx512f")
except OSError:
    pass

bin_dir = config.kiln_bin_dir
config.substitutions.append(("%kiln-opt", os.path.join(bin_dir, "kiln-opt")))
config.substitutions.append(("%kiln", os.path.join(bin_dir, "kiln")))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.environment["PATH"] = os.pathsep.join(
    [os.path.dirname(config.filecheck), bin_dir, config.environment.get("PATH", "")])
for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HOME", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# kiln run's compile cache: inside the build tree, not the user's ~/.cache.
config.environment["XDG_CACHE_HOME"] = os.path.join(config.kiln_obj_root, "kiln-cache")
