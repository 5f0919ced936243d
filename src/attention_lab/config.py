"""One place that turns conf/ (Hydra groups) + params.yaml (DVC knobs) + CLI overrides into a config."""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

PARAMS_FILE = "params.yaml"
CONF_DIR = "conf"
TUNED_DIR = "tuned"  # tuned/<family>.yaml: the tune stage's best parameters, which training merges
REPLACED = ("data.length_mix",)
TASKS = ("translate", "classify", "caption")  # the tasks; params.yaml holds one section for each it runs


class ConfigError(ValueError):
    """A config file or field is not what the pipeline expects."""


def read_params(root: Path) -> dict:
    """params.yaml as a dict, with a clear error if it is missing or malformed."""
    path = root / PARAMS_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: not found (run from the repository root)")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(params) - {"profile", "seeds", "tasks", *TASKS})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {unknown}; expected profile, seeds, tasks and one "
                          f"section per task ({', '.join(TASKS)})")
    return params


def task_params(params: dict, root: Path, task: str) -> dict:
    """params.yaml `<task>:`, the knobs of one task (families, family_params, data, tokenize, train, evaluate)."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    own = params.get(task)
    if not isinstance(own, dict):
        raise ConfigError(f"{root / PARAMS_FILE}: expected a mapping `{task}:` (families, data, train, ...), got {own!r}")
    return own


def families(params: dict, task: str) -> list[str]:
    """params.yaml `<task>.families` in timeline order, then `<task>.pretrained` (families fine-tuned from a
    pretrained encoder)."""
    own = params.get(task, {})
    return list(own.get("families") or []) + pretrained_families(params, task)


def pretrained_families(params: dict, task: str) -> list[str]:
    """params.yaml `<task>.pretrained`: families whose encoder comes from their `pretrain@<family>` stage."""
    return list(params.get(task, {}).get("pretrained") or [])


def family_params(params: dict, root: Path, task: str, family: str | None) -> dict:
    """params.yaml `<task>.family_params.<family>`: overrides for one family (its DVC stages alone depend on them)."""
    if family is None:
        return {}
    own = (params[task].get("family_params") or {}).get(family, {})
    if not isinstance(own, dict):
        raise ConfigError(f"{root / PARAMS_FILE}: {task}.family_params.{family} must be a mapping "
                          f"(e.g. {{model: {{...}}}}), got {own!r}")
    return own


def tuned_params(root: Path, family: str | None) -> dict:
    """tuned/<family>.yaml `params:` (the tune stage's best trial), or {} when the family has not been tuned."""
    path = root / TUNED_DIR / f"{family}.yaml"
    if family is None or not path.is_file():
        return {}
    try:
        tuned = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(tuned, dict) or not isinstance(tuned.get("params", {}), dict):
        raise ConfigError(f"{path}: expected a mapping with `params: {{...}}` (written by the tune stage)")
    return tuned.get("params") or {}


def load_config(overrides: list[str] | None = None, family: str | None = None, root: Path | None = None,
                task: str = "translate", tuned: bool = True) -> DictConfig:
    """Compose conf/config.yaml for one task, pick its data source and model family, merge params.yaml and the profile.

    Precedence (later wins): conf/ defaults (config.yaml < task/<task>.yaml) < params.yaml `<task>:` <
    `<task>.family_params.<family>` < tuned/<family>.yaml (unless tuned=False: the tune stage searches from the
    untuned config) < conf/profile/<profile>.yaml `<task>:` < command-line overrides.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    root = (root or Path.cwd()).resolve()
    params = read_params(root)
    own_task = task_params(params, root, task)
    profile = params.get("profile", "quick")
    group_choices = [f"task={task}", f"data={task}/{own_task.get('data', {}).get('source', 'generated')}"]
    if family is not None:
        group_choices.append(f"model={family}")
    cli = list(overrides or [])
    try:
        with initialize_config_dir(config_dir=str(root / CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=group_choices + [o for o in cli if o.split("=")[0] in ("data", "model")])
    except HydraException as err:  # e.g. a family or data source with no file in conf/
        raise ConfigError(f"{root / CONF_DIR}: {err}") from err
    knobs = {k: v for k, v in own_task.items() if k not in ("families", "pretrained", "family_params")}
    own = family_params(params, root, task, family)
    overlay_path = root / CONF_DIR / "profile" / f"{profile}.yaml"
    if not overlay_path.is_file():
        raise ConfigError(f"{root / PARAMS_FILE}: profile '{profile}' has no file {overlay_path}")
    overlay = OmegaConf.load(overlay_path).get(task) or OmegaConf.create({})
    if "data" in overlay:  # a profile sizes the generated data; other sources ignore those keys
        overlay.data = {k: v for k, v in overlay.data.items() if k in cfg.data}
    knobs = OmegaConf.create(knobs)
    replaced = {key: OmegaConf.select(knobs, key) for key in REPLACED}
    for key in REPLACED:
        parent, _, leaf = key.rpartition(".")
        if OmegaConf.select(knobs, parent) is not None:
            OmegaConf.select(knobs, parent).pop(leaf, None)
    try:
        best = tuned_params(root, family) if tuned else {}
        cfg = OmegaConf.merge(cfg, knobs, own, best, overlay, OmegaConf.from_dotlist(
            [o for o in cli if o.split("=")[0] not in ("data", "model")]))
        for key, value in replaced.items():
            if value is not None:
                OmegaConf.update(cfg, key, value, merge=False)
    except Exception as err:  # omegaconf raises several types; all mean "this field is not expected here"
        raise ConfigError(f"{root / PARAMS_FILE} (`{task}:`), {root / TUNED_DIR / f'{family}.yaml'} or "
                          f"{overlay_path}: {err}") from err
    OmegaConf.set_struct(cfg, False)
    cfg.family, cfg.profile, cfg.root = family, profile, str(root)
    cfg.pretrained = family in pretrained_families(params, task)
    cfg.seeds = params.get("seeds", [0])
    OmegaConf.set_struct(cfg, True)
    return cfg
