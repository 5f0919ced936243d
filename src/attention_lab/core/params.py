"""params.yaml, the pipeline's knobs (DVC's params): read and checked, and its lists (a task's
families, pretrained families, corpora, ablations and replication) as the stages and dvc.yaml use
them. core/config.py merges its values into a run's config."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from attention_lab.core.config_rules import ConfigError
from attention_lab.core.paths import CONF_DIR

# params.yaml holds one section for each task it runs
from attention_lab.core.task import NAMES as TASKS

PARAMS_FILE = "params.yaml"
# params.yaml lists
NOT_KNOBS = (
    "families",
    "pretrained",
    "family_params",
    "ablations",
    "corpus_ablations",
    "replication",
    "corpora",
)
# the replication's first seed: far from params.yaml `seeds`, none seen by a study
REPLICATION_SEED = 1000


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
    unknown = sorted(set(params) - {"profile", "seeds", "tasks", "trainer", *TASKS})
    if unknown:
        raise ConfigError(
            f"{path}: unknown top-level key(s) {unknown}; expected profile, seeds, tasks, trainer"
            f" and one section per task ({', '.join(TASKS)})"
        )
    return params


def task_params(params: dict, root: Path, task: str) -> dict:
    """params.yaml `<task>:`, the knobs of one task (families, family_params, data, tokenize, train,
    evaluate)."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    own = params.get(task)
    if not isinstance(own, dict):
        raise ConfigError(
            f"{root / PARAMS_FILE}: expected a mapping `{task}:` (families, data, train, ...), got"
            f" {own!r}"
        )
    return own


def families(params: dict, task: str) -> list[str]:
    """params.yaml `<task>.families` in timeline order, then `<task>.pretrained` (families
    fine-tuned from a pretrained encoder)."""
    own = params.get(task, {})
    return list(own.get("families") or []) + pretrained_families(params, task)


def pretrained_families(params: dict, task: str) -> list[str]:
    """params.yaml `<task>.pretrained`: families whose encoder comes from their `pretrain@<family>`
    stage."""
    return list(params.get(task, {}).get("pretrained") or [])


def corpora(params: dict, task: str, root: Path | None = None) -> dict[str, dict]:
    """params.yaml `<task>.corpora`: {name: {data key: value, ...}}, each the task's `data` with
    those keys changed (or added: a transform the task's prepare reads, e.g. translate's `order`),
    prepared and tokenized on its own under data/prepared/<task>_<name> and
    data/tokenized/<task>_<name>, for the ablations that name it; checked. An entry's `source` names
    the data source it is built on: it exists only while `<task>.data.source` is that one (a corpus
    of the built-in data does not exist on a user's corpus: corpus_applies)."""
    where = f"{(root or Path()) / PARAMS_FILE} {task}.corpora"
    entries = (params.get(task) or {}).get("corpora") or {}
    if not isinstance(entries, dict):
        raise ConfigError(
            f"{where}: expected a mapping {{<name>: {{<data key>: <value>, ...}}}}, got {entries!r}"
        )
    for name, entry in entries.items():
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ConfigError(
                f"{where}: corpus name {name!r}: expected lowercase letters, digits and _"
            )
        if not isinstance(entry, dict) or not entry:
            raise ConfigError(
                f"{where}.{name}: expected {{<data key>: <value>, ...}} (what differs from "
                f"`{task}.data`), got {entry!r}"
            )
        if "source" in entry and not isinstance(entry["source"], str):
            raise ConfigError(
                f"{where}.{name}.source: expected the data source the corpus is built on (e.g. "
                f"generated), got {entry['source']!r}"
            )
    return entries


def corpus_applies(params: dict, task: str, corpus: str, root: Path | None = None) -> bool:
    """Whether `<task>.corpora.<corpus>` exists on the task's data: its `source`, where it names
    one, is `<task>.data.source`."""
    source = corpora(params, task, root)[corpus].get("source")
    return source is None or source == ((params.get(task) or {}).get("data") or {}).get("source")


def corpus_suffix(corpus: str | None) -> str:
    """A corpus's folders are <task>_<name> beside the task's own <task>: the suffix `_<name>` (''
    for none)."""
    return f"_{corpus}" if corpus else ""


ABLATION_KEYS = ("ablations", "corpus_ablations")  # a task's two dicts of ablations (ablations())


def ablations(params: dict, task: str, root: Path | None = None) -> dict[str, dict]:
    """params.yaml `<task>.ablations` and `<task>.corpus_ablations` as one checked dict {name: {of:
    family, set: {key: value, ...}[, corpus: name]}}: a family with one switch changed, or trained
    on a corpus of `<task>.corpora` (every seed, the family's tuned values, evaluated as it). Two
    dicts since dvc.yaml loops over each, and an item of the second reads
    data/prepared/<task>_<corpus>."""
    found: dict[str, dict] = {}
    known, pretrained = corpora(params, task, root), pretrained_families(params, task)  # checked
    for key in ABLATION_KEYS:
        where = f"{(root or Path()) / PARAMS_FILE} {task}.{key}"
        entries = (params.get(task) or {}).get(key) or {}
        if not isinstance(entries, dict):
            raise ConfigError(
                f"{where}: expected a mapping {{<name>: {{of: <family>, "
                f"set: {{...}}}}}}, got {entries!r}"
            )
        for name, entry in entries.items():
            check_ablation(
                f"{where}.{name}", entry, key == "corpus_ablations", task, known, pretrained, root
            )
            if name in found:
                raise ConfigError(
                    f"{where}.{name}: also an entry of `{task}.ablations`; name it once"
                )
            found[name] = entry
    return found


