import pytest
import yaml
from omegaconf import OmegaConf

from attention_lab.cli import main
from attention_lab.core.config import (
    ConfigError,
    explain_config,
    leaf_values,
    load_config,
    resolve_config,
)
from attention_lab.core.params import ablations, families, read_params, run_ablations
from tests.conftest import ROOT, edit_params


def test_params_and_profile_overlay(project):
    cfg = load_config(root=project, family="bahdanau")
    assert cfg.profile == "tiny" and cfg.family == "bahdanau"
    assert cfg.data.n_train == 600  # conf/profile/tiny.yaml wins over params.yaml
    # conf/ default survives; params.yaml sets lr
    assert cfg.train.clip == 1.0 and cfg.train.lr == 0.002
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
    # the pre-task layout: refused, not silently ignored
    params.write_text(text + "\ntrain:\n  lr: 0.1\n")
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
    with pytest.raises(
        ConfigError,
        match=r"unknown family 'nope'; choose one of bahdanau, bert, .*transformer_encoder "
        r"\(files in .*conf/model\)",
    ):
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
    edit_params(
        project,
        lambda p: p["translate"]["family_params"].update(
            luong_general={"model": {"input_feeding": False}}
        ),
    )
    assert load_config(root=project, family="luong_general").model.input_feeding is False
    assert load_config(root=project, family="luong_dot").model.input_feeding is True
    assert "input_feeding" not in load_config(root=project, family="bahdanau").model


def test_family_params_entries_are_optional_and_bad_ones_are_named(project):
    text = (project / "params.yaml").read_text()
    params = yaml.safe_load(text)
    # entries name families of the task (dvc.yaml's stages name each family's entry)
    for task in params["tasks"]:
        assert set(params[task]["family_params"]) <= set(families(params, task))
    with_entry = load_config(root=project, family="transformer")
    edit_params(project, lambda p: p["translate"]["family_params"].pop("transformer"))
    without = load_config(root=project, family="transformer")  # a missing entry is {}
    assert without == with_entry and list(without.explicit) == []
    edit_params(project, lambda p: p["translate"].pop("family_params"))
    # conf/model/luong_local_m.yaml
    assert load_config(root=project, family="luong_local_m").model.window == 10
    (project / "params.yaml").write_text(text.replace("  transformer: {}", "  transformer: 3"))
    with pytest.raises(ConfigError, match="family_params.transformer must be a mapping"):
        load_config(root=project, family="transformer")
    (project / "params.yaml").write_text(
        text.replace("  transformer: {}", "  transformer: {model: {dropot: 0.2}}")
    )
    with pytest.raises(ConfigError, match="dropot"):
        load_config(root=project, family="transformer")


def test_the_stages_name_each_family_s_entry_and_say_which_is_missing(project):
    """dvc.yaml's family stages depend on `<task>.family_params.<family>` by name (DVC reads it
    for any family params.yaml lists), so writing them without one names the file and the key."""
    from attention_lab.pipeline.dvc_yaml import render

    edit_params(project, lambda p: p["translate"]["family_params"].pop("transformer"))
    missing = r"params.yaml: no `translate.family_params.transformer` \(give every"
    with pytest.raises(ConfigError, match=missing):
        render(project)


def test_classify_task_composes_its_own_groups(project):
    cfg = load_config(root=project, task="classify", family="han")
    assert cfg.task.name == "classify" and cfg.paths.prepared == "data/prepared/classify"
    assert (
        cfg.model._target_ == "attention_lab.classify.models.han.HAN"
        and cfg.tokenize.model == "wordlevel"
    )
    # tiny profile's classify section; task default
    assert cfg.data.n_train == 300 and cfg.train.penalty == 1.0
    assert "teacher_forcing" not in cfg.train  # translation's knobs stay with translation
    assert load_config(root=project, task="classify", family="self_attentive").train.penalty == 1.0
    with pytest.raises(
        ConfigError, match="unknown task 'captions'; choose one of translate, classify, caption"
    ):
        load_config(root=project, task="captions")


