"""The pipeline on your CUDA GPU: the tiny (or quick) profile end to end with params.yaml `trainer:
gpu`, in a scratch copy of the project -> the section `gpu` of reports/benchmarks.md (and its key in
benchmarks.json).

    python benchmarks/gpu.py                           # tiny profile, a family of each kind, seed 0
    python benchmarks/gpu.py --families all --jobs 8   # every family of params.yaml, 8 chains at
    once python benchmarks/gpu.py --profile quick           # the committed run's profile, its
    studies included python benchmarks/gpu.py --dry-run                 # make the copy and print
    its commands; run nothing

The copy (attention_lab.pipeline.scratch: code, conf/, params.yaml; no data, models or .git) becomes
a git and DVC repository of its own and runs `attention-lab repro` there, the whole pipeline from
data preparation to the reports, while nvidia-smi is sampled for GPU memory and processes. The
section has the GPU, each training run's accelerator (its config.yaml), updates/s and tokens/s
(beside the committed CPU run's, for the committed run's profile), whether the ONNX exports decode
as torch does, and the log's lines about determinism and precision. Needs a torch that sees the GPU
(docs/scaling.md); `--trainer cpu` runs the same copy on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

# `python benchmarks/gpu.py` finds the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_lab.core.machine import cpu_model
from attention_lab.pipeline.scratch import copy_project, drop_orphans, environ
from benchmarks.common import GIT_ID, ROOT, command, num, table, write_marked_section

SECTION = "gpu"  # its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
# tests/e2e/test_pipeline.py's
KINDS = {
    "translate": ["seq2seq_lstm", "bahdanau", "luong_general", "transformer"],
    "classify": ["bow", "han", "self_attentive", "transformer_encoder", "bert", "bert_minilm"],
    "caption": ["show_tell", "show_attend_tell"],
}
WARNED = ("deterministic", "CUBLAS", "cudnn", "TF32", "Tensor Cores")  # log lines worth reporting


def choose(params: dict, families: list[str] | None, trainer: str, profile: str) -> None:
    """params.yaml of the copy: `trainer:`, and only `families` (None: all) with the tasks that have
    one left."""
    params["trainer"] = trainer
    classify = params["classify"]
    if families is not None:
        for task in params["tasks"]:
            params[task]["families"] = [f for f in params[task]["families"] if f in families]
        classify["pretrained"] = [f for f in classify["pretrained"] if f in families]
        params["tasks"] = [
            t
            for t in params["tasks"]
            if params[t]["families"] or (t == "classify" and classify["pretrained"])
        ]
        drop_orphans(params)  # every ablation has stages: those of families left out go
    # 22M weights: short inputs (the e2e test's)
    if profile == "tiny" and "bert_minilm" in classify["pretrained"]:
        classify["family_params"]["bert_minilm"]["train"]["max_tokens"] = 128


def commands(args) -> list[list[str]]:
    """What runs in the copy: a git and DVC repository of its own, then the pipeline."""
    dvc = [sys.executable, "-m", "dvc"]
    git = [["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "project"]]
    setup = [git[0], dvc + ["init", "-q"], dvc + ["config", "core.analytics", "false"], *git[1:]]
    if shutil.which("git") is None:
        setup = [dvc + ["init", "-q", "--no-scm"], dvc + ["config", "core.analytics", "false"]]
    repro = [sys.executable, "-m", "attention_lab.cli", "repro", "--jobs", str(args.jobs)]
    return setup + [repro + (["--slots", str(args.slots)] if args.slots else [])]


class GpuSampler(threading.Thread):
    """nvidia-smi every half second: the most GPU memory in use and the most compute processes at
    once."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.peak_mib, self.processes = threading.Event(), 0, 0

    @staticmethod
    def query(what: str) -> list[str]:
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-{what}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
        except OSError:  # no nvidia-smi: the CPU
            return []
        return [line.strip() for line in out.splitlines() if line.strip()]

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.peak_mib = max(
                [self.peak_mib, *(int(float(u)) for u in self.query("gpu=memory.used")[:1])]
            )
            self.processes = max(self.processes, len(self.query("compute-apps=pid")))


def machine() -> dict:
    """The GPU (nvidia-smi's name, memory, driver), torch and its CUDA, the CPU."""
    import torch

    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "nvidia_smi": GpuSampler.query("gpu=name,memory.total,driver_version"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }


