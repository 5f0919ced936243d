"""What the speed benchmarks share: the machine, timing, the model folders found, markdown tables."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORT_LEVELS = {"basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


@dataclass
class Family:
    """One exported family under --models: its task, onnx folder and (when trained here) seed-0 checkpoint."""

    name: str
    task: str
    onnx: Path
    ckpt: Path | None


def find_families(models: Path) -> list[Family]:
    """Every <family>/onnx folder under models, in params.yaml's family order (others after, by name)."""
    from attention_lab.core.config import TASKS, families, read_params

    params = read_params(ROOT)
    order = [f for task in TASKS if task in params for f in families(params, task)]
    found = []
    for meta in sorted(models.glob("*/onnx/meta.json")):
        folder = meta.parent.parent
        ckpt = folder / "checkpoints" / "seed0" / "best.ckpt"
        task = json.loads(meta.read_text(encoding="utf-8")).get("task", "translate")
        found.append(Family(folder.name, task, meta.parent, ckpt if ckpt.is_file() else None))
    return sorted(found, key=lambda f: (order.index(f.name) if f.name in order else len(order), f.name))


def cpu_model() -> str:
    """The CPU's model name and vector extensions from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines() if ":" in line)
    except OSError:
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = set(info.get("flags", "").split())
    vector = ", ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags) or "no AVX2"
    return f"{info.get('model name', platform.machine())} ({vector})"


def machine() -> dict:
    """CPU, cores, library versions and the thread settings the run started with."""
    import onnxruntime
    import torch

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
            "torch_threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset")}


def clock(fn: Callable, *args, **kwargs) -> tuple[float, object]:
    """(seconds, result) of one call fn(*args, **kwargs)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def median(values) -> float:
    return float(statistics.median(values))


def geomean(values) -> float:
    values = list(values)
    return float(statistics.geometric_mean(values)) if values else float("nan")


def num(x, digits: int = 1) -> str:
    """A number for a table cell; '—' for None."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:,.{digits}f}"


def spread(values) -> str:
    """'min–max' of a list of numbers, 2 decimals."""
    return f"{min(values):,.2f}–{max(values):,.2f}"


def table(header: list[str], rows: list[list]) -> list[str]:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


@contextlib.contextmanager
def torch_threads(n: int):
    """torch intra-op threads set to n inside the block, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


MARKED = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.DOTALL)  # a section another script writes and keeps


def write_marked_section(md: Path, name: str, lines: list[str], figures: dict) -> None:
    """Replace (or append) section `name` of md, between its markers, and its key in md's .json twin."""
    text = md.read_text(encoding="utf-8") if md.is_file() else "# Speed benchmarks\n"
    block = "\n".join([f"<!-- {name}:start -->", *lines, f"<!-- {name}:end -->"])
    pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.DOTALL)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    md.write_text(text, encoding="utf-8")
    js = md.with_suffix(".json")
    summary = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else {}
    summary[name] = figures
    js.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def keep_marked_sections(md: Path, text: str, summary: dict) -> tuple[str, dict]:
    """(text, summary) of a rewrite of md with the marked sections of the old md (and their .json keys) kept."""
    old = md.read_text(encoding="utf-8") if md.is_file() else ""
    js = md.with_suffix(".json")
    old_json = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else {}
    for m in MARKED.finditer(old):
        text = text.rstrip() + "\n\n" + m.group(0) + "\n"
        if m.group(1) in old_json:
            summary = {**summary, m.group(1): old_json[m.group(1)]}
    return text, summary