def test_caption_model_takes_the_canvas_size_from_the_data(project):
    cfg = load_config(root=project, task="caption", family="show_attend_tell")
    assert (cfg.model.height, cfg.model.width) == (cfg.data.height, cfg.data.width) == (32, 128)
    assert cfg.data.n_train == 300 and cfg.tokenize.min_frequency == 1  # tiny profile; task default


def test_an_explicit_setting_beats_the_tuned_value(project):
    """tuned/<family>.yaml < params.yaml family_params < command line; the explicit keys are listed
    for the tune stage."""
    (project / "tuned").mkdir(exist_ok=True)
    (project / "tuned" / "luong_local_m.yaml").write_text(
        "params:\n  model: {window: 4, dropout: 0.25}\n  train: {lr: 0.003}\n"
    )
    edit_params(
        project,
        lambda p: p["translate"]["family_params"].update(luong_local_m={"model": {"window": 7}}),
    )
    cfg = load_config(root=project, family="luong_local_m")
    assert cfg.model.window == 7  # params.yaml translate.family_params.luong_local_m.model.window
    assert cfg.model.dropout == 0.25 and cfg.train.lr == 0.003  # tuned, set nowhere explicitly
    assert "model.window" in cfg.explicit and "train.lr" not in cfg.explicit
    cfg = load_config(["model.window=5", "train.lr=0.001"], root=project, family="luong_local_m")
    assert cfg.model.window == 5 and cfg.train.lr == 0.001
    assert {"model.window", "train.lr"} <= set(cfg.explicit)
    assert load_config(root=project, family="luong_local_m", tuned=False).model.dropout != 0.25


DECOY = {
    "window": 7,
    "penalty": 0.5,
    "penalty_warmup": 100,
    "input_feeding": True,
    "reverse_source": True,
    "schedule": "linear",
    "image_input": "every_step",
    "positions": "alibi",
    "init_range": 0.05,
    "init": "torch",
    "query": "previous",
    "label_fractions": [0.1, 1.0],
    "attention": "concat",
    "metric": "val/accuracy",
    "direction": "minimize",
    "val_bleu_sentences": 7,
    "min_delta": 0.5,
    "per": "epoch",
    "k": 9.0,
    "min_epochs": 3,
    "max_epochs": 7,
}


def every_ablation():
    params = read_params(ROOT)
    return [
        (task, name, entry)
        for task in params["tasks"]
        for name, entry in ablations(params, task, ROOT).items()
    ]


@pytest.mark.parametrize(
    "task, name, entry", every_ablation(), ids=[n for _, n, _ in every_ablation()]
)
def test_each_ablation_trains_its_family_with_its_switch(project, task, name, entry):
    """An ablation (params.yaml `<task>.ablations`) is its family's config, tuned values included,
    with `set` on top: `set` beats the family's tuned/<family>.yaml and family_params, and
    everything else is the family's."""
    (project / "tuned").mkdir(exist_ok=True)
    changed = leaf_values(entry.get("set") or {})
    tuned: dict = {"params": {"train": {"lr": 0.0123}}}
    for key in changed:
        *parents, leaf = key.split(".")
        node = tuned["params"]
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = DECOY[leaf]
    (project / "tuned" / f"{entry['of']}.yaml").write_text(yaml.safe_dump(tuned))
    corpora = read_params(ROOT)[task].get("corpora") or {}
    key = "corpus_ablations" if "corpus" in entry else "ablations"
    edit_params(project, lambda p: p[task].setdefault(key, {}).update({name: entry}))
    edit_params(project, lambda p: p[task].update(corpora=corpora))
    family = load_config(root=project, task=task, family=entry["of"])
    cfg = load_config(root=project, task=task, family=name)
    # the family's tuned value
    assert cfg.family == name and cfg.train.lr == family.train.lr == 0.0123
    for key, value in changed.items():
        assert (
            OmegaConf.select(cfg, key) == value != OmegaConf.select(family, key)
            and key in cfg.explicit
        )
    # its corpus's data keys, and its own folders for the prepared and tokenized corpus
    if "corpus" in entry:
        moved = {
            f"paths.{k}": f"{OmegaConf.select(family, f'paths.{k}')}_{entry['corpus']}"
            for k in ("prepared", "tokenized")
        }
        changed = {**changed, **leaf_values({"data": corpora[entry["corpus"]]}), **moved}
        for key, value in changed.items():
            assert OmegaConf.select(cfg, key) == value
    rest = {k: v for k, v in leaf_values(OmegaConf.to_container(cfg)).items() if k not in changed}
    assert rest == {
        **{
            k: v for k, v in leaf_values(OmegaConf.to_container(family)).items() if k not in changed
        },
        "family": name,
        "explicit": rest["explicit"],
    }


