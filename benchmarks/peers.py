"""Our translate families beside Joey NMT 2.3's: training tokens/s, validation loss after the same updates and greedy
decoding speed, on the same data, vocabulary and batches -> the section `peers` of reports/benchmarks.md and .json.

    python benchmarks/peers.py                 # 1,000 updates a model, seeds 0 and 1, about 30 minutes
    python benchmarks/peers.py --quick         # 20 updates, one seed: checks the run, prints the section
    python benchmarks/peers.py --updates 500 --work /tmp/peers    # keep Joey's files, configs and logs
    python benchmarks/peers.py --rerender      # the section again from reports/benchmarks.json's figures

Joey NMT lives in its own virtualenv, .venv-peers at the repository root, which this script creates when missing:
`python -m venv .venv-peers`, then `.venv-peers/bin/pip install torch==2.13.0` first (joeynmt asks torch>=1.12, which
pip would otherwise meet with a CUDA build), then `joeynmt==2.3.0 importlib_metadata` (joeynmt imports the latter
without declaring it). Our data comes from the prepare and tokenize stages (run here when data/ lacks them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/peers.py` finds the package

from attention_lab.infer.tokenization import PAD
from benchmarks.common import ROOT, cpu_model, write_marked_section
from benchmarks.peers_report import render

SECTION = "peers"  # its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
# our family -> Joey's model: its RNN as Bahdanau's nearest (GRU, bridge; sized to ours), its RNN as Luong's global
# model (the same architecture as ours: joey.luong_config), its Transformer
PAIRS = {"bahdanau": "rnn", "luong_concat": "rnn_luong", "transformer": "transformer"}
QUALITY = 0.02  # "equal quality": ours' validation loss at most 2% above Joey's
REPORT = ROOT / "reports" / "benchmarks.md"


def ensure_data(data: Path) -> None:
    """data/{prepared,tokenized}/translate from the project's prepare and tokenize stages, when missing."""
    import subprocess

    from benchmarks.settings import stage_command

    if (data / "tokenized" / "translate" / "tokenizer.json").is_file():
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for stage in ("prepare", "tokenizer"):
        done = subprocess.run(stage_command(stage, "translate", data), check=False, cwd=ROOT, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{stage}@translate: {done.stderr.strip()[-1000:]}")


def our_config(family: str, data: Path):
    """params.yaml's config of a translate family (conf/, tuned/ merged), reading data under data, seed 0."""
    from attention_lab.core.config import load_config
    from benchmarks.train_speed import with_paths

    return with_paths(load_config(family=family, task="translate", root=ROOT), "translate", ROOT / "models", data)


def joey_model(family: str, dims: dict, vocab: int, params: int) -> tuple[dict, dict]:
    """(Joey's model config at our family's sizes, what was chosen for it): the RNN's decoder size keeps its
    parameters within joey.RNN_TOLERANCE of ours."""
    from benchmarks import joey

    if PAIRS[family] == "transformer":
        return joey.transformer_config(dims), {}
    if PAIRS[family] == "rnn_luong":
        return joey.luong_config(dims), {}
    sizes = vocab, dims["emb_dim"], dims["enc_hidden_dim"]
    hidden = joey.rnn_hidden(*sizes, dims["dec_hidden_dim"], params)
    return joey.rnn_config(dims, hidden), {"joey_dec_hidden": hidden,
                                           "joey_params_at_ours": joey.rnn_params(*sizes, dims["dec_hidden_dim"])}


def one_seed(family: str, seed: int, data: Path, work: Path, python: Path, sizes: dict) -> dict:
    """One family and Joey's model of the same size, from seed `seed`, on the same batches: the figures of both."""
    from omegaconf import OmegaConf

    from attention_lab.core.task import get_task
    from benchmarks import joey

    cfg = our_config(family, data)
    cfg.seed = seed
    sizes = {**sizes, "decode_batch": cfg.evaluate.batch_size}  # a greedy call's and a validation batch's sentences
    pl.seed_everything(seed, workers=True, verbose=False)  # as the train stage does before building
    module, dm = get_task("translate").build(cfg, seed)
    dims = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "_target_"}
    reverse = PAIRS[family] == "rnn_luong" and dims["reverse_source"]  # Joey's encoder reads what ours reads
    exported = joey.export(dm, sizes["updates"], work / "data", reverse_source=reverse)
    vocab = dm.tok.get_vocab_size()
    model, chosen = joey_model(family, dims, vocab, sum(p.numel() for p in module.model.parameters()))
    ours = train_ours(module, dm, cfg, sizes)
    train = OmegaConf.to_container(cfg.train, resolve=True)
    theirs = joey.run(python, joey.config(model, work / "data", work / family, train, sizes, seed),
                      work / family, cfg.train.warmup_steps, cfg.evaluate.max_len_ratio, sizes)
    if theirs["vocab"] != vocab:
        raise RuntimeError(f"Joey's vocabulary has {theirs['vocab']} entries, ours {vocab}")
    refs = [r["tgt"] for r in dm.splits["valid"]]
    ids = [[dm.tok.token_to_id(p) for p in h] for h in theirs["greedy"]["hypotheses"]]
    ours["bleu"], ours["greedy"] = bleu(dm.tok, ours["greedy"]["hypotheses"], refs), outputs(ours["greedy"])
    theirs = {**summarise(theirs, sizes["skip"]), "bleu": bleu(dm.tok, ids, refs), "params": theirs["params"],
              "val_loss": theirs["val_loss"], "greedy": outputs(theirs["greedy"]), "torch": theirs["torch"],
              "threads": theirs["threads"]}
    return {"family": family, "joey_model": PAIRS[family], "dims": dims, "vocab": vocab, **exported, **chosen,
            "batch_size": cfg.train.batch_size, "lr": cfg.train.lr, "warmup_steps": cfg.train.warmup_steps,
            "clip": cfg.train.clip, "max_len_ratio": cfg.evaluate.max_len_ratio,
            "decode_batch": sizes["decode_batch"], "ours": ours, "joey": theirs}


