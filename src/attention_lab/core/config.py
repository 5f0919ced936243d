"""One place that turns conf/ (Hydra groups) + params.yaml (DVC knobs, read by core/params.py) +
CLI overrides into a config, and says which layer set each of its values (`attention-lab config
--explain`)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

# stages import ConfigError and check_value from here (tuning.py, a DVC dependency of every tune
# stage, among them)
from attention_lab.core.config_rules import (  # noqa: F401
    ConfigError,
    check_config,
    check_missing,
    check_value,
)
from attention_lab.core.params import (
    NOT_KNOBS,
    PARAMS_FILE,
    REPLICATION_SEED,
    ablations,
    corpora,
    corpus_suffix,
    family_params,
    pretrained_families,
    read_params,
    replication,
    task_params,
)
from attention_lab.core.paths import CONF_DIR, PLOTS, REPLICATION, TUNED_DIR

# OmegaConf's "no value yet": how conf/ declares a key whose value lives in params.yaml
# (check_missing)
MISSING = "???"
# params.yaml `<task>:` replaces these whole (a mix of other buckets), not key by key
REPLACED = ("data.length_mix",)
# overrides that pick a file
GROUPS = {
    "model": "family {name}",
    "data": "data source {name} for task {task}",
    "trainer": "trainer {name}",
}
# paths the replication's runs keep under <path>/replication
REPLICATED = ("models", "metrics", "predictions")
# params.yaml `trainer: auto`: conf/trainer/gpu.yaml where torch sees a CUDA GPU, else cpu.yaml
AUTO = "auto"
SET_ELSEWHERE = {
    "task": "the stage argument task=<task>",
    "family": "the stage argument family=<family>",
    "profile": "params.yaml `profile:`",
    "seeds": "params.yaml `seeds:`",
    "root": "the working directory",
    "pretrained": "params.yaml `<task>.pretrained:`",
    "explicit": (
        "params.yaml `<task>.family_params` (an ablation: and its `set`) and the command line"
    ),
}


def tuned_params(root: Path, family: str | None) -> dict:
    """tuned/<family>.yaml `params:` (the tune stage's best trial), or {} when the family has not
    been tuned."""
    path = root / TUNED_DIR / f"{family}.yaml"
    if family is None or not path.is_file():
        return {}
    try:
        tuned = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(tuned, dict) or not isinstance(tuned.get("params", {}), dict):
        raise ConfigError(
            f"{path}: expected a mapping with `params: {{...}}` (written by the tune stage)"
        )
    return tuned.get("params") or {}


def _check_choice(root: Path, group: str, name: str, what: str, also: str = "") -> None:
    """A ConfigError listing the valid names (and `also`) unless conf/<group>/<name>.yaml exists."""
    folder = root / CONF_DIR / group
    if not (folder / f"{name}.yaml").is_file():
        valid = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(
            f"unknown {what.format(name=repr(name))}; choose one of {', '.join(valid) or '(none)'} "
            f"(files in {folder}){also}"
        )


def cuda_available() -> bool:
    """Does torch see a CUDA GPU? (imported here only: serving never imports torch)"""
    import torch

    return torch.cuda.is_available()


def trainer_file(root: Path, name: object, where: str) -> str:
    """The conf/trainer file a trainer name picks: itself, checked; `auto` -> gpu where torch sees a
    CUDA GPU, else cpu. `where` says who named it, for the error."""
    if name == AUTO:
        return "gpu" if cuda_available() else "cpu"
    if not isinstance(name, str):
        raise ConfigError(
            f"{where}: expected a trainer name (a file of {root / CONF_DIR / 'trainer'}, or auto),"
            f" got {name!r}"
        )
    try:
        _check_choice(
            root,
            "trainer",
            name,
            "trainer {name}",
            also=" or auto (gpu where torch sees a CUDA GPU, else cpu)",
        )
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    return name


def params_trainer(params: dict, root: Path) -> str:
    """params.yaml `trainer:` (the switch every training stage reads; dvc.yaml lists it in their
    params) as the conf/trainer file it picks (trainer_file)."""
    if "trainer" not in params:
        names = ", ".join(sorted(p.stem for p in (root / CONF_DIR / "trainer").glob("*.yaml")))
        raise ConfigError(
            f"{root / PARAMS_FILE}: no `trainer:` (what every training stage trains on); set it to"
            f" one of {names} (conf/trainer/<name>.yaml) or auto (gpu where torch sees a CUDA GPU,"
            " else cpu)"
        )
    return pipeline_trainer(
        root, params["trainer"], f"{root / PARAMS_FILE} `trainer: {params['trainer']}`"
    )


def pipeline_trainer(root: Path, name: object, where: str) -> str:
    """trainer_file, for the whole pipeline: a trainer of one device per process (tune runs one
    process per trial, train runs train.processes side by side); a data-parallel one is for a stage
    run by hand."""
    chosen = trainer_file(root, name, where)
    options = (
        yaml.safe_load((root / CONF_DIR / "trainer" / f"{chosen}.yaml").read_text(encoding="utf-8"))
        or {}
    )
    if options.get("strategy") not in (None, "auto") or options.get("devices", 1) != 1:
        raise ConfigError(
            f"{where}: conf/trainer/{chosen}.yaml is data parallel ({options.get('devices')}"
            f" devices, strategy {options.get('strategy')!r}), and the pipeline trains one device"
            " per process; pick cpu, gpu or auto, and a data-parallel trainer for a stage run by"
            " hand (`python -m attention_lab.stages.train ... trainer=ddp_gpu`, docs/scaling.md)"
        )
    return chosen


def set_trainer(root: Path, name: str) -> bool:
    """Set params.yaml `trainer:` to `name` (checked), keeping the line's comment; True when it
    changed."""
    pipeline_trainer(root, name, f"trainer {name}")
    path = root / PARAMS_FILE
    text = path.read_text(encoding="utf-8")
    new, found = re.subn(
        r"^trainer:[ \t]*[^\s#]*", f"trainer: {name}", text, count=1, flags=re.MULTILINE
    )
    if not found:
        raise ConfigError(f"{path}: no top-level `trainer:` line to set")
    path.write_text(new, encoding="utf-8")
    return new != text


def _split_overrides(root: Path, task: str, overrides: list[str]) -> tuple[list[str], list[str]]:
    """Command-line overrides -> (group choices for Hydra: data=, model=, trainer=; key=value
    pairs), each checked."""
    groups, values = [], []
    for item in overrides:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"override {item!r}: expected key=value (e.g. train.lr=0.001)")
        if key in SET_ELSEWHERE:
            raise ConfigError(
                f"override {item!r}: `{key}` is set by {SET_ELSEWHERE[key]}, not by an override"
            )
        if key == "trainer":
            groups.append(f"trainer={trainer_file(root, value.strip(), f'override {item}')}")
        elif key in GROUPS:
            group = f"data/{task}" if key == "data" else key
            name = value.strip().removeprefix(f"{task}/") if key == "data" else value.strip()
            _check_choice(root, group, name, GROUPS[key].replace("{task}", task))
            groups.append(f"{key}={task}/{name}" if key == "data" else f"{key}={name}")
        else:
            values.append(item)
    return groups, values


@dataclass
class Layer:
    """One layer of load_config, merged over the ones before it: its name (what `attention-lab
    config --explain` prints), its values and the keys it replaces whole instead of merging into
    (`REPLACED`)."""

    name: str
    values: dict
    replace: tuple[str, ...] = ()


def leaf_values(tree, prefix: str = "") -> dict:
    """{'model': {'window': 10}} -> {'model.window': 10}: lists and empty mappings are leaves
    too."""
    if not isinstance(tree, dict) or not tree:
        return {prefix.removesuffix("."): tree} if prefix else {}
    leaves = {}
    for key, value in tree.items():
        leaves.update(leaf_values(value, f"{prefix}{key}."))
    return leaves


def _subtree(values: dict, key: str):
    """values' node at dotted `key`, or None."""
    for part in key.split("."):
        values = values.get(part) if isinstance(values, dict) else None
    return values


def _merge_layer(cfg: DictConfig, layer: Layer) -> DictConfig:
    """cfg with one layer merged over it: key by key, except its `replace` keys, which take the
    layer's value whole."""
    values, replaced = copy.deepcopy(layer.values), {}
    for key in layer.replace:
        parent, _, leaf = key.rpartition(".")
        node = _subtree(values, parent) if parent else values
        if isinstance(node, dict) and leaf in node:
            replaced[key] = node.pop(leaf)
    cfg = OmegaConf.merge(cfg, values)
    for key, value in replaced.items():
        if value is not None:
            OmegaConf.update(cfg, key, value, merge=False)
    return cfg


def profile_overlay(root: Path, task: str, profile: str) -> dict:
    """conf/profile/<profile>.yaml `<task>:`: an overlay of params.yaml `<task>:`, in its shape
    (family_params too)."""
    path = root / CONF_DIR / "profile" / f"{profile}.yaml"
    if not path.is_file():
        valid = ", ".join(sorted(p.stem for p in path.parent.glob("*.yaml")))
        raise ConfigError(
            f"{root / PARAMS_FILE}: profile '{profile}' has no file {path}; choose one of {valid}"
        )
    return OmegaConf.to_container(OmegaConf.load(path)).get(task) or {}


def params_layers(
    params: dict, root: Path, task: str, family: str | None, tuned: bool, data_keys
) -> list[Layer]:
    """The layers merged over conf/, in order (later wins): params.yaml `<task>:` (its knobs;
    `families`, `pretrained`, `family_params`, `ablations` and `replication` are not config keys)
    and the profile's overlay of them, tuned/<family>.yaml (unless tuned=False), params.yaml
    `<task>.family_params.<family>` ({} when the family has no entry) and the profile's overlay of
    it; for an ablation (`<task>.ablations.<name>`), the layers of the family it is `of`, then its
    `set`. A profile sizes the generated data: its `data` keys the data source lacks (`data_keys`,
    e.g. n_train for a user's TSV file) are dropped."""
    profile = params.get("profile", "quick")
    overlay = profile_overlay(root, task, profile)
    knobs = {k: v for k, v in params[task].items() if k not in NOT_KNOBS}
    scale = {k: v for k, v in overlay.items() if k not in NOT_KNOBS}
    if "data" in scale:
        scale["data"] = {k: v for k, v in scale["data"].items() if k in data_keys}
    where = f"conf/profile/{profile}.yaml {task}"
    for name in overlay.get("family_params") or {}:
        _check_choice(root, "model", name, f"family {{name}} (in {where}.family_params)")
    ablation = ablations(params, task, root).get(family) if family else None
    base = ablation["of"] if ablation else family
    own = family_params(
        {task: overlay}, root / CONF_DIR / "profile" / f"{profile}.yaml", task, base
    )
    return [
        Layer(f"params.yaml {task}:", knobs, replace=REPLACED),
        Layer(f"{where}:", scale, replace=REPLACED),
        Layer(f"{TUNED_DIR}/{base}.yaml", tuned_params(root, base) if tuned else {}),
        Layer(
            f"params.yaml {task}.family_params.{base}",
            family_params(params, root / PARAMS_FILE, task, base),
        ),
        Layer(f"{where}.family_params.{base}", own),
        *(
            [Layer(f"params.yaml {task}.ablations.{family}.set", ablation["set"])]
            if ablation and ablation.get("set")
            else []
        ),
    ]


def _compose(root: Path, choices: list[str]) -> tuple[DictConfig, dict[str, str], list[Layer]]:
    """Hydra's composition of conf/config.yaml with these group choices (task=, data=, model=,
    trainer=), the file it chose in each group, and the files of its defaults list as layers in the
    order it merged them."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from hydra.types import RunMode

    try:
        with initialize_config_dir(config_dir=str(root / CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=choices)
            used = (
                GlobalHydra.instance()
                .config_loader()
                .compute_defaults_list("config", choices, RunMode.RUN)
            )
    except HydraException as err:  # e.g. a conf/ file that is not valid YAML
        raise ConfigError(f"{root / CONF_DIR}: {err}") from err
    layers = []
    for default in used.defaults:
        if default.package.split(".")[0] == "hydra":  # Hydra's own settings, not the run's
            continue
        path = root / CONF_DIR / f"{default.config_path}.yaml"
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        values.pop("defaults", None)
        for part in reversed(default.package.split(".") if default.package else []):
            values = {part: values}
        group = "conf default" if default.primary else default.config_path.split("/")[0]
        layers.append(Layer(f"{group} ({path.relative_to(root).as_posix()})", values))
    chosen = {k: v for k, v in used.overrides.known_choices.items() if not k.startswith("hydra")}
    return cfg, chosen, layers


def _command_line(cfg: DictConfig, cli: list[str], task: str) -> tuple[DictConfig, Layer]:
    """cfg with the key=value overrides merged one by one (a section must be set key by key:
    `train=3` would replace it), and the layer they make."""
    for item in cli:
        key, _, value = item.partition("=")
        if isinstance(
            OmegaConf.select(cfg, key.strip()), DictConfig
        ) and not value.lstrip().startswith("{"):
            raise ConfigError(
                f"override {item!r}: `{key}` is a section; set one of its keys (e.g. {key}."
                f"{next(iter(OmegaConf.select(cfg, key.strip())), 'key')}=...)"
            )
    values = {}
    for item in cli:
        try:
            one = OmegaConf.from_dotlist([item])
            cfg = OmegaConf.merge(cfg, one)
        # omegaconf's several types: all mean "this field is not expected here"
        except Exception as err:
            raise ConfigError(
                f"override {item!r}: {str(err).splitlines()[0]} (no such key in the {task} config)"
            ) from err
        values = OmegaConf.to_container(OmegaConf.merge(values, one))
    return cfg, Layer("command line", values)


def _corpus_layer(
    cfg: DictConfig, params: dict, root: Path, task: str, corpus: str
) -> tuple[DictConfig, Layer]:
    """cfg with `<task>.corpora.<corpus>` merged over its `data` (keys the source lacks added: the
    task's prepare reads them), and the layer it makes."""
    known = corpora(params, task, root)
    if corpus not in known:
        raise ConfigError(
            f"corpus={corpus!r}: not a corpus of {root / PARAMS_FILE} `{task}.corpora` "
            f"({', '.join(known) or 'none'})"
        )
    layer = Layer(f"params.yaml {task}.corpora.{corpus}", {"data": known[corpus]}, replace=REPLACED)
    OmegaConf.set_struct(cfg, False)
    cfg = _merge_layer(cfg, layer)
    OmegaConf.set_struct(cfg, True)
    return cfg, layer


@dataclass
class Resolved:
    """load_config's config and what made it: the group files chosen, and the layers merged over
    them."""

    cfg: DictConfig
    choices: dict[str, str]
    layers: list[Layer]  # conf/'s files, then the layers merged over them


def resolve_config(
    overrides: list[str] | None = None,
    family: str | None = None,
    root: Path | None = None,
    task: str = "translate",
    tuned: bool = True,
    corpus: str | None = None,
) -> Resolved:
    """load_config, with the layers it merged (see load_config)."""
    root = (root or Path.cwd()).resolve()
    params = read_params(root)
    own_task = task_params(params, root, task)
    source = own_task.get("data", {}).get("source", "generated")
    _check_choice(
        root,
        f"data/{task}",
        source,
        f"data source {{name}} for task {task} (params.yaml `{task}.data.source`)",
    )
    # an ablation: its family's model file
    base = ablations(params, task, root).get(family, {}).get("of", family)
    if family is not None:
        _check_choice(
            root,
            "model",
            base,
            "family {name}"
            if base == family
            else f"family {{name}} (params.yaml `{task}.ablations.{family}.of`)",
        )
    groups, cli = _split_overrides(root, task, list(overrides or []))
    # params.yaml `trainer:`, unless the command line picks one
    if not any(g.startswith("trainer=") for g in groups):
        groups.append(f"trainer={params_trainer(params, root)}")
    # the layers in load_config's order: 1. conf/
    choices = [
        f"task={task}",
        f"data={task}/{source}",
        *([f"model={base}"] if family is not None else []),
        *groups,
    ]
    cfg, chosen_files, conf = _compose(root, choices)
    # 2.-4. params.yaml, tuned/, family_params (with the profile's overlay)
    layers = params_layers(params, root, task, family, tuned, set(cfg.data))
    try:
        for layer in layers:
            cfg = _merge_layer(cfg, layer)
    except ConfigError:
        raise
    # omegaconf raises several types; all mean "this field is not expected here"
    except Exception as err:
        raise ConfigError(
            f"{root / PARAMS_FILE} (`{task}:`), {root / TUNED_DIR / f'{family}.yaml'} or "
            f"{root / CONF_DIR / 'profile' / (params.get('profile', 'quick') + '.yaml')}: {err}"
        ) from err
    # 4b. the corpus (`<task>.corpora.<name>`): the stage's corpus=<name>, else the ablation's
    corpus = corpus or (ablations(params, task, root).get(family) or {}).get("corpus")
    if corpus is not None:
        cfg, layer = _corpus_layer(cfg, params, root, task, corpus)
        layers.append(layer)
    # 5. the command line
    cfg, command_line = _command_line(cfg, cli, task)
    layers.append(command_line)
    # then what load_config sets itself (SET_ELSEWHERE: no file or override sets these;
    # conf/config.yaml declares ???) family_params (+ ablation)
    own = {k: v for layer in layers[3:] for k, v in leaf_values(layer.values).items()}
    set_here = {
        "family": family,
        "profile": params.get("profile", "quick"),
        "root": str(root),
        "pretrained": family in pretrained_families(params, task),
        "seeds": params.get("seeds", [0]),
        "explicit": sorted({*own, *(item.partition("=")[0].strip() for item in cli)}),
    }
    # the folders as plain strings (${folder:...} resolved): a config another process reads (a Ray
    # worker, a spawned benchmark) needs no resolver
    for key in cfg.paths:
        cfg.paths[key] = str(cfg.paths[key])
    # the confirmatory replication: fresh seeds, its own models, metrics and predictions
    if cfg.replication:
        if family is not None:
            n = replication(params, task, root).get(family)
            if n is None:
                raise ConfigError(
                    f"replication=true: {family} has no entry in {root / PARAMS_FILE} "
                    f"`{task}.replication`"
                )
            set_here["seeds"] = list(range(REPLICATION_SEED, REPLICATION_SEED + n))
        for key in REPLICATED:
            cfg.paths[key] = f"{cfg.paths[key]}/{REPLICATION}"
        cfg.paths.plots = f"{PLOTS}/{REPLICATION}/{task}"
    # data/<kind>/<task>_<corpus>
    for key in ("prepared", "tokenized") if corpus is not None else ():
        cfg.paths[key] = f"{cfg.paths[key]}{corpus_suffix(corpus)}"
    OmegaConf.set_struct(cfg, False)
    for key, value in set_here.items():
        cfg[key] = value
    OmegaConf.set_struct(cfg, True)
    layers += [
        Layer(f"load_config: {SET_ELSEWHERE[key]}", {key: value}) for key, value in set_here.items()
    ]
    where = (
        f"config of {task}{'/' + family if family else ''} ({root / PARAMS_FILE}, conf/,"
        f" {TUNED_DIR}/, the profile or an override)"
    )
    # conf/'s ??? keys (values that live in params.yaml) all set, data.source among them
    check_missing(cfg, where)
    chosen = next((g.split("/", 1)[1] for g in groups if g.startswith("data=")), source)
    if cfg.data.get("source") != chosen:
        raise ConfigError(
            f"data.source = {cfg.data.get('source')!r}, but the data source chosen is {chosen!r}:"
            f" pick it with params.yaml `{task}.data.source` (or the override data=<source>), which"
            f" also brings its keys from conf/data/{task}/<source>.yaml"
        )
    check_config(cfg, where)
    return Resolved(cfg, chosen_files, conf + layers)


def load_config(
    overrides: list[str] | None = None,
    family: str | None = None,
    root: Path | None = None,
    task: str = "translate",
    tuned: bool = True,
    corpus: str | None = None,
) -> DictConfig:
    """The config a stage of `task` runs `family` with, checked (check_config). Layers, later wins:

    1. conf/ composed by Hydra: conf/config.yaml < conf/task/<task>.yaml <
    conf/data/<task>/<source>.yaml (params.yaml
       `<task>.data.source`) < conf/model/<family>.yaml < conf/trainer/<trainer>.yaml;
    2. params.yaml `<task>:` (its `data.length_mix` taken whole, not key by key);
    3. tuned/<family>.yaml (unless tuned=False: the tune stage searches from the untuned config);
    4. params.yaml `<task>.family_params.<family>` (only what differs from the layers below; none:
    {}); for an
       ablation (`<task>.ablations.<name>`, family=<name>), 1.-4. are those of the family it is
       `of`, then its `set`; then, for corpus=<name> or an ablation's `corpus`,
       `<task>.corpora.<name>` over `data` (its folders are data/prepared/<task>_<name> and
       data/tokenized/<task>_<name>);
    5. command-line overrides `key=value` (and `data=`, `model=`, `trainer=`, which pick the group's
    file in 1).

    conf/profile/<profile>.yaml overlays params.yaml in its shape: its `<task>:` keys layer 2 (its
    `data` keys only where the data source has them), its `<task>.family_params.<family>` layer 4.
    Then load_config sets family, profile, root, pretrained, seeds and `explicit` (the keys of layer
    4 and 5: an explicit setting beats a tuned value, and the tune stage does not search it). A
    value lives in one of 1 and 2: conf/ declares what params.yaml sets as ???, and a key still ???
    after every layer is a ConfigError naming it (check_missing).
    """
    return resolve_config(overrides, family, root, task, tuned, corpus).cfg


def explain_config(
    overrides: list[str] | None = None,
    family: str | None = None,
    root: Path | None = None,
    task: str = "translate",
    tuned: bool = True,
    corpus: str | None = None,
) -> tuple[DictConfig, dict[str, list[tuple[str, object]]]]:
    """load_config's config and, for each of its leaf keys (`model.input_feeding`; a list is one
    leaf), every layer that set it, in order, with the value it set there: [(layer, value), ...],
    the last one the value's origin. A conf/ file's ??? declares a key without setting it: it is not
    in the list."""
    resolved = resolve_config(overrides, family, root, task, tuned, corpus)
    history: dict[str, list[tuple[str, object]]] = {}
    for layer in resolved.layers:
        # a layer that sets a replaced key drops the lower layers' values under it
        for key in layer.replace:
            if _subtree(layer.values, key) is None:
                continue
            for old in [k for k in history if k == key or k.startswith(key + ".")]:
                history.pop(old)
        for key, value in leaf_values(layer.values).items():
            # a conf/ file's ???: the key declared, its value set by a later layer (params.yaml)
            if value != MISSING:
                history.setdefault(key, []).append((layer.name, value))
    final = leaf_values(OmegaConf.to_container(resolved.cfg, resolve=False))
    return resolved.cfg, {
        key: history.get(key) or [("(unknown)", value)] for key, value in final.items()
    }