def test_bad_ablations_are_named(project):
    """An entry that is not {of, set}, of a pretrained family or of an unknown one, or named as a
    family: refused."""
    bad = [
        ({"of": "luong_general"}, "expected {of: <family>, set:"),
        ({"of": "luong_general", "set": {}}, "expected {of: <family>, set:"),
        ({"of": "bert", "set": {"train": {"lr": 1}}}, "expected a family trained from scratch"),
        ({"of": "luong_nope", "set": {"model": {"window": 3}}}, "luong_nope.*ablations.x.of"),
    ]
    for entry, message in bad:
        edit_params(
            project, lambda p, e=entry: p["translate"].update(ablations={"x": e}, replication={})
        )
        if entry["of"] == "bert":
            edit_params(project, lambda p: p["translate"].update(pretrained=["bert"]))
        with pytest.raises(ConfigError, match=message):
            load_config(root=project, family="x")
        edit_params(project, lambda p: p["translate"].pop("pretrained", None))
    clash = {"bahdanau": {"of": "luong_general", "set": {"model": {"window": 3}}}}
    edit_params(project, lambda p: p["translate"].update(replication={}, ablations=clash))
    with pytest.raises(ConfigError, match="a family has this name"):
        load_config(root=project, family="luong_general")


def test_every_ablation_has_stages_and_those_of_families_that_run_reach_the_reports(project):
    """dvc.yaml loops over params.yaml `<task>.ablations` itself (so `dvc exp run -S` can change
    it): every entry has stages, on its family's files; reports read those of families that run."""
    from attention_lab.pipeline.dvc_yaml import render
    from attention_lab.pipeline.resolved import expand

    edit_params(
        project,
        lambda p: p["translate"].update(
            families=["luong_general"],
            replication={},
            ablations={
                "no_feeding": {"of": "luong_general", "set": {"model": {"input_feeding": False}}},
                "forward": {"of": "seq2seq_lstm", "set": {"model": {"reverse_source": False}}},
            },
        ),
    )
    assert list(run_ablations(read_params(project), "translate")) == ["no_feeding"]
    stages = yaml.safe_load(render(project))["stages"]
    train, evaluate = stages["train_ablation_translate"], stages["evaluate_ablation_translate"]
    assert train["foreach"] == evaluate["foreach"] == "${translate.ablations}"
    deps, params = set(train["do"]["deps"]), set(train["do"]["params"])
    assert {
        "tuned/${item.of}.yaml",
        "conf/model/${item.of}.yaml",
        "conf/model/${item.of}.py",
    } <= deps
    assert {"translate.ablations.${key}", "translate.family_params.${item.of}"} <= params
    same = [d.replace("${item.of}", "${item}") for d in train["do"]["deps"]]  # the family's
    assert same == stages["train_translate"]["do"]["deps"]
    resolved = expand(project)
    assert {f"train_ablation_translate@{a}" for a in ("no_feeding", "forward")} <= set(resolved)
    assert "conf/model/seq2seq_lstm.py" in resolved["train_ablation_translate@forward"]["deps"]


