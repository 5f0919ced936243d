"""Bad inputs on every surface get a clear message (file, line, field or key, and what was
expected), never a traceback or a half-written output. docs/bad_inputs.md is the catalogue; each of
its rows names a test here or in a module's own test file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attention_lab.classify.data.labeled import read_labeled
from attention_lab.core.config import ConfigError, check_value, load_config
from attention_lab.core.readers import DataError
from attention_lab.translate.data.readers import read_parallel_files, read_tsv
from tests.conftest import edit_params

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

# ------------------------------------------------------------------------------------------- config


def test_unknown_data_source_and_trainer_list_the_valid_ones(project):
    edit_params(project, lambda p: p["translate"]["data"].update(source="csv"))
    with pytest.raises(
        ConfigError,
        match=r"unknown data source 'csv' for task translate \(params.yaml "
        r"`translate.data.source`\); choose one of generated, parallel_files, tsv",
    ):
        load_config(root=project)
    edit_params(project, lambda p: p["translate"]["data"].update(source="generated"))
    with pytest.raises(ConfigError, match=r"unknown trainer 'tpu'; choose one of cpu"):
        load_config(["trainer=tpu"], root=project)
    with pytest.raises(ConfigError, match=r"unknown family 'nope'; choose one of bahdanau, bert"):
        load_config(["model=nope"], root=project)


def test_unknown_profile_lists_the_valid_ones(project):
    edit_params(project, lambda p: p.update(profile="huge"))
    with pytest.raises(
        ConfigError, match=r"profile 'huge' has no file .*; choose one of paper, quick, tiny"
    ):
        load_config(root=project)


@pytest.mark.parametrize(
    ("family", "override", "message"),
    [
        (
            "luong_general",
            "model.attention=multiplicative",
            (
                "model.attention = 'multiplicative': expected one of additive, dot, general,"
                " concat, concat_identity, local_m, local_p"
            ),
        ),
        (
            "luong_local_p",
            "model.local_score=additive",
            "model.local_score = 'additive': expected one of dot, general, concat, concat_identity",
        ),
    ],
)
def test_unknown_attention_type_lists_the_valid_ones(project, family, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config([override], family=family, root=project)


def test_unknown_attention_in_the_library_lists_the_valid_ones():
    from attention_lab.nn.attention import build_attention

    with pytest.raises(
        ValueError,
        match=r"unknown attention 'nope'; choose one of \['additive', 'concat', "
        r"'concat_identity', 'dot', 'general', 'local_m', 'local_p'\]",
    ):
        build_attention("nope", 4, 4)


@pytest.mark.parametrize(
    ("task", "family", "override", "message"),
    [
        (
            "translate",
            "bahdanau",
            "model.dropout=-0.1",
            r"model.dropout = -0.1: expected a number in \[0, 1\)",
        ),
        (
            "translate",
            "bahdanau",
            "model.dropout=1.0",
            r"model.dropout = 1.0: expected a number in \[0, 1\)",
        ),
        (
            "classify",
            "bert",
            "model.attention_dropout=1.5",
            r"model.attention_dropout = 1.5: expected a number in \[0, 1\)",
        ),
        (
            "translate",
            "bahdanau",
            "model.emb_dim=0",
            r"model.emb_dim = 0: expected an integer in \[1, 65536\]",
        ),
        (
            "translate",
            "seq2seq_gru",
            "model.hidden_dim=-8",
            r"model.hidden_dim = -8: expected an integer in \[1, 65536\]",
        ),
        (
            "translate",
            "bahdanau",
            "model.emb_dim=100000000",
            r"model.emb_dim = 100000000: expected an integer in \[1, 65536\]",
        ),
        (
            "translate",
            "bahdanau",
            "model.emb_dim=12.5",
            r"model.emb_dim = 12.5: expected an integer",
        ),
        (
            "translate",
            "transformer",
            "model.heads=0",
            r"model.heads = 0: expected an integer in \[1, 65536\]",
        ),
        (
            "translate",
            "transformer",
            "model.heads=3",
            r"model.d_model = 128 is not divisible by model.heads = 3",
        ),
        (
            "translate",
            "luong_local_m",
            "model.window=-1",
            r"model.window = -1: expected an integer in \[0, 65536\]",
        ),
        (
            "caption",
            "show_attend_tell",
            "model.channels=[16,0]",
            r"model.channels = 0: expected an integer in \[1, 65536\]",
        ),
        ("translate", "bahdanau", "train.lr=0", r"train.lr = 0: expected a number in \(0, inf\)"),
        (
            "translate",
            "bahdanau",
            "train.lr=-0.001",
            r"train.lr = -0.001: expected a number in \(0, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "train.lr=fast",
            r"train.lr = 'fast': expected a number in \(0, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "train.batch_size=0",
            r"train.batch_size = 0: expected an integer in \[1, 65536\]",
        ),
        (
            "translate",
            "bahdanau",
            "train.batch_size=10000000",
            r"train.batch_size = 10000000: expected an integer in \[1, ",
        ),
        (
            "translate",
            "bahdanau",
            "train.max_epochs=0",
            r"train.max_epochs = 0: expected an integer in \[1, 100000\]",
        ),
        (
            "translate",
            "bahdanau",
            "train.label_smoothing=1",
            r"train.label_smoothing = 1: expected a number in \[0, 1\)",
        ),
        (
            "translate",
            "bahdanau",
            "train.clip=-1",
            r"train.clip = -1: expected a number in \[0, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "train.teacher_forcing.schedule=cosine",
            (
                r"train.teacher_forcing.schedule = 'cosine': expected one of constant, linear,"
                r" inverse_sigmoid"
            ),
        ),
        (
            "translate",
            "bahdanau",
            "train.teacher_forcing.ratio=1.5",
            r"train.teacher_forcing.ratio = 1.5: expected a number in \[0, 1\]",
        ),
        (
            "classify",
            "transformer_encoder",
            "train.label_fractions=[0.0,1.0]",
            r"train.label_fractions = 0.0: expected a number in \(0, 1\]",
        ),
        (
            "classify",
            "transformer_encoder",
            "train.label_fractions=[1.5]",
            r"train.label_fractions = 1.5: expected a number in \(0, 1\]",
        ),
        (
            "classify",
            "bert",
            "train.max_tokens=600",
            r"train.max_tokens = 600: expected an integer in \[1, 510\] \(model.max_positions - 2",
        ),
        (
            "classify",
            "bert",
            "pretrain.mask_rate=0",
            r"pretrain.mask_rate = 0: expected a number in \(0, 1\)",
        ),
        (
            "classify",
            "bert",
            "pretrain.objective=mlm",
            r"pretrain.objective = 'mlm': expected one of sop, nsp, none",
        ),
        (
            "classify",
            "bert",
            "pretrain.max_updates=0",
            r"pretrain.max_updates = 0: expected an integer in \[1, inf\) or null",
        ),
        (
            "classify",
            "bert",
            "data.n_unlabelled=-1",
            r"data.n_unlabelled = -1: expected an integer in \[0, 10000000\]",
        ),
        (
            "classify",
            "han",
            "train.max_words=0",
            r"train.max_words = 0: expected an integer in \[1, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "tune.trials=-1",
            r"tune.trials = -1: expected an integer in \[0, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "tune.reduction_factor=1",
            r"tune.reduction_factor = 1: expected an integer in \[2, inf\)",
        ),
        (
            "translate",
            "bahdanau",
            "tune.direction=up",
            r"tune.direction = 'up': expected one of minimize, maximize",
        ),
        (
            "translate",
            "bahdanau",
            "tokenize.vocab_size=0",
            r"tokenize.vocab_size = 0: expected an integer in \[1, 10000000\]",
        ),
        (
            "translate",
            "bahdanau",
            "tokenize.model=wordpiece",
            r"tokenize.model = 'wordpiece': expected one of bpe, unigram",
        ),
        (
            "translate",
            "bahdanau",
            "tokenize.normalization=NFD",
            r"tokenize.normalization = 'NFD': expected one of nfkc, nfc, none",
        ),
        (
            "translate",
            "bahdanau",
            "tokenize.lowercase=maybe",
            r"tokenize.lowercase = 'maybe': expected one of false, true",
        ),
        (
            "translate",
            "bahdanau",
            "tokenize.lowercase=1",
            r"tokenize.lowercase = 1: expected one of false, true",
        ),
        (
            "translate",
            "bahdanau",
            "evaluate.beam=0",
            r"evaluate.beam = 0: expected an integer in \[1, 64\]",
        ),
        (
            "translate",
            "bahdanau",
            "evaluate.len_penalty=-1",
            r"evaluate.len_penalty = -1: expected a number in \[0, 5\]",
        ),
        (
            "translate",
            "bahdanau",
            "data.n_train=0",
            r"data.n_train = 0: expected an integer in \[1, 10000000\]",
        ),
        (
            "translate",
            "bahdanau",
            "data.n_train=1000000000",
            r"data.n_train = 1000000000: expected an integer in \[1, ",
        ),
        (
            "translate",
            "bahdanau",
            "data.length_mix.1-10=-0.5",
            r"data.length_mix.1-10 = -0.5: expected a number in \[0, inf\)",
        ),
        ("caption", "show_tell", "data.noise=2", r"data.noise = 2: expected a number in \[0, 1\]"),
        (
            "translate",
            "bahdanau",
            "trainer.accelerator=tpu",
            r"trainer.accelerator = 'tpu': expected one of auto, cpu",
        ),
    ],
)
def test_out_of_range_values_name_key_value_and_range(project, task, family, override, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config([override], family=family, task=task, root=project)
    assert f"config of {task}/{family} (" in str(err.value)


def test_out_of_range_values_from_params_yaml_and_tuned_files(project):
    edit_params(project, lambda p: p["translate"]["train"].update(lr=-0.5))
    with pytest.raises(
        ConfigError,
        match=r"params.yaml, conf/, tuned/, the profile or an override\): "
        r"train.lr = -0.5: expected a number in \(0, inf\)",
    ):
        load_config(family="bahdanau", root=project)
    edit_params(project, lambda p: p["translate"]["train"].update(lr=0.002))
    (project / "tuned").mkdir()
    (project / "tuned" / "bahdanau.yaml").write_text("params: {model: {dropout: 1.2}}\n")
    with pytest.raises(ConfigError, match=r"model.dropout = 1.2: expected a number in \[0, 1\)"):
        load_config(family="bahdanau", root=project)
    assert load_config(family="bahdanau", root=project, tuned=False).model.dropout == 0.1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("params: {model: {dropout: 0.2\n", r"tuned/bahdanau.yaml: not valid YAML"),
        (
            "- 1\n- 2\n",
            (
                r"tuned/bahdanau.yaml: expected a mapping with `params: \{...\}` \(written by the"
                r" tune stage\)"
            ),
        ),
        ("params: {model: {dropot: 0.2}}\n", r"tuned/bahdanau.yaml or .*dropot"),
    ],
)
def test_malformed_tuned_files(project, text, message):
    (project / "tuned").mkdir()
    (project / "tuned" / "bahdanau.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(family="bahdanau", root=project)


@pytest.mark.parametrize(
    ("source", "data", "override", "message"),
    [
        (
            "tsv",
            {"path": "c.tsv"},
            "data.valid_fraction=1.0",
            r"data.valid_fraction = 1.0: expected a number in \[0, 1\)",
        ),
        (
            "tsv",
            {"path": "c.tsv"},
            "data.valid_fraction=0.95",
            r"data.valid_fraction \+ data.test_fraction = 0.95 \+ 0.1: expected a sum below 1",
        ),
        (
            "tsv",
            {"path": "c.tsv"},
            "data.max_pairs=-5",
            r"data.max_pairs = -5: expected an integer in \[1, inf\) or null",
        ),
        (
            "tsv",
            {"path": "c.tsv"},
            "data.src_column=-1",
            r"data.src_column = -1: expected an integer in \[0, inf\)",
        ),
        (
            "parallel_files",
            {"src_path": "a", "tgt_path": "b"},
            "data.max_pairs=0",
            r"data.max_pairs = 0: expected an integer in \[1, inf\) or null",
        ),
    ],
)
def test_bad_values_of_user_corpus_sources(project, source, data, override, message):
    edit_params(project, lambda p: p["translate"].update(data={"source": source, **data}))
    with pytest.raises(ConfigError, match=message):
        load_config([override], root=project)


def test_labeled_files_format_and_max_documents(project):
    edit_params(
        project, lambda p: p["classify"].update(data={"source": "labeled_files", "path": "d.jsonl"})
    )
    with pytest.raises(ConfigError, match=r"data.format = 'tsv': expected one of jsonl, csv"):
        load_config(["data.format=tsv"], task="classify", root=project)
    with pytest.raises(
        ConfigError, match=r"data.max_documents = 0: expected an integer in \[1, inf\) or null"
    ):
        load_config(["data.max_documents=0"], task="classify", root=project)


def test_labeled_files_columns_and_escapes(project):
    """data.columns (CSV without a header row) and data.escapes, from params.yaml or an override."""
    zhang = {
        "source": "labeled_files",
        "path": "d.csv",
        "format": "csv",
        "columns": ["label", "text"],
        "escapes": True,
    }
    edit_params(project, lambda p: p["classify"].update(data=zhang))
    assert load_config(task="classify", root=project).data.columns == ["label", "text"]
    with pytest.raises(
        ConfigError,
        match=r"data.columns = \['label', 'text'\] but data.format = "
        r"'jsonl': columns name the fields of a CSV file",
    ):
        load_config(["data.format=jsonl"], task="classify", root=project)
    with pytest.raises(
        ConfigError,
        match=r"data.columns = \['label', 'text', 'text'\] names "
        r"'text' more than once: expected one name per column",
    ):
        load_config(["data.columns=[label,text,text]"], task="classify", root=project)
    with pytest.raises(
        ConfigError,
        match=r"data.columns = \['stars', 'text'\] lacks "
        r"data.label_field = 'label': expected it among",
    ):
        load_config(["data.columns=[stars,text]"], task="classify", root=project)
    with pytest.raises(ConfigError, match=r"data.escapes = 1: expected one of false, true"):
        load_config(["data.escapes=1"], task="classify", root=project)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.lr", r"override 'train.lr': expected key=value \(e.g. train.lr=0.001\)"),
        ("=3", r"override '=3': expected key=value"),
        (
            "train=3",
            (
                r"override 'train=3': `train` is a section; set one of its keys \(e.g."
                r" train.batch_size=...\)"
            ),
        ),
        (
            "task=classify",
            r"override 'task=classify': `task` is set by the stage argument task=<task>",
        ),
        ("profile=paper", r"override 'profile=paper': `profile` is set by params.yaml `profile:`"),
        (
            "train.learning_rate=0.1",
            r"override 'train.learning_rate=0.1': Key 'learning_rate' is not in struct \(no",
        ),
        ("data.source=tsv", r"data.source = 'tsv', but the data source chosen is 'generated'"),
        ("train.lr==0.1", r"train.lr = '=0.1': expected a number"),
    ],
)
def test_malformed_overrides(project, override, message):
    with pytest.raises(ConfigError, match=message):
        load_config([override], family="bahdanau", root=project)


def test_an_interpolation_that_does_not_resolve(project):
    with pytest.raises(
        ConfigError,
        match=r"config of caption/show_tell \(.*Interpolation key 'data.heigth' not found",
    ):
        load_config(
            ["model.height=${data.heigth}"], family="show_tell", task="caption", root=project
        )


def test_group_overrides_pick_existing_files(project):
    (project / "conf" / "trainer" / "cpu2.yaml").write_text(
        (project / "conf" / "trainer" / "cpu.yaml").read_text()
    )
    assert load_config(["trainer=cpu2"], root=project).trainer.accelerator == "cpu"
    assert load_config(["data=translate/generated"], root=project).data.source == "generated"


def test_check_value_is_the_one_rule_table():
    assert check_value("model.dropout", 0.0) is None and check_value("train.lr", 3) is None
    assert check_value("train.lr", True) == "train.lr = True: expected a number in (0, inf)"
    assert check_value("train.lr", float("nan")) == "train.lr = nan: expected a number in (0, inf)"
    assert (
        check_value("tune.max_params", None) is None
        and check_value("train.batch_size", None) is not None
    )
    assert check_value("model.no_rule_for_this", -1) is None
    assert check_value("tokenize.model", "wordlevel", "classify") is None
    assert (
        check_value("tokenize.model", "wordlevel", "translate")
        == "tokenize.model = 'wordlevel': expected one of bpe, unigram"
    )


def test_every_shipped_config_passes_the_checks(project):
    params = yaml.safe_load((project / "params.yaml").read_text())
    for task in params["tasks"]:
        for family in params[task]["families"] + params[task].get("pretrained", []):
            load_config(family=family, task=task, root=project)


def test_a_stage_without_a_family_prints_its_usage(project):
    from attention_lab.stages.common import stage_config

    with pytest.raises(
        SystemExit,
        match=r"usage: python -m attention_lab.stages.<stage> \[task=<task>\] "
        r"family=<name> \[key=value ...\]",
    ):
        stage_config(["train.lr=0.01"])


def test_a_stage_prints_one_line_not_a_traceback(project):
    """What `dvc repro` shows for a bad config: `<stage>: error: <message>`, exit status 1, nothing
    written."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(project / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "attention_lab.stages.prepare", "task=translate", "data.n_valid=-3"],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        proc.stderr.startswith("prepare: error: config of translate (")
        and "data.n_valid = -3: expected an integer in [1, 10000000]" in proc.stderr
    )
    assert not (project / "data").exists()


