"""MLflow setup in one place: tracking URI, experiment per task (with the tags that make the UI
open it as model training, on its headline metrics), run tags, flattened params, reopening runs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import urllib.request
from pathlib import Path

from filelock import FileLock
from omegaconf import DictConfig, OmegaConf

from attention_lab.core.paths import CONF_DIR, TUNED_DIR, prepared_dir, pretrained_dir, root_dir
from attention_lab.core.task import Task, get_task

# The experiment kind MLflow's UI calls "Machine learning" (not "GenAI apps & agents"); MLflow
# 3.17's UI follows its sidebar switch or ?workflowType=machine_learning instead, so ui_link()
# carries that too (docs/mlflow.md).
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"
VIEW = "headline"  # a saved runs view, an experiment tag; ?viewStateShareKey=headline opens it
VIEW_TAG = f"mlflow.sharedViewState.{VIEW}"
ORIGIN_TAG = "origin_run_id"  # on a run standing in for one (this id) the store lacks: stand_in()


def tracking_uri(cfg: DictConfig) -> str:
    """cfg.tracking.uri, else $MLFLOW_TRACKING_URI, else sqlite:///<repo>/mlflow.db
    (default_tracking_uri)."""
    return cfg.tracking.uri or default_tracking_uri(cfg.root)


def default_tracking_uri(root: str | Path) -> str:
    """$MLFLOW_TRACKING_URI, else sqlite:///<store_root(root)>/mlflow.db (never ./mlruns)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{store_root(root) / 'mlflow.db'}"


def store_root(root: str | Path) -> Path:
    """The checkout whose mlflow.db a run logs to: $DVC_ROOT where DVC set it, else root."""
    # `dvc exp run --queue` or `--temp` runs the stages in a copy that it deletes; DVC_ROOT names
    # the user's checkout there (the checkout itself for `dvc repro`): the runs outlive the copy
    dvc_root = os.environ.get("DVC_ROOT")
    return Path(dvc_root) if dvc_root and Path(dvc_root).is_dir() else Path(root)


class TrackingError(RuntimeError):
    """The MLflow tracking server does not answer."""


def check_server(uri: str, timeout: float = 5.0) -> None:
    """Fail at once when an http(s) tracking URI does not answer its /health (MLflow itself retries
    for minutes)."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            pass
    except (OSError, ValueError) as err:
        raise TrackingError(
            f"MLflow tracking server {uri} is unreachable ({getattr(err, 'reason', err)}): start"
            " it, or unset MLFLOW_TRACKING_URI to log to sqlite:///<repo>/mlflow.db; nothing"
            " was run"
        ) from err


def store_lock(uri: str):
    """A file lock for processes of this machine writing the same rows of a local sqlite store (two
    inserts of one tag, or of the tables, race there); nothing for a server (its clients are on
    other machines too)."""
    local = uri.startswith("sqlite:///")
    return FileLock(uri.removeprefix("sqlite:///") + ".lock") if local else contextlib.nullcontext()


def experiment_id(cfg: DictConfig) -> str:
    """The task's experiment, created on first use (a local store's artifacts in mlartifacts/ beside
    its mlflow.db); a TrackingError first if the tracking server does not answer."""
    import mlflow

    uri = tracking_uri(cfg)
    check_server(uri)
    mlflow.set_tracking_uri(uri)
    local = uri.startswith("sqlite:///")
    # processes starting at once (tuning workers) must not both create tables or experiment
    with store_lock(uri):
        exp = mlflow.get_experiment_by_name(cfg.task.name)
        if exp is not None:
            return update_tags(exp, cfg.task.name)
        database = Path(uri.removeprefix("sqlite:///"))
        location = (database.parent / "mlartifacts" / cfg.task.name).as_uri() if local else None
        return mlflow.create_experiment(
            cfg.task.name,
            artifact_location=location,
            tags={KIND_TAG: KIND, VIEW_TAG: headline_view(cfg.task.name)},
        )


def headline_view(task: str) -> str:
    """MLflow's saved-view envelope for the runs table: training runs, best first by the ranking
    metric, with the family, seed and the task's headline metrics as columns."""
    keys = list(get_task(task).headline)
    state = {
        "searchFilter": "tags.stage = 'train'",
        "orderByKey": f"metrics.`{keys[0]}`",
        "orderByAsc": False,
        "selectedColumns": ["tags.`family`", "tags.`seed`", *(f"metrics.`{k}`" for k in keys)],
    }
    return json.dumps({"name": VIEW, "createdAt": 0, "state": json.dumps(state)})


