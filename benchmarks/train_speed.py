"""Sections 2 and 4: our Transformer vs torch.nn.Transformer per training step, and each family's achieved FLOP/s."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from attention_lab.core.tokenization import PAD
from benchmarks.common import ROOT, clock, median, num, spread, table


def _rnn_flops(input, w0, w1, *args, out_shape=None, **kwargs) -> int:
    """aten.mkldnn_rnn_layer (CPU nn.LSTM): 2 · steps · batch · (|W_ih| + |W_hh|)."""
    return 2 * input[0] * input[1] * (w0[0] * w0[1] + w1[0] * w1[1])


# ops that FlopCounterMode has no formula for on CPU; the backward of a matmul costs twice its forward
EXTRA_FLOPS = {
    torch.ops.aten.mkldnn_rnn_layer: _rnn_flops,
    torch.ops.aten.mkldnn_rnn_layer_backward: lambda *a, **k: 2 * _rnn_flops(*a, **k),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
        lambda q, k, v, *a, out_shape=None, **kw: sdpa_flop_count(q, k, v),
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda grad, q, k, v, *a, out_shape=None, **kw: sdpa_backward_flop_count(grad, q, k, v),
}


def family_config(name: str, task: str, models: Path, data: Path) -> DictConfig:
    """The checkpoint's training config when models/<name> has one, else params.yaml's; paths under data and models."""
    from attention_lab.core.checkpoints import load_model
    from attention_lab.core.config import load_config

    ckpt = models / name / "checkpoints" / "seed0" / "best.ckpt"
    cfg = load_model(ckpt)[1] if ckpt.is_file() else load_config(family=name, task=task, root=ROOT)
    OmegaConf.set_struct(cfg, False)
    cfg.paths.prepared = str((data / "prepared" / task).resolve())
    cfg.paths.tokenized = str((data / "tokenized" / task).resolve())
    cfg.paths.models = str(models.resolve())
    cfg.seed = 0
    return cfg


def module_and_batches(cfg: DictConfig, k: int):
    """The training stage's LightningModule and DataModule (the task's build hook) and its first k training batches."""
    from attention_lab.core.task import get_task

    torch.manual_seed(0)
    module, dm = get_task(cfg.task.name).build(cfg, 0)
    return module, list(itertools.islice(dm.train_dataloader(), k))


@contextlib.contextmanager
def determinism(cfg: DictConfig):
    """torch.use_deterministic_algorithms as the pipeline's Trainer sets it (conf/trainer), restored after."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(bool(cfg.trainer.get("deterministic", False)))
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def trainer(params, loss_fn, lr: float, clip: float):
    """One optimisation step on a batch: zero grads, loss_fn(batch).backward(), clip the norm, Adam step."""
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


def seq2seq_loss(model):
    """Teacher-forced next-token cross-entropy of a (src, src_mask, tgt_in) -> (logits, ...) model."""
    return lambda b: F.cross_entropy(model(b["src"], b["src_mask"], b["tgt_in"])[0].flatten(0, 1),
                                     b["tgt_out"].flatten(), ignore_index=PAD)


def transformer_vs_torch(models: Path, data: Path, sizes: dict) -> dict:
    """Section 2: training step of models.transformer.Transformer vs the nn.Transformer reference, same batches."""
    from benchmarks.torch_transformer import TorchTransformer

    cfg = family_config("transformer", "translate", models, data)
    module, batches = module_and_batches(cfg, sizes["train_batches"])
    ours = module.model.train()
    dims = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "_target_"}
    torch.manual_seed(0)
    ref = TorchTransformer(ours.vocab_size, PAD, **dims).train()
    steps = {name: trainer(m.parameters(), seq2seq_loss(m), cfg.train.lr, cfg.train.clip)
             for name, m in (("ours", ours), ("torch", ref))}
    times = {"ours": [], "torch": []}
    with determinism(cfg):
        for name, step in steps.items():
            for b in itertools.islice(itertools.cycle(batches), sizes["warmup"]):
                step(b)
        for _ in range(sizes["train_repeats"]):  # interleaved, so drift in machine load hits both alike
            for name, step in steps.items():
                times[name].append(seconds_per_step(step, batches))
    ours_ms, ref_ms = 1000 * median(times["ours"]), 1000 * median(times["torch"])
    return {"dims": dims, "vocab": ours.vocab_size, "batch_size": cfg.train.batch_size, "batches": len(batches),
            "shapes": [tuple(b["src"].shape) + (b["tgt_in"].shape[1],) for b in batches],
            "params_ours": sum(p.numel() for p in ours.parameters()),
            "params_torch": sum(p.numel() for p in ref.parameters()), "ours_ms": ours_ms, "torch_ms": ref_ms,
            "ours_all_ms": [1000 * x for x in times["ours"]], "torch_all_ms": [1000 * x for x in times["torch"]],
            "ratio": ours_ms / ref_ms, "deterministic": bool(cfg.trainer.get("deterministic", False)),
            "threads": torch.get_num_threads()}