def mean_side(sides: list[dict]) -> dict:
    """One side's figures over seeds: numbers (also the greedy run's) averaged, the rest from the first seed; the
    validation losses of every seed under `val_losses`."""
    def mean(key, rows):
        values = [r[key] for r in rows]
        return sum(values) / len(values) if isinstance(values[0], float) else values[0]

    first = sides[0]
    return {**{k: mean(k, sides) for k in first if k != "greedy"},
            "greedy": {k: mean(k, [s["greedy"] for s in sides]) for k in first["greedy"]},
            "val_losses": [s["val_loss"] for s in sides]}


def pair(family: str, seeds: list[int], data: Path, work: Path, python: Path, sizes: dict) -> dict:
    """one_seed for every seed, ours and Joey's in turn; each side's figures averaged over them, and the verdict."""
    runs = [one_seed(family, seed, data, work / f"seed{seed}", python, sizes) for seed in seeds]
    ours, theirs = mean_side([r["ours"] for r in runs]), mean_side([r["joey"] for r in runs])
    return {**runs[0], "seeds": seeds, "same_batches": all(r["same_batches"] for r in runs),
            "ours": ours, "joey": theirs, **verdict(ours, theirs)}


class Clock(pl.Callback):
    """perf_counter at every training batch's start and end, and the batch's target tokens."""

    def __init__(self):
        self.starts, self.ends, self.cpu_starts, self.cpu_ends, self.tokens = [], [], [], [], []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.starts.append(time.perf_counter())
        self.cpu_starts.append(time.process_time())
        self.tokens.append(int((batch["tgt_out"] != PAD).sum()))  # </s> in, padding out, as Joey counts

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):  # after the optimizer step
        self.ends.append(time.perf_counter())
        self.cpu_ends.append(time.process_time())


def fit(module, dm, cfg, updates: int) -> dict:
    """The train stage's Trainer settings (conf/trainer, gradient clipping) for `updates` updates: no validation,
    logger, checkpoint or progress bar; the clock's figures."""
    import warnings

    from omegaconf import OmegaConf

    clock = Clock()
    options = {k: v for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items()
               if k not in ("log_every_n_steps", "enable_model_summary")}
    trainer = pl.Trainer(**options, max_steps=updates, max_epochs=-1, gradient_clip_val=cfg.train.clip,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
                         use_distributed_sampler=False, callbacks=[clock])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "few workers", "no val_dataloader"
        trainer.fit(module, datamodule=dm)
    return {k: getattr(clock, k) for k in ("starts", "ends", "cpu_starts", "cpu_ends", "tokens")}


def val_loss(module, rows: list[dict], batch: int) -> float:
    """Cross-entropy per target token (</s> in, padding out) over rows, teacher-forced, in eval mode."""
    from attention_lab.translate.data.batches import collate

    module.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            loss, n = module.loss(collate(rows[i:i + batch]))
            total, count = total + float(loss) * n, count + n
    return total / count


def greedy(model, rows: list[dict], ratio: float, batch: int) -> dict:
    """Our greedy search (translate_batch, beam 1) over rows in order, batch sentences a call; timed calls only."""
    from attention_lab.translate.search import translate_batch

    seconds, hyps = 0.0, []
    for i in range(0, len(rows), batch):
        t0 = time.perf_counter()
        out = translate_batch(model, [r["src_ids"] for r in rows[i:i + batch]], beam=1, max_len_ratio=ratio)
        seconds += time.perf_counter() - t0
        hyps += [h.tokens for h in out]
    return {"seconds": seconds, "sentences": len(hyps), "hypotheses": hyps}


