"""One place that turns conf/ (Hydra groups) + params.yaml (DVC knobs) + CLI overrides into a config."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Range:
    """The numbers a config key allows: [low, high] (either end open or absent), integers only, or null too."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    open_low: bool = False
    open_high: bool = False
    nullable: bool = False

    def allows(self, value) -> bool:
        if value is None:
            return self.nullable
        if isinstance(value, bool) or not isinstance(value, int | float) or (self.integer and not isinstance(value, int)):
            return False
        if not math.isfinite(value):
            return False
        low_ok = self.low is None or (value > self.low if self.open_low else value >= self.low)
        return low_ok and (self.high is None or (value < self.high if self.open_high else value <= self.high))

    def __str__(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}" if self.low % 1 else str(int(self.low))
        high = "inf" if self.high is None else f"{self.high:g}" if self.high % 1 else str(int(self.high))
        left = "(" if self.open_low or self.low is None else "["
        right = ")" if self.open_high or self.high is None else "]"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {left}{low}, {high}{right}" + (" or null" if self.nullable else "")


SIZE = Range(1, 65536, integer=True)  # widths, heads, layers, batch sizes: past 2^16 is a typo, not a model for 2 cores
COUNT = Range(0, None, integer=True)
POSITIVE = Range(1, None, integer=True)
SHARE = Range(0, 1, open_high=True)  # dropout, label smoothing, held-out shares: [0, 1)
# What every numeric or named knob allows, checked by load_config after every layer is merged. A key takes the first
# pattern it matches (fnmatch, `*` spans dots); list values (train.label_fractions, model.channels) are checked item
# by item. Keys without a pattern are not checked.
RULES: dict[str, Range | tuple[str, ...]] = {
    "*dropout": SHARE,
    "model.attention": ("dot", "general", "concat", "local_m", "local_p"),  # attention.ATTENTIONS that LuongNMT takes
    "model.local_score": ("dot", "general", "concat"),  # attention.GLOBAL_SCORES
    "model.window": Range(0, 65536, integer=True),
    "model.buckets": Range(1, 10_000_000, integer=True),
    "model.height": Range(1, 4096, integer=True),
    "model.width": Range(1, 4096, integer=True),
    "model.*_dim": SIZE, "model.*hidden*": SIZE, "model.d_model": SIZE, "model.d_ff": SIZE, "model.intermediate": SIZE,
    "model.heads": SIZE, "model.hops": SIZE, "model.*layers": SIZE, "model.channels": SIZE, "model.max_positions": SIZE,
    "*.lr": Range(0, None, open_low=True),
    "*.batch_size": SIZE,
    "*.max_epochs": Range(1, 100_000, integer=True),
    "*.max_minutes": Range(0, None, open_low=True),
    "*.warmup_steps": COUNT,
    "*.patience": COUNT,
    "train.weight_decay": Range(0, 1),
    "train.label_smoothing": SHARE,
    "train.clip": Range(0, None),  # 0: no clipping
    "train.penalty": Range(0, None),
    "train.label_fraction*": Range(0, 1, open_low=True),
    "train.max_sentences": POSITIVE,
    "train.max_words": POSITIVE,
    "train.max_tokens": Range(1, None, integer=True, nullable=True),
    "train.val_bleu_sentences": COUNT,
    "train.teacher_forcing.schedule": ("constant", "linear", "inverse_sigmoid"),
    "train.teacher_forcing.*ratio": Range(0, 1),
    "train.teacher_forcing.slope": Range(0, None),
    "train.teacher_forcing.k": Range(0, None, open_low=True),
    "tune.trials": COUNT,
    "tune.epochs": POSITIVE,
    "tune.train_batches": Range(0, 1, open_low=True),
    "tune.direction": ("minimize", "maximize"),
    "tune.max_params": Range(1, None, integer=True, nullable=True),
    "tune.startup_trials": COUNT,
    "*vocab_size": Range(1, 10_000_000, integer=True),
    "*min_frequency": COUNT,
    "pretrain.source": ("mlm", "minilm"),
    "pretrain.objective": ("sop", "nsp", "none"),
    "pretrain.mask_rate": Range(0, 1, open_low=True, open_high=True),
    "pretrain.max_tokens": Range(4, 65536, integer=True),  # [CLS] A [SEP] B [SEP]
    "evaluate.beam": Range(1, 64, integer=True),
    "evaluate.len_penalty": Range(0, 5),
    "evaluate.max_len_ratio": Range(0, 100, open_low=True),
    "evaluate.max_len": Range(1, 10_000, integer=True),
    "evaluate.top_k_words": POSITIVE,
    "evaluate.heatmaps": COUNT, "evaluate.overlays": COUNT, "evaluate.pictures": COUNT,
    "data.n_train": Range(1, 10_000_000, integer=True),
    "data.n_valid": Range(1, 10_000_000, integer=True),
    "data.n_test_per_bucket": Range(1, 10_000_000, integer=True),
    "data.length_mix.*": Range(0, None),
    "data.valid_fraction": SHARE, "data.test_fraction": SHARE,
    "data.max_pairs": Range(1, None, integer=True, nullable=True),
    "data.max_documents": Range(1, None, integer=True, nullable=True),
    "data.src_column": COUNT, "data.tgt_column": COUNT,
    "data.format": ("jsonl", "csv"),
    "data.height": Range(1, 4096, integer=True), "data.width": Range(1, 4096, integer=True),
    "data.digit_size": Range(1, 4096, integer=True),
    "data.noise": Range(0, 1),
    "data.max_gap": COUNT, "data.max_offset": COUNT,
    "data.scan_fractions": Range(0, 1),
    "trainer.accelerator": ("auto", "cpu", "cuda", "gpu", "mps"),
    "trainer.log_every_n_steps": POSITIVE,
}
GROUPS = {"model": "family {name}", "data": "data source {name} for task {task}", "trainer": "trainer {name}"}  # overrides that pick a file
SET_ELSEWHERE = {"task": "the stage argument task=<task>", "family": "the stage argument family=<family>",
                 "profile": "params.yaml `profile:`", "seeds": "params.yaml `seeds:`", "root": "the working directory",
                 "pretrained": "params.yaml `<task>.pretrained:`"}
