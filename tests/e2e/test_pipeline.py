"""End to end: the real pipeline (`attention-lab repro`, i.e. `dvc repro` two chains at a time, then
plain `dvc repro`) on the tiny profile, in a throw-away copy of the project."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import yaml

from attention_lab.core.config import leaf_values
from attention_lab.pipeline.scratch import GIT_ID, init_repo
from attention_lab.results import plots, records
from tests.conftest import ROOT, copy_project

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
# The tiny pipeline runs one family of each kind (every family's model, export and parity have their
# own tests in test_models, test_classifiers, test_captioner and test_export; luong_local_p runs
# through the pipeline in test_user_corpora): the same stages, fewer processes.
FAMILIES = ["seq2seq_lstm", "bahdanau", "luong_general", "transformer"]
NO_ATTENTION = {"seq2seq_lstm"}
CLASSIFIERS = ["bow", "han", "self_attentive", "transformer_encoder", "bert", "bert_minilm"]
NO_ATTENTION_CLASSIFIERS = {"bow"}
ABLATIONS = {"translate": "luong_general_no_feeding", "classify": "self_attentive_no_penalty"}
REPLICATION = {"translate": {"bahdanau": 2}}


def sh(args: list[str], cwd: Path, check: bool = True, **extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **GIT_ID,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'mlflow.db'}",
        **extra,
    }
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} failed"
            f" ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


def repro_project(dest: Path, params_edit=None, imports: Path | None = None) -> tuple[Path, float]:
    """The tiny pipeline in a fresh copy at dest; with `imports`, every Python process logs there
    the project modules it imported (tests/stage_imports/sitecustomize.py)."""
    copy_project(dest)
    if params_edit:
        params_edit(dest / "params.yaml")
    init_repo(dest)  # a git repository, so `dvc exp run` works as it does for users
    t0 = time.perf_counter()
    logged = (
        {
            "STAGE_IMPORTS": str(imports),
            "PYTHONPATH": os.pathsep.join(
                p
                for p in (str(ROOT / "tests" / "stage_imports"), os.environ.get("PYTHONPATH"))
                if p
            ),
        }
        if imports
        else {}
    )
    # make pipeline's: the families' chains two at a time
    sh(["attention-lab", "repro", "--jobs", "2"], dest, **logged)
    return dest, time.perf_counter() - t0


def representative_families(params: Path) -> None:

    params_dict = yaml.safe_load(params.read_text())
    params_dict["translate"]["families"] = FAMILIES
    params_dict["classify"]["families"] = [
        f for f in CLASSIFIERS if f not in params_dict["classify"]["pretrained"]
    ]
    # 22M weights: short inputs
    params_dict["classify"]["family_params"]["bert_minilm"]["train"]["max_tokens"] = 128
    for task in params_dict["tasks"]:  # one ablation in two tasks: the machinery, not every switch
        name = ABLATIONS.get(task)
        params_dict[task]["ablations"] = (
            {name: params_dict[task]["ablations"][name]} if name else {}
        )
        params_dict[task].update(corpus_ablations={}, corpora={})
        # one family's fresh seeds: the machinery
        params_dict[task]["replication"] = REPLICATION.get(task, {})
    params.write_text(yaml.safe_dump(params_dict, sort_keys=False))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("e2e")
    dest, seconds = repro_project(
        work / "project", representative_families, imports=work / "stage_imports.jsonl"
    )
    (dest / "repro_seconds.txt").write_text(f"{seconds:.1f}\n")
    return dest


def test_outputs_report_and_metrics(tiny):
    report = (tiny / "reports" / "translate.md").read_text()
    for family in FAMILIES:
        assert f"| `{family}` |" in report
        m = json.loads((tiny / "metrics" / "translate" / f"{family}.json").read_text())
        assert 0.0 <= m["test/bleu"] <= 100.0 and "test/bleu_len_41_plus" in m
        assert ("test/aer" in m) == (family not in NO_ATTENTION)
        parity = json.loads((tiny / "models" / family / "onnx" / "parity.json").read_text())
        assert parity["greedy_identical"] is True
    assert (tiny / "reports" / "translate" / "bleu_by_length.png").stat().st_size > 1000
    assert len(list((tiny / "reports" / "translate").glob("bahdanau_attention_*.png"))) >= 1
    summary = json.loads((tiny / "metrics" / "translate_summary.json").read_text())
    assert set(summary) == set(FAMILIES)


def test_classify_outputs_report_pictures_and_cli(tiny):
    report = (tiny / "reports" / "classify.md").read_text()
    for family in CLASSIFIERS:
        assert f"| `{family}` |" in report
        m = json.loads((tiny / "metrics" / "classify" / f"{family}.json").read_text())
        assert 0.0 <= m["test/accuracy"] <= 1.0 and 0.0 <= m["test/macro_f1"] <= 1.0
        assert ("test/rationale_acc" in m) == (family not in NO_ATTENTION_CLASSIFIERS)
        parity = json.loads((tiny / "models" / family / "onnx" / "parity.json").read_text())
        assert parity["ok"] and parity["prediction_identical"]
    assert "test/hop_overlap" in json.loads(
        (tiny / "metrics" / "classify" / "self_attentive.json").read_text()
    )
    assets = tiny / "reports" / "classify"
    assert (assets / "han_document_0.png").stat().st_size > 1000 and (
        assets / "self_attentive_hops_0.png"
    ).is_file()
    page = (assets / "han_document_0.html").read_text()
    assert "<div" in page and "http://" not in page and "https://" not in page
    out = sh(
        [
            "attention-lab",
            "classify",
            "--model",
            "models/han",
            "--json",
            "The room was small. In the end the food was not good at all. We left on a Sunday.",
        ],
        tiny,
    ).stdout
    result = json.loads(out)[0]
    assert result["label"] in result["probabilities"] and len(result["sentence_weights"]) == 3
    bad = sh(["attention-lab", "classify", "--model", "models/han", "   "], tiny, check=False)
    assert bad.returncode == 2 and "no document" in bad.stderr


def test_bert_families_pretrain_fine_tune_and_serve(tiny):
    """pretrain@bert (masked LM, tracked in MLflow), the label-fraction rows, the head grid, and
    serving with WordPiece."""
    ours = json.loads((tiny / "models" / "pretrained" / "bert" / "pretrain.json").read_text())
    assert ours["source"] == "mlm" and {
        "val/mlm_loss",
        "val/mlm_accuracy",
        "val/perplexity",
    } <= set(ours["last_val"])
    real = json.loads(
        (tiny / "models" / "pretrained" / "bert_minilm" / "pretrain.json").read_text()
    )
    assert real["source"] == "minilm" and real["params"] > 20_000_000
    mlflow.set_tracking_uri(f"sqlite:///{tiny / 'mlflow.db'}")
    pretrain = [
        r
        for r in mlflow.search_runs(experiment_names=["classify"], output_format="list")
        if r.data.tags.get("stage") == "pretrain"
    ]
    assert len(pretrain) == 1 and {"train/mlm_loss", "val/mlm_accuracy", "val/perplexity"} <= set(
        pretrain[0].data.metrics
    )
    for family in ("bert", "transformer_encoder"):
        m = json.loads((tiny / "metrics" / "classify" / f"{family}.json").read_text())
        assert 0.0 <= m["label_fractions"]["0.1"]["test/accuracy"] <= 1.0
        assert m["label_fractions"]["0.1"]["train/train_documents"] < m["train/train_documents"]
    report = (tiny / "reports" / "classify.md").read_text()
    assert "accuracy, 10% of labels" in report and "## Pretrained encoders" in report
    assert (tiny / "reports" / "classify" / "bert_heads.png").stat().st_size > 1000
    text = "The room was small. In the end the loathed toaster was not good at all."
    # "loathed" and "toaster" are several pieces in MiniLM's vocabulary
    for family in ("bert", "bert_minilm"):
        result = json.loads(
            sh(
                ["attention-lab", "classify", "--model", f"models/{family}", "--json", text], tiny
            ).stdout
        )[0]
        assert (
            [len(w) for w in result["word_weights"]]
            == [len(s) for s in result["sentences"]]
            == [5, 12]
        )
        assert abs(sum(map(sum, result["word_weights"])) - 1.0) < 1e-4


def test_caption_outputs_overlays_and_cli(tiny):
    report = (tiny / "reports" / "caption.md").read_text()
    for family in ("show_tell", "show_attend_tell"):
        assert f"| `{family}` |" in report
        m = json.loads((tiny / "metrics" / "caption" / f"{family}.json").read_text())
        assert (
            0.0 <= m["test/accuracy"] <= 1.0
            and 0.0 <= m["test/bleu"] <= 100.0
            and "test/accuracy_len_5_6" in m
        )
        assert ("test/localisation" in m) == (family == "show_attend_tell")
        parity = json.loads((tiny / "models" / family / "onnx" / "parity.json").read_text())
        assert parity["ok"] and parity["greedy_identical"]
    assert (tiny / "reports" / "caption" / "show_attend_tell_overlay_0.png").stat().st_size > 1000
    import numpy as np
    from PIL import Image

    canvas = np.load(tiny / "data" / "prepared" / "caption" / "test.npy")[0]
    Image.fromarray(canvas).save(tiny / "canvas.png")
    out = json.loads(
        sh(
            [
                "attention-lab",
                "caption",
                "--model",
                "models/show_attend_tell",
                "--json",
                "canvas.png",
            ],
            tiny,
        ).stdout
    )[0]
    assert Path(tiny / out["overlay"]).is_file() and len(out["attention"]) == len(out["words"])


def test_second_repro_does_nothing_and_one_search_space_change_reruns_only_that_family(tiny):
    out = sh(["dvc", "repro"], tiny).stdout
    assert "up to date" in out.lower() or "didn't change" in out.lower()
    space = tiny / "conf" / "tune" / "transformer.yaml"
    space.write_text(space.read_text().replace("high: 0.3}", "high: 0.2}"))
    log = sh(["dvc", "repro"], tiny).stdout
    ran = {line.split("'")[1] for line in log.splitlines() if line.startswith("Running stage")}
    assert ran == {
        "tune_translate@transformer",
        "train_translate@transformer",
        "evaluate_translate@transformer",
        "export_translate@transformer",
        "report_translate",
        "report_claims",
        "report_index",
    }


def test_an_edit_of_serving_or_report_code_reruns_no_training_stage(tiny):
    """Editing serving/app.py and results/report.py in the finished project leaves every tune,
    train, pretrain and evaluate stage up to date in `dvc status` (the report stages, which import
    results/report.py, are listed)."""
    edited = [
        tiny / "src/attention_lab/serving/app.py",
        tiny / "src/attention_lab/results/report.py",
    ]
    before = [path.read_text() for path in edited]
    try:
        for path, text in zip(edited, before):
            path.write_text(text + "\n# an edit\n")
        changed = json.loads(sh(["dvc", "status", "--json"], tiny).stdout)
    finally:
        for path, text in zip(edited, before):
            path.write_text(text)
    assert any(name.startswith("report") for name in changed), changed
    training = [
        n
        for n in changed
        if n.startswith(("tune_", "train_", "finetune_", "pretrain", "evaluate_"))
    ]
    assert not training, training


def test_every_family_was_tuned_under_the_same_budget_and_trains_with_its_best_values(tiny):

    def leaves(tree: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in tree.items():
            out.update(leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    params = yaml.safe_load((tiny / "params.yaml").read_text())
    budget = {
        task: v["tune"]
        for task, v in yaml.safe_load((tiny / "conf" / "profile" / "tiny.yaml").read_text()).items()
    }
    for task in ("translate", "classify", "caption"):
        for family in params[task]["families"] + params[task].get("pretrained", []):
            tuned = yaml.safe_load((tiny / "tuned" / f"{family}.yaml").read_text())
            assert tuned["study"]["trials"] == budget[task]["trials"], family
            # in updates
            assert tuned["study"]["budget_updates"] == params[task]["tune"]["updates"], family
            assert (
                tuned["trials"][0]["trial"] == 0
                and tuned["study"]["default_value"] == tuned["study"]["best_value"]
            )
            trained = leaves(
                yaml.safe_load(
                    (tiny / "models" / family / "checkpoints" / "seed0" / "config.yaml").read_text()
                )
            )
            best = leaves(tuned["params"])
            assert best and all(trained[k] == v for k, v in best.items()), family
        # one trial: the default
        assert "## What tuning bought" in (tiny / "reports" / f"{task}.md").read_text()
        assert (tiny / "reports" / task / "expected_best.png").is_file()
        # the final runs' validation curves
        assert (tiny / "reports" / task / "val_curves.png").is_file()
    mlflow.set_tracking_uri(f"sqlite:///{tiny / 'mlflow.db'}")
    studies = mlflow.search_runs(
        experiment_names=["caption"], output_format="list", filter_string="tags.kind = 'tune'"
    )
    assert {r.data.tags["family"] for r in studies} == {"show_tell", "show_attend_tell"}


def test_mlflow_runs_hold_params_tags_plots_and_onnx(tiny):
    mlflow.set_tracking_uri(f"sqlite:///{tiny / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["translate"], output_format="list")
    by_family = {r.data.tags.get("family"): r for r in runs if r.data.tags.get("stage") == "train"}
    assert set(FAMILIES) <= set(by_family)
    names = {
        frozenset(k for k in r.data.metrics if k.startswith("test/"))
        for f, r in by_family.items()
        if f not in NO_ATTENTION
    }
    assert len(names) == 1  # the same metric names across families with attention
    for family in FAMILIES:
        run = by_family[family]
        assert run.data.params["model._target_"].startswith("attention_lab.translate.models.")
        assert run.data.tags["data_hash"] and run.data.tags["git_commit"]
        client = mlflow.MlflowClient()
        top = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "config.yaml" in top and "onnx" in top
    reports = [r for r in runs if r.data.tags.get("kind") == "comparison"]
    assert reports and "translate.md" in {
        a.path for a in mlflow.MlflowClient().list_artifacts(reports[0].info.run_id)
    }
    parents = {r.data.tags.get("mlflow.parentRunId") for f, r in by_family.items() if f in FAMILIES}
    # family runs nest under the comparison run (ablations do not)
    assert parents <= {r.info.run_id for r in reports}


def test_translate_cli_uses_exported_model(tiny):
    out = sh(
        [
            "attention-lab",
            "translate",
            "--model",
            "models/bahdanau",
            "--json",
            "the old man reads a book in the library",
        ],
        tiny,
    ).stdout
    result = json.loads(out)[0]
    assert result["source_words"] == [
        "the",
        "old",
        "man",
        "reads",
        "a",
        "book",
        "in",
        "the",
        "library",
    ]
    assert len(result["attention"]) == len(result["source_words"])


def test_notebook_runs(tiny):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "01_attention_walkthrough.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tiny)}}
    ).execute()
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert images, "the walkthrough draws attention heatmaps"


def ranking_rows(page: str) -> dict[str, list[str]]:
    """{family: cells} of the `## Ranking` table of a report page."""
    table = page.split("## Ranking\n\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return {
        cells[1].strip("`"): cells
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table)
    }


def test_predictions_ranking_and_index_pages(tiny):
    for task, families in (
        ("translate", FAMILIES),
        ("classify", CLASSIFIERS),
        ("caption", ["show_tell", "show_attend_tell"]),
    ):
        n_test = len((tiny / "data" / "prepared" / task / "test.jsonl").read_text().splitlines())
        for family in families:
            p = json.loads((tiny / "predictions" / task / f"{family}.json").read_text())
            assert (
                set(p["seeds"]) == {"0"} and len(p["seeds"]["0"]) == len(p["references"]) == n_test
            )
        page = (tiny / "reports" / f"{task}.md").read_text()
        assert list(ranking_rows(page)) and set(ranking_rows(page)) == set(families)
        assert (tiny / "reports" / task / "pareto.png").stat().st_size > 1000
        summary = json.loads((tiny / "metrics" / f"{task}_summary.json").read_text())
        assert sorted(m["rank"] for m in summary.values()) == list(range(1, len(families) + 1))
        assert summary[families[1]]["significance"]["baseline"] == families[0]
        assert set(summary[families[1]]["significance"]["p_baseline"]) <= {
            "test/bleu",
            "test/chrf",
            "test/accuracy",
        }
    assert isinstance(
        json.loads((tiny / "predictions" / "translate" / "bahdanau.json").read_text())["seeds"][
            "0"
        ][0],
        str,
    )
    index = (tiny / "reports" / "index.md").read_text()
    assert all(f"[{task}.md]({task}.md)" in index for task in ("translate", "classify", "caption"))
    for task, family in (
        ("translate", "seq2seq_lstm"),
        ("classify", "bow"),
        ("caption", "show_tell"),
    ):
        # committed like the predictions: a family without attention keeps the picture that says so
        assert [p.name for p in (tiny / "plots" / task / family).iterdir()] == [plots.NO_ATTENTION]
        page = (tiny / "reports" / f"{task}.md").read_text()
        assert f"No attention pictures of `{family}`" in page


def test_report_tables_equal_the_mlflow_comparison_runs(tiny):
    """Every number of a page's ranking table is the one logged in MLflow: the comparison run's
    figures and the mean over its nested family runs' test scores."""
    from attention_lab.core.task import NAMES, get_task

    mlflow.set_tracking_uri(f"sqlite:///{tiny / 'mlflow.db'}")
    for task in NAMES:
        comparison = mlflow.search_runs(
            experiment_names=[task],
            filter_string="tags.kind = 'comparison'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
            output_format="list",
        )[0]
        assert comparison.info.run_name == "comparison" and comparison.data.tags["task"] == task
        logged = comparison.data.metrics
        children = mlflow.search_runs(
            experiment_names=[task],
            output_format="list",
            filter_string=f"tags.mlflow.parentRunId = '{comparison.info.run_id}'",
        )
        rows = ranking_rows((tiny / "reports" / f"{task}.md").read_text())
        assert {r.data.tags["family"] for r in children} == set(rows)
        for family, cells in rows.items():
            assert float(cells[0]) == logged[f"{family}/rank"]
            seeds = [r.data.metrics for r in children if r.data.tags["family"] == family]
            for i, key in enumerate(get_task(task).headline):
                mean, sd = cells[2 + 2 * i].split(" ± ")
                digits, slug = len(mean.split(".")[1]), key.replace("/", "_")
                assert mean == f"{logged[f'{family}/{slug}_mean']:,.{digits}f}"
                assert mean == f"{sum(m[key] for m in seeds) / len(seeds):,.{digits}f}"
                assert sd.rstrip("†‡") == "—"  # the tiny profile trains one seed
            assert cells[-3] == f"{logged[f'{family}/params']:,.0f}"
            assert cells[-2] == f"{logged[f'{family}/train_seconds']:,.0f}"