# ------------------------------------------------------------------------------------- data readers


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_unknown_encoding_is_a_data_error(tmp_path):
    f = write(tmp_path / "c.tsv", "a\tb\n")
    with pytest.raises(
        DataError, match=rf"{f}: unknown encoding 'utf-9' \(data.encoding; e.g. utf-8"
    ):
        read_tsv(f, encoding="utf-9")
    with pytest.raises(DataError, match="unknown encoding 'klingon'"):
        read_labeled(f, "csv", "text", "label", encoding="klingon")
    assert read_tsv(write(tmp_path / "l.tsv", b"caf\xe9\tb\n"), encoding="latin-1") == [
        {"src": "café", "tgt": "b"}
    ]


def test_non_utf8_bytes_in_every_format(tmp_path):
    utf16 = "hello\tworld\n".encode("utf-16")
    with pytest.raises(
        DataError, match=r"u.tsv:1: cannot decode bytes as utf-8 \(invalid start byte at byte 0\)"
    ):
        read_tsv(write(tmp_path / "u.tsv", utf16))
    en, ko = write(tmp_path / "a.en", "a\nb\n"), write(tmp_path / "a.ko", b"\xea\xb0\x80\n\xff\n")
    with pytest.raises(DataError, match=rf"{ko}:2: cannot decode bytes as utf-8"):
        read_parallel_files(en, ko)
    with pytest.raises(DataError, match=r"c.csv:2: cannot decode bytes as utf-8"):
        read_labeled(write(tmp_path / "c.csv", b"text,label\ncaf\xe9,x\n"), "csv", "text", "label")


