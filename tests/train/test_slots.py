"""slots.py: the machine's pool of training runs (ATTENTION_LAB_SLOTS), across real processes."""

import os
import subprocess
import sys
import time

import pytest

from attention_lab.train import slots

HOLD = """
import sys, time
from attention_lab.train.slots import training_slot
with training_slot(poll_s=0.02) as number:
    print(f"{time.time():.3f} in {number}", flush=True)
    time.sleep(float(sys.argv[1]))
    print(f"{time.time():.3f} out {number}", flush=True)
"""


def spans(outputs: list[str]) -> list[tuple[float, float]]:
    """(entered, left) of each process's slot."""
    result = []
    for out in outputs:
        times = [float(line.split()[0]) for line in out.splitlines()]
        result.append((times[0], times[1]))
    return result


@pytest.fixture
def pool(tmp_path, monkeypatch):
    monkeypatch.setattr(slots.tempfile, "tempdir", str(tmp_path))  # this test's own pool
    return {**os.environ, "TMPDIR": str(tmp_path)}


def test_no_more_runs_than_slots_train_at_once_and_a_killed_run_frees_its_slot(pool):
    """Four processes wanting a slot of two: at most two hold one at any moment, all four get one; a process killed
    while holding a slot frees it."""
    env = {**pool, slots.ENV: "2"}
    procs = [subprocess.Popen([sys.executable, "-c", HOLD, "0.6"], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    held = spans([p.communicate(timeout=60)[0] for p in procs])
    for t, _ in held:
        assert sum(1 for a, b in held if a <= t < b) <= 2, held
    assert len(held) == 4 and max(b for _, b in held) - min(a for a, _ in held) >= 1.1  # two rounds of 0.6 s

    env = {**pool, slots.ENV: "1"}
    killed = subprocess.Popen([sys.executable, "-c", HOLD, "60"], env=env, stdout=subprocess.PIPE, text=True)
    assert " in 0" in killed.stdout.readline()
    waiting = subprocess.Popen([sys.executable, "-c", HOLD, "0"], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    assert waiting.poll() is None, "the only slot is held"
    killed.kill()
    killed.wait()
    assert " in 0" in waiting.communicate(timeout=30)[0]


def test_without_the_variable_runs_do_not_wait_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.delenv(slots.ENV, raising=False)
    with slots.training_slot() as number:
        assert number is None
    monkeypatch.setenv(slots.ENV, "two")
    with pytest.raises(ValueError, match="ATTENTION_LAB_SLOTS = 'two': expected a whole number >= 1"):
        slots.slots()
