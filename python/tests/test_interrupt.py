"""Ctrl-C stops a systole.train() in progress: between two training steps, with
KeyboardInterrupt, the run folder keeping the checkpoint of the last epoch saved."""

import json
import signal
import subprocess
import sys
import time

import systole

# A run far longer than the test: only the interrupt ends it.
SCRIPT = """
import sys, systole
systole.train(device="golden", array=4, dataset="digits", model="mlp", hidden=[16], limit=64,
              batch=16, epochs=100000, out=sys.argv[1], verbose=False)
"""


def test_ctrl_c_stops_a_run_between_steps_and_keeps_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-u", "-c", SCRIPT, str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # Two epochs saved: a checkpoint is on disk and the run is well inside a third. Quiet, so
        # that only the checks between steps can see the signal (not a line being printed).
        ck = out / "checkpoint.json"
        deadline = time.monotonic() + 120
        while not (ck.is_file() and json.loads(ck.read_text())["epoch"] >= 2):
            assert child.poll() is None, f"the run ended early: {child.stderr.read()}"
            assert time.monotonic() < deadline, "no checkpoint of epoch 2 after 2 minutes"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = child.communicate(timeout=60)
        stopped_in = time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("KeyboardInterrupt: interrupted in epoch "), err
    assert "checkpoint.json keeps the last epoch it saved: train(..., resume=True) continues from it" in last, last
    # Between two steps: well under the time of an epoch's many steps.
    assert stopped_in < 10, stopped_in
    ck = json.loads((out / "checkpoint.json").read_text())
    assert ck["epoch"] >= 2
    # The checkpoint resumes (and the folder is free again: the lock died with the run).
    r = systole.train(device="golden", array=4, dataset="digits", model="mlp", hidden=[16], limit=64,
                      batch=16, epochs=ck["epoch"] + 1, out=out, resume=True, verbose=False)
    assert [h["epoch"] for h in r.history][-2:] == [ck["epoch"], ck["epoch"] + 1]