PHOTO_KEYS = [
    "max_images",
    "max_pixels",
    "encoder",
    "feature_batch",
    "image_size",
    "height",
    "width",
    "feature_dim",
    "feature_stride",
]
OWN_KEYS = {
    "image_captions": ["images_dir", "captions_file", "split_field", "split_file"],
    "coco_captions": ["splits"],
}


@pytest.mark.parametrize("source", OWN_KEYS)
def test_the_photo_sources_share_the_photo_keys_of_one_file(project, source):
    """Both photo layouts take the photo keys from conf/data/caption/shared/photos.yaml, last."""
    edit_params(project, lambda p: p["caption"].update(data={"source": source}))
    cfg = load_config(root=project, task="caption", family="show_attend_tell")
    assert list(cfg.data) == [
        "source",
        "path",
        *OWN_KEYS[source],
        "valid_fraction",
        "test_fraction",
        "seed",
        *PHOTO_KEYS,
    ]
    assert [cfg.data[k] for k in PHOTO_KEYS] == [
        None,
        40_000_000,
        "efficientnet_lite0",
        32,
        224,
        224,
        224,
        1280,
        32,
    ]
    assert (cfg.model.height, cfg.model.feature_dim) == (224, 1280)
    _, origins = explain_config(family="show_attend_tell", task="caption", root=project)
    shared = "data (conf/data/caption/shared/photos.yaml)"
    assert origins["data.encoder"] == [(shared, "efficientnet_lite0")]
    assert origins["data.seed"][0][0] == f"data (conf/data/caption/{source}.yaml)"


def every_family():
    params = read_params(ROOT)
    return [(task, family) for task in params["tasks"] for family in families(params, task)]


@pytest.mark.parametrize("task, family", every_family())
def test_explain_attributes_the_conf_files_as_hydra_composes_them(task, family):
    """explain_config's conf/ layers are the files of Hydra's own defaults list: merged in its order
    they are what Hydra composed, and every leaf of the config has an origin."""
    resolved = resolve_config(family=family, task=task, root=ROOT)
    conf = [layer for layer in resolved.layers if layer.name.endswith(".yaml)")]
    assert [layer.name.split(" (")[0] for layer in conf] == [
        "conf default",
        "task",
        "data",
        "model",
        "trainer",
    ]
    merged = OmegaConf.merge(*(OmegaConf.create(layer.values) for layer in conf))
    from attention_lab.core.config import _compose

    composed, _, _ = _compose(ROOT, [f"{group}={name}" for group, name in resolved.choices.items()])
    assert OmegaConf.to_container(merged) == OmegaConf.to_container(composed)
    _, origins = explain_config(family=family, task=task, root=ROOT)
    assert all(history and history[0][0] != "(unknown)" for history in origins.values())


@pytest.mark.parametrize("task, family", every_family())
def test_no_value_is_set_twice(task, family):
    """params.yaml `<task>.family_params.<family>` holds only what differs from the layers below it
    (conf/model, the task's files, params.yaml `<task>:`), and no model value that
    conf/model/<family>.yaml sets: those live there, in one place."""
    _, origins = explain_config(family=family, task=task, root=ROOT, tuned=False)
    own = f"params.yaml {task}.family_params.{family}"
    for key, history in origins.items():
        names = [name for name, _ in history]
        if own not in names:
            continue
        i = names.index(own)
        below = history[i - 1] if i else None
        assert below is None or below[1] != history[i][1], (
            f"{own}: {key} = {below[1]!r} repeats {below[0]}"
        )
        assert not any(name.startswith("model (conf/model/") for name in names[:i]), (
            f"{own}: {key} is a model value, set in conf/model/{family}.yaml: change it there"
        )
    assert origins["model._target_"][-1][0] == f"model (conf/model/{family}.yaml)"