def test_compare_runs_notebook_rebuilds_the_ranking(tiny):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "02_compare_runs.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tiny)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs)
    assert all(f in text for f in FAMILIES) and "logged rank" in text
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook plots the ranking"


def test_each_ablation_trains_on_its_family_s_tuned_values_and_fills_the_table(tiny):
    """An ablation's stages ran in the pipeline: its family's tuned values with its one switch
    changed, and a row of reports/ablations.md (family → ablation, Δ) for it."""
    table = (tiny / "reports" / "ablations.md").read_text()
    for task, name in ABLATIONS.items():
        entry = yaml.safe_load((tiny / "params.yaml").read_text())[task]["ablations"][name]
        mine, family = (
            records.read_at(tiny, task, f)["trained_config"] for f in (name, entry["of"])
        )
        # tuned values kept
        assert {k for k in family if mine.get(k) != family[k]} == set(leaf_values(entry["set"]))
        assert f"| `{name}` | `{entry['of']}` |" in table
    assert (
        "| `luong_general_no_feeding` | `luong_general` | model.input_feeding: True → False |"
        in table
    )


def test_the_replication_trains_fresh_seeds_and_the_ledger_reads_them(tiny):
    """translate.replication.bahdanau: 2 fresh seeds (1000, 1001) trained and evaluated apart from
    the family's own run, and the ledger measures the claims resting on bahdanau alone from them
    (the confirmatory ledger)."""
    record = records.read_at(tiny, "translate", "bahdanau", replication=True)
    assert sorted(record["per_seed"]) == ["1000", "1001"]
    ledger = json.loads((tiny / "metrics" / "claims.json").read_text())
    again = {r["id"]: r for r in ledger["confirmatory"]}
    # every confirmatory row reads the fresh seeds alone; on the tiny profile a row can be left out
    # as not measurable (bahdanau's BLEU by length at 0 on every seed and sentence: the metric's
    # bound)
    assert all(
        r["seeds"] == ["1000", "1001"] and r["families"] == ["bahdanau"] for r in again.values()
    )
    alone = {r["id"]: r for r in ledger["claims"] if r["families"] == ["bahdanau"]}
    assert alone and set(again) <= set(alone)
    assert "## The confirmatory ledger" in (tiny / "reports" / "claims.md").read_text()


