"""Joey NMT's side of benchmarks/peers.py, run in Joey's own virtualenv: its TrainManager trains,
then per-token validation loss and timed greedy search; the figures go to a JSON file.

    .venv-peers/bin/python benchmarks/joey_driver.py CONFIG.yaml OUT.json --warmup-steps 200 --skip
    10 ... --stop-rule '{"start": 5, "min_delta": 0.01, "decay": 0.5, "patience": 2}'   # to early
    stopping ... --no-source-eos                     # sources without Joey's </s>, as ours read
    them

Imports nothing of attention_lab (Joey's venv does not have it).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from joeynmt.builders import BaseScheduler
from joeynmt.config import load_config, parse_global_args, set_validation_args
from joeynmt.helpers import make_model_dir
from joeynmt.helpers_for_ddp import get_logger
from joeynmt.prediction import predict, prepare
from joeynmt.search import search
from joeynmt.training import TrainManager


def patch(module, cls, method: str, old: str, new: str) -> None:
    """cls.method of Joey's `module` with the one occurrence of `old` in its source replaced by
    `new`, the rest of the method as Joey wrote it; an error if Joey's source no longer has `old`
    exactly once."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(getattr(cls, method)))
    if source.count(old) != 1:
        raise RuntimeError(f"joeynmt's {cls.__name__}.{method} has changed: {old!r} not found once")
    scope: dict = {}
    exec(compile(source.replace(old, new), module.__file__, "exec"), vars(module), scope)  # noqa: S102
    setattr(cls, method, scope[method])


def fix_one_way_encoder() -> None:
    """Joey 2.3's RecurrentEncoder.forward takes the backward direction's final state of every RNN,
    one-way too (an IndexError at `hidden_layerwise[-1:, 1]`); that one line becomes "the backward
    directions' final states, if any" (the same tensor for a two-way RNN, an empty one for a one-way
    RNN)."""
    from joeynmt import encoders

    patch(
        encoders,
        encoders.RecurrentEncoder,
        "forward",
        "hidden_layerwise[-1:, 1]",
        "hidden_layerwise[-1:, 1:].transpose(1, 2).flatten(2)",
    )


def drop_source_eos() -> None:
    """Joey's batches end every source with </s> (BaseDataset.collate_fn encodes it with eos=True);
    ours do not: that one argument becomes eos=False."""
    from joeynmt import datasets

    patch(
        datasets,
        datasets.BaseDataset,
        "collate_fn",
        "](src_list, bos=False, eos=True)",
        "](src_list, bos=False, eos=False)",
    )


class WarmupConstant(BaseScheduler):
    """Linear warm-up to the peak rate over `warmup` updates, then constant: update k (0-based) at
    (k + 1) / warmup.

    Joey 2.3 has no such schedule: `warmupexponentialdecay` (decay rate 1 would be this) is built
    without its optimizer (a TypeError), `plateau` passes ReduceLROnPlateau the `verbose` that torch
    2.13 no longer takes (a TypeError), and no `scheduling` at all is a ConfigurationError. The
    config names `warmupinversesquareroot`; this replaces it."""

    def __init__(self, optimizer, peak: float, warmup: int):
        super().__init__(optimizer)
        self.peak, self.warmup = peak, max(1, warmup)

    def _compute_rate(self) -> float:
        return self.peak * min(1.0, (self._step + 1) / self.warmup)


class StopRule:
    """Our train stage's rule on Joey's validations (train.module's PlateauStep and
    EarlyStoppingAfter): from validation `start` on, one whose loss does not beat the best counted
    one by min_delta multiplies the rate by `decay`, and `patience` of them in a row end the run;
    every validation's (update, loss) is kept."""

    def __init__(self, trainer: TrainManager, scheduler: WarmupConstant, rule: dict):
        self.trainer, self.scheduler, self.rule = trainer, scheduler, rule
        self.best, self.wait, self.curve = math.inf, 0, []

    def __call__(self, valid_scores: dict) -> None:
        loss, r = float(valid_scores["loss"]), self.rule
        self.curve.append([self.trainer.stats.steps, round(loss, 6)])
        if len(self.curve) < r["start"]:
            return
        if loss < self.best - r["min_delta"]:
            self.best, self.wait = loss, 0
            return
        self.wait += 1
        self.scheduler.peak *= r["decay"]
        if self.wait >= r["patience"]:
            # Joey's loop ends after this validation, as at max_updates
            self.trainer.stats.is_max_update = True


def validate(trainer: TrainManager, valid_data, scoring, rule: StopRule) -> None:
    """Joey's validation as our train stage's: the loss per target token over the dev set (no
    search), the best checkpoint kept (Joey's own saving), then the stop rule."""
    scores = predict(
        model=trainer.model,
        data=valid_data,
        device=trainer.device,
        n_gpu=0,
        compute_loss=True,
        normalization="tokens",
        args=scoring,
        autocast=trainer.autocast,
    )[0]
    if trainer.stats.is_best(scores["loss"]):
        trainer.stats.best_ckpt_score, trainer.stats.best_ckpt_iter = (
            scores["loss"],
            trainer.stats.steps,
        )
        trainer._save_checkpoint(True, scores["loss"])
    rule(scores)
    trainer.model.train()


