"""Does torch.compile pay on this CPU? A family's training step eager against `torch.compile(model)` (inductor, the
default mode), the compile paid by the first steps with an empty compile cache and with the cache a previous process
left -> the section `compile` of reports/benchmarks.md (and benchmarks.json).

    python benchmarks/compile_step.py                        # bahdanau and transformer (translate), 1 thread
    python benchmarks/compile_step.py --families transformer --steps 8
    python benchmarks/compile_step.py --rerender             # the section again from benchmarks.json's figures

A copy of the project (its default profile, translate only) is prepared and tokenized once. Each arm runs in its own
process on the same batches (the first `--warmup` training batches compile, the next `--steps` are timed, best of 3):
eager; compiled with a new cache folder (TORCHINDUCTOR_CACHE_DIR); compiled again on that folder, as a second stage
process of the pipeline would be. Break-even: the compile's seconds over the seconds a compiled step saves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/compile_step.py` finds the package

from benchmarks.common import ROOT, machine, num, table, write_marked_section
from benchmarks.pool import copy_project

SECTION = "compile"  # its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
ARMS = ("eager", "compiled, empty cache", "compiled, warm cache")


def arm(dest: Path, family: str, compiled: bool, cache: Path, warmup: int, steps: int) -> dict:
    """One arm in a process of its own: {"warmup_s", "step_ms", "graphs"}."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{dest / 'src'}:{ROOT}",
           "TORCHINDUCTOR_CACHE_DIR": str(cache), "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}"}
    args = [sys.executable, __file__, "--worker", family, str(int(compiled)), str(warmup), str(steps), str(dest)]
    proc = subprocess.run(args, cwd=dest, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{family} ({'compiled' if compiled else 'eager'}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def worker(family: str, compiled: bool, warmup: int, steps: int, dest: Path) -> None:
    """Train `warmup` batches (timed whole: the compile happens here), then `steps` batches three times (best)."""
    import torch
    import torch._dynamo

    from benchmarks.train_speed import determinism, family_config, module_and_batches

    torch.set_num_threads(1)
    cfg = family_config(family, "translate", dest / "models", dest / "data")
    module, batches = module_and_batches(cfg, warmup + steps)
    module.train()
    if compiled:
        module.model = torch.compile(module.model)
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=cfg.train.lr)

    def step(batch: dict) -> None:
        opt.zero_grad(set_to_none=True)
        module.loss(batch)[0].backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.train.clip)
        opt.step()

    with determinism(cfg):
        start = time.perf_counter()
        for b in batches[:warmup]:
            step(b)
        warm = time.perf_counter() - start
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for b in batches[warmup:]:
                step(b)
            best = min(best, (time.perf_counter() - start) / steps)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # what dynamo compiled, recompilations included
    lengths = len({b["tgt_in"].shape[1] for b in batches})  # an RNN decoder's loop unrolls once per length
    print(json.dumps({"warmup_s": warm, "step_ms": 1000 * best, "graphs": graphs, "target_lengths": lengths}))


def row(family: str, arms: dict[str, dict]) -> list[str]:
    """The table's row of a family: eager and compiled (warm cache) ms per step, their ratio, the compile's seconds
    with an empty and a warm cache, and the updates a compiled step needs to earn back the warm compile."""
    eager, cold, warm = (arms[name] for name in ARMS)
    saved = (eager["step_ms"] - warm["step_ms"]) / 1000  # seconds a compiled step saves
    compile_s = warm["warmup_s"] - eager["warmup_s"]
    return [f"`{family}`", num(eager["step_ms"]), num(warm["step_ms"]), f"{warm['step_ms'] / eager['step_ms']:.2f}×",
            num(cold["warmup_s"] - eager["warmup_s"]), num(compile_s),
            f"{max(compile_s, 0) / saved:,.0f}" if saved > 0 else "never"]


def torch_recompile_limit() -> int:
    """How many graphs dynamo compiles for one frame before it runs that frame eagerly."""
    import torch._dynamo.config

    return int(torch._dynamo.config.recompile_limit)


def render(figures: dict) -> list[str]:
    """The section's lines from its figures."""
    rows = [row(family, r) + [f"{r[ARMS[2]]['graphs']} ({r[ARMS[2]]['target_lengths']} target lengths)"]
            for family, r in figures["results"].items()]
    return ["## Does torch.compile pay?", "",
            (f"Written by `python benchmarks/compile_step.py` ({figures['date']}) on {figures['machine']['cpu']}, one "
            f"thread, load average {figures['load_before']:.2f} before. Each family's training step (forward, backward, "
            "clipping, Adam) on the same translate batches of the default profile: eager, then `torch.compile(model)` "
            "(inductor, default mode) in a new process with an empty compile cache, then in another on the cache it "
            f"left. The compile is what the first {figures['warmup']} steps cost beyond eager's; a step is the best of 3 "
            f"passes over the next {figures['steps']}. Graphs: what dynamo compiled for those batches; it compiles a "
            f"frame at most {figures['recompile_limit']} times (torch's recompile limit) and then runs it eagerly."), "",
            *table(["family", "eager ms/step", "compiled ms/step", "compiled ÷ eager", "compile s (empty cache)",
                    "compile s (warm cache)", "updates to break even", "graphs"], rows), ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="bahdanau,transformer")
    parser.add_argument("--warmup", type=int, default=8, help="training batches that pay the compile")
    parser.add_argument("--steps", type=int, default=32, help="training batches timed after them (best of 3)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    parser.add_argument("--rerender", action="store_true", help="write the section again from --out's .json figures")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rerender:
        figures = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(args.out, SECTION, render(figures), figures)
        return 0
    if args.worker:
        family, compiled, warmup, steps, dest = args.worker
        worker(family, bool(int(compiled)), int(warmup), int(steps), Path(dest))
        return 0
    families = args.families.split(",")
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="compile-") as tmp:
        dest = Path(tmp)
        copy_project(dest)
        env = {**os.environ, "PYTHONPATH": str(dest / "src"), "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}"}
        for module in ("prepare", "tokenizer"):
            subprocess.run([sys.executable, "-m", f"attention_lab.stages.{module}", "task=translate"], cwd=dest,
                           env=env, check=True, capture_output=True)
        before = os.getloadavg()[0]
        for family in families:
            cache = dest / f"cache-{family}"
            results[family] = {name: arm(dest, family, name != "eager", cache, args.warmup, args.steps)
                               for name in ARMS}
            print(family, json.dumps(results[family]), flush=True)
    figures = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "families": families, "warmup": args.warmup,
               "steps": args.steps, "results": results, "load_before": round(before, 2),
               "recompile_limit": torch_recompile_limit()}
    write_marked_section(args.out, SECTION, render(figures), figures)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
