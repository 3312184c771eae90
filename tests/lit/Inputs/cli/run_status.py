"""Runs a command and prints its exit status and its stderr, so that a lit test can check the
exact exit code (1 for errors, 2 for usage errors) and that an error is one line:
    %python %inputs/cli/run_status.py %kiln run ... | FileCheck %s
prints "exit: N", "stderr lines: K" and then stderr itself."""
import subprocess
import sys

result = subprocess.run(sys.argv[1:], capture_output=True, text=True)
lines = result.stderr.splitlines()
print(f"exit: {result.returncode}")
print(f"stderr lines: {len(lines)}")
for line in lines:
    print(line)
