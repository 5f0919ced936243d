"""Sections 4 and 6 of speed.py: each family's achieved FLOP/s in training, and the machine's
training throughput under today's settings against the new ones."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from benchmarks.common import ROOT, clock, median, num, table


def _rnn_flops(input, w0, w1, *args, out_shape=None, **kwargs) -> int:
    """aten.mkldnn_rnn_layer (CPU nn.LSTM): 2 · steps · batch · (|W_ih| + |W_hh|)."""
    return 2 * input[0] * input[1] * (w0[0] * w0[1] + w1[0] * w1[1])


# ops that FlopCounterMode has no formula for on CPU; the backward of a matmul costs twice its
# forward
EXTRA_FLOPS = {
    torch.ops.aten.mkldnn_rnn_layer: _rnn_flops,
    torch.ops.aten.mkldnn_rnn_layer_backward: lambda *a, **k: 2 * _rnn_flops(*a, **k),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: (
        lambda q, k, v, *a, out_shape=None, **kw: sdpa_flop_count(q, k, v)
    ),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        lambda grad, q, k, v, *a, out_shape=None, **kw: sdpa_backward_flop_count(grad, q, k, v)
    ),
}


def family_config(name: str, task: str, models: Path, data: Path) -> DictConfig:
    """The checkpoint's training config when models/<name> has one, else params.yaml's; paths under
    data and models."""
    from attention_lab.core.config import load_config
    from attention_lab.train.checkpoints import load_model

    ckpt = models / name / "checkpoints" / "seed0" / "best.ckpt"
    cfg = load_model(ckpt)[1] if ckpt.is_file() else load_config(family=name, task=task, root=ROOT)
    return with_paths(cfg, task, models, data)


def with_paths(cfg: DictConfig, task: str, models: Path, data: Path) -> DictConfig:
    """cfg reading its prepared data and tokenizer under data, its models under models; seed 0."""
    OmegaConf.set_struct(cfg, False)
    cfg.paths.prepared = str((data / "prepared" / task).resolve())
    cfg.paths.tokenized = str((data / "tokenized" / task).resolve())
    cfg.paths.models = str(models.resolve())
    cfg.seed = 0
    return cfg


def module_and_batches(cfg: DictConfig, k: int, seed: int = 0):
    """The training stage's LightningModule and DataModule (the task's build hook) and its first k
    training batches."""
    from attention_lab.core.task import get_task

    torch.manual_seed(seed)
    module, dm = get_task(cfg.task.name).build(cfg, seed)
    return module, list(itertools.islice(dm.train_dataloader(), k))


@contextlib.contextmanager
def determinism(cfg: DictConfig):
    """torch.use_deterministic_algorithms as the pipeline's Trainer sets it (conf/trainer), restored
    after."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(bool(cfg.trainer.get("deterministic", False)))
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def trainer(params, loss_fn, lr: float, clip: float):
    """One optimisation step on a batch: zero grads, loss_fn(batch).backward(), clip the norm, Adam
    step."""
    params = [p for p in params if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)

    def step(batch: dict) -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(batch).backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()

    return step


def seconds_per_step(step, batches: list[dict]) -> float:
    """Mean seconds of one step over the batches, in order."""
    return clock(lambda: [step(b) for b in batches])[0] / len(batches)


