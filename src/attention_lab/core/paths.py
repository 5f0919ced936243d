"""Where a run's files live, all under the checkout the config was loaded in: one function per kind,
for stages and tasks alike."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

# The project's folders, relative to the checkout, named here alone: conf/config.yaml `paths:` reads
# them (${folder:<name>}), pipeline/dvc_yaml.py writes dvc.yaml's deps and outs from them (FOLDERS),
# and the code that has no config (the reports, the ledgers, the proof) joins them to a root.
CONF_DIR = "conf"  # the Hydra groups (core.config composes them)
DATA = "data"  # what the pipeline builds from the corpora (and the ledgers' copies, data/ledgers)
PREPARED = f"{DATA}/prepared"  # <task>[_<corpus>]/: the prepare stage's splits
TOKENIZED = f"{DATA}/tokenized"  # <task>[_<corpus>]/tokenizer.json
MODELS = "models"  # <family>/checkpoints, <family>/onnx, pretrained/<family>
TUNED_DIR = "tuned"  # <family>.yaml: the tune stage's best parameters, which training merges
METRICS = "metrics"  # <task>/<family>.json: DVC's metrics
RESULTS = "results"  # <task>/<family>/: the rest of an evaluation's record, and the data plots
PREDICTIONS = "predictions"  # <task>/<family>.json: every seed's test outputs
PLOTS = "plots"  # <task>/<family>/: the pictures
REPORTS = "reports"  # <task>.md, claims.md, index.md
REPLICATION = "replication"  # the replication's runs: <models, metrics, ...>/replication/
LEDGERS = "ledgers"  # a real corpus's ledger: results/ledgers/<name>/, reports/ledgers/<name>.md
FOLDERS = {
    "conf": CONF_DIR,
    "prepared": PREPARED,
    "tokenized": TOKENIZED,
    "models": MODELS,
    "tuned": TUNED_DIR,
    "metrics": METRICS,
    "results": RESULTS,
    "predictions": PREDICTIONS,
    "plots": PLOTS,
    "reports": REPORTS,
}
# conf/config.yaml `paths:` names them as ${folder:<name>}
OmegaConf.register_new_resolver("folder", FOLDERS.__getitem__, replace=True)
LOCK = "dvc.lock"  # what DVC recorded of the last runs: their deps' and outputs' hashes


def root_dir(cfg: DictConfig) -> Path:
    """The checkout a config was loaded in: every path of a run is under it."""
    return Path(cfg.root)


def user_path(cfg: DictConfig, name: str) -> Path:
    """A file or folder the config names (a user's corpus, `data.path`), relative to the
    checkout."""
    return root_dir(cfg) / name


def prepared_dir(cfg: DictConfig) -> Path:
    """data/prepared/<task>: the prepare stage's splits (<split>.jsonl, stats.json; caption:
    <split>.npy)."""
    return root_dir(cfg) / cfg.paths.prepared


def tokenized_dir(cfg: DictConfig) -> Path:
    """data/tokenized/<task>: the tokenize stage's tokenizer.json and stats.json."""
    return root_dir(cfg) / cfg.paths.tokenized


def metrics_dir(cfg: DictConfig) -> Path:
    """metrics/: metrics/<task>/<family>.json (the evaluate stages), metrics/<task>_summary.json
    (the report)."""
    return root_dir(cfg) / cfg.paths.metrics


def plots_dir(cfg: DictConfig, family: str | None = None) -> Path:
    """plots/<task>/<family>: the evaluate stage's pictures."""
    return root_dir(cfg) / cfg.paths.plots / (family or cfg.family)


def reports_dir(cfg: DictConfig) -> Path:
    """reports/: reports/<task>.md and its assets reports/<task>/, reports/index.md."""
    return root_dir(cfg) / cfg.paths.reports


def tuned_path(cfg: DictConfig, suffix: str = ".yaml") -> Path:
    """tuned/<family>.yaml, the tune stage's best trial (or, suffix=".journal", its Optuna study's
    journal)."""
    return root_dir(cfg) / TUNED_DIR / f"{cfg.family}{suffix}"


def search_space_path(cfg: DictConfig) -> Path:
    """conf/tune/<family>.yaml: the family's Optuna search space."""
    return root_dir(cfg) / CONF_DIR / "tune" / f"{cfg.family}.yaml"


def seed_dir(
    cfg: DictConfig, seed: int, family: str | None = None, folder: str | None = None
) -> Path:
    """models/<family>/checkpoints/seed<k>: best.ckpt, last.ckpt, train.json, run.json (MLflow run
    id); a task's variant of the family's runs (Task.runs: classify's runs on a share of the labels)
    lives in checkpoints/<folder>/seed<k>."""
    checkpoints = root_dir(cfg) / cfg.paths.models / (family or cfg.family) / "checkpoints"
    return (checkpoints if folder is None else checkpoints / folder) / f"seed{seed}"


def trials_dir(cfg: DictConfig, family: str | None = None) -> Path:
    """tuned/.trials/<family>: where the tune stage's trials train; the best complete trial's run
    stays there (a full run at the first seed, and its reuse.json), for the train stage to take as
    that seed's run (train/training.py)."""
    return root_dir(cfg) / TUNED_DIR / ".trials" / (family or cfg.family)


def partial_dir(out: Path, dvc_out: Path) -> Path:
    """Where a run works before it moves to `out` (inside the stage's DVC output `dvc_out`): beside
    dvc_out, never in it, because DVC clears a stage's outputs before running it and the partial run
    must survive to be resumed."""
    return dvc_out.parent / f".partial-{dvc_out.name}" / out.relative_to(dvc_out)


def pretrained_dir(cfg: DictConfig, family: str | None = None) -> Path:
    """models/pretrained/<family>: the pretrain stage's encoder.safetensors, config.json,
    tokenizer.json, pretrain.json."""
    return root_dir(cfg) / cfg.paths.models / "pretrained" / (family or cfg.family)


def pretrain_run_path(cfg: DictConfig, family: str | None = None) -> Path:
    """models/pretrained/<family>.run.json: what differs each time the pretraining runs (its MLflow
    run, its seconds), kept out of models/pretrained/<family> so that folder is the same bytes every
    time (DVC then skips what reads it)."""
    return pretrained_dir(cfg, family).with_name(f"{family or cfg.family}.run.json")


def tokenizer_path(cfg: DictConfig) -> Path:
    """The family's vocabulary: its pretrained encoder's for a pretrained family, else the task's
    tokenize stage's."""
    if cfg.get("pretrained"):
        return pretrained_dir(cfg) / "tokenizer.json"
    return tokenized_dir(cfg) / "tokenizer.json"


def onnx_dir(cfg: DictConfig) -> Path:
    """models/<family>/onnx: the self-contained folder that serving loads."""
    return root_dir(cfg) / cfg.paths.models / cfg.family / "onnx"


def predictions_path(cfg: DictConfig, family: str | None = None) -> Path:
    """predictions/<task>/<family>.json: {"ids": [...], "references": [...], "seeds": {"<k>":
    [...]}}, one output per test example in test order (translate: detokenized hypothesis; classify:
    label id; caption: caption); a task with variants of its runs adds its Task.variants section,
    {"<variant>": {"<k>": [...]}} (classify: its runs on a share of the labels)."""
    return root_dir(cfg) / cfg.paths.predictions / cfg.task.name / f"{family or cfg.family}.json"