def step_flops(module, batch: dict) -> int:
    """FLOPs of one training step's forward and backward (FlopCounterMode, plus EXTRA_FLOPS)."""
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FLOPS) as counter:
        module.loss(batch)[0].backward()
    module.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_rate(n: int, repeats: int) -> float:
    """FLOP/s of a float32 torch.mm of two n × n matrices (median of repeats) at the current thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    return 2 * n ** 3 / median(clock(torch.mm, a, b)[0] for _ in range(repeats))


def family_flops(fam, models: Path, data: Path, sizes: dict, peak: float) -> dict:
    """One family's training step (the stage's module and batches): FLOPs, seconds, FLOP/s and share of peak."""
    cfg = family_config(fam.name, fam.task, models, data)
    module, batches = module_and_batches(cfg, sizes["flop_batches"])
    module.train()
    flops = sum(step_flops(module, b) for b in batches) / len(batches)
    step = trainer(module.parameters(), lambda b: module.loss(b)[0], cfg.train.lr, cfg.train.clip)
    with determinism(cfg):
        for b in itertools.islice(itertools.cycle(batches), sizes["flop_warmup"]):
            step(b)
        seconds = median(seconds_per_step(step, batches) for _ in range(sizes["flop_repeats"]))
    return {"family": fam.name, "task": fam.task, "batch_size": cfg.train.batch_size,
            "params": sum(p.numel() for p in module.parameters()), "mflop_per_step": flops / 1e6,
            "ms_per_step": 1000 * seconds, "gflops": flops / seconds / 1e9, "share": flops / seconds / peak}


def flop_rates(families, models: Path, data: Path, sizes: dict) -> dict:
    """Section 4 over every family with a checkpoint (its training config) in the tasks asked for."""
    peak = matmul_rate(sizes["mm_n"], sizes["mm_repeats"])
    rows, errors = [], []
    for fam in families:
        if fam.ckpt is None or fam.task not in sizes["flop_tasks"]:
            continue
        try:
            rows.append(family_flops(fam, models, data, sizes, peak))
        except (FileNotFoundError, KeyError, ValueError, RuntimeError) as err:
            errors.append((fam.name, f"{type(err).__name__}: {err}"))
    return {"peak_gflops": peak / 1e9, "mm_n": sizes["mm_n"], "threads": torch.get_num_threads(), "rows": rows,
            "errors": errors}


def render_transformer(r: dict) -> list[str]:
    d = r["dims"]
    shapes = ", ".join(f"{b}×{s}→{t}" for b, s, t in r["shapes"][:8]) + (" …" if len(r["shapes"]) > 8 else "")
    return ["## 2. Our Transformer vs torch.nn.Transformer: training step", "",
            (f"Forward, backward, gradient-norm clipping and an Adam step on the same {r['batches']} training batches "
             f"of the translate pipeline (batch size {r['batch_size']}; batch × source → target tokens: {shapes}), "
             f"d_model {d['d_model']}, {d['heads']} heads, {d['enc_layers']}+{d['dec_layers']} layers, d_ff "
             f"{d['d_ff']}, dropout {d['dropout']}, vocabulary {r['vocab']:,}, shared tied embedding, sinusoidal "
             f"positions. Reference: `torch.nn.Transformer(norm_first=True, batch_first=True)` with only our "
             f"dropouts (`benchmarks/torch_transformer.py`). {r['threads']} torch thread(s), deterministic algorithms "
             f"{'on' if r['deterministic'] else 'off'} (as the pipeline's Trainer). Median over repeats after warm-up."),
            ""] + table(["model", "parameters", f"ms per step (median of {len(r['ours_all_ms'])})", "range"],
                        [["ours (`attention_lab.translate.models.transformer`)", f"{r['params_ours']:,}", num(r["ours_ms"], 2),
                          spread(r["ours_all_ms"])],
                         ["`torch.nn.Transformer`", f"{r['params_torch']:,}", num(r["torch_ms"], 2),
                          spread(r["torch_all_ms"])]]) + [
            "", f"**Ratio ours / torch: {r['ratio']:.3f}** (target ≤ 1.0: {'met' if r['ratio'] <= 1 else 'not met'}).",
            ""]


def render_flops(r: dict) -> list[str]:
    lines = ["## 4. Achieved FLOP/s in training", "",
             (f"FLOPs of a training step's forward and backward counted by `torch.utils.flop_counter.FlopCounterMode` "
              "(with formulas added for CPU LSTM layers and CPU flash attention, which it does not count; only "
              "matmuls, convolutions and attention count: embedding lookups and sums (all of `bow`'s work), "
              "elementwise ops and Adam do not), divided by the measured step time (forward, backward, clipping, "
              "Adam) on the first batches of each family's training DataModule. Peak: a float32 "
              f"`torch.mm` of {r['mm_n']}×{r['mm_n']} matrices, **{r['peak_gflops']:.1f} GFLOP/s** at "
              f"{r['threads']} thread(s), the same as the training steps."), ""]
    lines += table(["family", "task", "batch", "params", "MFLOP / step", "ms / step", "GFLOP/s", "share of mm peak"],
                   [[x["family"], x["task"], x["batch_size"], f"{x['params']:,}", num(x["mflop_per_step"], 1),
                     num(x["ms_per_step"], 1), num(x["gflops"], 2), f"{100 * x['share']:.1f}%"] for x in r["rows"]])
    lines += [f"- {name}: {err}" for name, err in r["errors"]]
    return lines + [""]
