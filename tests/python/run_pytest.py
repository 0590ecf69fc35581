"""Runs pytest on the given files with the Python that has numpy and
pytest: $LOCUS_TEST_PYTHON (CI's venv, .ci/run), else this interpreter.
Exits 77 (skipped) when neither has them, saying so, except under CI=true,
where they are installed (scripts/install-deps.sh, .ci/run) and their
absence is a failure. pytest's "no tests collected" (5) is a failure too:
a test file that collects nothing tests nothing."""

import os
import subprocess
import sys

python = os.environ.get("LOCUS_TEST_PYTHON") or sys.executable
probe = subprocess.run([python, "-c", "import numpy, pytest"],
                       capture_output=True, text=True)
if probe.returncode != 0:
    why = probe.stderr.strip().splitlines()[-1:] or ["no output"]
    print(f"{python} lacks numpy or pytest ({why[0]}); "
          "set LOCUS_TEST_PYTHON to a Python that has them "
          "(docs/PYTHON.md, Tests)")
    if os.environ.get("CI") == "true":
        print("CI=true: they must be installed there (.ci/run)")
        sys.exit(1)
    print("skipped: numpy or pytest absent")
    sys.exit(77)
code = subprocess.call([python, "-m", "pytest", "-q", "-rs", "-s",
                        "-p", "no:cacheprovider"] + sys.argv[1:])
sys.exit(1 if code == 5 else code)