def train_ours(module, dm, cfg, sizes: dict) -> dict:
    """Our side: fit, then validation loss and greedy decoding of the valid split."""
    clock = fit(module, dm, cfg, sizes["updates"])
    return {**summarise(clock, sizes["skip"]), "params": sum(p.numel() for p in module.model.parameters()),
            "val_loss": val_loss(module, dm.splits["valid"], sizes["decode_batch"]),
            "greedy": greedy(module.model, dm.splits["valid"], cfg.evaluate.max_len_ratio, sizes["decode_batch"]),
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def outputs(greedy: dict) -> dict:
    """A greedy run's seconds, sentences, sentences/s and mean output tokens (</s> not counted), hypotheses left out."""
    hyps = greedy["hypotheses"]
    return {"seconds": greedy["seconds"], "sentences": len(hyps), "sentences_per_s": len(hyps) / greedy["seconds"],
            "mean_tokens": sum(map(len, hyps)) / len(hyps)}


def bleu(tok, hyps: list[list[int]], refs: list[str]) -> float:
    """sacreBLEU corpus BLEU of token-id hypotheses, detokenized by our tokenizer, against the references."""
    from sacrebleu.metrics import BLEU

    from attention_lab.infer.tokenization import decode

    return BLEU().corpus_score(decode(tok, hyps), [refs]).score


def summarise(side: dict, skip: int) -> dict:
    """Wall and CPU ms per update and target tokens/s from update `skip` to the last, from per-update clocks (wall:
    perf_counter, CPU: the process's process_time) and tokens."""
    tokens, n = side["tokens"], len(side["tokens"])
    if not all(len(side[k]) == n for k in ("starts", "ends", "cpu_starts", "cpu_ends")) or n <= skip:
        raise RuntimeError(f"clocks of {[len(side[k]) for k in ('starts', 'ends', 'cpu_starts', 'cpu_ends')]} "
                           f"updates and {n} token counts: need {n} each, more than {skip}")
    wall, cpu = side["ends"][-1] - side["starts"][skip], side["cpu_ends"][-1] - side["cpu_starts"][skip]
    return {"updates": n, "timed_updates": n - skip, "ms_per_update": 1000 * wall / (n - skip),
            "cpu_ms_per_update": 1000 * cpu / (n - skip), "tokens_per_s": sum(tokens[skip:]) / wall,
            "tokens_per_cpu_s": sum(tokens[skip:]) / cpu, "train_tokens": sum(tokens)}


def verdict(ours: dict, theirs: dict) -> dict:
    """CPU time per update ours / Joey's (and wall time's), and whether ours is at least as fast at equal quality
    (QUALITY). CPU time: one thread each, so it is the work of an update, whatever else shares the cores."""
    ratio = ours["cpu_ms_per_update"] / theirs["cpu_ms_per_update"]
    equal = ours["val_loss"] <= (1 + QUALITY) * theirs["val_loss"]
    return {"time_ratio": ratio, "wall_ratio": ours["ms_per_update"] / theirs["ms_per_update"],
            "equal_quality": equal, "met": ratio <= 1 and equal}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=1000, help="training updates of every model")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0, 1, ... of every model (figures: their mean)")
    ap.add_argument("--skip", type=int, default=20, help="first updates left out of the timing (warm-up)")
    ap.add_argument("--families", default=",".join(PAIRS), help=f"comma-separated subset of {list(PAIRS)}")
    ap.add_argument("--quick", action="store_true", help="20 updates, one seed: prints the section, writes no "
                    "report unless --out is given")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="folder of prepared/ and tokenized/")
    ap.add_argument("--work", type=Path, default=None, help="keep Joey's data, configs and logs here")
    ap.add_argument("--venv", type=Path, default=None, help="Joey NMT's virtualenv (default .venv-peers)")
    ap.add_argument("--out", type=Path, default=None, help="report to write (default reports/benchmarks.md)")
    ap.add_argument("--rerender", action="store_true", help="write the section again from --out's .json figures")
    args = ap.parse_args(argv)
    if args.rerender:
        out = args.out or REPORT
        figures = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(out, SECTION, render(figures), figures)
        return 0
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if unknown := sorted(set(families) - set(PAIRS)):
        ap.error(f"unknown families {unknown}; choose from {', '.join(PAIRS)}")
    updates = 20 if args.quick else args.updates
    sizes = {"updates": updates, "skip": min(args.skip, updates // 4), "timeout": 3600}
    seeds = list(range(1 if args.quick else args.seeds))
    out = args.out or (None if args.quick else REPORT)
    from benchmarks import joey

    python = joey.ensure_venv(args.venv or joey.VENV)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no "GPU available: False" per fit
    ensure_data(args.data)
    torch.set_num_threads(1)
    load, t0 = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        work = args.work or Path(tmp)
        rows = [pair(f, seeds, args.data, work / f, python, sizes) for f in families]
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    figures = {"command": f"python benchmarks/peers.py {argv_text}".strip(), "date": datetime.date.today().isoformat(),
               "cpu": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(), "sizes": sizes,
               "quality_tolerance": QUALITY, "load_before": load, "load_after": os.getloadavg(),
               "seconds": time.perf_counter() - t0, "torch": torch.__version__, "joeynmt": joey.JOEY.split("==")[1],
               "rows": rows, "quick": args.quick}
    lines = render(figures)
    if out is None:
        print("\n".join(lines))
    else:
        write_marked_section(out, SECTION, lines, figures)
        print(f"wrote the section {SECTION} of {out} and its .json in {figures['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
