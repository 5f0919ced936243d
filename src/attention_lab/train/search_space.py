"""A family's search space, conf/tune/<family>.yaml ({dotted config key: {low, high[, log]} or
{choices: [...]}}): read and checked against the family's config, its untuned values (a study's
trial 0) and a trial's sampled values."""

from __future__ import annotations

from pathlib import Path

import optuna
from omegaconf import DictConfig, OmegaConf

from attention_lab.core.config import ConfigError, check_value

SPEC_KEYS = {"low", "high", "log", "choices"}


def load_space(path: Path, cfg: DictConfig) -> dict[str, dict]:
    """conf/tune/<family>.yaml: {dotted config key: {low, high[, log]} or {choices: [...]}}, checked
    against cfg."""
    try:
        space = OmegaConf.to_container(OmegaConf.load(path)) or {}
    except Exception as err:  # yaml's and omegaconf's parse errors
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from err
    if not isinstance(space, dict):
        raise ConfigError(
            f"{path}: expected a mapping of config keys to {{low, high}} or {{choices}}"
        )
    for key, spec in space.items():
        where = f"{path}: `{key}`"
        if OmegaConf.select(cfg, key, default=None) is None:
            raise ConfigError(
                f"{where} is not a key of the family's config (e.g. train.lr, model.dropout)"
            )
        if (
            not isinstance(spec, dict)
            or not spec.keys() <= SPEC_KEYS
            or ("choices" in spec) == ("low" in spec)
        ):
            raise ConfigError(
                f"{where}: expected {{low: L, high: H[, log: true]}} or {{choices: [...]}}, got"
                f" {spec!r}"
            )
        if "choices" in spec and not (isinstance(spec["choices"], list) and spec["choices"]):
            raise ConfigError(f"{where}: choices must be a non-empty list")
        if "low" in spec:
            low, high = spec.get("low"), spec.get("high")
            if (
                not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)
                )
                or low >= high
            ):
                raise ConfigError(
                    f"{where}: low and high must be numbers with low < high, got {low!r}, {high!r}"
                )
            if spec.get("log") and low <= 0:
                raise ConfigError(f"{where}: a log scale needs low > 0, got {low!r}")
        # the key's own range (config_rules.RULES)
        for value in spec.get("choices") or (spec["low"], spec["high"]):
            if problem := check_value(key, value, cfg.task.name):
                raise ConfigError(f"{where}: {problem}")
        if not contains(spec, own := OmegaConf.select(cfg, key)):
            raise ConfigError(
                f"{where}: the family's own value {own!r} is outside the space (trial 0 trains the "
                "untuned default); widen the range or add it to the choices"
            )
    return space


def contains(spec: dict, value: object) -> bool:
    """Is `value` one of spec's choices, or within its [low, high]?"""
    if "choices" in spec:
        return value in spec["choices"]
    return isinstance(value, (int, float)) and spec["low"] <= value <= spec["high"]


def defaults(cfg: DictConfig, space: dict) -> dict[str, object]:
    """The family's own (untuned) value of every searched key: trial 0 of its study."""
    return {key: OmegaConf.select(cfg, key) for key in space}


def suggest(trial: optuna.Trial, space: dict[str, dict]) -> dict[str, object]:
    """One sampled value per key: categorical for choices, int when low and high are ints, else
    float."""
    out = {}
    for key, spec in space.items():
        if "choices" in spec:
            out[key] = trial.suggest_categorical(key, spec["choices"])
        elif isinstance(spec["low"], int) and isinstance(spec["high"], int):
            out[key] = trial.suggest_int(key, spec["low"], spec["high"], log=bool(spec.get("log")))
        else:
            out[key] = trial.suggest_float(
                key, float(spec["low"]), float(spec["high"]), log=bool(spec.get("log"))
            )
    return out


def nested(flat: dict[str, object]) -> dict:
    """{'train.lr': 1e-3} -> {'train': {'lr': 1e-3}}."""
    out: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out