def ui_link(experiment_id: str) -> str:
    """The task's headline view in the MLflow UI, relative to its address (http://127.0.0.1:5000/
    for `mlflow ui`)."""
    return (
        f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW}"
    )


def update_tags(exp, task: str) -> str:
    """An experiment made before these tags gets them: the kind if it has none, our saved view if it
    differs."""
    import mlflow

    client = mlflow.MlflowClient()
    if KIND_TAG not in exp.tags:
        client.set_experiment_tag(exp.experiment_id, KIND_TAG, KIND)
    if exp.tags.get(VIEW_TAG) != (view := headline_view(task)):
        client.set_experiment_tag(exp.experiment_id, VIEW_TAG, view)
    return exp.experiment_id


def flatten(cfg: DictConfig) -> dict[str, str]:
    """Resolved config as dotted keys: {'model.hidden_dim': '256', 'train.lr': '0.001', ...}."""
    out: dict[str, str] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix[:-1]] = str(node)[:6000]

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def git_commit(root: str | Path) -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def data_hash(cfg: DictConfig) -> str:
    """Short SHA-256 over the prepared splits and, for a pretrained family, the encoder it starts
    from (models/pretrained/<family>/encoder.safetensors), so a run or study names the exact data
    and weights it saw."""
    h = hashlib.sha256()
    paths = [prepared_dir(cfg) / f"{split}.jsonl" for split in ("train", "valid", "test")]
    if cfg.get("pretrained"):
        paths.append(pretrained_dir(cfg) / "encoder.safetensors")
    for path in paths:
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


# {code hash: the one it trains like}, by `attention-lab neutral`
EQUIVALENT_CODE = f"{TUNED_DIR}/equivalent_code.json"


def raw_code_hash(cfg: DictConfig, stage: str = "train") -> str:
    """Short SHA-256 over the names and contents of the source files the family's `stage` command
    can import (core.code_deps; `train` stands for train_<task> and finetune_<task>, which run one
    module), under cfg.root's src/ as DVC hashes them (the running package's where cfg.root has
    none)."""
    from attention_lab.core.code_deps import PACKAGE, Source

    src = root_dir(cfg) / "src"
    if not (src / PACKAGE).is_dir():
        src = Path(__file__).resolve().parents[2]
    command = (
        f"python -m attention_lab.stages.{'pretrain' if stage == 'pretrain' else 'train'} "
        f"task={cfg.task.name} family={cfg.family}"
    )
    h = hashlib.sha256()
    for path in Source(src, root_dir(cfg) / CONF_DIR).stage_files(command):
        h.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def code_hash(cfg: DictConfig, stage: str = "train") -> str:
    """The code that trains the family's runs and studies: raw_code_hash, or the hash that
    `attention-lab neutral` proved it trains bit for bit like (tuned/equivalent_code.json), so a
    refactor leaves runs and studies valid."""
    raw = raw_code_hash(cfg, stage)
    path = root_dir(cfg) / EQUIVALENT_CODE
    return json.loads(path.read_text(encoding="utf-8")).get(raw, raw) if path.is_file() else raw


def run_name(cfg: DictConfig, task: Task, stage: str = "train") -> str:
    """<family>-seed<k>, pretrain- before it for pretraining, and the task's suffix after it
    (Task.run_marks: classify's -labels<percent> for a run on a share of the labels)."""
    suffix, _ = task.run_marks(cfg)
    return f"{'pretrain-' if stage == 'pretrain' else ''}{cfg.family}-seed{cfg.seed}{suffix}"


def run_tags(cfg: DictConfig, task: Task, stage: str = "train") -> dict[str, str]:
    tags = {
        "family": str(cfg.family),
        "task": cfg.task.name,
        "seed": str(cfg.seed),
        "profile": cfg.profile,
        "stage": stage,
        "git_commit": git_commit(cfg.root),
        "data_hash": data_hash(cfg),
    }
    tags.update(task.run_marks(cfg)[1])  # the task's own (classify: label_fraction)
    if exp := os.environ.get("DVC_EXP_NAME"):  # set by `dvc exp run`: the experiment of the run
        tags["dvc_exp"] = exp
    return tags


def lightning_logger(
    cfg: DictConfig,
    task: Task,
    run_id: str | None = None,
    stage: str = "train",
    tags: dict | None = None,
    name: str | None = None,
):
    """MLFlowLogger for one (family, seed) training, pretraining or tuning-trial run (or the run
    `run_id`, when resuming), with tags (`mlflow.parentRunId` among them nests it under a study's
    run)."""
    from lightning.pytorch.loggers import MLFlowLogger

    experiment_id(cfg)  # make sure the experiment exists with the right artifact location
    return MLFlowLogger(
        experiment_name=cfg.task.name,
        run_name=name or run_name(cfg, task, stage),
        tracking_uri=tracking_uri(cfg),
        tags={**run_tags(cfg, task, stage), **(tags or {})},
        log_model=False,
        run_id=run_id,
    )


