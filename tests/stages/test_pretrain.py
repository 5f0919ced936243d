"""pretrain@bert on the tiny profile: the training split plus the unlabelled documents, a schedule
in updates."""

from __future__ import annotations

import mlflow
import pytest
import yaml

from attention_lab.core.files import read_json, read_jsonl
from attention_lab.results import records
from attention_lab.stages import evaluate, prepare, pretrain, train
from tests.tiny_models import stage_overrides

BERT = [
    "task=classify",
    "family=bert",
    *stage_overrides("bert"),
    "pretrain.vocab_size=300",
    "pretrain.max_tokens=64",
    "pretrain.batch_size=16",
    "pretrain.warmup_steps=2",
    "pretrain.max_updates=18",
    "pretrain.validate_every=9",
]


@pytest.mark.slow  # it pretrains: `make test-fast` leaves it out
def test_pretraining_reads_the_unlabelled_documents_for_a_number_of_updates(
    project, one_torch_thread
):
    """60 training + 120 unlabelled documents (never valid/test) at batch 16, 12 updates an epoch:
    18 updates, validated every 9 updates, and the MLM curves reach MLflow."""
    prepare.main(["task=classify", "data.n_train=60", "data.n_valid=15", "data.n_unlabelled=120"])
    about = pretrain.main(BERT)
    assert (
        about["documents"]
        == 180
        == len(read_jsonl(project / "data/prepared/classify/unlabelled.jsonl")) + 60
    )
    # the second epoch cut short
    assert (about["steps"], about["epochs"], about["stopped_by"]) == (18, 2, "update cap")
    assert {"val/mlm_loss", "val/mlm_accuracy", "val/perplexity"} <= set(about["last_val"])
    run = next(
        r
        for r in mlflow.search_runs(experiment_names=["classify"], output_format="list")
        if r.data.tags.get("stage") == "pretrain"
    )
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id, "val/mlm_loss")
    assert [m.step for m in history] == [8, 17]  # after updates 9 and 18, across the epoch boundary


@pytest.mark.slow  # it pretrains twice
def test_the_replication_pretrains_its_own_encoder_on_its_first_fresh_seed(
    project, one_torch_thread
):
    """With `classify.replication: {bert: 2}`, pretrain replication=true writes
    models/replication/pretrained/bert from seed 1000, beside (not over) the family's own encoder
    of seed 0, and its weights differ from that one; the replication fine-tunes and evaluates on
    it."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["classify"]["replication"] = {"bert": 2}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    prepare.main(["task=classify", "data.n_train=60", "data.n_valid=15", "data.n_unlabelled=120"])
    own, fresh = pretrain.main(BERT), pretrain.main([*BERT, "replication=true"])
    assert (own["seed"], fresh["seed"]) == (0, 1000)
    mine = project / "models/pretrained/bert"
    theirs = project / "models/replication/pretrained/bert"
    assert read_json(theirs / "pretrain.json")["seed"] == 1000
    assert (project / "models/replication/pretrained/bert.run.json").is_file()
    encoder = "encoder.safetensors"
    assert (mine / encoder).read_bytes() != (theirs / encoder).read_bytes()
    tiny = ["train.label_fractions=[1.0]", "train.max_epochs=1", "train.min_epochs=0"]
    (mine / encoder).unlink()  # the fine-tuning must not need the family's own
    train.main([*BERT, *tiny, "train.batch_size=16", "replication=true"])
    evaluate.main([*BERT, tiny[0], "replication=true"])
    record = records.read_at(project, "classify", "bert", replication=True)
    assert record["seeds"] == [1000, 1001] and record["pretrain"]["seed"] == 1000