@pytest.mark.parametrize(
    "task, family", [(task, None) for task in read_params(ROOT)["tasks"]] + every_family()
)
def test_each_value_is_set_in_one_layer(task, family):
    """The strong form of the rule above: every leaf of the config is set by one layer alone, below
    the layers that override by design: a value params.yaml `<task>:` sets is only declared in conf/
    (`???`, which explain_config does not count as setting it), whether the values were equal or
    conf/'s was dead, and conf/config.yaml declares what load_config sets. The overriding layers:
    family_params (only what differs: test_no_value_is_set_twice), tuned/<family>.yaml (the tune
    stage's search; tuned=False here), the profile (an overlay of params.yaml) and the command
    line."""
    _, origins = explain_config(family=family, task=task, root=ROOT, tuned=False)
    overriding = (f"params.yaml {task}.family_params.", "tuned/", "conf/profile/", "command line")
    for key, history in origins.items():
        homes = [(name, value) for name, value in history if not name.startswith(overriding)]
        assert len(homes) == 1, (
            f"{task}/{family}: {key} is set in {len(homes)} layers, {homes}: give it one home (a"
            " key params.yaml sets is declared ??? in conf/, with the comment `set in params.yaml`)"
        )


def test_a_value_that_lives_in_params_yaml_is_named_when_missing(project):
    """conf/ declares the keys params.yaml sets as ??? (no value of their own): without them in
    params.yaml, load_config names each key and where to set it, before any stage runs."""
    edit_params(project, lambda p: p["translate"]["train"].pop("lr"))
    with pytest.raises(
        ConfigError,
        match=r"config of translate/bahdanau \(.*params\.yaml, conf/, tuned/, the profile or "
        r"an override\): no value for train\.lr: conf/ declares it \?\?\? \(the value "
        r"lives in params\.yaml\): set params\.yaml `translate\.train\.lr`$",
    ):
        load_config(root=project, family="bahdanau")
    edit_params(project, lambda p: [p["classify"]["tune"].pop(k) for k in ("metric", "direction")])
    with pytest.raises(
        ConfigError,
        match=r"no value for tune\.direction, tune\.metric: conf/ declares them \?\?\? .*: "
        r"set params\.yaml `classify\.tune\.direction`, `classify\.tune\.metric`$",
    ):
        load_config(root=project, task="classify")
    # conf/data/caption/generated.yaml, the default
    edit_params(project, lambda p: p["caption"]["data"].pop("source"))
    with pytest.raises(
        ConfigError,
        match=r"no value for data\.source: .* set params\.yaml `caption\.data\.source`$",
    ):
        load_config(root=project, task="caption", family="show_tell")
    # an override fills it too
    assert main(["config", "task=translate", "family=bahdanau", "train.lr=0.01"]) == 0


def test_explain_names_the_layer_that_set_each_value(project):
    _, origins = explain_config(family="luong_general", root=project)
    assert origins["model.input_feeding"] == [("model (conf/model/luong_general.yaml)", True)]
    assert [name for name, _ in origins["train.val_bleu_sentences"]] == [
        "task (conf/task/translate.yaml)",
        "conf/profile/tiny.yaml translate:",
    ]
    assert origins["train.lr"][-1] == ("params.yaml translate:", 0.002)
    # the conf/data mix is replaced whole
    assert origins["data.length_mix.1-10"] == [("params.yaml translate:", 0.3)]
    assert origins["trainer.accelerator"] == [("trainer (conf/trainer/cpu.yaml)", "cpu")]
    edit_params(
        project,
        lambda p: p["translate"]["family_params"].update(
            luong_general={"model": {"input_feeding": False}}
        ),
    )
    _, origins = explain_config(["model.dropout=0.2"], family="luong_general", root=project)
    assert origins["model.input_feeding"][-1] == (
        "params.yaml translate.family_params.luong_general",
        False,
    )
    assert origins["model.dropout"][-1] == ("command line", 0.2)