def timed_training(trainer: TrainManager, train_data, dev_data) -> dict:
    """train_and_validate with clocks (wall: perf_counter, CPU: process_time) at every batch's start
    and every optimizer step's end, and its tokens."""
    clock = {k: [] for k in ("starts", "ends", "cpu_starts", "cpu_ends", "tokens")}
    step = trainer._train_step

    def clocked(batch):
        clock["starts"].append(time.perf_counter())
        clock["cpu_starts"].append(time.process_time())
        clock["tokens"].append(int(batch.ntokens))  # target tokens, </s> in, padding out
        return step(batch)

    def stepped(*_):
        clock["ends"].append(time.perf_counter())
        clock["cpu_ends"].append(time.process_time())

    trainer._train_step = clocked
    trainer.optimizer.register_step_post_hook(stepped)
    trainer.train_and_validate(train_data=train_data, valid_data=dev_data)
    return clock


def greedy(model, data, batch_size: int, max_len_ratio: float, source_eos: bool = True) -> dict:
    """Joey's search() with beam 1 over data in order, batch_size sentences a batch, at most
    ceil(ratio × source tokens) + 10 steps (the longest source of the batch; its </s>, where Joey
    adds one, not counted); timed calls only."""
    model.eval()
    batches = data.make_iter(
        batch_size=batch_size,
        batch_type="sentence",
        shuffle=False,
        eos_index=model.eos_index,
        pad_index=model.pad_index,
    )
    seconds, hyps = 0.0, {}
    for batch in batches:
        batch.sort_by_src_length()  # Joey's packed RNN encoder needs it (predict() does the same)
        steps = math.ceil(max_len_ratio * (int(batch.src_length.max()) - int(source_eos))) + 10
        t0 = time.perf_counter()
        output, _, _ = search(
            model=model,
            batch=batch,
            max_output_length=steps,
            beam_size=1,
            beam_alpha=-1,
            # ours never emits <unk> either
            n_best=1,
            return_prob="none",
            generate_unk=False,
        )
        seconds += time.perf_counter() - t0
        words = model.trg_vocab.arrays_to_sentences(arrays=output, cut_at_eos=True)
        for i, sentence in zip(batch.indices.tolist(), words):  # indices were sorted with the batch
            hyps[i] = [w for w in sentence if w != model.trg_vocab._itos[model.eos_index]]
    return {
        "seconds": seconds,
        "sentences": len(hyps),
        "hypotheses": [hyps[i] for i in sorted(hyps)],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument(
        "--warmup-steps", type=int, required=True, help="linear learning-rate warm-up (updates)"
    )
    ap.add_argument("--decode-batch", type=int, default=64)
    ap.add_argument("--max-len-ratio", type=float, default=2.0)
    ap.add_argument(
        "--stop-rule",
        type=json.loads,
        default=None,
        help="our early stopping on Joey's validations, "
        'JSON {"start", "min_delta", "decay", "patience"}; then the best checkpoint is scored',
    )
    ap.add_argument(
        "--no-source-eos", action="store_true", help="sources without Joey's </s> (ours have none)"
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    fix_one_way_encoder()
    if args.no_source_eos:
        drop_source_eos()
    cfg = load_config(args.config)
    # and its log, as `python -m joeynmt train` does
    make_model_dir(Path(cfg["model_dir"]), overwrite=True)
    get_logger("", log_file=str(Path(cfg["model_dir"]) / "train.log"))
    torch.manual_seed(cfg["training"]["random_seed"])  # Joey seeds only after building the model
    run = parse_global_args(cfg, rank=0, mode="train")
    model, train_data, dev_data, _ = prepare(run, rank=0, mode="train")
    trainer = TrainManager(
        model=model,
        model_dir=run.model_dir,
        device=run.device,
        n_gpu=run.n_gpu,
        rank=0,
        num_workers=run.num_workers,
        autocast=run.autocast,
        seed=run.seed,
        train_args=run.train,
        dev_args=set_validation_args(run.test),
    )
    trainer.scheduler = WarmupConstant(
        trainer.optimizer, run.train.learning_rate, args.warmup_steps
    )
    trainer.scheduler_step_at = "step"
    trainer.scheduler.step(-1)  # the first update's rate, as Joey sets it after each update
    # "ref": scores the references, no search; without return_attention Joey's Transformer fails
    # (attention None)
    scoring = set_validation_args(run.test)._replace(
        return_prob="ref",
        return_attention=True,
        batch_size=args.decode_batch,
        batch_type="sentence",
    )
    rule = None
    if args.stop_rule is not None:
        rule = StopRule(trainer, trainer.scheduler, args.stop_rule)
        trainer._validate = lambda valid_data: validate(trainer, valid_data, scoring, rule)
    clock = timed_training(trainer, train_data, dev_data)
    if rule is not None:  # the best validation's weights, as our best.ckpt
        best = torch.load(
            Path(cfg["model_dir"]) / "best.ckpt", map_location="cpu", weights_only=False
        )
        model.load_state_dict(best["model_state"])
    scores = predict(
        model=model,
        data=dev_data,
        device=run.device,
        n_gpu=0,
        compute_loss=True,
        normalization="tokens",
        args=scoring,
        autocast=run.autocast,
    )[0]
    decoded = greedy(model, dev_data, args.decode_batch, args.max_len_ratio, not args.no_source_eos)
    figures = {
        "updates": trainer.stats.steps,
        **clock,
        "val_loss": scores["loss"],
        "params": sum(p.numel() for p in model.parameters()),
        "vocab": len(model.trg_vocab),
        "greedy": decoded,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if rule is not None:
        figures["val_curve"] = rule.curve
    args.out.write_text(json.dumps(figures), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