def step_flops(module, batch: dict) -> int:
    """FLOPs of one training step's forward and backward (FlopCounterMode, plus EXTRA_FLOPS)."""
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FLOPS) as counter:
        module.loss(batch)[0].backward()
    module.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_rate(n: int, repeats: int) -> float:
    """FLOP/s of a float32 torch.mm of two n × n matrices (median of repeats) at the current thread
    count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    return 2 * n**3 / median(clock(torch.mm, a, b)[0] for _ in range(repeats))


def family_flops(fam, models: Path, data: Path, sizes: dict, peak: float) -> dict:
    """One family's training step (the stage's module and batches): FLOPs, seconds, FLOP/s and share
    of peak."""
    cfg = family_config(fam.name, fam.task, models, data)
    module, batches = module_and_batches(cfg, sizes["flop_batches"])
    module.train()
    flops = sum(step_flops(module, b) for b in batches) / len(batches)
    step = trainer(module.parameters(), lambda b: module.loss(b)[0], cfg.train.lr, cfg.train.clip)
    with determinism(cfg):
        for b in itertools.islice(itertools.cycle(batches), sizes["flop_warmup"]):
            step(b)
        seconds = median(seconds_per_step(step, batches) for _ in range(sizes["flop_repeats"]))
    return {
        "family": fam.name,
        "task": fam.task,
        "batch_size": cfg.train.batch_size,
        "params": sum(p.numel() for p in module.parameters()),
        "mflop_per_step": flops / 1e6,
        "ms_per_step": 1000 * seconds,
        "gflops": flops / seconds / 1e9,
        "share": flops / seconds / peak,
    }


def flop_rates(families, models: Path, data: Path, sizes: dict) -> dict:
    """Section 4 over every family with a checkpoint (its training config) in the tasks asked
    for."""
    peak = matmul_rate(sizes["mm_n"], sizes["mm_repeats"])
    rows, errors = [], []
    for fam in families:
        if fam.ckpt is None or fam.task not in sizes["flop_tasks"]:
            continue
        try:
            rows.append(family_flops(fam, models, data, sizes, peak))
        except (FileNotFoundError, KeyError, ValueError, RuntimeError) as err:
            errors.append((fam.name, f"{type(err).__name__}: {err}"))
    return {
        "peak_gflops": peak / 1e9,
        "mm_n": sizes["mm_n"],
        "threads": torch.get_num_threads(),
        "rows": rows,
        "errors": errors,
    }


def render_flops(r: dict) -> list[str]:
    lines = [
        "## 4. Achieved FLOP/s in training",
        "",
        (
            "FLOPs of a training step's forward and backward counted by"
            " `torch.utils.flop_counter.FlopCounterMode` (with formulas added for CPU LSTM layers"
            " and CPU flash attention, which it does not count; only matmuls, convolutions and"
            " attention count: embedding lookups and sums (all of `bow`'s work), elementwise ops"
            " and Adam do not), divided by the measured step time (forward, backward, clipping,"
            " Adam) on the first batches of each family's training DataModule. Peak: a float32"
            f" `torch.mm` of {r['mm_n']}×{r['mm_n']} matrices, **{r['peak_gflops']:.1f} GFLOP/s**"
            f" at {r['threads']} thread(s), the same as the training steps."
        ),
        "",
    ]
    lines += table(
        [
            "family",
            "task",
            "batch",
            "params",
            "MFLOP / step",
            "ms / step",
            "GFLOP/s",
            "share of mm peak",
        ],
        [
            [
                x["family"],
                x["task"],
                x["batch_size"],
                f"{x['params']:,}",
                num(x["mflop_per_step"], 1),
                num(x["ms_per_step"], 1),
                num(x["gflops"], 2),
                f"{100 * x['share']:.1f}%",
            ]
            for x in r["rows"]
        ],
    )
    lines += [f"- {name}: {err}" for name, err in r["errors"]]
    return lines + [""]


# Section 6: today's settings against the new ones, the whole machine's training throughput per
# family


def timed_worker(cfg: DictConfig, seed: int, threads: int, sizes: dict, barrier, results) -> None:
    """One process of a side: its own copy of the family on its own batches (seed), `threads` torch
    threads; the timed repeats start together on every process of the side (barrier). Puts its
    figures (or its error) on results."""
    import ctypes
    import signal
    import sys
    import warnings

    if sys.platform == "linux":  # killed with its parent
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    torch.set_num_threads(threads)
    # training_step without a Trainer logs nothing
    warnings.filterwarnings("ignore", message=".*self.log.*")
    try:
        module, batches = module_and_batches(cfg, sizes["side_steps"], seed)
        module.train()
        flops = sum(step_flops(module, b) for b in batches)
        step = trainer(
            module.parameters(), lambda b: module.training_step(b, 0), cfg.train.lr, cfg.train.clip
        )
        windows = []
        with determinism(cfg):
            for b in itertools.islice(itertools.cycle(batches), sizes["side_warmup"]):
                step(b)
            start = module.tokens_seen  # counted by the stage's own training_step
            for _ in range(sizes["side_repeats"]):
                barrier.wait()
                # CLOCK_MONOTONIC: one clock for every process of the machine
                t0 = time.perf_counter()
                for b in batches:
                    step(b)
                windows.append((t0, time.perf_counter()))
        results.put(
            {
                "pid": os.getpid(),
                "threads": torch.get_num_threads(),
                "steps": len(batches),
                "flops": flops,
                "tokens": (module.tokens_seen - start) / sizes["side_repeats"],
                "windows": windows,
            }
        )
    except Exception as err:  # noqa: BLE001 -- reported by the parent; the other processes must not wait for this one
        barrier.abort()
        results.put({"pid": os.getpid(), "error": f"{type(err).__name__}: {err}"})


def run_side(cfg: DictConfig, processes: int, threads: int, sizes: dict) -> list[dict]:
    """timed_worker in `processes` spawned processes side by side (seeds 0..processes-1); their
    figures."""
    from multiprocessing import get_context

    ctx = get_context("spawn")
    barrier, results = ctx.Barrier(processes, timeout=sizes["side_timeout"]), ctx.Queue()
    workers = [
        ctx.Process(target=timed_worker, args=(cfg, seed, threads, sizes, barrier, results))
        for seed in range(processes)
    ]
    for w in workers:
        w.start()
    outs, deadline = [], time.monotonic() + sizes["side_timeout"]
    try:
        while len(outs) < len(workers):
            try:
                outs.append(results.get(timeout=2))
            except queue.Empty:
                if lost := [w.exitcode for w in workers if w.exitcode not in (None, 0)]:
                    raise RuntimeError(
                        f"a process of the side ended with exit status {lost[0]} before it reported"
                    ) from None
                if time.monotonic() > deadline:
                    raise
    finally:
        for w in workers:
            w.join(timeout=5)
            if w.is_alive():
                w.kill()
    if errors := [o["error"] for o in outs if "error" in o]:
        raise RuntimeError(errors[0])
    return outs


def machine_rates(outs: list[dict], roof: float) -> dict:
    """A side's figures for the whole machine: per repeat, tokens and FLOPs of every process over
    the span from the first start to the last end; the median over repeats."""
    spans = [
        max(o["windows"][r][1] for o in outs) - min(o["windows"][r][0] for o in outs)
        for r in range(len(outs[0]["windows"]))
    ]
    tokens, flops = sum(o["tokens"] for o in outs), sum(o["flops"] for o in outs)
    overlap = all(
        max(o["windows"][r][0] for o in outs) < min(o["windows"][r][1] for o in outs)
        for r in range(len(spans))
    )
    return {
        "processes": len(outs),
        "threads": outs[0]["threads"],
        "pids": [o["pid"] for o in outs],
        "tokens_per_s": median(tokens / s for s in spans),
        "tokens_per_s_all": [tokens / s for s in spans],
        "gflops": median(flops / s for s in spans) / 1e9,
        "share": median(flops / s for s in spans) / roof,
        "tokens_per_update": tokens / sum(o["steps"] for o in outs),
        "overlapped": overlap,
        "windows": [o["windows"] for o in outs],
    }


def side_config(family: str, task: str, root: Path, models: Path, data: Path) -> DictConfig:
    """The family's config under the settings at root (params.yaml, conf/, tuned/), reading data
    under data."""
    from attention_lab.core.config import load_config
    from attention_lab.core.paths import pretrained_dir
    from attention_lab.core.task import get_task
    from attention_lab.train.training import run_settings

    cfg = with_paths(load_config(family=family, task=task, root=root), task, models, data)
    # the run on all the data (classify: labels)
    cfg = run_settings(cfg, get_task(task).full_run(cfg, cfg.seeds[0]))
    if cfg.pretrained and not pretrained_dir(cfg).is_dir():
        raise FileNotFoundError(
            f"{pretrained_dir(cfg)} (the pretrain@{family} stage's output; pass --models)"
        )
    return cfg


def side(cfg: DictConfig, processes: int, threads: int, sizes: dict, roof: float) -> dict:
    """One side of a family's comparison: its settings and the machine's figures."""
    mix = cfg.data.get("length_mix")
    return {
        **machine_rates(run_side(cfg, processes, threads, sizes), roof),
        "batch_size": cfg.train.batch_size,
        "length_mix": OmegaConf.to_container(mix) if mix is not None else None,
        "n_train": cfg.data.get("n_train"),
    }


def family_sides(
    family: str, task: str, roots: dict, data: dict, models: Path, sizes: dict, roof: float
) -> dict:
    """before: one process on every core; after: train.processes single-thread processes side by
    side."""
    before = side_config(family, task, roots["before"], models, data["before"])
    after = side_config(family, task, roots["after"], models, data["after"])
    row = {
        "family": family,
        "task": task,
        "before": side(before, 1, os.cpu_count(), sizes, roof),
        "after": side(after, int(after.train.get("processes", 1)), 1, sizes, roof),
    }
    return {**row, "ratio": row["after"]["tokens_per_s"] / row["before"]["tokens_per_s"]}


def settings_rates(
    before: str, only: list[str] | None, models: Path, sizes: dict, after: Path = ROOT
) -> dict:
    """Section 6 for every family of every task in the 'after' settings' params.yaml (or those in
    `only`); before: a git revision or a folder of settings, after: the working tree (or another
    folder)."""
    import tempfile

    from attention_lab.core.params import families, read_params
    from attention_lab.core.task import NAMES as TASKS
    from benchmarks.common import prepare_data, settings_of, shown_path, torch_threads

    with torch_threads(os.cpu_count()):
        roof = matmul_rate(sizes["mm_n"], sizes["mm_repeats"])
    params, rows, errors = read_params(after), [], []
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as work:
        before_root, label = settings_of(before, Path(work))
        roots = {"before": before_root, "after": after}
        for task in (t for t in TASKS if t in params.get("tasks", TASKS)):
            names = [f for f in families(params, task) if only is None or f in only]
            data = (
                {k: prepare_data(root, task, Path(work)) for k, root in roots.items()}
                if names
                else {}
            )
            for name in names:
                try:
                    rows.append(family_sides(name, task, roots, data, models, sizes, roof))
                except (FileNotFoundError, KeyError, ValueError, RuntimeError) as err:
                    errors.append((name, f"{type(err).__name__}: {err}"))
    shown = "the working tree" if after == ROOT else f"folder `{shown_path(after)}`"
    return {
        "before": label,
        "after": shown,
        "roof_gflops": roof / 1e9,
        "cores": os.cpu_count(),
        "mm_n": sizes["mm_n"],
        "steps": sizes["side_steps"],
        "warmup": sizes["side_warmup"],
        "repeats": sizes["side_repeats"],
        "rows": rows,
        "errors": errors,
    }


def settings_row(x: dict) -> list[str]:
    """One family's row of section 6."""
    b, a = x["before"], x["after"]
    return [
        x["family"],
        x["task"],
        num(b["tokens_per_s"], 0),
        num(a["tokens_per_s"], 0),
        f"{x['ratio']:.2f}×",
        f"{100 * b['share']:.1f}%",
        f"{100 * a['share']:.1f}%",
        f"{b['processes']} × {b['threads']} thr / {a['processes']} × {a['threads']} thr",
        f"{b['batch_size']} / {a['batch_size']}",
        f"{b['tokens_per_update']:,.0f} / {a['tokens_per_update']:,.0f}",
    ]