def trained(dest: Path) -> dict:
    """{<family>/<run>: train.json's figures and the accelerator its config.yaml records} under
    dest/models."""
    out = {}
    for path in sorted((dest / "models").glob("*/checkpoints/**/train.json")):
        t = json.loads(path.read_text(encoding="utf-8"))
        config = yaml.safe_load((path.parent / "config.yaml").read_text(encoding="utf-8"))
        out[path.parent.relative_to(dest / "models").as_posix().replace("/checkpoints", "")] = {
            "task": config["task"]["name"],
            "accelerator": config["trainer"]["accelerator"],
            "steps": t["steps"],
            "train_seconds": t["train_seconds"],
            "updates_per_s": t["steps"] / max(t["train_seconds"], 1e-9),
            "tokens_per_s": t.get("train_tokens_per_s"),
            "best_val": t.get("best_val"),
            "metric": t.get("best_val_metric"),
            "stopped_by": t.get("stopped_by"),
        }
    return out


def committed_cpu(runs: dict) -> dict:
    """Per family: the committed CPU run's training tokens/s (metrics/<task>/<family>.json, the mean
    over seeds)."""
    out = {}
    for name, r in runs.items():
        family = name.split("/")[0]
        path = ROOT / "metrics" / r["task"] / f"{family}.json"
        if path.is_file() and (
            rate := json.loads(path.read_text(encoding="utf-8")).get("train/train_tokens_per_s")
        ):
            out[family] = rate
    return out