def test_dvc_remote_push_then_a_fresh_clone_pulls_everything_and_has_nothing_to_run(tiny, tmp_path):
    """The workspace is committed, pushed and pulled."""
    remote, clone = tmp_path / "remote", tmp_path / "clone"
    # a directory remote; S3 etc. in the README
    sh(["dvc", "remote", "add", "-d", "shared", str(remote)], tiny)
    sh(["git", "add", "-A"], tiny)
    sh(["git", "commit", "-qm", "results"], tiny)
    sh(["dvc", "push"], tiny)
    sh(["git", "clone", "-q", str(tiny), str(clone)], tmp_path)
    assert not (clone / "models").exists()
    sh(["dvc", "pull"], clone)
    for family in FAMILIES:
        assert (clone / "models" / family / "onnx" / "parity.json").read_bytes() == (
            tiny / "models" / family / "onnx" / "parity.json"
        ).read_bytes()
    assert "up to date" in sh(["dvc", "status"], clone).stdout
    log = sh(["dvc", "repro"], clone).stdout
    assert "Running stage" not in log, log


def plots_json(project: Path, args: list[str], out: Path) -> dict:
    """`dvc plots <args> --json` of the project, its images copied to `out`."""
    return json.loads(sh(["dvc", "plots", *args, "--json", "-o", str(out)], project).stdout)