def test_empty_parallel_file_and_whitespace_only_tsv(tmp_path):
    en, ko = write(tmp_path / "a.en", "a\n"), write(tmp_path / "a.ko", "")
    with pytest.raises(DataError, match=rf"{ko}: file is empty"):
        read_parallel_files(en, ko)
    with pytest.raises(DataError, match=r"w.tsv: file is empty"):
        read_tsv(write(tmp_path / "w.tsv", " \t \n\n"))


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "s.jsonl",
            '{"text": "bad \\ud800 here.", "label": "x"}\n',
            (
                r"s.jsonl:1: a \\u escape is a lone surrogate \('\\ud800'\), not a character;"
                r" expected valid Unicode text"
            ),
        ),
        (
            "d.jsonl",
            "[" * 100_000 + "\n",
            r"d.jsonl:1: not valid JSON for this reader \(maximum recursion depth",
        ),
        (
            "i.jsonl",
            '{"text": "a.", "label": ' + "9" * 5000 + "}\n",
            r"i.jsonl:1: not valid JSON for this reader",
        ),
        (
            "q.csv",
            'text,label\n"an open quote,x\nmore,y\n',
            (
                r"q.csv:2: malformed CSV \(unexpected end of data\); a quoted field that starts"
                r" here is never closed"
            ),
        ),
        (
            "k.csv",
            'text,label\n"quoted" then more,x\n',
            r"k.csv:2: malformed CSV \(',' expected after '\"'\)",
        ),
        (
            "h.csv",
            "text,text,label\na,b,c\n",
            (
                r"h.csv:1: column\(s\) 'text' appear more than once in the header; expected one"
                r" column per name"
            ),
        ),
    ],
)
def test_malformed_labeled_files(tmp_path, name, data, message):
    with pytest.raises(DataError, match=message):
        read_labeled(write(tmp_path / name, data), name.split(".")[1], "text", "label")


