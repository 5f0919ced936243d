"""repro.py: how `attention-lab repro` splits the pipeline into the shared head, the families' chains and the rest (the
command itself runs the real pipeline in tests/e2e/test_pipeline.py)."""

from attention_lab.core.repro import pipeline_plan, plan
from tests.conftest import ROOT


def test_plan_puts_each_family_s_stages_in_its_chain_in_order():
    order = ["prepare@t", "tokenize@t", "pretrain@b", "tune_t@a", "tune_t@b", "train_t@a", "train_t@b", "report@t",
             "report_index"]
    upstream = {"prepare@t": set(), "tokenize@t": {"prepare@t"}, "pretrain@b": {"prepare@t"},
                "tune_t@a": {"prepare@t", "tokenize@t"}, "tune_t@b": {"prepare@t", "pretrain@b"},
                "train_t@a": {"prepare@t", "tokenize@t", "tune_t@a"},
                "train_t@b": {"prepare@t", "pretrain@b", "tune_t@b"}, "report@t": set(order[:7]),
                "report_index": set(order[:8])}
    got = plan(order, upstream, ["a", "b", "c"])
    assert got.chains == {"a": ["tune_t@a", "train_t@a"], "b": ["pretrain@b", "tune_t@b", "train_t@b"]}
    assert got.head == ["prepare@t", "tokenize@t"] and got.tail == ["report@t", "report_index"]


def test_the_project_s_plan_covers_every_stage_once():
    import yaml

    got = pipeline_plan(ROOT)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    families = [f for t in params["tasks"] for f in params[t]["families"] + params[t].get("pretrained", [])]
    assert list(got.chains) == families
    assert all(stages[-1].startswith("export") for stages in got.chains.values())
    every = got.head + [s for stages in got.chains.values() for s in stages] + got.tail
    assert len(every) == len(set(every)) and set(got.tail) == {"report_index", *(f"report@{t}" for t in params["tasks"])}
    assert [s.partition("@")[0] for s in got.chains["bert"]] == ["pretrain", "tune_finetuned", "finetune_classify",
                                                                  "evaluate_finetuned", "export_finetuned"]


def test_a_task_s_plan_holds_its_chains_and_the_reports_that_read_them():
    got = pipeline_plan(ROOT, ["caption"])
    assert list(got.chains) == ["show_tell", "show_attend_tell"]
    assert got.head == ["prepare@caption", "tokenize@caption"] and got.tail == ["report@caption", "report_index"]
