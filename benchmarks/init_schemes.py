"""Weight initialisation of the attentional RNN translate families: PyTorch's defaults, Xavier-uniform (Joey NMT's
default) and each family's paper's scheme, same data, batches and recipe, validation loss after the same updates ->
the section `init` of reports/benchmarks.md (and benchmarks.json), with the scheme each family trains with marked.

    python benchmarks/init_schemes.py                      # bahdanau, 1,000 updates, seeds 0 and 1, about 20 min
    python benchmarks/init_schemes.py --families bahdanau,luong_concat --updates 500 --seeds 1
    python benchmarks/init_schemes.py --rerender           # the section again from benchmarks.json's figures

Each run is benchmarks/peers.py's side "ours" (the train stage's Trainer settings and tuned recipe, one thread): the
model is built with PyTorch's defaults (`model.init_range: null`), then a scheme redraws its weights; embeddings keep
N(0, 1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/init_schemes.py` finds the package

from benchmarks.common import ROOT, cpu_model, table, write_marked_section

SECTION = "init"


def xavier(model: nn.Module) -> None:
    """Xavier-uniform matrices, zero vectors, embeddings kept (Joey NMT's default `initializer: xavier_uniform`)."""
    for name, p in model.named_parameters():
        if "embed" not in name:
            nn.init.xavier_uniform_(p) if p.dim() > 1 else nn.init.zeros_(p)


def bahdanau_paper(model: nn.Module) -> None:
    """Bahdanau et al. 2015, App. B.2: recurrent matrices orthogonal (per gate), W_a and U_a N(0, 0.001²), v_a and
    biases zero, every other matrix N(0, 0.01²); embeddings kept (at N(0, 0.01²) they starve the GRUs' inputs)."""
    for name, p in model.named_parameters():
        if "embed" in name:
            continue
        if p.dim() == 1 or name.startswith("attention.v"):
            nn.init.zeros_(p)
        elif "weight_hh" in name:
            for gate in p.data.chunk(3, 0):
                nn.init.orthogonal_(gate)
        elif name.startswith(("attention.W", "attention.U")):
            nn.init.normal_(p, std=0.001)
        else:
            nn.init.normal_(p, std=0.01)


def luong_paper(model: nn.Module) -> None:
    """Luong et al. 2015, §4.1: every parameter uniform in [-0.1, 0.1]; embeddings kept."""
    for name, p in model.named_parameters():
        if "embed" not in name:
            nn.init.uniform_(p, -0.1, 0.1)


DEFAULTS = "PyTorch defaults"
SCHEMES = {DEFAULTS: None, "Xavier-uniform (Joey NMT)": xavier}
PAPER = {"bahdanau": ("Bahdanau et al. App. B.2", bahdanau_paper), "luong_dot": ("Luong et al. §4.1", luong_paper),
         "luong_general": ("Luong et al. §4.1", luong_paper), "luong_concat": ("Luong et al. §4.1", luong_paper)}


def run(family: str, scheme, seed: int, data: Path, updates: int) -> float:
    """Validation loss per target token after `updates` updates of family from seed, weights drawn by scheme."""
    from attention_lab.core.task import get_task
    from benchmarks.peers import fit, our_config, val_loss

    cfg = our_config(family, data)
    cfg.seed = seed
    if "init_range" in cfg.model:  # the family's own scheme off: the schemes start from PyTorch's defaults
        cfg.model.init_range = None
    pl.seed_everything(seed, workers=True, verbose=False)
    module, dm = get_task("translate").build(cfg, seed)
    if scheme is not None:
        scheme(module.model)
    fit(module, dm, cfg, updates)
    return val_loss(module, dm.splits["valid"], cfg.evaluate.batch_size)


def own_scheme(family: str) -> str:
    """The scheme the family trains with: its paper's when its config sets model.init_range, else PyTorch's."""
    from attention_lab.core.config import load_config

    return PAPER[family][0] if load_config(family=family, task="translate", root=ROOT).model.get("init_range") \
        is not None else DEFAULTS


def render(f: dict, own: dict) -> list[str]:
    rows = []
    for r in f["rows"]:
        base = statistics.mean(f["rows_by"][r["family"]][DEFAULTS])
        mean = statistics.mean(r["losses"])
        rows.append([f"`{r['family']}`", r["scheme"], "✓" if own[r["family"]] == r["scheme"] else "", f"{mean:.3f}",
                     ", ".join(f"{x:.3f}" for x in r["losses"]), f"{mean / base:.2f}×"])
    return ["## Initialisation: PyTorch's defaults against the papers' schemes", "",
            (f"Produced by `{f['command']}` on {f['date']} ({f['cpu']}, one thread, load average before "
             f"{f['load_before']:.2f}, {f['seconds']:.0f} s). Each family trains {f['updates']} updates from seeds "
             f"{', '.join(map(str, f['seeds']))} with the train stage's Trainer and its tuned recipe, on the same "
             "batches in every row; only how the weights are drawn differs (embeddings keep N(0, 1)). The loss is "
             "cross-entropy per target token over the validation split; ✓ marks the scheme the family trains with "
             "(its conf/model file's `init_range`)."), "",
            *table(["family", "weights drawn by", "trains with", "val loss (mean)", "per seed",
                    "against PyTorch's defaults"], rows), "",
            verdict(f["rows_by"], own), ""]


def verdict(rows_by: dict, own: dict) -> str:
    """Whether each family trains with the scheme that ended the updates lowest, from the run's figures."""
    best = {family: min(by, key=lambda scheme: statistics.mean(by[scheme])) for family, by in rows_by.items()}
    lines = [f"`{family}`: {'its own scheme' if scheme == own[family] else f'not its own scheme ({own[family]})'}"
             f" ended lowest ({scheme})" for family, scheme in best.items()]
    return "Lowest validation loss after these updates: " + "; ".join(lines) + "."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="bahdanau", help=f"comma-separated, of {sorted(PAPER)}")
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0, 1, ...")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="folder of prepared/ and tokenized/")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    ap.add_argument("--rerender", action="store_true", help="write the section again from --out's .json figures")
    args = ap.parse_args(argv)
    if args.rerender:
        figures = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(args.out, SECTION, render(figures, {f: own_scheme(f) for f in figures["rows_by"]}),
                             figures)
        return 0
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if unknown := sorted(set(families) - set(PAPER)):
        ap.error(f"unknown families {unknown}; choose from {', '.join(sorted(PAPER))}")
    from benchmarks.peers import ensure_data

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    ensure_data(args.data)
    torch.set_num_threads(1)
    load, t0 = os.getloadavg()[0], time.perf_counter()
    seeds, rows, rows_by = list(range(args.seeds)), [], {}
    for family in families:
        name, paper = PAPER[family]
        for scheme_name, scheme in {**SCHEMES, name: paper}.items():
            losses = [run(family, scheme, seed, args.data, args.updates) for seed in seeds]
            rows.append({"family": family, "scheme": scheme_name, "losses": losses})
            rows_by.setdefault(family, {})[scheme_name] = losses
            print(f"{family} {scheme_name}: {losses}", file=sys.stderr, flush=True)
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    figures = {"command": f"python benchmarks/init_schemes.py {argv_text}".strip(),
               "date": datetime.date.today().isoformat(), "cpu": cpu_model(), "load_before": load,
               "seconds": time.perf_counter() - t0, "updates": args.updates, "seeds": seeds, "rows": rows,
               "rows_by": rows_by}
    write_marked_section(args.out, SECTION, render(figures, {f: own_scheme(f) for f in families}), figures)
    print(f"wrote the section {SECTION} of {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
