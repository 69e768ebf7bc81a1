"""Builds `top.v` with Icarus and runs test_top.py on it with cocotb's runner.

Usage: python run.py BUILD_DIR   (BUILD_DIR holds top.v, systole_top.py and vectors.py)
Exits 0 only when every test ran and passed.
"""

import sys
from pathlib import Path

from cocotb_tools.check_results import get_results
from cocotb_tools.runner import get_runner

build = Path(sys.argv[1]).resolve()
here = Path(__file__).resolve().parent
sys.path[:0] = [str(build), str(here)]
runner = get_runner("icarus")
runner.build(sources=[build / "top.v"], hdl_toplevel="top", build_dir=build, always=True)
results = runner.test(
    hdl_toplevel="top",
    test_module="test_top",
    build_dir=build,
    test_dir=build,
    extra_env={"PYTHONPATH": f"{build}:{here}"},
)
tests, failed = get_results(results)
print(f"cocotb: {tests - failed} passed, {failed} failed")
sys.exit(0 if tests > 0 and failed == 0 else 1)
