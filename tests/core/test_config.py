import re

import pytest
import yaml
from omegaconf import OmegaConf

from attention_lab.core.config import ConfigError, families, load_config
from tests.conftest import ROOT


def test_params_and_profile_overlay(project):
    cfg = load_config(root=project, family="bahdanau")
    assert cfg.profile == "tiny" and cfg.family == "bahdanau"
    assert cfg.data.n_train == 600  # conf/profile/tiny.yaml wins over params.yaml
    assert cfg.train.clip == 1.0 and cfg.train.lr == 0.002  # conf/ default survives; params.yaml sets lr
    assert cfg.model._target_ == "attention_lab.translate.models.bahdanau.RNNSearch"
    quick = load_config(root=ROOT)
    assert quick.data.n_train > cfg.data.n_train


def test_cli_overrides_win(project):
    cfg = load_config(["train.lr=0.01", "evaluate.beam=1"], root=project)
    assert cfg.train.lr == 0.01 and cfg.evaluate.beam == 1


def test_unknown_key_in_params_names_the_file(project):
    params = project / "params.yaml"
    text = params.read_text()
    params.write_text(text.replace("  train:\n", "  train:\n    learning_rat: 0.1\n", 1))
    with pytest.raises(ConfigError, match="params.yaml.*learning_rat"):
        load_config(root=project)
    params.write_text(text + "\ntrain:\n  lr: 0.1\n")  # the pre-task layout: refused, not silently ignored
    with pytest.raises(ConfigError, match="unknown top-level key.*'train'"):
        load_config(root=project)


