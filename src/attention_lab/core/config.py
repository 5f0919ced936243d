"""One place that turns conf/ (Hydra groups) + params.yaml (DVC knobs) + CLI overrides into a config."""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from attention_lab.core.config_rules import ConfigError, check_config, check_value  # noqa: F401

# stages import ConfigError and check_value from here (tuning.py, a DVC dependency of every tune stage, among them)
from attention_lab.core.task import NAMES as TASKS  # params.yaml holds one section for each task it runs

PARAMS_FILE = "params.yaml"
CONF_DIR = "conf"
TUNED_DIR = "tuned"  # tuned/<family>.yaml: the tune stage's best parameters, which training merges
REPLACED = ("data.length_mix",)
GROUPS = {"model": "family {name}", "data": "data source {name} for task {task}", "trainer": "trainer {name}"}  # overrides that pick a file
SET_ELSEWHERE = {"task": "the stage argument task=<task>", "family": "the stage argument family=<family>",
                 "profile": "params.yaml `profile:`", "seeds": "params.yaml `seeds:`", "root": "the working directory",
                 "pretrained": "params.yaml `<task>.pretrained:`",
                 "explicit": "params.yaml `<task>.family_params` and the command line"}


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


def dotted_keys(tree: dict, prefix: str = "") -> list[str]:
    """{'model': {'window': 10}} -> ['model.window']: the leaf keys of a nested mapping."""
    keys = []
    for key, value in tree.items():
        keys += dotted_keys(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"]
    return keys


def _check_choice(root: Path, group: str, name: str, what: str) -> None:
    """A ConfigError listing the valid names unless conf/<group>/<name>.yaml exists."""
    folder = root / CONF_DIR / group
    if not (folder / f"{name}.yaml").is_file():
        valid = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(f"unknown {what.format(name=repr(name))}; choose one of {', '.join(valid) or '(none)'} "
                          f"(files in {folder})")


def _split_overrides(root: Path, task: str, overrides: list[str]) -> tuple[list[str], list[str]]:
    """Command-line overrides -> (group choices for Hydra: data=, model=, trainer=; key=value pairs), each checked."""
    groups, values = [], []
    for item in overrides:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"override {item!r}: expected key=value (e.g. train.lr=0.001)")
        if key in SET_ELSEWHERE:
            raise ConfigError(f"override {item!r}: `{key}` is set by {SET_ELSEWHERE[key]}, not by an override")
        if key in GROUPS:
            group = f"data/{task}" if key == "data" else key
            name = value.strip().removeprefix(f"{task}/") if key == "data" else value.strip()
            _check_choice(root, group, name, GROUPS[key].replace("{task}", task))
            groups.append(f"{key}={task}/{name}" if key == "data" else f"{key}={name}")
        else:
            values.append(item)
    return groups, values


def load_config(overrides: list[str] | None = None, family: str | None = None, root: Path | None = None,
                task: str = "translate", tuned: bool = True) -> DictConfig:
    """Compose conf/config.yaml for one task, pick its data source and model family, merge params.yaml and the profile.

    Precedence (later wins): conf/ defaults (config.yaml < task/<task>.yaml) < params.yaml `<task>:` <
    tuned/<family>.yaml (unless tuned=False: the tune stage searches from the untuned config) <
    `<task>.family_params.<family>` < conf/profile/<profile>.yaml `<task>:` < command-line overrides. An explicit
    setting (family_params or an override) always beats a tuned value; `cfg.explicit` lists those keys, and the tune
    stage does not search them.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    root = (root or Path.cwd()).resolve()
    params = read_params(root)
    own_task = task_params(params, root, task)
    profile = params.get("profile", "quick")
    source = own_task.get("data", {}).get("source", "generated")
    _check_choice(root, f"data/{task}", source, f"data source {{name}} for task {task} (params.yaml "
                                                f"`{task}.data.source`)")
    group_choices = [f"task={task}", f"data={task}/{source}"]
    if family is not None:
        _check_choice(root, "model", family, "family {name}")
        group_choices.append(f"model={family}")
    groups, cli = _split_overrides(root, task, list(overrides or []))
    try:
        with initialize_config_dir(config_dir=str(root / CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=group_choices + groups)
    except HydraException as err:  # e.g. a conf/ file that is not valid YAML
        raise ConfigError(f"{root / CONF_DIR}: {err}") from err
    for item in cli:  # `train=3` would replace the whole section
        key, _, value = item.partition("=")
        if isinstance(OmegaConf.select(cfg, key.strip()), DictConfig) and not value.lstrip().startswith("{"):
            raise ConfigError(f"override {item!r}: `{key}` is a section; set one of its keys (e.g. {key}."
                              f"{next(iter(OmegaConf.select(cfg, key.strip())), 'key')}=...)")
    knobs = {k: v for k, v in own_task.items() if k not in ("families", "pretrained", "family_params")}
    own = family_params(params, root, task, family)
    overlay_path = root / CONF_DIR / "profile" / f"{profile}.yaml"
    if not overlay_path.is_file():
        valid = ", ".join(sorted(p.stem for p in overlay_path.parent.glob("*.yaml")))
        raise ConfigError(f"{root / PARAMS_FILE}: profile '{profile}' has no file {overlay_path}; choose one of {valid}")
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
        cfg = OmegaConf.merge(cfg, knobs, best, own, overlay)
        for key, value in replaced.items():
            if value is not None:
                OmegaConf.update(cfg, key, value, merge=False)
    except Exception as err:  # omegaconf raises several types; all mean "this field is not expected here"
        raise ConfigError(f"{root / PARAMS_FILE} (`{task}:`), {root / TUNED_DIR / f'{family}.yaml'} or "
                          f"{overlay_path}: {err}") from err
    for item in cli:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([item]))
        except Exception as err:  # omegaconf's several types, as above
            raise ConfigError(f"override {item!r}: {str(err).splitlines()[0]} (no such key in the {task} config)") \
                from err
    chosen = next((g.split("/", 1)[1] for g in groups if g.startswith("data=")), source)
    if cfg.data.get("source") != chosen:
        raise ConfigError(f"data.source = {cfg.data.get('source')!r}, but the data source chosen is {chosen!r}: pick it "
                          f"with params.yaml `{task}.data.source` (or the override data=<source>), which also brings "
                          f"its keys from conf/data/{task}/<source>.yaml")
    OmegaConf.set_struct(cfg, False)
    cfg.family, cfg.profile, cfg.root = family, profile, str(root)
    cfg.pretrained = family in pretrained_families(params, task)
    cfg.seeds = params.get("seeds", [0])
    cfg.explicit = sorted({*dotted_keys(own), *(item.partition("=")[0].strip() for item in cli)})
    OmegaConf.set_struct(cfg, True)
    check_config(cfg, f"config of {task}{'/' + family if family else ''} ({root / PARAMS_FILE}, conf/, "
                      f"{TUNED_DIR}/, the profile or an override)")
    return cfg