def rows_of(found: dict, name: str) -> list[dict]:
    """The data rows of one vega plot of `dvc plots ... --json`."""
    return [row for r in found["data"][name] for row in r["content"]["data"]["values"]]


def test_dvc_plots_show_and_diff_load_every_plot_and_the_curves_have_data(tiny, tmp_path):
    """Real `dvc plots show` and `dvc plots diff` of two commits: no errors, curves of numbers."""
    pictures = [p for p in (tiny / "plots").rglob("*") if p.is_file()]
    assert pictures and all(p.suffix == ".png" for p in pictures), pictures  # image plots only
    dvc_yaml = yaml.safe_load((tiny / "dvc.yaml").read_text())
    defined = [next(iter(plot.items())) for plot in dvc_yaml["plots"]]
    names = {name for name, _ in defined}
    assert {f"translate/curves/{f}" for f in FAMILIES} <= names
    assert "replication/translate/curves/bahdanau" in names
    assert {f"{task}/by_length/families" for task in ("translate", "classify", "caption")} <= names
    sh(["git", "add", "-A"], tiny)
    sh(["git", "commit", "--allow-empty", "-qm", "results, for the plots"], tiny)
    sh(["git", "commit", "--allow-empty", "-qm", "a second commit"], tiny)
    for args, revs in ((["show"], {"workspace"}), (["diff", "HEAD~1", "HEAD"], {"HEAD~1", "HEAD"})):
        found = plots_json(tiny, args, tmp_path / args[0])
        assert not found.get("errors"), found["errors"]
        images = [r for plot in found["data"].values() for r in plot if r["type"] == "image"]
        assert len(images) == len(pictures) * len(revs), (args, len(images), len(pictures))
        for name, props in defined:  # every file of every data plot, in every revision: numbers
            x, y = props["x"], next(iter(props["y"].values()))
            for rev in revs:
                rows = [row for row in rows_of(found, name) if row["rev"] == rev]
                files = {row.get("filename") for row in rows}  # DVC names no file for a plot of one
                assert len(files) == len(props["y"]), (args, name, rev, files)
                assert all(math.isfinite(float(row[x]) + float(row[y])) for row in rows), name
        fresh = rows_of(found, "replication/translate/curves/bahdanau")
        replicated = {row["filename"] for row in fresh}
        assert replicated == {records.curve_file(s) for s in (1000, 1001)}