@contextlib.contextmanager
def reopen_run(cfg: DictConfig, folder: Path):
    """Log into the training run of a run folder (its run.json), or into stand_in()'s run for it."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(cfg))
    with mlflow.start_run(run_id=stand_in(cfg, folder)) as run:
        yield run


def local_run(cfg: DictConfig, run_id: str) -> str | None:
    """run_id if this store has it, else the run standing in for it (tag ORIGIN_TAG), else None."""
    import mlflow
    from mlflow.exceptions import MlflowException

    client = mlflow.MlflowClient(tracking_uri(cfg))
    try:
        client.get_run(run_id)
        return run_id
    except MlflowException:
        query = f"tags.{ORIGIN_TAG} = '{run_id}'"
        found = client.search_runs([experiment_id(cfg)], query, max_results=1)
        return found[0].info.run_id if found else None


def stand_in(cfg: DictConfig, folder: Path) -> str:
    """The run of folder/run.json in this store, else a new run for it with its config."""
    # outputs pulled from a DVC remote name runs of the store they trained with: a clone with a
    # store of its own logs evaluation, export and report to a run tagged with the original id
    import mlflow
    from mlflow.entities import Param

    run_id = read_run_id(folder)
    if found := local_run(cfg, run_id):
        return found
    task = get_task(cfg.task.name)
    config = OmegaConf.load(folder / "config.yaml") if (folder / "config.yaml").is_file() else None
    suffix, marks = task.run_marks(config) if config is not None else ("", {})
    seed = config.seed if config is not None else folder.name.removeprefix("seed")
    client = mlflow.MlflowClient(uri := tracking_uri(cfg))
    tags = {
        "family": str(cfg.family),
        "task": cfg.task.name,
        "seed": str(seed),
        "stage": "train",
        "profile": cfg.profile,
        ORIGIN_TAG: run_id,
        **marks,
    }
    rid = client.create_run(
        experiment_id(cfg), run_name=f"{cfg.family}-seed{seed}{suffix}", tags=tags
    ).info.run_id
    if config is not None:  # the params of the training run it stands in for, and its config.yaml
        params = [Param(k, v) for k, v in flatten(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            client.log_batch(rid, params=params[i : i + 100])
        client.log_artifact(rid, str(folder / "config.yaml"))
    client.set_terminated(rid, "FINISHED")
    print(
        f"MLflow: run {run_id} of {folder / 'run.json'} is not in {uri} (its outputs came from "
        f"elsewhere, e.g. `dvc pull`): logging to run {rid}, tagged {ORIGIN_TAG}={run_id}; point "
        "MLFLOW_TRACKING_URI at the store that has it to log there instead"
    )
    return rid


def read_run_id(folder: Path) -> str:
    """The MLflow run id in a run folder's run.json (written by its training)."""
    return json.loads((folder / "run.json").read_text(encoding="utf-8"))["run_id"]


def copy_run(
    cfg: DictConfig, task: Task, source: str, stage: str = "train", tags: dict | None = None
) -> str:
    """A new run of cfg's (family, seed) with the params, metric histories and artifacts of run
    `source` (a tuning trial that is also a seed's training run), so the task's training runs stay
    one per (family, seed); its id."""
    import mlflow
    from mlflow.entities import Param

    client = mlflow.MlflowClient(tracking_uri(cfg))
    old = client.get_run(source)
    run = client.create_run(
        experiment_id(cfg),
        run_name=run_name(cfg, task, stage),
        tags={**run_tags(cfg, task, stage), **(tags or {})},
    )
    rid = run.info.run_id
    params = [Param(k, v) for k, v in flatten(cfg).items()]
    for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
        client.log_batch(rid, params=params[i : i + 100])
    for key in old.data.metrics:
        history = client.get_metric_history(source, key)
        for i in range(0, len(history), 1000):
            client.log_batch(rid, metrics=history[i : i + 1000])
    with contextlib.suppress(OSError):  # artifacts of a remote store may not be reachable from here
        local = Path(
            mlflow.artifacts.download_artifacts(run_id=source, tracking_uri=tracking_uri(cfg))
        )
        client.log_artifacts(rid, str(local))
    client.set_terminated(rid, "FINISHED")
    return rid
