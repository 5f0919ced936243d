"""data.canvas_batches and data.canvas_datamodule: prepared canvases to batches, and a clear error
for bad files."""

import numpy as np
import pytest

from attention_lab.caption.data.batches import collate_canvases, load_canvases
from attention_lab.caption.data.datamodule import CanvasDataModule
from attention_lab.caption.data.digits import generated_canvases
from attention_lab.core.files import write_jsonl
from attention_lab.core.readers import DataError
from attention_lab.infer.tokenization import BOS, EOS, PAD, train_word_tokenizer


@pytest.fixture
def prepared(tmp_path):
    """A tiny prepared caption folder and its tokenizer, as the prepare and tokenize stages write
    them."""
    splits = generated_canvases(
        1,
        64,
        16,
        2,
        [(2, 2), (3, 3), (4, 4), (5, 6)],
        32,
        128,
        (12, 18),
        2,
        16,
        0.1,
        (0.6, 0.1, 0.3),
    )
    for name, (rows, images) in splits.items():
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
        np.save(tmp_path / f"{name}.npy", images)
    tok = train_word_tokenizer(([r["caption"].split()] for r in splits["train"][0]), 100, 1)
    tok.save(str(tmp_path / "tokenizer.json"))
    return tmp_path, tok


def test_collate_shapes_and_targets(prepared):
    root, tok = prepared
    rows, images = load_canvases(root, "valid", tok)
    batch = collate_canvases(list(zip(rows[:3], images[:3])))
    assert (
        batch["images"].shape == (3, 32, 128)
        and 0.0 <= batch["images"].min()
        and batch["images"].max() <= 1.0
    )
    n = rows[0]["n_digits"]
    assert batch["tgt_in"][0, 0] == BOS and batch["tgt_out"][0, n] == EOS
    assert (
        batch["tgt_in"][0, 1 : n + 1].tolist()
        == batch["tgt_out"][0, :n].tolist()
        == rows[0]["tgt_ids"]
    )
    assert (batch["tgt_out"][0, n + 1 :] == PAD).all()


def test_training_batches_mix_digit_counts(prepared):
    """Length-bucketed batches would let BatchNorm hide how many digits a canvas has."""
    root, _ = prepared
    dm = CanvasDataModule(root, root / "tokenizer.json", batch_size=16, seed=0)
    dm.setup()
    assert all(len(set(b["n_digits"].tolist())) > 1 for b in dm.train_dataloader())


def test_images_that_do_not_match_the_rows_are_named(prepared):
    root, tok = prepared
    np.save(root / "valid.npy", np.zeros((3, 32, 128), np.uint8))
    with pytest.raises(DataError, match=r"valid.npy: expected 16 uint8 images"):
        load_canvases(root, "valid", tok)