def stage_runs(project: Path, log: Path) -> dict[str, set[str]]:
    """{stage command: the source files it and the processes it started imported}, from the import
    log."""
    from attention_lab.core.code_deps import Source

    source = Source(project / "src", project / "conf")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    parent = {r["pid"]: r["ppid"] for r in records}
    commands = {
        r["pid"]: " ".join(
            ["python -m", f"attention_lab.stages.{Path(r['argv'][0]).stem}", *r["argv"][1:]]
        )
        for r in records
        if Path(r["argv"][0]).parent.name == "stages"
    }
    runs: dict[str, set[str]] = {}
    for r in records:
        pid = r["pid"]
        while pid in parent and pid not in commands:
            pid = parent[pid]
        if pid in commands:
            found = {source.module_file(m) for m in r["modules"]} - {None}
            if r["pid"] in commands:  # the stage's own module ran as __main__
                found.add(project / "src" / "attention_lab" / "stages" / Path(r["argv"][0]).name)
            runs.setdefault(commands[pid], set()).update(
                p.relative_to(project).as_posix() for p in found
            )
    return runs


def code_deps(project: Path) -> dict[str, tuple[str, set[str]]]:
    """{stage command: (stage name, the source files dvc.yaml lists for it)}; links followed."""
    from attention_lab.pipeline.resolved import expand

    found = {}
    for name, stage in expand(project).items():
        deps = {
            (project / d).resolve().relative_to(project).as_posix()
            if (project / d).is_symlink()
            else d
            for d in stage["deps"]
        }
        found[stage["cmd"]] = (name, {d for d in deps if d.endswith(".py")})
    return found