def check_ablation(
    where: str, entry, on_corpus: bool, task: str, known: dict, pretrained: list, root: Path | None
) -> None:
    """A ConfigError naming `where` (`<file> <task>.<key>.<name>`) unless the entry is an ablation
    (`known`: the task's corpora; `pretrained`: its pretrained families)."""
    name = where.rpartition(".")[2]
    allowed = {"of", "set", "corpus"} if on_corpus else {"of", "set"}
    if (
        not isinstance(entry, dict)
        or "of" not in entry
        or not set(entry) <= allowed
        or not isinstance(entry.get("set", {}), dict)
        or not (entry.get("corpus") if on_corpus else entry.get("set"))
    ):
        shape = (
            "{of: <family>, corpus: <name>[, set: {<key>: <value>, ...}]}"
            if on_corpus
            else "{of: <family>, set: {<key>: <value>, ...}} (one on another corpus: "
            f"`{task}.corpus_ablations`)"
        )
        raise ConfigError(f"{where}: expected {shape}, got {entry!r}")
    if on_corpus and entry["corpus"] not in known:
        raise ConfigError(
            f"{where}.corpus: {entry['corpus']!r} is not a corpus of "
            f"`{task}.corpora` ({', '.join(known) or 'none'})"
        )
    if entry["of"] in pretrained or not isinstance(entry["of"], str):
        raise ConfigError(
            f"{where}.of: expected a family trained from scratch (not one of "
            f"`{task}.pretrained`), got {entry['of']!r}"
        )
    if root is not None and (root / CONF_DIR / "model" / f"{name}.yaml").is_file():
        raise ConfigError(
            f"{where}: a family has this name (conf/model/{name}.yaml); name the ablation otherwise"
        )


def corpora_apply(params: dict, task: str, root: Path | None = None) -> bool:
    """Whether the task's corpora exist on its data (corpus_applies): all of them or none (a mix
    is a ConfigError: dvc.yaml's corpus groups loop over `<task>.corpora` whole)."""
    names = list(corpora(params, task, root))
    applies = [n for n in names if corpus_applies(params, task, n, root)]
    if applies and len(applies) < len(names):
        gone = [n for n in names if n not in applies]
        raise ConfigError(
            f"{(root or Path()) / PARAMS_FILE} {task}.corpora.{gone[0]}: built on "
            f"another data source than `{task}.data.source` ({', '.join(applies)} "
            "are on it): remove it with its corpus ablations"
        )
    return bool(applies) or not names


def replication(params: dict, task: str, root: Path | None = None) -> dict[str, int]:
    """params.yaml `<task>.replication`: {family or ablation: seeds}, the confirmatory replication's
    runs (fresh seeds from REPLICATION_SEED, trained after the claims are frozen), checked: each a
    family or ablation the pipeline runs, 2 to 100 seeds."""
    where = f"{(root or Path()) / PARAMS_FILE} {task}.replication"
    entries = (params.get(task) or {}).get("replication") or {}
    if not isinstance(entries, dict):
        raise ConfigError(
            f"{where}: expected a mapping {{<family or ablation>: <seeds>}}, got {entries!r}"
        )
    known = families(params, task) + list(run_ablations(params, task, root))
    # an entry of a family or ablation left out of this run: no stages
    defined = set(ablations(params, task, root))
    for name, n in entries.items():
        model = root is not None and (root / CONF_DIR / "model" / f"{name}.yaml").is_file()
        if name not in known and name not in defined and not model:
            raise ConfigError(
                f"{where}.{name}: not a family or ablation; choose from {', '.join(known)}"
            )
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 100:
            raise ConfigError(f"{where}.{name} = {n!r}: expected a number of seeds from 2 to 100")
    return {name: n for name, n in entries.items() if name in known}


def run_ablations(params: dict, task: str, root: Path | None = None) -> dict[str, dict]:
    """The ablations (`ablations`) the pipeline runs: those of a family in `<task>.families`, on a
    corpus that exists on the task's data (corpus_applies)."""
    own = families(params, task)
    return {
        name: entry
        for name, entry in ablations(params, task, root).items()
        if entry["of"] in own
        and ("corpus" not in entry or corpus_applies(params, task, entry["corpus"], root))
    }


def family_params(params: dict, path: Path, task: str, family: str | None) -> dict:
    """`<task>.family_params.<family>` of params.yaml (or of a profile, its overlay; `path` is the
    file): overrides for one family (its DVC stages alone depend on them)."""
    if family is None:
        return {}
    own = (params[task].get("family_params") or {}).get(family, {})
    if not isinstance(own, dict):
        raise ConfigError(
            f"{path}: {task}.family_params.{family} must be a mapping "
            f"(e.g. {{model: {{...}}}}), got {own!r}"
        )
    return own
