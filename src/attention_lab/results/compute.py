"""What a ledger's runs cost: per task, the runs, the hours their training steps took and those of
the tuning studies, and the CPUs that trained them, from the records the evaluate stages wrote."""

from __future__ import annotations

from collections.abc import Callable, Iterable

HOUR = 3600.0


def training_seconds(record: dict) -> tuple[int, float]:
    """(runs, seconds) of one record: each seed's run, and one per seed for each share of the labels
    (`label_fractions`), at the mean `train/train_seconds` each reports; a pretrained family's
    pretraining too."""
    seeds = len(record.get("seeds") or [])
    parts = [record, *(record.get("label_fractions") or {}).values()]
    runs = seeds * len(parts)
    seconds = seeds * sum(float(p.get("train/train_seconds") or 0.0) for p in parts)
    pretrain = record.get("pretrain") or {}
    if pretrain.get("train_seconds"):
        runs, seconds = runs + 1, seconds + float(pretrain["train_seconds"])
    return runs, seconds


def tuning_seconds(record: dict) -> float:
    """A study's updates at its family's measured seconds per update (an estimate: a trial's model
    size differs from the one it chose); 0 without a study."""
    study = (record.get("tuning") or {}).get("study") or {}
    steps = float(record.get("train/steps") or 0.0)
    if not study.get("updates") or not steps:
        return 0.0
    return float(study["updates"]) * float(record.get("train/train_seconds") or 0.0) / steps


def spent(
    names: Iterable[str], read: Callable[[str], dict | None], tuned: Iterable[str] = ()
) -> dict:
    """{runs, train_hours, tune_hours, cpus} over the records of `names` (those `read` finds); the
    studies of `tuned` alone are counted (an ablation runs its family's tuned values)."""
    tuned = set(tuned)
    runs, train, tune, cpus = 0, 0.0, 0.0, set()
    for name in names:
        record = read(name)
        if record is None:
            continue
        n, seconds = training_seconds(record)
        runs, train = runs + n, train + seconds
        tune += tuning_seconds(record) if name in tuned else 0.0
        cpus.update(cpu for each in (record.get("machines") or {}).values() for cpu in each)
    return {"runs": runs, "train_hours": train / HOUR, "tune_hours": tune / HOUR, "cpus": cpus}


def compute_text(rows: dict[tuple[str, str], dict]) -> str:
    """The page's table: one row per (task, ledger) of `spent`."""
    out = [
        (
            "Each run's own training-step time (validation and evaluation not counted), added up;"
            " runs train side by side on the machine's cores, so its wall time is less than this."
            " Tuning: each study's updates at its family's measured seconds per update, an"
            " estimate. The CPUs are those the runs recorded (runs before records kept them: not"
            " recorded)."
        ),
        "",
        "| task | ledger | runs | training hours | tuning hours (estimated) | CPUs |",
        "|---|---|---|---|---|---|",
    ]
    for (task, which), s in rows.items():
        cpus = "; ".join(sorted(s["cpus"])) or "not recorded"
        tune = f"{s['tune_hours']:.1f}" if s["tune_hours"] else "—"
        out.append(f"| {task} | {which} | {s['runs']} | {s['train_hours']:.1f} | {tune} | {cpus} |")
    return "\n".join(out)
