"""The comparison's protocol, checked on the results a full run wrote: every family's final runs at
params.yaml's seeds, each stopped by early stopping (not by a cap), and every tuned family's study
with at least MIN_TRIALS trials. `make check-results` (pipeline/provenance.py) and
tests/test_results.py (CI, on the committed results) run it."""

from __future__ import annotations

from pathlib import Path

import yaml

from attention_lab.core.params import families, read_params
from attention_lab.core.paths import METRICS, RESULTS, TUNED_DIR

# the protocol: every tuned family's study has at least this many trials (0: untuned, said so)
MIN_TRIALS = 8
# the protocol: every final run stopped by early stopping, not by a cap
STOPPED = ["early stopping"]


def protocol_gaps(params: dict, studies: dict[str, dict], metrics: dict[str, dict]) -> list[str]:
    """Where the results break the comparison's protocol: a family's final runs not at params.yaml's
    seeds or not all stopped by early stopping (its record's `train/stopped_by`), or its study with
    1 to MIN_TRIALS - 1 trials (tuned/<family>.yaml `study.trials`). studies: {family: study},
    metrics: {"<task>/<family>": its record (results.records)}."""
    gaps = []
    for task in params.get("tasks", []):
        for family in families(params, task):
            m = metrics.get(f"{task}/{family}")
            if m is None:
                gaps.append(f"{METRICS}/{task}/{family}.json: missing")
                continue
            details = f"{RESULTS}/{task}/{family}/details.json"
            if m.get("seeds") != params.get("seeds"):
                gaps.append(
                    f"{details}: seeds {m.get('seeds')}, params.yaml says {params.get('seeds')}"
                )
            if m.get("train/stopped_by") != STOPPED:
                gaps.append(
                    f"{details}: final runs stopped by {m.get('train/stopped_by')}, "
                    f"expected {STOPPED} (a run cut by a cap has not converged)"
                )
            trials = (studies.get(family) or {}).get("trials")
            if trials is None:
                gaps.append(f"{TUNED_DIR}/{family}.yaml: missing, or without `study.trials`")
            elif 0 < trials < MIN_TRIALS:
                gaps.append(
                    f"{TUNED_DIR}/{family}.yaml: {trials} trials, the protocol asks for >="
                    f" {MIN_TRIALS} (raise params.yaml `{task}.tune.updates`)"
                )
    return gaps


def protocol_problems(root: Path) -> list[str]:
    """protocol_gaps of the results under root (params.yaml, tuned/*.yaml, the records)."""
    from attention_lab.results import records  # omegaconf, sacrebleu: only when results are checked

    params = read_params(root)
    studies = {
        p.stem: (yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("study")
        for p in sorted((root / TUNED_DIR).glob("*.yaml"))
    }
    metrics = {
        f"{task}/{family}": records.read_at(root, task, family)
        for task in params.get("tasks", [])
        for family in families(params, task)
        if records.exists_at(root, task, family)
    }
    return protocol_gaps(params, studies, metrics)
