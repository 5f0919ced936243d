"""stages/common.py's stage_config: params.yaml `trainer:` (the GPU switch) reaches every stage that
trains, as the generated dvc.yaml runs it, without a GPU (the config is resolved, nothing is
trained); the command line still wins, `auto` follows torch, and a GPU stage process gets
deterministic cuBLAS and float32 cuDNN before its first kernel."""

from __future__ import annotations

import os
import re

import pytest
import torch
import yaml

from attention_lab.core.config import ConfigError, load_config, set_trainer
from attention_lab.pipeline.resolved import expand
from attention_lab.stages.common import stage_config

# the stage modules that build a Trainer (train: train_<task> and finetune_<task>)
TRAINS = {"pretrain", "tune", "train"}


def stage_commands(root) -> dict[str, tuple[str, list[str], list[str], list[str]]]:
    """{stage@item: (stage module, its arguments, params, deps)} of every stage of the generated
    dvc.yaml."""
    out = {}
    for name, stage in expand(root).items():
        _, _, module, *args = stage["cmd"].split()
        out[name] = (module.rpartition(".")[2], args, stage["params"], stage["deps"])
    return out


@pytest.fixture
def gpu_process_state(monkeypatch):
    """Restore what a GPU stage process sets (stages.common.cuda_process) after the test."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    tf32 = torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cudnn.allow_tf32 = tf32


@pytest.mark.slow  # it runs every stage that trains: `make test-fast` leaves it out
def test_params_trainer_gpu_reaches_every_stage_that_trains(project, gpu_process_state):
    assert set_trainer(project, "gpu")
    # the comment is kept
    assert "trainer: gpu               # cpu | gpu" in (project / "params.yaml").read_text()
    stages = stage_commands(project)
    trains = {name: s for name, s in stages.items() if s[0] in TRAINS}
    kinds = {name.partition("@")[0] for name in trains}
    assert kinds >= {
        "pretrain",
        "tune_translate",
        "tune_classify",
        "tune_caption",
        "tune_finetuned",
        "train_translate",
        "train_classify",
        "train_caption",
        "finetune_classify",
    }, kinds
    for name, (module, args, params, deps) in trains.items():
        assert "trainer" in params and "conf/trainer" in deps, (
            f"{name}: switching the trainer would not re-run it"
        )
        cfg = stage_config(args, tuned=module != "tune")
        assert cfg.trainer.accelerator == "gpu" and cfg.trainer.devices == 1, name
        # train.processes side by side share the GPU
        assert cfg.trainer.get("strategy") in (None, "auto"), name
        assert cfg.trainer.precision == "32-true" and cfg.trainer.deterministic == "warn", name
    # evaluate and export run their models on the CPU: switching the trainer re-runs none of them
    # (nor the rest)
    assert not [
        name
        for name, (module, _, params, _) in stages.items()
        if module not in TRAINS and "trainer" in params
    ]
    assert torch.backends.cudnn.allow_tf32 is False  # 32-true is float32 in cuDNN too
    # deterministic cuBLAS, before the first kernel
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_the_command_line_wins_and_auto_follows_torch(project, monkeypatch, gpu_process_state):
    set_trainer(project, "gpu")
    assert (
        stage_config(["task=translate", "family=bahdanau", "trainer=cpu"]).trainer.accelerator
        == "cpu"
    )
    set_trainer(project, "auto")
    assert load_config(family="bahdanau").trainer.accelerator == (
        "gpu" if torch.cuda.is_available() else "cpu"
    )
    monkeypatch.setattr("attention_lab.core.config.cuda_available", lambda: True)
    assert load_config(family="bahdanau").trainer.accelerator == "gpu"
    monkeypatch.setattr("attention_lab.core.config.cuda_available", lambda: False)
    auto, cpu = (load_config([f"trainer={t}"], family="bahdanau").trainer for t in ("auto", "cpu"))
    assert auto == cpu


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "tpu",
            (
                r"params.yaml `trainer: tpu`: unknown trainer 'tpu'; choose one of cpu, ddp,"
                r" ddp_gpu, gpu \(files in "
                r".*conf/trainer\) or auto \(gpu where torch sees a CUDA GPU, else cpu\)"
            ),
        ),
        (
            "ddp_gpu",
            (
                r"params.yaml `trainer: ddp_gpu`: conf/trainer/ddp_gpu.yaml is data parallel .*pick"
                r" cpu, gpu or auto"
            ),
        ),
        (
            None,
            (
                r"params.yaml: no `trainer:` .*set it to one of cpu, ddp, ddp_gpu, gpu"
                r" \(conf/trainer/<name>.yaml\) or auto"
            ),
        ),
    ],
)
def test_a_bad_params_trainer_is_named_with_the_valid_ones(project, value, message):
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params.pop("trainer") if value is None else params.update(trainer=value)
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ConfigError, match=message):
        load_config(family="bahdanau", root=project)


def test_repro_trainer_refuses_an_unknown_one_before_running(project, capsys):
    from attention_lab.cli import main

    before = (project / "params.yaml").read_text()
    assert main(["repro", "--trainer", "tpu"]) == 2
    assert "unknown trainer 'tpu'" in capsys.readouterr().err
    assert (project / "params.yaml").read_text() == before


@pytest.mark.parametrize("how", ["flag", "params"])
def test_repro_on_gpu_without_one_refuses_before_running(project, capsys, monkeypatch, how):
    from attention_lab.cli import main

    monkeypatch.setattr("attention_lab.core.config.cuda_available", lambda: False)
    if how == "params":
        path = project / "params.yaml"
        path.write_text(
            re.sub(r"^trainer:.*$", "trainer: gpu", path.read_text(), count=1, flags=re.MULTILINE)
        )
    before = (project / "params.yaml").read_text()
    assert main(["repro", "--trainer", "gpu"] if how == "flag" else ["repro"]) == 2
    err = capsys.readouterr().err
    assert "trains on a CUDA GPU, and torch" in err and "sees none" in err
    assert ("--trainer gpu" if how == "flag" else "`trainer: gpu`") in err
    assert (project / "params.yaml").read_text() == before  # nothing set, no stage ran