TASK_RULES: dict[str, dict[str, tuple[str, ...]]] = {"translate": {"tokenize.model": ("bpe", "unigram")}}


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


def _leaves(node, key: str = ""):
    """(dotted key, value) of every scalar in a container of dicts and lists; list items keep their list's key."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, key)
    else:
        yield key, node


def check_value(key: str, value, task: str | None = None) -> str | None:
    """Why `value` is not allowed for config key `key` (its rule in RULES), or None when it is (or has no rule)."""
    rule = TASK_RULES.get(task or "", {}).get(key) or next(
        (r for pattern, r in RULES.items() if fnmatch.fnmatchcase(key, pattern)), None)
    if rule is None:
        return None
    if isinstance(rule, tuple):
        return None if value in rule else f"{key} = {value!r}: expected one of {', '.join(rule)}"
    return None if rule.allows(value) else f"{key} = {value!r}: expected {rule}"


def check_config(cfg: DictConfig, where: str) -> None:
    """Every knob in its range (RULES) and the cross-key constraints; a ConfigError naming key, value and range."""
    try:
        values = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # omegaconf's errors for an interpolation that does not resolve (${data.nope})
        raise ConfigError(f"{where}: {str(err).splitlines()[0]}") from err
    problems = [p for key, value in _leaves(values) if (p := check_value(key, value, cfg.task.name))]
    d, t, m, pre = (values.get(k) or {} for k in ("data", "train", "model", "pretrain"))
    if not problems:  # the cross-key constraints, once every value has its type
        if d.get("valid_fraction", 0) + d.get("test_fraction", 0) >= 1:
            problems.append(f"data.valid_fraction + data.test_fraction = {d['valid_fraction']} + "
                            f"{d['test_fraction']}: expected a sum below 1 (the rest is training data)")
        width = next((k for k in ("d_model", "hidden") if k in m), None)
        if width and "heads" in m and m[width] % m["heads"]:
            problems.append(f"model.{width} = {m[width]} is not divisible by model.heads = {m['heads']}")
        if "max_positions" in m:  # BERT: [CLS] document [SEP] must fit its learned positions
            room = m["max_positions"] - 2
            if "max_tokens" in t and (t["max_tokens"] is None or t["max_tokens"] > room):
                problems.append(f"train.max_tokens = {t['max_tokens']!r}: expected an integer in [1, {room}] "
                                "(model.max_positions - 2: [CLS] and [SEP] take two)")
            if pre.get("max_tokens", 0) > m["max_positions"]:
                problems.append(f"pretrain.max_tokens = {pre['max_tokens']}: expected at most model.max_positions "
                                f"= {m['max_positions']}")
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))


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
        cfg = OmegaConf.merge(cfg, knobs, own, best, overlay)
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
    OmegaConf.set_struct(cfg, True)
    check_config(cfg, f"config of {task}{'/' + family if family else ''} ({root / PARAMS_FILE}, conf/, "
                      f"{TUNED_DIR}/, the profile or an override)")
    return cfg