def test_config_command_prints_the_config_and_explains_a_key(project, capsys):
    assert (
        main(
            ["config", "task=translate", "family=luong_general", "--explain", "model.input_feeding"]
        )
        == 0
    )
    assert (
        capsys.readouterr().out
        == "model.input_feeding: true  <- model (conf/model/luong_general.yaml)\n"
    )
    assert (
        main(
            [
                "config",
                "task=translate",
                "family=luong_general",
                "train.lr=0.01",
                "--explain",
                "train.lr",
            ]
        )
        == 0
    )
    # conf/config.yaml declares train.lr (???) without a value: params.yaml's is the one below the
    # override
    assert (
        capsys.readouterr().out
        == "train.lr: 0.01  <- command line  (over params.yaml translate: = 0.002)\n"
    )
    assert main(["config", "task=caption", "family=show_tell", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "model.image_input: every_step  <- model (conf/model/show_tell.yaml)\n" in out
    assert "data.n_train: 300  <- conf/profile/tiny.yaml caption:" in out
    assert main(["config", "task=classify", "family=han"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["_target_"].endswith(".HAN") and printed["data"]["n_train"] == 300
    for argv, message in [
        (
            ["family=luong_general", "--explain", "model.nope"],
            "no key 'model.nope' in the config of translate/luong_general",
        ),
        (["task=translate", "family=han"], "unknown family 'han' for task translate; give family="),
        (["task=translat", "family=han"], "unknown task 'translat'"),
        (
            ["family=bahdanau", "model.nope=3"],
            "override 'model.nope=3': Key 'nope' is not in struct",
        ),
    ]:
        assert main(["config", *argv]) == 2
        assert message in capsys.readouterr().err


def test_a_familys_own_setting_beats_the_profile_unless_the_profile_caps_that_family(project):
    """The profile overlays params.yaml in its shape: its `<task>:` keys the task's knobs, its
    family_params the family's, so a family's own setting beats the profile's task-wide one."""
    edit_params(
        project,
        lambda p: p["translate"]["family_params"].update(bahdanau={"train": {"max_epochs": 7}}),
    )
    # tiny's translate: says 1
    assert load_config(root=project, family="bahdanau").train.max_epochs == 7
    assert load_config(root=project, family="luong_dot").train.max_epochs == 1
    _, origins = explain_config(family="bahdanau", root=project)
    assert [name for name, _ in origins["train.max_epochs"]] == [
        "params.yaml translate:",
        "conf/profile/tiny.yaml translate:",
        "params.yaml translate.family_params.bahdanau",
    ]
    tiny = project / "conf" / "profile" / "tiny.yaml"
    profile = yaml.safe_load(tiny.read_text())
    profile["translate"]["family_params"] = {"bahdanau": {"train": {"max_epochs": 2}}}
    tiny.write_text(yaml.safe_dump(profile))
    cfg = load_config(root=project, family="bahdanau")
    assert cfg.train.max_epochs == 2 and "train.max_epochs" in cfg.explicit
    # tiny caps bert's 60
    assert load_config(root=project, family="bert", task="classify").train.max_epochs == 1
    profile["translate"]["family_params"] = {"bahdanu": {"train": {"max_epochs": 2}}}
    tiny.write_text(yaml.safe_dump(profile))
    with pytest.raises(
        ConfigError,
        match=r"unknown family 'bahdanu' \(in conf/profile/tiny.yaml translate.family_params\)",
    ):
        load_config(root=project, family="bahdanau")


def test_a_replication_run_takes_fresh_seeds_and_its_own_paths(project):
    """replication=true: params.yaml `<task>.replication.<name>` seeds from 1000 (none a study saw),
    the family's (or ablation's) config otherwise, models, metrics, predictions and plots under
    replication/."""
    edit_params(project, lambda p: p["translate"].update(replication={"bahdanau": 3}))
    cfg = load_config(["replication=true"], family="bahdanau", root=project)
    plain = load_config(family="bahdanau", root=project)
    assert list(cfg.seeds) == [1000, 1001, 1002] and list(plain.seeds) == [0]
    assert (cfg.paths.models, cfg.paths.metrics, cfg.paths.predictions, cfg.paths.plots) == (
        "models/replication",
        "metrics/replication",
        "predictions/replication",
        "plots/replication/translate",
    )
    assert OmegaConf.to_container(cfg.model) == OmegaConf.to_container(plain.model)
    with pytest.raises(
        ConfigError, match=r"replication=true: luong_dot has no entry in .*`translate.replication`"
    ):
        load_config(["replication=true"], family="luong_dot", root=project)


def test_a_corpus_is_the_tasks_data_with_its_keys_changed_in_folders_of_its_own(project, capsys):
    """`<task>.corpora.<name>` layers over `data` (a key the source lacks added: prepare reads it)
    for the stage's corpus=<name> and for an ablation that names it; its folders are
    data/<kind>/<task>_<name>."""
    edit_params(
        project,
        lambda p: p["translate"].update(
            corpora={
                "even": {"length_mix": {"1-10": 0.5, "11-20": 0.5}},
                "mono": {"order": "monotone"},
            },
            corpus_ablations={"b_even": {"of": "bahdanau", "corpus": "even"}},
            replication={},
        ),
    )
    base, even = load_config(root=project), load_config(root=project, corpus="even")
    assert dict(even.data.length_mix) == {"1-10": 0.5, "11-20": 0.5} != dict(base.data.length_mix)
    assert (even.paths.prepared, even.paths.tokenized) == (
        "data/prepared/translate_even",
        "data/tokenized/translate_even",
    )
    assert (
        load_config(root=project, corpus="mono").data.order == "monotone"
        and "order" not in base.data
    )
    ablation = load_config(root=project, family="b_even")
    assert (
        ablation.paths.prepared == even.paths.prepared
        and ablation.model == load_config(root=project, family="bahdanau").model
    )
    # `attention-lab config` of a corpus or an ablation
    for items in (["corpus=mono"], ["family=b_even"]):
        assert main(["config", "task=translate", *items, "--explain", "data"]) == 0
    out = capsys.readouterr().out
    assert "data.order: monotone  <- params.yaml translate.corpora.mono" in out
    assert "data.length_mix.11-20: 0.5  <- params.yaml translate.corpora.even" in out
    with pytest.raises(
        ConfigError, match="corpus='nope': not a corpus of .* `translate.corpora` \\(even, mono\\)"
    ):
        load_config(root=project, corpus="nope")
    bad = [
        (
            {"x": {"of": "bahdanau", "corpus": "nope"}},
            {},
            "corpus_ablations.x.corpus: 'nope' is not a",
        ),
        (
            {"x": {"of": "bahdanau"}},
            {},
            "corpus_ablations.x: expected {of: <family>, corpus: <name>",
        ),
        ({}, {"Bad-Name": {"order": "monotone"}}, "corpus name 'Bad-Name'"),
        (
            {},
            {"tsv": {"source": 3}},
            "corpora.tsv.source: expected the data source the corpus is built on",
        ),
        ({}, {"empty": {}}, "corpora.empty: expected"),
    ]
    for entries, corpora, message in bad:
        edit_params(
            project,
            lambda p, a=entries, c=corpora: p["translate"].update(
                ablations={}, corpus_ablations=a, corpora=c
            ),
        )
        with pytest.raises(ConfigError, match=message):
            load_config(root=project, family="bahdanau")
    on_corpus = {"of": "bahdanau", "corpus": "mono"}  # in `ablations`: named, with where it belongs
    edit_params(
        project,
        lambda p: p["translate"].update(
            ablations={"x": on_corpus}, corpus_ablations={}, corpora={"mono": {"order": "monotone"}}
        ),
    )
    with pytest.raises(ConfigError, match="ablations.x: expected .* `translate.corpus_ablations`"):
        load_config(root=project, family="bahdanau")
    edit_params(
        project,
        lambda p: p["translate"].update(
            ablations={"x": {"of": "bahdanau", "set": {"model": {"init": "xavier"}}}},
            corpus_ablations={"x": on_corpus},
        ),
    )
    with pytest.raises(
        ConfigError, match="corpus_ablations.x: also an entry of `translate.ablations`"
    ):
        load_config(root=project, family="bahdanau")


def test_a_corpus_of_the_built_in_data_does_not_exist_on_a_users_corpus(project):
    """A corpus whose `source` is not the task's data source has no stages, nor have the ablations
    naming it: the shipped params.yaml runs on a user's TSV (the corpora are the generated
    data's)."""
    from attention_lab.core.params import corpus_applies, run_ablations
    from attention_lab.pipeline.dvc_yaml import render

    params = read_params(project)
    shipped = set(params["translate"]["corpus_ablations"])
    assert shipped and all(
        params["translate"]["corpora"][c]["source"] == "generated"
        for c in params["translate"]["corpora"]
    )
    assert shipped <= set(run_ablations(params, "translate", project))
    edit_params(
        project, lambda p: p["translate"].update(data={"source": "tsv", "path": "corpus.tsv"})
    )
    params = read_params(project)
    assert not corpus_applies(params, "translate", "monotone", project)
    assert not shipped & set(run_ablations(params, "translate", project))
    stages = yaml.safe_load(render(project))["stages"]
    assert not {"prepare_corpus_translate", "train_corpus_ablation_translate"} & set(stages)
    assert stages["train_ablation_translate"]["foreach"] == "${translate.ablations}"
    edit_params(
        project,
        lambda p: p["translate"]["corpora"].update(mine={"source": "tsv", "order": "monotone"}),
    )
    with pytest.raises(
        ConfigError,
        match="translate.corpora.uniform_lengths: built on another data source .*\\(mine are on it",
    ):
        render(project)  # a mix: dvc.yaml's groups loop over `corpora` whole


def test_an_ablation_on_a_corpus_has_that_corpus_prepared_and_tokenized(project):
    """`<task>.corpora` and `<task>.corpus_ablations` have groups of their own that loop over
    params.yaml's dicts; a corpus ablation reads its corpus's folders."""
    from attention_lab.pipeline.dvc_yaml import render
    from attention_lab.pipeline.resolved import expand

    edit_params(
        project,
        lambda p: p["translate"].update(
            families=["bahdanau"],
            replication={},
            corpora={"mono": {"order": "monotone"}, "unused": {"order": "korean"}},
            ablations={},
            corpus_ablations={"b_mono": {"of": "bahdanau", "corpus": "mono"}},
        ),
    )
    stages = yaml.safe_load(render(project))["stages"]
    prepare, tokenize = stages["prepare_corpus_translate"], stages["tokenize_corpus_translate"]
    # `dvc exp run -S` can change it
    assert prepare["foreach"] == tokenize["foreach"] == "${translate.corpora}"
    assert (
        prepare["do"]["cmd"]
        == "python -m attention_lab.stages.prepare task=translate corpus=${key}"
    )
    assert prepare["do"]["outs"] == ["data/prepared/translate_${key}"]
    assert "translate.corpora.${key}" in prepare["do"]["params"]
    assert tokenize["do"]["deps"][0] == "data/prepared/translate_${key}/train.jsonl"
    for kind in ("train_corpus_ablation_translate", "evaluate_corpus_ablation_translate"):
        assert stages[kind]["foreach"] == "${translate.corpus_ablations}"
        assert {
            "data/prepared/translate_${item.corpus}",
            "data/tokenized/translate_${item.corpus}",
        } <= set(stages[kind]["do"]["deps"])
    resolved = expand(project)
    assert {"prepare_corpus_translate@mono", "prepare_corpus_translate@unused"} <= set(resolved)
    assert (
        "data/prepared/translate_mono" in resolved["train_corpus_ablation_translate@b_mono"]["deps"]
    )
    assert "data/prepared/translate_mono/test.jsonl" in stages["report_claims"]["deps"]
