"""Shared corpus reading: split files named by their config keys, and the shares carved from
train."""

import pytest

from attention_lab.core.readers import DataError, carved_fractions, read_lines, read_splits

DATA = {
    "src_path": "a.de",
    "tgt_path": "a.en",
    "valid_src_path": None,
    "valid_tgt_path": None,
    "test_src_path": "t.de",
    "test_tgt_path": "t.en",
    "valid_fraction": 0.1,
    "test_fraction": 0.2,
    "seed": 7,
}


def test_read_splits_reads_train_and_the_splits_given():
    assert read_splits(DATA, ("src_path", "tgt_path"), lambda paths: paths) == {
        "train": ["a.de", "a.en"],
        "test": ["t.de", "t.en"],
    }
    assert read_splits({"path": "c.tsv", "valid_path": None}, ("path",), lambda paths: paths) == {
        "train": ["c.tsv"]
    }


def test_a_bad_split_file_names_the_split_and_its_keys(tmp_path):
    def read(paths):
        return [read_lines(tmp_path / p) for p in paths]

    (tmp_path / "a.de").write_text("x\n")
    (tmp_path / "a.en").write_text("y\n")
    with pytest.raises(
        DataError, match=r"^test split \(data.test_src_path, data.test_tgt_path\): .*t.de: file not"
    ):
        read_splits(DATA, ("src_path", "tgt_path"), read)
    # one file: the message is the reader's own
    with pytest.raises(DataError, match=r"^\S*nope: file not found"):
        read_splits({"path": "nope"}, ("path",), read)


def test_carved_fractions_say_which_splits_are_carved(capsys):
    assert carved_fractions(DATA, {}, "translate", "the train files", "of the pairs") == (0.1, 0.2)
    assert capsys.readouterr().out == ""  # one corpus split at random: nothing to say
    assert carved_fractions(DATA, {"test": []}, "translate", "the train files", "of the pairs") == (
        0.1,
        0,
    )
    assert capsys.readouterr().out == (
        "prepare_translate: valid: carved from the train files (10% of the pairs, "
        "seed 7): no valid split given\n"
    )