def prepare_project(project: Path, data: dict) -> None:
    edit_params(project, lambda p: p["classify"].update(data={"source": "labeled_files", **data}))


def test_prepare_refuses_a_split_field_without_every_split_and_writes_nothing(project):
    from attention_lab.stages.prepare import main

    rows = [
        {"text": f"Document {i}.", "label": "ab"[i % 2], "part": "train" if i < 8 else "test"}
        for i in range(10)
    ]
    write(project / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    prepare_project(project, {"path": "d.jsonl", "split_field": "part"})
    with pytest.raises(DataError, match=r"d.jsonl: no document has part = 'valid'"):
        main(["task=classify"])
    assert not (project / "data").exists()


def test_prepare_refuses_a_label_only_in_test(project):
    from attention_lab.stages.prepare import main

    rows = [
        {"text": f"Document {i}.", "label": "a", "part": ["train", "valid", "test"][i % 3]}
        for i in range(9)
    ]
    rows[2]["label"] = "zzz"
    write(project / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    prepare_project(project, {"path": "d.jsonl", "split_field": "part"})
    with pytest.raises(
        DataError, match=r"test document 0: label 'zzz' does not occur in train \(train labels: a\)"
    ):
        main(["task=classify"])
    assert not (project / "data").exists()


def split_files_project(
    project: Path, task: str, data: dict, files: dict[str, str | bytes]
) -> None:
    """`files` written into the project and `data` as the task's params.yaml data section."""
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        write(project / name, text)
    edit_params(project, lambda p: p[task].update(data=data))


PARALLEL = {
    "source": "parallel_files",
    "src_path": "m/train.de",
    "tgt_path": "m/train.en",
    "valid_src_path": "m/val.de",
    "valid_tgt_path": "m/val.en",
    "test_src_path": "m/test_2016_flickr.de",
    "test_tgt_path": "m/test_2016_flickr.en",
}
LINES = "".join(f"line {i}\n" for i in range(10))


@pytest.mark.parametrize(
    ("task", "data", "files", "message"),
    [
        (
            "translate",
            PARALLEL,
            {"m/train.de": LINES, "m/train.en": LINES, "m/val.de": LINES, "m/val.en": LINES},
            (
                r"test split \(data.test_src_path, data.test_tgt_path\): .*m/test_2016_flickr.de:"
                r" file not found"
            ),
        ),
        (
            "translate",
            PARALLEL,
            {
                "m/train.de": LINES,
                "m/train.en": LINES,
                "m/val.de": "a\nb\nc\n",
                "m/val.en": "a\nb\n",
                "m/test_2016_flickr.de": LINES,
                "m/test_2016_flickr.en": LINES,
            },
            (
                r"valid split \(data.valid_src_path, data.valid_tgt_path\): .*m/val.de has 3 lines"
                r" but .*m/val.en has 2: expected one translation per line in both"
            ),
        ),
        (
            "translate",
            {"source": "tsv", "path": "t.tsv", "test_path": "u.tsv"},
            {"t.tsv": "a\tb\n" * 10, "u.tsv": b"\xff\tb\n"},
            r"test split \(data.test_path\): .*u.tsv:1: cannot decode bytes as utf-8",
        ),
        (
            "classify",
            {"source": "labeled_files", "path": "train.jsonl", "test_path": "test.jsonl"},
            {
                "train.jsonl": '{"text": "A.", "label": "a"}\n' * 10,
                "test.jsonl": '{"text": "B.", "label": "zzz"}\n',
            },
            r"test document 0: label 'zzz' does not occur in train \(train labels: a\)",
        ),
        (
            "classify",
            {"source": "label_folders", "path": "imdb"},
            {"imdb/test/pos/0.txt": "A."},
            r"imdb/train: folder not found; expected .*imdb/train/<label>/\*.txt",
        ),
        (
            "classify",
            {"source": "label_folders", "path": "imdb"},
            {
                **{f"imdb/train/pos/{i}.txt": "A." for i in range(3)},
                "imdb/test/pos/0.txt": "A.",
                "imdb/test/neg/0.txt": "B.",
            },
            (
                r"imdb/test/neg: label 'neg' does not occur in train \(train labels: pos\);"
                r" expected the same label folders in "
                r"every split, or data.labels naming the ones to read"
            ),
        ),
        (
            "classify",
            {"source": "labeled_files", "path": "train.jsonl", "unlabelled_path": "u.jsonl"},
            {"train.jsonl": '{"text": "A.", "label": "a"}\n' * 10},
            (
                r"unlabelled documents \(data.unlabelled_path\): .*u.jsonl: not found; expected a"
                r" folder of .txt files or a jsonl/csv file of unlabelled documents"
            ),
        ),
        (
            "classify",
            {"source": "labeled_files", "path": "train.jsonl", "unlabelled_path": "u.jsonl"},
            {
                "train.jsonl": '{"text": "A.", "label": "a"}\n' * 10,
                "u.jsonl": '{"text": "B."}\n{"body": "C."}\n',
            },
            (
                r"unlabelled documents \(data.unlabelled_path\): .*u.jsonl:2: no field 'text'"
                r" \(fields present: body\)"
            ),
        ),
        (
            "classify",
            {
                "source": "label_folders",
                "path": "imdb",
                "labels": ["pos"],
                "unlabelled_path": "imdb/train/unsup",
            },
            {
                **{f"imdb/{s}/pos/{i}.txt": "A." for s in ("train", "test") for i in range(3)},
                "imdb/train/unsup/0.md": "B.",
            },
            (
                r"unlabelled documents \(data.unlabelled_path\): .*imdb/train/unsup: no .txt files;"
                r" expected one unlabelled document per .txt file"
            ),
        ),
    ],
    ids=[
        "missing-test-file",
        "valid-line-counts",
        "test-not-utf8",
        "label-only-in-test-file",
        "no-train-folder",
        "label-folder-only-in-test",
        "missing-unlabelled-file",
        "unlabelled-line-without-text",
        "empty-unlabelled-folder",
    ],
)
def test_prepare_names_the_bad_split_and_writes_nothing(project, task, data, files, message):
    from attention_lab.stages.prepare import main

    split_files_project(project, task, data, files)
    with pytest.raises(DataError, match=message):
        main([f"task={task}"])
    assert not (project / "data").exists()


@pytest.mark.parametrize(
    ("task", "data", "message"),
    [
        (
            "translate",
            {**PARALLEL, "valid_tgt_path": None},
            (
                r"data.valid_src_path = 'm/val.de' but data.valid_tgt_path is null: give both files"
                r" of the valid split, or "
                r"neither \(then it is carved from the train files by data.valid_fraction\)"
            ),
        ),
        (
            "classify",
            {
                "source": "labeled_files",
                "path": "d.jsonl",
                "test_path": "t.jsonl",
                "split_field": "part",
            },
            r"data.split_field = 'part' and data.test_path both say where the splits are: use one",
        ),
        (
            "classify",
            {"source": "label_folders", "path": "imdb", "labels": "pos"},
            (
                r"data.labels = 'pos': expected a list of label folder names \(e.g. \[neg, pos\]\)"
                r" or null"
            ),
        ),
        (
            "caption",
            {
                "source": "coco_captions",
                "splits": {"val": {"annotations": "v.json", "images": "v"}},
            },
            r"Key 'val' is not in struct",
        ),
    ],
    ids=["half-a-pair-of-files", "split-field-and-files", "labels-not-a-list", "coco-split-val"],
)
def test_split_file_settings_that_contradict_each_other(project, task, data, message):
    from attention_lab.stages.prepare import main

    edit_params(project, lambda p: p[task].update(data=data))
    with pytest.raises(ConfigError, match=message):
        main([f"task={task}"])
    assert not (project / "data").exists()


# ------------------------------------------------------------------------------------------------
# search-space files


def tune_stage(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(project / "src")}
    return subprocess.run(
        [sys.executable, "-m", "attention_lab.stages.tune", *args],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_search_space_that_is_not_yaml_names_file_and_line(project):
    (project / "conf" / "tune" / "bahdanau.yaml").write_text("train.lr: {low: 0.001, high: [\n")
    proc = tune_stage(project, "family=bahdanau")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(
        f"tune: error: {project / 'conf' / 'tune' / 'bahdanau.yaml'}: not valid YAML"
    )
    assert 'bahdanau.yaml", line 2' in proc.stderr
    assert not (project / "tuned" / "bahdanau.yaml").exists()


def test_search_space_bounds_outside_the_keys_range_are_refused(project):
    from attention_lab.stages.common import stage_config
    from attention_lab.train.search_space import load_space

    (project / "conf" / "tune" / "bahdanau.yaml").write_text(
        "model.dropout: {low: 0.0, high: 1.5}\n"
    )
    with pytest.raises(ConfigError, match=r"model.dropout = 1.5: expected a number in \[0, 1\)"):
        load_space(
            project / "conf" / "tune" / "bahdanau.yaml",
            stage_config(["family=bahdanau"], tuned=False),
        )


def test_the_train_stage_prints_one_line_not_a_traceback(project):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(project / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "attention_lab.stages.train", "family=bahdanau", "model.dropout=2"],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "model.dropout = 2: expected a number in [0, 1)" in proc.stderr


# -------------------------------------------------------------------------------------- model files


def fake_export(
    folder: Path, meta, tokenizer: str | None = None, files=("encoder.onnx", "decoder_step.onnx")
) -> Path:
    """An exported folder whose graphs are placeholders: meta.json and tokenizer.json are read
    before any graph."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in files:
        (folder / name).write_bytes(b"placeholder")
    (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    if tokenizer is None:
        from attention_lab.infer.tokenization import train_tokenizer

        train_tokenizer(["the cat sat", "고양이가 앉았다"] * 3, "bpe", 60, 1).save(
            str(folder / "tokenizer.json")
        )
    else:
        (folder / "tokenizer.json").write_text(tokenizer)
    return folder


TRANSLATE_META = {
    "task": "translate",
    "family": "bahdanau",
    "has_attention": True,
    "pad_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "encoder_state_outputs": ["state_0"],
    "state_inputs": ["state_0"],
    "state_outputs": ["new_state_0"],
    "max_len_ratio": 1.5,
}


@pytest.mark.parametrize(
    ("command", "meta", "tokenizer", "message"),
    [
        (
            "translate",
            '{"family": ',
            None,
            r"meta.json: not valid JSON \(Expecting value: line 1 column 12",
        ),
        ("translate", "[1, 2]", None, r"meta.json: expected a JSON object, found list"),
        (
            "translate",
            {"family": "bahdanau"},
            None,
            r"meta.json: missing has_attention, pad_id, bos_id, eos_id",
        ),
        (
            "translate",
            {"task": "caption"},
            None,
            r"meta.json: not a translate model \(task 'caption'\); use `attention",
        ),
        ("caption", TRANSLATE_META, None, r"meta.json: not a caption model \(task 'translate'\)"),
        (
            "classify",
            {"task": "classify", "family": "han"},
            None,
            r"meta.json: missing labels, hierarchical",
        ),
        (
            "translate",
            TRANSLATE_META,
            "",
            r"tokenizer.json: not a readable tokenizer \(EOF while parsing",
        ),
        (
            "translate",
            TRANSLATE_META,
            "garbage",
            r"tokenizer.json: not a readable tokenizer \(expected value",
        ),
    ],
)
def test_broken_model_files_are_named_by_the_cli(
    tmp_path, capsys, command, meta, tokenizer, message
):
    from attention_lab.cli import main

    files = ("model.onnx",) if command == "classify" else ("encoder.onnx", "decoder_step.onnx")
    folder = fake_export(tmp_path / "onnx", meta, tokenizer, files)
    image = tmp_path / "c.png"
    image.write_bytes(b"")
    assert (
        main([command, "--model", str(folder), str(image) if command == "caption" else "the cat"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"attention-lab {command}: {folder}/") and "Traceback" not in err
    assert __import__("re").search(message, err), err


def test_serve_skips_broken_folders_and_says_why(tmp_path, capsys):
    from attention_lab.cli import main
    from attention_lab.serving.registry import discover

    fake_export(tmp_path / "bad" / "onnx", "{")
    fake_export(tmp_path / "old" / "onnx", {"family": "bahdanau"})
    models, skipped = discover(tmp_path)
    assert models == {}
    reasons = {Path(s["path"]).parent.name: s["reason"] for s in skipped}
    assert (
        "meta.json: not valid JSON" in reasons["bad"]
        and "meta.json: missing has_attention" in reasons["old"]
    )
    assert main(["serve", "--models", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no servable model under" in err and f"skipped {tmp_path / 'bad' / 'onnx'}: " in err


def test_register_names_a_broken_meta_json(tmp_path, capsys, monkeypatch):
    from attention_lab.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    folder = fake_export(tmp_path / "han" / "onnx", '{"task": "classify",')
    assert main(["register", "--model", str(tmp_path / "han")]) == 2
    assert (
        f"attention-lab register: {folder / 'meta.json'}: not valid JSON" in capsys.readouterr().err
    )


def test_bad_checkpoints_are_named(tmp_path):
    import torch

    from attention_lab.train.checkpoints import CheckpointError, load_model

    with pytest.raises(
        CheckpointError, match=r"nope.ckpt: no such checkpoint \(run the train stage first\)"
    ):
        load_model(tmp_path / "nope.ckpt")
    (tmp_path / "garbage.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(
        CheckpointError, match=r"garbage.ckpt: (truncated or )?not a (readable )?checkpoint"
    ):
        load_model(tmp_path / "garbage.ckpt")
    torch.save({"state_dict": {}}, tmp_path / "other.ckpt")
    with pytest.raises(
        CheckpointError, match=r"other.ckpt: not a readable attention-lab checkpoint \(KeyError"
    ):
        load_model(tmp_path / "other.ckpt")
    data = (tmp_path / "other.ckpt").read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.ckpt: .*re-run its train stage"):
        load_model(tmp_path / "cut.ckpt")


# ---------------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["translate", "--beam", "0", "hi"],
            "argument --beam: expected an integer in [1, 16], got 0",
        ),
        (
            ["translate", "--beam", "100000", "hi"],
            "argument --beam: expected an integer in [1, 16], got 100000",
        ),
        (["translate", "--beam", "two", "hi"], "argument --beam: expected an integer, got 'two'"),
        (
            ["translate", "--len-penalty", "-1", "hi"],
            "argument --len-penalty: expected a number in [0, 5], got -1",
        ),
        (
            ["translate", "--len-penalty", "nan", "hi"],
            "argument --len-penalty: expected a number in [0, 5], got nan",
        ),
        (
            ["translate", "--threads", "0", "hi"],
            "argument --threads: expected an integer in [1, 1024], got 0",
        ),
        (
            ["translate", "--max-chars", "0", "hi"],
            "argument --max-chars: expected an integer in [1, inf), got 0",
        ),
        (
            ["classify", "--top", "-1", "x"],
            "argument --top: expected an integer in [0, inf), got -1",
        ),
        (
            ["caption", "--beam", "0", "c.png"],
            "argument --beam: expected an integer in [1, 16], got 0",
        ),
        (["caption"], "the following arguments are required: images"),
        (
            ["serve", "--port", "70000"],
            "argument --port: expected an integer in [1, 65535], got 70000",
        ),
        (
            ["serve", "--max-body", "-5"],
            "argument --max-body: expected an integer in [1, inf), got -5",
        ),
        (["register"], "the following arguments are required: --model"),
        (["transl8"], "invalid choice: 'transl8' (choose from"),
    ],
)
def test_cli_options_out_of_range_are_usage_errors(capsys, argv, message):
    from attention_lab.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: attention-lab") and message in err, err


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (
            ["translate", "  ", "\t"],
            "",
            "attention-lab translate: no sentences given (as arguments or on stdin)",
        ),
        (["translate"], "\n \n", "attention-lab translate: no sentences given"),
        (
            ["translate", "the \udcff cat"],
            "",
            "sentence 1 holds bytes that are not UTF-8 ('\\udcff' at character 4)",
        ),
        (
            ["translate", "--max-chars", "20", "ok", "word " * 10],
            "",
            "attention-lab translate: sentence 2 has 50 characters; at most 20 (--max-chars)",
        ),
        (
            ["translate", "word " * 1001],
            "",
            "sentence 1 has 5005 characters; at most 5000 (--max-chars)",
        ),
        (
            ["classify", " "],
            "",
            "attention-lab classify: no document given (as arguments or on stdin)",
        ),
        (
            ["classify", "a \udce9 b."],
            "",
            "attention-lab classify: document 1 holds bytes that are not UTF-8",
        ),
        (
            ["translate", "--model", "/nonexistent/bahdanau", "hi"],
            "",
            (
                "attention-lab translate: /nonexistent/bahdanau: no exported model here or in"
                " /nonexistent/bahdanau/onnx"
            ),
        ),
        (
            ["caption", "--model", "/nonexistent/sat", "c.png"],
            "",
            "attention-lab caption: /nonexistent/sat: no exported",
        ),
    ],
)
def test_cli_bad_texts_exit_2_before_loading_a_model(capsys, monkeypatch, argv, stdin, message):
    import io

    from attention_lab.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_readme_outside_a_project(tmp_path, monkeypatch, capsys, project):
    from attention_lab.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["readme"]) == 2
    assert (
        f"attention-lab readme: {tmp_path / 'params.yaml'}: not found (run from the repository"
        " root)" in capsys.readouterr().err
    )
    monkeypatch.chdir(project)
    assert main(["readme"]) == 2
    assert (
        f"attention-lab readme: [Errno 2] No such file or directory: '{project / 'README.md'}'"
        in capsys.readouterr().err
    )
    (project / "README.md").write_text("# results\n")
    assert main(["readme"]) == 2
    err = capsys.readouterr().err
    assert "attention-lab readme: no metrics yet: " in err and "(run `dvc repro` first)" in err
