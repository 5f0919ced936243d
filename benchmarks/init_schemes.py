"""Weight initialisation of the recurrent translate families: PyTorch's defaults (what they train with) against their
papers' schemes and Xavier-uniform (Joey NMT's default), same data, batches and recipe, validation loss after the same
updates -> the section `init` of reports/benchmarks.md (and benchmarks.json).

    python benchmarks/init_schemes.py                      # bahdanau, 1,000 updates, seeds 0 and 1, about 20 min
    python benchmarks/init_schemes.py --families bahdanau,luong_general --updates 500 --seeds 1

Each run is benchmarks/peers.py's side "ours" (the train stage's Trainer settings and tuned recipe, one thread), with
the weights redrawn by a scheme right after the model is built; embeddings keep N(0, 1) unless a scheme says so.
"""

from __future__ import annotations

import argparse
import datetime
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


SCHEMES = {"PyTorch defaults (ours)": None, "Xavier-uniform (Joey NMT)": xavier}
PAPER = {"bahdanau": ("Bahdanau et al. App. B.2", bahdanau_paper), "luong_dot": ("Luong et al. §4.1", luong_paper),
         "luong_general": ("Luong et al. §4.1", luong_paper), "luong_concat": ("Luong et al. §4.1", luong_paper)}


def run(family: str, scheme, seed: int, data: Path, updates: int) -> float:
    """Validation loss per target token after `updates` updates of family from seed, weights drawn by scheme."""
    from attention_lab.core.task import get_task
    from benchmarks.peers import fit, our_config, val_loss

    cfg = our_config(family, data)
    cfg.seed = seed
    pl.seed_everything(seed, workers=True, verbose=False)
    module, dm = get_task("translate").build(cfg, seed)
    if scheme is not None:
        scheme(module.model)
    fit(module, dm, cfg, updates)
    return val_loss(module, dm.splits["valid"], cfg.evaluate.batch_size)


def render(f: dict) -> list[str]:
    rows = []
    for r in f["rows"]:
        base = statistics.mean(f["rows_by"][r["family"]]["PyTorch defaults (ours)"])
        mean = statistics.mean(r["losses"])
        rows.append([f"`{r['family']}`", r["scheme"], f"{mean:.3f}", ", ".join(f"{x:.3f}" for x in r["losses"]),
                     f"{mean / base:.2f}×"])
    return ["## Initialisation: PyTorch's defaults against the papers' schemes", "",
            (f"Produced by `{f['command']}` on {f['date']} ({f['cpu']}, one thread, load average before "
            f"{f['load_before']:.2f}, {f['seconds']:.0f} s). Each family trains {f['updates']} updates from seeds "
            f"{', '.join(map(str, f['seeds']))} with the train stage's Trainer and its tuned recipe, on the same "
            "batches in every row; only how the weights are drawn differs (embeddings keep N(0, 1)). The loss is "
            "cross-entropy per target token over the validation split."), "",
            *table(["family", "weights drawn by", "val loss (mean)", "per seed", "against PyTorch's"], rows), "",
            verdict(f["rows_by"]), ""]


def verdict(rows_by: dict) -> str:
    """Which schemes beat PyTorch's defaults (mean validation loss), family by family, from the run's figures."""
    better = [f"{scheme} on `{family}`" for family, by in rows_by.items() for scheme, losses in by.items()
              if statistics.mean(losses) < statistics.mean(by["PyTorch defaults (ours)"])]
    if not better:
        return ("The families train with PyTorch's defaults: under this lab's recipe (Adam; the papers trained with "
                "SGD or Adadelta) every other scheme above ended these updates at a higher validation loss.")
    return f"Lower validation loss than PyTorch's defaults: {'; '.join(better)}."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="bahdanau", help=f"comma-separated, of {sorted(PAPER)}")
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0, 1, ...")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="folder of prepared/ and tokenized/")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = ap.parse_args(argv)
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
    write_marked_section(args.out, SECTION, render(figures), figures)
    print(f"wrote the section {SECTION} of {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
