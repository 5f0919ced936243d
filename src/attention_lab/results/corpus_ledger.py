"""A real-data ledger's figures and page (pipeline.corpus_ledger runs it):
reports/ledgers/<name>.md, from results/ledgers/<name>/ (the copy's claims, dvc.lock, the corpus's
checksums, each family's figures), the built-in ledger's verdicts (metrics/claims.json) and the
field's published figures (the spec's `published`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from attention_lab.core.files import read_json, write_text
from attention_lab.core.paths import LEDGERS, METRICS, PREDICTIONS, PREPARED, REPORTS, RESULTS
from attention_lab.results import claims, ledger, preregistration, records

FLAVOURS = {  # a published figure's metric computed our way, on our outputs: like for like
    "bleu_lowercase_spacy": (
        "corpus BLEU-4 (no smoothing) on lower-cased spaCy English tokens, as "
        "Hugging Face `evaluate`'s bleu and torchtext's bleu_score compute it"
    ),
}


def flavour_scores(
    flavour: str, hypotheses: dict[str, list[str]], references: list[str]
) -> dict[str, float]:
    """{seed: the flavour's score of its outputs}."""
    if flavour != "bleu_lowercase_spacy":
        raise ValueError(f"unknown flavour {flavour!r}; expected one of {', '.join(FLAVOURS)}")
    import sacrebleu
    import spacy

    tokenizer = spacy.blank(
        "en"
    ).tokenizer  # en_core_web_sm's tokenizer rules, without its model's weights

    def words(text: str) -> str:
        return " ".join(t.text.lower() for t in tokenizer(text) if not t.is_space)

    refs = [[words(r) for r in references]]
    return {
        seed: sacrebleu.corpus_bleu(
            [words(h) for h in hyps], refs, tokenize="none", smooth_method="none", force=True
        ).score
        for seed, hyps in hypotheses.items()
    }


def summary(work: Path, spec) -> dict:
    """Each family's figures in the copy at `work`: test metrics (mean, per seed), training time and
    epochs, how each seed stopped, the published figures' flavours on its outputs; the corpus's
    split sizes."""
    task = spec.task
    out: dict = {"task": task, "families": {}, "flavours": {}}
    stats = work / PREPARED / task / "stats.json"
    out["data"] = read_json(stats) if stats.is_file() else {}
    for name in [*spec.families, *spec.ablations]:
        if not records.exists_at(work, task, name):
            continue
        record = records.read_at(work, task, name)
        numbers = {k: v for k, v in record.items() if records.is_metric(k, v)}
        curves = record.get("val_curves") or {}
        out["families"][name] = {
            "metrics": numbers,
            "seeds": [str(s) for s in record.get("seeds") or []],
            "per_seed": {
                s: {k: v for k, v in m.items() if isinstance(v, int | float)}
                for s, m in (record.get("per_seed") or {}).items()
            },
            "stopped_by": {s: c.get("stopped_by") for s, c in curves.items()},
            "epochs": {s: len(c.get("curve") or []) for s, c in curves.items()},
            "machines": record.get("machines") or {},
        }
    for entry in spec.published:
        family, flavour = entry.get("family"), entry.get("flavour")
        path = work / PREDICTIONS / task / f"{family}.json"
        if flavour and path.is_file():
            found = read_json(path)
            out["flavours"].setdefault(family, {})[flavour] = flavour_scores(
                flavour, found["seeds"], found["references"]
            )
    return out


def with_evidence(root: Path, name: str, rows: list[dict]) -> list[dict]:
    """The rows with their evidence read from this repository's git: each claim's freezing commit
    against the commit that first recorded the ledger's runs (results/ledgers/<name>/dvc.lock); no
    study selected a seed."""
    lock = (Path(RESULTS) / LEDGERS / name / "dvc.lock").as_posix()
    try:
        frozen = preregistration.frozen_at(root)
        runs = {
            f: preregistration.recorded_at(root, f, path=lock) for r in rows for f in r["families"]
        }
    except ValueError as err:
        why = f"no git history to order claims and runs ({err})"
        return [{**r, "evidence": "exploratory", "evidence_why": why} for r in rows]
    out = []
    for r in rows:
        found = preregistration.evidence(
            root, frozen.get(r["id"]), {f: runs[f] for f in r["families"]}, r["seeds"], set()
        )
        out.append({**r, "evidence": found["kind"], "evidence_why": found["why"]})
    return out


def agreement(here: dict, built_in: dict | None) -> str:
    """Where this corpus agrees with the built-in ledger on a claim, disagrees, or cannot decide,
    and why."""
    decided = (claims.HOLDS, claims.CONTRADICTED)
    if here["verdict"] in (claims.NOT_RUN, claims.NOT_MEASURABLE):
        return f"cannot decide here: {here['verdict']}" + (
            f" ({here['missing']})" if here.get("missing") else ""
        )
    if here["verdict"] == claims.INCONCLUSIVE:
        need = (
            claims.seeds_needed(here)
            if here["effect"] and here["effect"]["sd"] is not None
            else None
        )
        more = (
            "no number of seeds would: the test set's share alone is too wide"
            if need is None
            else f"about {need} seeds would (80% power)"
        )
        return f"cannot decide here: inconclusive with {len(here['seeds'])} seeds; {more}"
    if built_in is None or built_in["verdict"] not in decided:
        return f"decided here only ({here['verdict']}); the built-in ledger: " + (
            built_in["verdict"] if built_in else "no row"
        )
    if built_in["verdict"] == here["verdict"]:
        return f"agrees ({here['verdict']} on both)"
    return (
        f"disagrees: {here['verdict']} here ({ledger.effect_text(here)}), "
        f"{built_in['verdict']} on the built-in data ({ledger.effect_text(built_in)})"
    )


def verdict_table(rows: list[dict], built_in: dict[str, dict]) -> str:
    head = [
        "claim",
        "built-in: effect, verdict",
        "here: effect [95% CI]",
        "p (Holm)",
        "evidence",
        "verdict",
        "agreement",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        b = built_in.get(r["id"])
        out.append(
            ledger.cells_row(
                [
                    f"**{r['id']}**",
                    f"{ledger.effect_text(b)}, {b['verdict']}" if b else "—",
                    ledger.effect_text(r),
                    ledger.p_text(r["p_holm"]),
                    r.get("evidence") or "—",
                    f"**{r['verdict']}**",
                    agreement(r, b),
                ]
            )
        )
    return "\n".join(out)


def mean_sd(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{np.mean(values):.1f}" + (
        f" ± {np.std(values, ddof=1):.1f}" if len(values) > 1 else ""
    )


def as_published(value: float, metric: str) -> float:
    """Our figure on the published one's scale: a share as % accuracy or % error; BLEU as it is."""
    if "error" in metric:
        return 100 * (1 - value)
    return 100 * value if "accuracy" in metric else value


def published_table(spec, summary_: dict) -> str:
    """The field's figures beside ours: our metric, and the figure's own flavour on our outputs
    where it has one."""
    out = [
        (
            "| source | model | their figure | their protocol | ours (`family`, seeds' mean ± sd) "
            "| ours, their flavour | what still differs |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for e in spec.published:
        family = e.get("family")
        mine = summary_["families"].get(family)
        metric = e.get("ours", "test/bleu")
        ours = (
            "not run"
            if mine is None
            else f"`{family}` "
            + mean_sd(
                [
                    as_published(s[metric], e["metric"])
                    for s in mine["per_seed"].values()
                    if metric in s
                ]
            )
        )
        flavour = (summary_["flavours"].get(family) or {}).get(e.get("flavour") or "")
        like = mean_sd(list(flavour.values())) if flavour else "—"
        out.append(
            ledger.cells_row(
                [
                    f"{e['source']} ({e['where']})",
                    e["model"],
                    f"{e['value']:g} {e['metric']}",
                    e["protocol"].strip(),
                    ours,
                    like,
                    (e.get("differs") or "—").strip(),
                ]
            )
        )
    flavours = sorted({e["flavour"] for e in spec.published if e.get("flavour")})
    notes = [f"Their flavour `{f}`: {FLAVOURS[f]}." for f in flavours]
    return "\n".join([*out, "", *notes]) if notes else "\n".join(out)


def compute_table(summary_: dict) -> str:
    """Per family: seeds, epochs, minutes of training per seed, how each seed stopped."""
    out = [
        (
            "| family | weights | seeds | epochs | training minutes per seed | stopped by "
            "| converged |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    total = 0.0
    for name, f in summary_["families"].items():
        minutes = f["metrics"].get("train/train_seconds", float("nan")) / 60
        total += minutes * len(f["seeds"])
        stops = [str(v) for v in f["stopped_by"].values()]
        done = sum(s == "early stopping" for s in stops)
        weights = f["metrics"].get("train/params")
        out.append(
            f"| `{name}` | {f'{weights / 1e6:.2f}M' if weights else '—'} | {len(f['seeds'])} "
            f"| {mean_sd(list(f['epochs'].values()))} | {minutes:.1f} | "
            f"{', '.join(sorted(set(stops))) or '—'} | {done} of {len(stops)} seeds stopped early |"
        )
    return "\n".join(
        [
            *out,
            "",
            (
                f"Training in all: {total:.0f} min of runs (each on one thread); a seed "
                "that reached the epoch cap did not converge by the early-stopping rule."
            ),
            *machines_line(summary_),
        ]
    )


def machines_line(summary_: dict) -> list[str]:
    """The CPUs that trained the ledger's runs, with how many each (a paragraph; none where the
    runs predate the record): the figures repeat bit for bit on the same CPU model alone."""
    runs = Counter(
        m
        for f in summary_["families"].values()
        for trained in (f.get("machines") or {}).values()
        for m in dict.fromkeys(trained)
    )
    if not runs:
        return []
    said = "; ".join(f"{cpu}: {n} run{'s' * (n != 1)}" for cpu, n in runs.most_common())
    return [
        "",
        (
            f"Trained on {said}. The same command repeats these figures bit for bit on the same"
            " CPU model; a run resumed on another CPU (counted under each) repeats on none."
        ),
    ]


def size_of(stats: dict):
    """A split's size in its unit (the prepare stage's stats.json): pairs, documents or photos."""
    return next((stats[k] for k in ("pairs", "documents", "photos", "canvases") if k in stats), "?")


def page(
    root: Path, spec, rows: list[dict], summary_: dict, corpus: dict, built_in: dict[str, dict]
) -> str:
    origin = corpus["origin"]
    sizes = {k: v for k, v in summary_.get("data", {}).items() if isinstance(v, dict)}
    size_text = ", ".join(f"{split} {size_of(stats)}" for split, stats in sizes.items())
    counts = {
        v: sum(r["verdict"] == v for r in rows) for v in dict.fromkeys(r["verdict"] for r in rows)
    }
    lines = [
        f"# The claims on {spec.title}",
        "",
        (
            f"Generated by `attention-lab ledger {spec.name}` "
            f"(spec conf/ledgers/{spec.name}.yaml) from "
            f"results/ledgers/{spec.name}/; do not edit by hand. The pipeline ran in a copy of "
            "the project made "
            f"from commit {origin['commit']}"
            f"{' (with uncommitted changes)' if origin['dirty'] else ''} on "
            f"{origin['made']}, and is judged by the rule of [the built-in ledger](../claims.md)."
        ),
        "",
        "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".",
        "",
        "## The corpus",
        "",
        spec.corpus,
        "",
        f"Split sizes as prepared: {size_text or 'not prepared'}.",
        "",
        "| file | sha256 |",
        "|---|---|",
        *[f"| `{f}` | `{digest}` |" for f, digest in corpus["files"].items()],
        "",
        (
            f"`attention-lab ledger {spec.name} --files <folder>` reproduces this page from a "
            "folder holding these "
            "files (their checksums must match the table's): the same figures on the same CPU."
        ),
        "",
        "## The recipe",
        "",
        spec.recipe,
        "",
        (
            "Families: "
            + ", ".join(f"`{f}`" for f in spec.families)
            + "; ablations: "
            + (", ".join(f"`{a}`" for a in spec.ablations) or "none")
            + "."
        ),
        "",
        "## Verdicts, beside the built-in ledger's",
        "",
        verdict_table(rows, built_in),
        "",
        *ledger.sections(rows, "###"),
        "## The seeds that would decide each claim",
        "",
        ledger.power_text(rows, {}),
        "",
    ]
    if spec.published:
        lines += ["## The field's figures beside ours", "", published_table(spec, summary_), ""]
    lines += ["## Compute", "", compute_table(summary_), ""]
    if (root / REPORTS / LEDGERS / spec.name / "forest.png").is_file():
        lines += [f"![effects against thresholds]({spec.name}/forest.png)", ""]
    return "\n".join(lines)


def write_page(root: Path, spec) -> Path:
    """reports/ledgers/<name>.md from results/ledgers/<name>/ (pipeline.corpus_ledger's)."""
    folder = root / RESULTS / LEDGERS / spec.name
    if not (folder / "claims.json").is_file():
        raise FileNotFoundError(
            f"{folder / 'claims.json'}: not collected yet (run `attention-lab ledger {spec.name}`)"
        )
    rows = with_evidence(root, spec.name, read_json(folder / "claims.json")["claims"])
    built = root / METRICS / "claims.json"
    found = read_json(built) if built.is_file() else {"claims": []}
    built_in = {
        r["id"]: r for r in ledger.headline(found["claims"], found.get("confirmatory") or [])
    }
    text = page(
        root,
        spec,
        rows,
        read_json(folder / "summary.json"),
        read_json(folder / "corpus.json"),
        built_in,
    )
    path = root / REPORTS / LEDGERS / f"{spec.name}.md"
    write_text(path, text)
    return path


def verdicts(root: Path) -> dict[str, dict[str, dict]]:
    """{ledger name: {claim id: row}} of every collected real-data ledger, for README's table."""
    out = {}
    for path in sorted((root / RESULTS / LEDGERS).glob("*/claims.json")):
        out[path.parent.name] = {r["id"]: r for r in read_json(path)["claims"]}
    return out