def test_every_stage_imports_what_its_code_deps_name(tiny):
    """Both ways, from the modules every stage's command really imported: each one is among the
    stage's code deps in dvc.yaml (an edit to it re-runs the stage); each module that importing the
    stage's entry module runs for sure (the statements of a module's body) was imported (the static
    reader invents none); a task's own stages (prepare_, tokenize_, report_<task>) name no other
    task's code."""
    from attention_lab.core.code_deps import Source

    runs, deps = stage_runs(tiny, tiny.parent / "stage_imports.jsonl"), code_deps(tiny)
    assert {name.partition("@")[0].partition("_")[0] for name, _ in deps.values()} >= {
        "prepare",
        "tokenize",
        "pretrain",
        "tune",
        "train",
        "finetune",
        "evaluate",
        "export",
        "report",
    }
    ran = {cmd: files for cmd, files in runs.items() if cmd in deps}
    assert {deps[c][0] for c in ran} == {name for name, _ in deps.values()}, (
        "a stage left no import log"
    )
    missing = {
        deps[c][0]: sorted(files - deps[c][1]) for c, files in ran.items() if files - deps[c][1]
    }
    assert not missing, f"stages imported files their code deps do not name: {missing}"
    source = Source(tiny / "src", tiny / "conf")
    eager = {
        c: {
            source.module_file(m).relative_to(tiny).as_posix()
            for m in source.closure({c.split()[2]}, eager=True)
        }
        for c in ran
    }
    invented = {
        deps[c][0]: sorted(eager[c] - files) for c, files in ran.items() if eager[c] - files
    }
    assert not invented, f"the static reader names imports a stage did not run: {invented}"
    tasks = ("translate", "classify", "caption")
    foreign = {
        name: [
            f
            for f in files
            if any(f.startswith(f"src/attention_lab/{t}/") for t in tasks if t != own)
        ]
        for name, files in deps.values()
        if name.startswith(("prepare_", "tokenize_", "report_"))
        and (own := name.rpartition("_")[2]) in tasks
    }
    assert not {n: f for n, f in foreign.items() if f}, (
        f"a task's stage names another task's code: {foreign}"
    )