def run(dest: Path, cmds: list[list[str]], log: Path) -> dict:
    """cmds in dest, their output in log, nvidia-smi sampled during the last: the run's figures."""
    env = environ(
        dest,
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **GIT_ID,
    )
    for cmd in cmds[:-1]:
        subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    sampler = GpuSampler()
    sampler.start()
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(
            cmds[-1], cwd=dest, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    seconds = time.perf_counter() - t0
    sampler.stop.set()
    text = log.read_text(encoding="utf-8", errors="replace")
    # translate and caption: greedy_identical, classify: ok
    parity = {
        p.parent.parent.name: json.loads(p.read_text(encoding="utf-8"))
        for p in (dest / "models").glob("*/onnx/parity.json")
    }
    warned = [line.strip()[:300] for line in text.splitlines() if any(w in line for w in WARNED)]
    return {
        "exit": code,
        "seconds": seconds,
        "done": "the pipeline is done" in text,
        "stages_run": text.count("Running stage"),
        "peak_gpu_memory_mib": sampler.peak_mib,
        "most_gpu_processes": sampler.processes,
        "runs": trained(dest),
        "onnx_parity": {
            k: bool(v.get("greedy_identical", v.get("ok"))) for k, v in sorted(parity.items())
        },
        "warnings": list(dict.fromkeys(warned))[:20],
        "tail": text.splitlines()[-5:] if code else [],
    }


def render(f: dict) -> list[str]:
    """The section's lines."""
    m, r = f["machine"], f["run"]
    device = m["gpu"] or f"the CPU ({m['cpu']})"
    lines = [
        f"## The pipeline on {device}",
        "",
        (
            f"Produced by `{f['command']}` ({m['date']}): the {f['profile']} profile, seeds"
            f" {f['seeds']}, params.yaml `trainer: {f['trainer']}`"
            f" (conf/trainer/{f['trainer']}.yaml), in a scratch copy of the project: `attention-lab"
            f" repro --jobs {f['jobs']}`, every stage from data preparation to the reports"
            " (docs/scaling.md, A GPU box)."
        ),
        "",
    ]
    lines += table(
        ["machine", ""],
        [
            ["GPU (nvidia-smi)", "; ".join(m["nvidia_smi"]) or "—"],
            ["CPU", f"{m['cpu']}, {m['cores']} cores"],
            ["torch / CUDA / Python", f"{m['torch']} / {m['cuda'] or '—'} / {m['python']}"],
        ],
    )
    parity = r["onnx_parity"]
    lines += [""] + table(
        ["the run", ""],
        [
            [
                "finished",
                (
                    f"{'yes' if r['done'] else 'no'} (exit {r['exit']}) in"
                    f" {num(r['seconds'] / 60)} min"
                ),
            ],
            ["stages run", r["stages_run"]],
            [
                "training runs on the GPU (their config.yaml)",
                f"{sum(x['accelerator'] == 'gpu' for x in r['runs'].values())} of {len(r['runs'])}",
            ],
            ["most processes on the GPU at once", r["most_gpu_processes"] or "—"],
            [
                "peak GPU memory in use",
                f"{num(r['peak_gpu_memory_mib'], 0)} MiB" if r["peak_gpu_memory_mib"] else "—",
            ],
            [
                "ONNX exports (on the CPU) decoding as torch does",
                f"{sum(parity.values())} of {len(parity)}",
            ],
        ],
    )
    cpu = f.get("committed_cpu") or {}
    header = [
        "run",
        "accelerator",
        "updates (stopped by)",
        "train s",
        "updates/s",
        "tokens/s",
        "best validation",
    ]
    rows = [
        [
            f"`{name}`",
            x["accelerator"],
            f"{x['steps']:,} ({x['stopped_by']})",
            num(x["train_seconds"]),
            num(x["updates_per_s"], 2),
            num(x["tokens_per_s"], 0),
            f"{num(x['best_val'], 4)} {x['metric'] or ''}",
        ]
        + ([num(cpu.get(name.split("/")[0]), 0)] if cpu else [])
        for name, x in r["runs"].items()
    ]
    lines += [""] + table(header + (["committed CPU run tokens/s"] if cpu else []), rows)
    if cpu:
        lines += [
            "",
            (
                f"Committed CPU run: metrics/<task>/<family>.json of the committed {f['profile']}"
                " run (the mean of its seeds, one thread each, side by side on its machine)."
            ),
        ]
    lines += [
        "",
        "Log lines about determinism and precision: " + ("none." if not r["warnings"] else ""),
    ]
    lines += [f"- `{w}`" for w in r["warnings"]]
    if r["tail"]:
        lines += ["", "The log's last lines:", "", "```", *r["tail"], "```"]
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--profile",
        default="tiny",
        choices=("tiny", "quick"),
        help="conf/profile (default: %(default)s)",
    )
    ap.add_argument(
        "--families",
        default="kinds",
        help="comma-separated families, `kinds` (a family of each kind, "
        "as tests/e2e/test_pipeline.py runs) or `all` (params.yaml's) (default: %(default)s)",
    )
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default: %(default)s)")
    ap.add_argument(
        "--trainer", default="gpu", help="params.yaml `trainer:` of the copy (default: %(default)s)"
    )
    ap.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="chains at once (default: the cores)"
    )
    ap.add_argument(
        "--slots",
        type=int,
        default=None,
        help="training runs at once (default: repro's, the cores)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the copy and its log here (default: a temporary folder, removed after)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    ap.add_argument(
        "--dry-run", action="store_true", help="make the copy, print its commands, run nothing"
    )
    args = ap.parse_args(argv)
    families = {"all": None, "kinds": [f for names in KINDS.values() for f in names]}.get(
        args.families, [f.strip() for f in args.families.split(",") if f.strip()]
    )
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.trainer == "gpu" and not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            ap.error(
                f"torch {torch.__version__} sees no CUDA GPU: install a CUDA build of torch"
                " (docs/scaling.md), or try the copy with --trainer cpu"
            )
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-pipeline-"))
    dest = work / "project"
    try:
        copy_project(
            dest,
            ROOT,
            profile=args.profile,
            seeds=seeds,
            edit=lambda p: choose(p, families, args.trainer, args.profile),
        )
        cmds = commands(args)
        if args.dry_run:
            print(f"copy: {dest} (profile {args.profile}, seeds {seeds}, trainer {args.trainer})")
            print("\n".join(" ".join(c) for c in cmds))
            return 0
        result = run(dest, cmds, work / "repro.log")
        figures = {
            "command": command(__file__, argv),
            "machine": machine(),
            "profile": args.profile,
            "seeds": seeds,
            "trainer": args.trainer,
            "jobs": args.jobs,
            "run": result,
            "committed_cpu": committed_cpu(result["runs"])
            if args.profile
            == yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["profile"]
            else {},
        }
        write_marked_section(args.out, SECTION, render(figures), figures)
        print(
            f"wrote the section {SECTION} of {args.out} ({'done' if result['done'] else 'not done'}"
            f" in {result['seconds']:.0f} s); the log:"
            f" {work / 'repro.log' if args.work else 'removed with the copy'}"
        )
        return 0 if result["done"] else 1
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
