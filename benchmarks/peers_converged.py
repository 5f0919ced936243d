"""Our translate families beside Joey NMT 2.3's, each trained to early stopping on the same data,
batches and rule -> the section `peers_converged` of reports/benchmarks.md and .json.

    python benchmarks/peers_converged.py                       # bahdanau and transformer, seed 0
    (about 2 h on 2 cores) python benchmarks/peers_converged.py --families bahdanau --max-epochs 8
    --work /tmp/pc   # a shorter look python benchmarks/peers_converged.py --rerender            #
    the section again from reports/benchmarks.json python benchmarks/peers_converged.py --families
    bahdanau --joey-switch no_source_eos   # Joey once more, switched

Where Joey ends better, the differences are tried one at a time as ablations of our family
(params.yaml `translate.ablations` of it: `bahdanau_xavier` is Joey's initialisation), trained and
evaluated by the pipeline on every seed; the section reads their best validation losses from the
committed records (results/translate/). A difference that lives in Joey's pipeline rather than in
our model is tried on Joey's side instead (`--joey-switch`, JOEY_SWITCHES): Joey's model trains
again with it under the same rule, beside its figures of the last full run.

Ours is the train stage's seed-0 run as the committed study records it (tuned/<family>.yaml: its
best trial, trained on seed 0 with the family's tuned values, is the train stage's seed 0): the
validation loss of its best checkpoint and the update it stopped at. Joey's model of the same size
(benchmarks/peers.py picks it) trains on our batches in the order our Trainer draws them from seed
0, epoch after epoch, under our recipe and our stopping rule on its own validations
(benchmarks/joey_driver.py --stop-rule: the loss per target token over our validation split after
every epoch; from epoch train.min_epochs on, one that does not beat the best by train.min_delta
halves the rate, and train.patience of them in a row stop the run), then its best checkpoint is
scored as ours is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_lab.core.config import leaf_values
from attention_lab.core.machine import cpu_model
from attention_lab.core.params import ablations, read_params
from attention_lab.results import records
from benchmarks.common import ROOT, command, num, prepared, table, write_marked_section
from benchmarks.peers import (
    JOEY,
    NAMES,
    QUALITY,
    REPORT,
    VENV,
    ensure_venv,
    export,
    joey_config,
    joey_model,
    our_config,
    run_joey,
)

SECTION = "peers_converged"
# the two that Joey trains better per update (the peers section)
FAMILIES = ("bahdanau", "transformer")
# a switch of Joey's side -> (what it changes, joey_driver.py's arguments)
JOEY_SWITCHES = {
    "no_source_eos": ("sources without `</s>`, as ours read them", ["--no-source-eos"])
}


def ours(family: str) -> dict:
    """Our seed-0 run to early stopping, from the committed study: its best validation loss and
    updates."""
    study = yaml.safe_load((ROOT / "tuned" / f"{family}.yaml").read_text(encoding="utf-8"))
    best = next(t for t in study["trials"] if t["trial"] == study["study"]["best_trial"])
    if best["state"] != "complete" or best["stopped_by"] != "early stopping":
        raise RuntimeError(
            f"tuned/{family}.yaml: trial {best['trial']} {best['state']}, {best['stopped_by']}: not"
            " a run to early stopping"
        )
    return {
        "val_loss": best["value"],
        "updates": best["updates"],
        "stopped_by": best["stopped_by"],
        "study": study["study"]["name"],
    }


def best_losses(name: str) -> list[float] | None:
    """Each seed's best validation loss (seed order) in translate's committed <name>, or None."""
    if not records.exists_at(ROOT, "translate", name):
        return None
    curves = records.read_at(ROOT, "translate", name)["val_curves"]
    return [min(loss for _, loss in curves[seed]["curve"]) for seed in sorted(curves, key=int)]


def probes(family: str) -> list[dict]:
    """The family and its ablations (params.yaml `translate.ablations`, one of Joey's choices each)
    with their seeds' best validation losses as the committed metrics hold them; [] when the
    family's metrics are missing. An ablation on another corpus is no choice of Joey's (Joey trains
    on our data): left out."""
    entries = ablations(read_params(ROOT), "translate").items()
    names = {family: {}} | {
        name: entry["set"]
        for name, entry in entries
        if entry["of"] == family and "corpus" not in entry
    }
    rows = [
        {"name": name, "set": changed, "losses": best_losses(name)}
        for name, changed in names.items()
    ]
    return [r for r in rows if r["losses"]] if rows[0]["losses"] else []


def joey(
    family: str, data: Path, work: Path, python: Path, max_epochs: int, extra: list[str] = ()
) -> dict:
    """Joey's model at our family's size, trained on our seed-0 batches to our stopping rule: its
    figures."""
    import lightning.pytorch as pl
    from omegaconf import OmegaConf

    from attention_lab.core.task import get_task

    cfg = our_config(family, data)
    pl.seed_everything(0, workers=True, verbose=False)
    module, dm = get_task("translate").build(cfg, 0)
    per_epoch = len(dm.train_dataloader().batch_sampler)
    epochs = min(max_epochs, cfg.train.max_epochs)
    exported = export(dm, epochs * per_epoch, work / "data")
    dims = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "_target_"}
    model, chosen = joey_model(
        family, dims, dm.tok.get_vocab_size(), sum(p.numel() for p in module.model.parameters())
    )
    t = cfg.train
    sizes = {
        "updates": epochs * per_epoch,
        "decode_batch": cfg.evaluate.batch_size,
        "timeout": 6 * 3600,
    }
    config = joey_config(
        model, work / "data", work / family, OmegaConf.to_container(t, resolve=True), sizes, 0
    )
    config["training"].update(validation_freq=per_epoch, logging_freq=per_epoch)
    rule = {
        "start": t.min_epochs,
        "min_delta": t.min_delta,
        "decay": t.decay,
        "patience": t.patience,
    }
    figures = run_joey(
        python,
        config,
        work / family,
        t.warmup_steps,
        cfg.evaluate.max_len_ratio,
        sizes,
        ["--stop-rule", json.dumps(rule), *extra],
    )
    curve = figures["val_curve"]
    best = min(curve, key=lambda point: point[1])
    return {
        "val_loss": figures["val_loss"],
        "best_update": best[0],
        "updates": figures["updates"],
        "stopped_by": "early stopping" if figures["updates"] < sizes["updates"] else "update cap",
        "curve": curve,
        "params": figures["params"],
        "per_epoch": per_epoch,
        "cap_epochs": epochs,
        "rule": rule,
        "lr": t.lr,
        "warmup_steps": t.warmup_steps,
        "batch_size": t.batch_size,
        "same_batches": exported["same_batches"],
        **chosen,
    }


def explained(row: dict, tolerance: float) -> list[str]:
    """Where Joey ends better: our family beside its ablations toward Joey (probes(): seed 0 against
    Joey's seed-0 run, and every seed), and Joey's model with each switch of JOEY_SWITCHES run
    (`--joey-switch`)."""
    family, joey_loss, ours_loss = row["family"], row["joey"]["val_loss"], row["ours"]["val_loss"]
    rows, lines = probes(family), []
    if len(rows) > 1:
        closes = [r["name"] for r in rows[1:] if r["losses"][0] <= (1 + tolerance) * joey_loss]
        found = (
            f"seed 0 of {', '.join(f'`{n}`' for n in closes)} ends at most {100 * tolerance:.0f}%"
            " above Joey's: that difference explains the gap"
            if closes
            else (
                f"none ends within {100 * tolerance:.0f}% of Joey's on seed 0: these do not explain"
                " the gap"
            )
        )
        cells = [
            [
                f"`{r['name']}`",
                ", ".join(f"`{k}: {v}`" for k, v in leaf_values(r["set"]).items()) or "as trained",
                num(r["losses"][0], 3),
                num(sum(r["losses"]) / len(r["losses"]), 3),
                str(len(r["losses"])),
            ]
            for r in rows
        ]
        header = ["ours", "set", "seed 0", "mean over seeds", "seeds"]
        lines += [
            "",
            (
                f"  Joey's choices tried one at a time on ours (the ablations of `{family}`, every"
                " seed trained and evaluated by the pipeline; best validation loss per token, from"
                f" results/translate/): {found}."
            ),
            "",
            *("  " + line for line in table(header, cells)),
            "",
            (
                f"  `{family}` keeps its paper's version; each ablation's effect on the test set is"
                " a row of the claims ledger ([claims.md](claims.md))."
            ),
        ]
    for name, j in row.get("joey_switches", {}).items():
        gap = j["val_loss"] >= ours_loss / (1 + tolerance)
        lines += [
            "",
            f"  Joey's model with {JOEY_SWITCHES[name][0]} (`{j['command']}`, {j['date']}): best"
            f" validation loss {j['val_loss']:.3f} after {j['updates']:,} updates"
            f" ({j['stopped_by']}), against {joey_loss:.3f} as Joey runs it and ours"
            f" {ours_loss:.3f}: "
            + (
                f"within {100 * tolerance:.0f}% of ours, so this difference explains the gap."
                if gap
                else (
                    "still better than ours, so this difference does not explain the gap on its"
                    " own."
                )
            ),
        ]
    return lines or [
        (
            f"  No ablation of `{family}` toward Joey's model has metrics yet (params.yaml "
            "`translate.ablations`), and no switch of Joey's was run (`--joey-switch`)."
        )
    ]


def render(f: dict) -> list[str]:
    rows, lines = [], []
    for r in f["rows"]:
        o, j = r["ours"], r["joey"]
        rows += [
            [f"ours `{r['family']}`", num(o["val_loss"], 3), f"{o['updates']:,}", o["stopped_by"]],
            [
                f"Joey NMT {NAMES[r['family']]}",
                num(j["val_loss"], 3),
                f"{j['updates']:,}",
                j["stopped_by"],
            ],
        ]
        ratio = o["val_loss"] / j["val_loss"]
        verdict = (
            "ours ends at least as good"
            if ratio <= 1
            else f"ours ends within {100 * f['quality_tolerance']:.0f}%"
            if ratio <= 1 + f["quality_tolerance"]
            else "**Joey ends better**"
        )
        lines.append(
            f"- {NAMES[r['family']]}: validation loss ours / Joey's **{ratio:.2f}** ({verdict});"
            " Joey's validations (update, loss):"
            f" {', '.join(f'{u}: {v:.3f}' for u, v in j['curve'])}."
        )
        if ratio > 1 + f["quality_tolerance"]:
            lines += explained(r, f["quality_tolerance"])
    r0 = f["rows"][0]["joey"]
    head = [
        "## Side by side with a peer, to early stopping",
        "",
        (
            f"Produced by `{f['command']}` (`benchmarks/peers_converged.py`) on {f['date']}; every"
            " figure below comes from that run or the committed studies."
        ),
        "",
        (
            "Each model trains until our stopping rule ends it: ours is the train stage's seed-0"
            " run as its committed study records it (`tuned/<family>.yaml`, the best trial); Joey"
            f" NMT {f['joeynmt']}'s model of the same size (the peers section above says how it is"
            f" sized) trains on our seed-0 batches in our Trainer's order, {r0['per_epoch']}"
            " updates an epoch, under our recipe (Adam, warm-up then the plateau schedule) and our"
            " rule on its own validations: after every epoch the loss per target token over the"
            f" validation split; from validation {r0['rule']['start']} on, one that does not beat"
            f" the best by {r0['rule']['min_delta']} multiplies the rate by {r0['rule']['decay']},"
            f" and {r0['rule']['patience']} in a row stop the run (at most {r0['cap_epochs']}"
            " epochs). Its figure is its best checkpoint's loss, as ours is."
        ),
        "",
    ]
    tail = [
        "",
        (
            f"Target: every family ends within {100 * f['quality_tolerance']:.0f}% of its peer's"
            " validation loss, or the difference is found."
        ),
        "",
        *lines,
        "",
        *table(
            ["machine", ""],
            [["CPU", f"{f['cpu']}, {f['cores']} cores"], ["run time", f"{f['seconds']:.0f} s"]],
        ),
        "",
    ]
    return head + table(["model", "best val loss / token", "updates", "stopped by"], rows) + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    ap.add_argument(
        "--max-epochs",
        type=int,
        default=40,
        help="Joey's cap, in our epochs (ours: train.max_epochs)",
    )
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument(
        "--work", type=Path, default=None, help="keep Joey's data, configs and logs here"
    )
    ap.add_argument("--out", type=Path, default=REPORT)
    ap.add_argument(
        "--rerender", action="store_true", help="write the section again from --out's .json figures"
    )
    ap.add_argument(
        "--joey-switch",
        choices=sorted(JOEY_SWITCHES),
        default=None,
        help=(
            "train Joey's model of --families once more with this switch, beside the last full"
            " run's figures"
        ),
    )
    args = ap.parse_args(argv)
    if args.rerender:
        figures = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(args.out, SECTION, render(figures), figures)
        return 0
    python = ensure_venv(VENV)
    prepared("translate", args.data)
    t0 = time.perf_counter()
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if args.joey_switch:
        return switched(args, python, families, t0, command(__file__, argv))
    with tempfile.TemporaryDirectory(prefix="peers-converged-") as tmp:
        work = args.work or Path(tmp)
        rows = [
            {
                "family": f,
                "ours": ours(f),
                "joey": joey(f, args.data, work / f, python, args.max_epochs),
            }
            for f in families
        ]
    figures = {
        "command": command(__file__, argv),
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "joeynmt": JOEY.split("==")[1],
        "quality_tolerance": QUALITY,
        "seconds": time.perf_counter() - t0,
        "rows": rows,
    }
    write_marked_section(args.out, SECTION, render(figures), figures)
    print(
        f"wrote the section {SECTION} of {args.out} in {figures['seconds']:.0f} s", file=sys.stderr
    )
    return 0


def switched(args, python: Path, families: list[str], t0: float, quoted: str) -> int:
    """Joey's model of each family trained again with args.joey_switch, its figures kept in the
    family's row of the last full run (--out's .json) under joey_switches, with the command that ran
    it (quoted); the section written again."""
    figures = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
    rows = {r["family"]: r for r in figures["rows"]}
    if missing := [f for f in families if f not in rows]:
        raise SystemExit(
            f"{args.out.with_suffix('.json')}: no full run of {', '.join(missing)} to set a switch"
            " beside"
        )
    with tempfile.TemporaryDirectory(prefix="peers-switch-") as tmp:
        work = args.work or Path(tmp)
        for family in families:
            run = joey(
                family,
                args.data,
                work / f"{family}-{args.joey_switch}",
                python,
                args.max_epochs,
                JOEY_SWITCHES[args.joey_switch][1],
            )
            keep = ("val_loss", "best_update", "updates", "stopped_by", "curve", "params")
            rows[family].setdefault("joey_switches", {})[args.joey_switch] = {
                **{k: run[k] for k in keep},
                "command": quoted,
                "date": datetime.date.today().isoformat(),
                "seconds": time.perf_counter() - t0,
            }
    write_marked_section(args.out, SECTION, render(figures), figures)
    print(
        f"wrote the section {SECTION} of {args.out} in {time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
