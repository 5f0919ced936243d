"""paths.py names the project's folders once: the configs' `paths`, dvc.yaml's deps and outs, and
the readers without a config all take them from there."""

from __future__ import annotations

from pathlib import Path

import yaml

from attention_lab.core.config import load_config
from attention_lab.core.paths import CONF_DIR, FOLDERS
from attention_lab.pipeline.resolved import expand

ROOT = Path(__file__).resolve().parents[2]


def test_a_config_s_paths_are_the_folders_paths_py_names():
    cfg = load_config(family="bahdanau", root=ROOT)
    assert dict(cfg.paths) == {
        "prepared": f"{FOLDERS['prepared']}/translate",
        "tokenized": f"{FOLDERS['tokenized']}/translate",
        "models": FOLDERS["models"],
        "metrics": FOLDERS["metrics"],
        "predictions": FOLDERS["predictions"],
        "plots": f"{FOLDERS['plots']}/translate",
        "reports": FOLDERS["reports"],
    }
    raw = yaml.safe_load((ROOT / CONF_DIR / "config.yaml").read_text(encoding="utf-8"))["paths"]
    assert all(value.startswith("${folder:") for value in raw.values())  # no folder spelt out


def test_every_file_dvc_yaml_names_lies_in_a_folder_paths_py_names():
    stages = expand(ROOT)
    named = {
        entry if isinstance(entry, str) else next(iter(entry))
        for stage in stages.values()
        for key in ("deps", "outs", "metrics", "plots")
        for entry in stage.get(key) or []
    }
    top = {*FOLDERS.values(), "src", "params.yaml"}
    outside = sorted(p for p in named if not any(p == t or p.startswith(f"{t}/") for t in top))
    assert named and not outside, outside
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["plots"]
    files = {f for plot in plots for spec in plot.values() for f in spec["y"]}
    assert files and all(f.startswith(f"{FOLDERS['results']}/") for f in files)