def test_missing_profile_and_bad_yaml(project):
    params = project / "params.yaml"
    params.write_text(params.read_text().replace("profile: tiny", "profile: huge"))
    with pytest.raises(ConfigError, match="profile 'huge'"):
        load_config(root=project)
    params.write_text("families: [a\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(root=project)
def test_unknown_family_names_conf_model(project):
    with pytest.raises(ConfigError, match=r"unknown family 'nope'; choose one of bahdanau, bert, .*transformer_encoder "
                                          r"\(files in .*conf/model\)"):
        load_config(root=project, family="nope")


def test_profile_data_sizes_ignored_for_files_and_length_mix_replaced(project):
    import yaml

    params = project / "params.yaml"
    p = yaml.safe_load(params.read_text())
    p["translate"]["data"]["length_mix"] = {"1-5": 0.5, "6-60": 0.5}
    params.write_text(yaml.safe_dump(p))
    assert dict(load_config(root=project).data.length_mix) == {"1-5": 0.5, "6-60": 0.5}
    p["translate"]["data"] = {"source": "tsv", "path": "corpus.tsv"}
    params.write_text(yaml.safe_dump(p))
    cfg = load_config(root=project)
    assert cfg.data.source == "tsv" and "n_train" not in cfg.data


def test_family_params_reach_only_their_family(project):
    params = project / "params.yaml"
    params.write_text(params.read_text().replace(
        "luong_general: {model: {input_feeding: true,", "luong_general: {model: {input_feeding: false,", 1))
    assert load_config(root=project, family="luong_general").model.input_feeding is False
    assert load_config(root=project, family="luong_dot").model.input_feeding is True
    assert "input_feeding" not in load_config(root=project, family="bahdanau").model


def test_every_family_has_family_params_and_bad_ones_are_named(project):
    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    for task in params["tasks"]:  # dvc.yaml's train stages read each entry
        assert set(params[task]["family_params"]) == set(families(params, task))
    text = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(text.replace("  transformer: {}", "  transformer: 3"))
    with pytest.raises(ConfigError, match="family_params.transformer must be a mapping"):
        load_config(root=project, family="transformer")
    (project / "params.yaml").write_text(text.replace("  transformer: {}", "  transformer: {model: {dropot: 0.2}}"))
    with pytest.raises(ConfigError, match="dropot"):
        load_config(root=project, family="transformer")


def test_classify_task_composes_its_own_groups(project):
    cfg = load_config(root=project, task="classify", family="han")
    assert cfg.task.name == "classify" and cfg.paths.prepared == "data/prepared/classify"
    assert cfg.model._target_ == "attention_lab.classify.models.han.HAN" and cfg.tokenize.model == "wordlevel"
    assert cfg.data.n_train == 300 and cfg.train.penalty == 1.0  # tiny profile's classify section; task default
    assert "teacher_forcing" not in cfg.train  # translation's knobs stay with translation
    assert load_config(root=project, task="classify", family="self_attentive").train.penalty == 1.0
    with pytest.raises(ConfigError, match="unknown task 'captions'; choose one of translate, classify, caption"):
        load_config(root=project, task="captions")


def test_caption_model_takes_the_canvas_size_from_the_data(project):
    cfg = load_config(root=project, task="caption", family="show_attend_tell")
    assert (cfg.model.height, cfg.model.width) == (cfg.data.height, cfg.data.width) == (32, 128)
    assert cfg.data.n_train == 300 and cfg.tokenize.min_frequency == 1  # tiny profile; task default


def test_an_explicit_setting_beats_the_tuned_value(project):
    """tuned/<family>.yaml < params.yaml family_params < command line; the explicit keys are listed for the tune stage."""
    (project / "tuned").mkdir(exist_ok=True)
    (project / "tuned" / "luong_local_m.yaml").write_text(
        "params:\n  model: {window: 4, dropout: 0.25}\n  train: {lr: 0.003}\n")
    cfg = load_config(root=project, family="luong_local_m")
    assert cfg.model.window == 10  # params.yaml translate.family_params.luong_local_m.model.window
    assert cfg.model.dropout == 0.25 and cfg.train.lr == 0.003  # tuned, set nowhere explicitly
    assert "model.window" in cfg.explicit and "train.lr" not in cfg.explicit
    cfg = load_config(["model.window=5", "train.lr=0.001"], root=project, family="luong_local_m")
    assert cfg.model.window == 5 and cfg.train.lr == 0.001
    assert {"model.window", "train.lr"} <= set(cfg.explicit)
    assert load_config(root=project, family="luong_local_m", tuned=False).model.dropout != 0.25


TUNING_DOC = (ROOT / "docs" / "tuning.md").read_text()
ABLATIONS = re.findall(r"dvc exp run .*-S (\w+)\.family_params\.(\w+)\.([\w.]+)=(\S+)", TUNING_DOC)


@pytest.mark.parametrize("task, family, key, value", ABLATIONS, ids=[f"{f}.{k}={v}" for _, f, k, v in ABLATIONS])
def test_each_documented_ablation_changes_what_trains(project, task, family, key, value):
    """`dvc exp run -S <task>.family_params.<family>.<key>=<value>` (docs/tuning.md) edits params.yaml; the family's
    train stage then trains with that value, even where its tuned/<family>.yaml holds another one."""
    want = yaml.safe_load(value)
    (project / "tuned").mkdir(exist_ok=True)
    decoy = {"window": 7, "penalty": 0.5, "input_feeding": True, "reverse_source": True, "schedule": "linear",
             "image_input": "every_step"}
    tuned = {}
    node = tuned.setdefault("params", {})
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = decoy[leaf]
    (project / "tuned" / f"{family}.yaml").write_text(yaml.safe_dump(tuned))
    before = OmegaConf.select(load_config(root=project, task=task, family=family), key)
    params = yaml.safe_load((project / "params.yaml").read_text())
    node = params[task]["family_params"].setdefault(family, {})
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = want
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    cfg = load_config(root=project, task=task, family=family)
    assert OmegaConf.select(cfg, key) == want != before and key in cfg.explicit


def test_each_documented_ablation_runs_its_own_familys_train_and_evaluate_stages():
    """Each command runs `-s train_<task>@<family> evaluate_<task>@<family>` of the family its `-S` changes."""
    commands = re.findall(r"^dvc exp run .*$", TUNING_DOC, re.MULTILINE)
    assert len(commands) == len(ABLATIONS) >= 6
    for command, (task, family, _, _) in zip(commands, ABLATIONS):
        assert command.endswith(f" -s train_{task}@{family} evaluate_{task}@{family}"), command
