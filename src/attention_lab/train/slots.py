"""One pool of training runs for the whole machine: with ATTENTION_LAB_SLOTS = N in the environment (`attention-lab
repro` sets it to the machine's cores), a run (a trial, a seed, a share of the labels, a pretraining) trains only
while it holds one of N slots, file locks in the system's temporary folder that every process of the machine shares;
the others wait for one. Unset (a stage run by hand, the tests), runs do not wait."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "ATTENTION_LAB_SLOTS"


def slots() -> int:
    """The pool's size from ATTENTION_LAB_SLOTS (0: no pool)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return 0
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"environment variable {ENV} = {value!r}: expected a whole number >= 1 (the runs that may "
                         "train at once on this machine)")
    return int(value)


def slot_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"attention-lab-slots-{os.getuid()}"


@contextmanager
def training_slot(poll_s: float = 0.5) -> Iterator[int | None]:
    """Hold one of the machine's slots while the block runs (its number; None without a pool). The lock goes with
    the process, so a killed run frees its slot."""
    n = slots()
    if n == 0:
        yield None
        return
    folder = slot_dir()
    folder.mkdir(exist_ok=True)
    while True:
        for number in range(n):
            handle = open(folder / f"slot{number}", "a")  # noqa: SIM115 -- held for the block's whole life
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield number
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        time.sleep(poll_s)