def render_settings(r: dict) -> list[str]:
    from benchmarks.common import geomean, stage_command

    prepare = " ".join(stage_command("prepare", "<task>", Path("<tmp>"))[1:])
    lines = [
        "## 6. Today's settings against the new ones: the machine's training throughput",
        "",
        (
            f"**before**: the settings (params.yaml, conf/, tuned/) of {r['before']}, one process"
            f" on all {r['cores']} cores (torch threads = cores). **after**: the settings of"
            f" {r['after']}, `train.processes` spawned processes side by side, one torch thread"
            " each (as `train.processes` runs seeds), each training its own copy of the family on"
            " its own batches (seed 0, 1, …). Each side reads data prepared from its own settings"
            f" by the project's stages (`python {prepare}` and the same with"
            " `attention_lab.stages.tokenizer`, run in that setting's folder; identical data"
            " configs share one folder). Steps are the training stage's own: the task's build"
            " hook, `training_step` (which counts the tokens, as the stage's tokens/s does),"
            f" backward, norm clipping, Adam. {r['warmup']} warm-up steps, then {r['steps']} timed"
            " steps per process, the processes starting together; tokens/s of the machine = tokens"
            " of every process / span from the first start to the last end, median of"
            f" {r['repeats']} repeat(s). Share of roof: counted FLOPs (section 4) per second"
            f" against a float32 `torch.mm` of {r['mm_n']}×{r['mm_n']} on all {r['cores']} threads,"
            f" **{r['roof_gflops']:.1f} GFLOP/s**."
        ),
        "",
    ]
    lines += table(
        [
            "family",
            "task",
            "before tokens/s",
            "after tokens/s",
            "after / before",
            "roof before",
            "roof after",
            "processes before / after",
            "batch before / after",
            "tokens / update before / after",
        ],
        [settings_row(x) for x in r["rows"]],
    )
    if r["rows"]:
        lines += [
            "",
            f"Geometric mean after / before: **{geomean(x['ratio'] for x in r['rows']):.2f}×**.",
        ]
    lines += [f"- {name}: {err}" for name, err in r["errors"]]
    return lines + [""]
