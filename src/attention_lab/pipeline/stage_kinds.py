"""The kinds of stage dvc.yaml holds: each kind's command module, deps, params and outputs, as
templates that pipeline/dvc_yaml.py fills per task and item ({task}, {item}, {of}, {data}, and the
folders core/paths.py names: {prepared}, {models}, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from attention_lab.core.paths import FOLDERS, METRICS, PREDICTIONS, REPLICATION, RESULTS


@dataclass(frozen=True)
class Kind:
    """One kind of stage: per task, a foreach group `<kind>_<task>` whose items are the task's
    families, or (for a per-task kind, families="") the one stage `<kind>_<task>`, so that each
    task's stage imports that task's code alone."""

    # dvc.yaml group (or, per task, stage) name; `{task}` is replaced
    name: str
    module: str  # attention_lab.stages.<module>
    comment: str
    # data and conf deps: {task}, {item} (the family or task), {of} (the family whose model and
    # tuned values it runs: an ablation's family, else the item), {profile}, {data} (the folder name
    # of its corpus: <task>, or <task>_<corpus>)
    deps: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    outs_no_cache: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    # what the group loops over: "families", "pretrained", "ablations", "corpus_ablations" (those on
    # another corpus), "replication" (its families and ablations), "replication_pretrained" (its
    # pretrained families), "corpora" (the command says corpus=) or "" (one stage per task)
    families: str = "families"
    overrides: str = ""  # appended to the command: replication=true


RECORDS = (METRICS, RESULTS, PREDICTIONS)  # what report_claims reads of each evaluated family
# an evaluate stage's outputs besides metrics and plots (results/: the record's rest, data plots)
EVALUATED = ("{predictions}/{task}/{item}.json", "{results}/{task}/{item}")
REPLICATED = (
    "{predictions}/{replication}/{task}/{item}.json",
    "{results}/{replication}/{task}/{item}",
)
# a template's folders: {prepared}/{data}, {models}/{replication}/{item}/checkpoints, ...
NAMES = {**FOLDERS, "replication": REPLICATION}
# ${item.set}: a replicated ablation's own entry (ablations()), else `<task>.replication.<name>`
SET = "{set}"
REPLICATE = " replication=true"
OWN = "{own}"  # the family's own params key, `<task>.family_params.<family>`: every family has one
# the kinds that loop over params.yaml's own list or dict (the rest: over items written here)
LISTED = ("families", "pretrained", "ablations", "corpus_ablations", "corpora")
# their groups exist where the corpora do (corpora_apply)
ON_CORPORA = ("corpus_ablations", "corpora")
# the stages that train: params.yaml `trainer:` picks their conf/trainer file (any of them: `auto`
# names none), so switching it re-runs them; evaluate and export run their models on the CPU
# whatever it says
TRAINER = ("{conf}/trainer",)
CONF = ("{conf}/model/{of}.yaml", *TRAINER, "{conf}/config.yaml", "{conf}/task/{task}.yaml")
TRAIN_PARAMS = ("seeds", "trainer", "{task}.train", OWN)
TRAIN_DEPS = (
    "{tuned}/{of}.yaml",
    "{prepared}/{data}",
    "{tokenized}/{data}",
    *CONF,
    "{conf}/data/{task}",
    "{conf}/profile/{profile}.yaml",
)
PREPARE = ("{conf}/data/{task}", "{conf}/task/{task}.yaml", "{conf}/profile/{profile}.yaml")
TOKENIZE = (
    "{prepared}/{data}/train.jsonl",
    "{conf}/task/{task}.yaml",
    "{conf}/profile/{profile}.yaml",
)
PRETRAIN_DEPS = (
    "{prepared}/{task}/train.jsonl",
    "{prepared}/{task}/valid.jsonl",
    "{prepared}/{task}/unlabelled.jsonl",
    "{conf}/model/{item}.yaml",
    "{conf}/task/{task}.yaml",
    "{conf}/profile/{profile}.yaml",
    *TRAINER,
)
KINDS = (
    Kind(
        "prepare_{task}",
        "prepare",
        "data/prepared/<task>/{train,valid,test}.jsonl (+ images, rationales, stats.json)",
        deps=PREPARE,
        params=("profile", "{task}.data"),
        outs=("{prepared}/{task}",),
        families="",
    ),
    Kind(
        "tokenize_{task}",
        "tokenizer",
        "data/tokenized/<task>/tokenizer.json, trained on the training split only",
        deps=TOKENIZE,
        params=("{task}.tokenize",),
        outs=("{tokenized}/{task}",),
        families="",
    ),
    Kind(
        "prepare_corpus_{task}",
        "prepare",
        "each corpus of params.yaml `<task>.corpora`: "
        "`<task>.data` with its keys changed -> data/prepared/<task>_<corpus>",
        deps=PREPARE,
        params=("profile", "{task}.data", "{task}.corpora.{item}"),
        outs=("{prepared}/{data}",),
        families="corpora",
    ),
    Kind(
        "tokenize_corpus_{task}",
        "tokenizer",
        "as tokenize_<task>, on the corpus -> data/tokenized/<task>_<corpus>",
        deps=TOKENIZE,
        params=("{task}.tokenize",),
        outs=("{tokenized}/{data}",),
        families="corpora",
    ),
    Kind(
        "pretrain",
        "pretrain",
        "the encoder a pretrained family starts from -> models/pretrained/<family>",
        deps=PRETRAIN_DEPS,
        params=("seeds", "trainer", "{task}.pretrain", OWN),
        outs=("{models}/pretrained/{item}", "{models}/pretrained/{item}.run.json"),
        families="pretrained",
    ),
    Kind(
        "tune_{task}",
        "tune",
        "one Optuna study per family -> tuned/<family>.yaml, which its train stage merges",
        deps=(
            "{prepared}/{task}",
            "{tokenized}/{task}",
            *CONF,
            "{conf}/data/{task}",
            "{conf}/profile/{profile}.yaml",
        ),
        params=("{task}.tune", *TRAIN_PARAMS),
        outs_no_cache=("{tuned}/{item}.yaml",),
    ),
    Kind(
        "tune_finetuned",
        "tune",
        "as tune_<task>, on the pretrained encoder and its vocabulary",
        deps=(
            "{prepared}/{task}",
            "{models}/pretrained/{item}",
            *CONF,
            "{conf}/profile/{profile}.yaml",
        ),
        params=("{task}.tune", *TRAIN_PARAMS),
        outs_no_cache=("{tuned}/{item}.yaml",),
        families="pretrained",
    ),
    Kind(
        "train_{task}",
        "train",
        "every seed (and label fraction) -> models/<family>/checkpoints",
        deps=TRAIN_DEPS,
        params=TRAIN_PARAMS,
        outs=("{models}/{item}/checkpoints",),
    ),
    Kind(
        "finetune_{task}",
        "train",
        "as train_<task>, on the pretrained encoder and its vocabulary",
        deps=(
            "{tuned}/{item}.yaml",
            "{prepared}/{task}",
            "{models}/pretrained/{item}",
            *CONF,
            "{conf}/profile/{profile}.yaml",
        ),
        params=TRAIN_PARAMS,
        outs=("{models}/{item}/checkpoints",),
        families="pretrained",
    ),
    Kind(
        "evaluate_{task}",
        "evaluate",
        "test scores: metrics/ (numbers), results/ (the rest, data "
        "plots), plots/ (images), predictions/ (every seed's outputs, for the paired tests)",
        deps=(
            "{prepared}/{task}",
            "{tokenized}/{task}",
            "{models}/{item}/checkpoints",
            "{tuned}/{item}.yaml",
        ),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{task}/{item}.json",),
        plots=("{plots}/{task}/{item}",),
        outs_no_cache=EVALUATED,
    ),
    Kind(
        "evaluate_finetuned",
        "evaluate",
        "as evaluate_<task>, plus the pretraining figures",
        deps=(
            "{prepared}/{task}/test.jsonl",
            "{models}/pretrained/{item}/pretrain.json",
            "{models}/pretrained/{item}.run.json",
            "{models}/pretrained/{item}/tokenizer.json",
            "{models}/{item}/checkpoints",
            "{tuned}/{item}.yaml",
        ),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{task}/{item}.json",),
        plots=("{plots}/{task}/{item}",),
        outs_no_cache=EVALUATED,
        families="pretrained",
    ),
    Kind(
        "export_{task}",
        "export",
        "ONNX graphs, tokenizer, meta.json, parity.json -> models/<family>/onnx",
        deps=("{tokenized}/{task}", "{models}/{item}/checkpoints", "{conf}/config.yaml"),
        params=("{task}.evaluate",),
        outs=("{models}/{item}/onnx",),
    ),
    Kind(
        "export_finetuned",
        "export",
        "as export_<task>, from the fine-tuned checkpoints",
        deps=("{tokenized}/{task}", "{models}/{item}/checkpoints", "{conf}/config.yaml"),
        params=("{task}.evaluate",),
        outs=("{models}/{item}/onnx",),
        families="pretrained",
    ),
    Kind(
        "train_ablation_{task}",
        "train",
        "each of params.yaml `<task>.ablations`: its family with "
        "one switch changed, on that family's tuned values, every seed -> "
        "models/<ablation>/checkpoints",
        deps=TRAIN_DEPS,
        params=(*TRAIN_PARAMS, "{task}.ablations.{item}"),
        outs=("{models}/{item}/checkpoints",),
        families="ablations",
    ),
    Kind(
        "evaluate_ablation_{task}",
        "evaluate",
        "as evaluate_<task>, for the ablations",
        deps=("{prepared}/{data}", "{tokenized}/{data}", "{models}/{item}/checkpoints"),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{task}/{item}.json",),
        plots=("{plots}/{task}/{item}",),
        outs_no_cache=EVALUATED,
        families="ablations",
    ),
    Kind(
        "train_corpus_ablation_{task}",
        "train",
        "each of params.yaml `<task>.corpus_ablations`: "
        "as train_ablation_<task>, on its corpus (data/prepared/<task>_<corpus>)",
        deps=TRAIN_DEPS,
        params=(*TRAIN_PARAMS, "{task}.corpus_ablations.{item}"),
        outs=("{models}/{item}/checkpoints",),
        families="corpus_ablations",
    ),
    Kind(
        "evaluate_corpus_ablation_{task}",
        "evaluate",
        "as evaluate_<task>, on the ablation's corpus",
        deps=("{prepared}/{data}", "{tokenized}/{data}", "{models}/{item}/checkpoints"),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{task}/{item}.json",),
        plots=("{plots}/{task}/{item}",),
        outs_no_cache=EVALUATED,
        families="corpus_ablations",
    ),
    Kind(
        "train_replication_{task}",
        "train",
        "the confirmatory replication: each of params.yaml "
        "`<task>.replication` on its fresh seeds, after the claims are frozen -> "
        "models/replication/<name>/checkpoints",
        deps=TRAIN_DEPS,
        params=("trainer", "{task}.train", OWN, "{task}.replication.{item}", SET),
        outs=("{models}/{replication}/{item}/checkpoints",),
        families="replication",
        overrides=REPLICATE,
    ),
    Kind(
        "pretrain_replication",
        "pretrain",
        "as pretrain, for the replication: its own pretraining on the first fresh seed ->"
        " models/replication/pretrained/<family>",
        deps=PRETRAIN_DEPS,
        params=("trainer", "{task}.pretrain", OWN, "{task}.replication.{item}"),
        outs=(
            "{models}/{replication}/pretrained/{item}",
            "{models}/{replication}/pretrained/{item}.run.json",
        ),
        families="replication_pretrained",
        overrides=REPLICATE,
    ),
    Kind(
        "finetune_replication_{task}",
        "train",
        "as train_replication_<task>, for the pretrained families, on the replication's own"
        " pretraining",
        deps=(
            "{tuned}/{item}.yaml",
            "{prepared}/{task}",
            "{models}/{replication}/pretrained/{item}",
            *CONF,
            "{conf}/profile/{profile}.yaml",
        ),
        params=("trainer", "{task}.train", OWN, "{task}.replication.{item}"),
        outs=("{models}/{replication}/{item}/checkpoints",),
        families="replication_pretrained",
        overrides=REPLICATE,
    ),
    Kind(
        "evaluate_replication_{task}",
        "evaluate",
        "as evaluate_<task>, for the replication -> metrics/replication/",
        deps=(
            "{prepared}/{data}",
            "{tokenized}/{data}",
            "{models}/{replication}/{item}/checkpoints",
        ),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{replication}/{task}/{item}.json",),
        plots=("{plots}/{replication}/{task}/{item}",),
        outs_no_cache=REPLICATED,
        families="replication",
        overrides=REPLICATE,
    ),
    Kind(
        "evaluate_replication_finetuned",
        "evaluate",
        "as evaluate_finetuned, for the replication",
        deps=(
            "{prepared}/{task}/test.jsonl",
            "{models}/{replication}/pretrained/{item}/pretrain.json",
            "{models}/{replication}/pretrained/{item}.run.json",
            "{models}/{replication}/pretrained/{item}/tokenizer.json",
            "{models}/{replication}/{item}/checkpoints",
        ),
        params=("{task}.evaluate",),
        metrics=("{metrics}/{replication}/{task}/{item}.json",),
        plots=("{plots}/{replication}/{task}/{item}",),
        outs_no_cache=REPLICATED,
        families="replication_pretrained",
        overrides=REPLICATE,
    ),
    Kind(
        "report_{task}",
        "report",
        "reports/<task>.md + reports/<task>/, metrics/<task>_summary.json (ranking, p-values)",
        deps=("{metrics}/{task}", "{results}/{task}", "{plots}/{task}", "{predictions}/{task}"),
        params=("{task}.families",),
        outs_no_cache=("{reports}/{task}.md", "{reports}/{task}", "{metrics}/{task}_summary.json"),
        families="",
    ),
)
