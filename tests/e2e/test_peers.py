"""benchmarks/peers.py's pure parts: our batches as Joey NMT's plain files, Joey's RNN size and
configs, the timing summary, the verdict and the section. Joey's own virtualenv is not needed."""

from __future__ import annotations

import json

import pytest

from tests.tiny_models import PAIRS


@pytest.fixture
def tiny_dm(tmp_path):
    """A TranslationDataModule (batch 4) over 40 training and 8 validation pairs, with its own BPE
    tokenizer."""
    from attention_lab.infer.tokenization import train_tokenizer
    from attention_lab.translate.data.datamodule import TranslationDataModule

    prepared = tmp_path / "prepared"
    prepared.mkdir()
    for split, n in (("train", 40), ("valid", 8)):
        rows = [
            {"id": f"{split}-{i}", "src": PAIRS[i % 4][0], "tgt": PAIRS[i % 4][1]} for i in range(n)
        ]
        (prepared / f"{split}.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
    tok = train_tokenizer(
        [s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1
    )
    tok.save(str(tmp_path / "tokenizer.json"))
    dm = TranslationDataModule(prepared, tmp_path / "tokenizer.json", batch_size=4, seed=0)
    dm.setup()
    return dm


def test_export_writes_our_batches_in_order(tiny_dm, tmp_path):
    from benchmarks import peers

    info = peers.export(tiny_dm, 12, tmp_path / "joey")  # 10 batches an epoch: epochs 0 and 1
    assert info == {"pairs": 48, "same_batches": True}
    batches = peers.train_order(tiny_dm, 12)
    sampler = tiny_dm.train_dataloader().batch_sampler
    sampler.set_epoch(1)
    # epoch 1 reshuffles, as the Trainer does
    assert [r["index"] for r in batches[10]] == next(iter(sampler))
    tok = tiny_dm.tok
    lines = (tmp_path / "joey" / "train.en").read_text(encoding="utf-8").splitlines()
    assert [[tok.token_to_id(p) for p in line.split(" ")] for line in lines] == [
        r["src_ids"] for b in batches for r in b
    ]
    dev = (tmp_path / "joey" / "dev.ko").read_text(encoding="utf-8").splitlines()
    assert [[tok.token_to_id(p) for p in line.split(" ")] for line in dev] == [
        r["tgt_ids"] for r in tiny_dm.splits["valid"]
    ]
    vocab = (tmp_path / "joey" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab == [tok.id_to_token(i) for i in range(tok.get_vocab_size())]


def test_export_reverses_sources_for_a_reversing_encoder(tiny_dm, tmp_path):
    from benchmarks import peers

    peers.export(tiny_dm, 3, tmp_path / "joey", reverse_source=True)
    tok = tiny_dm.tok
    rows = [r for b in peers.train_order(tiny_dm, 3) for r in b]
    src = (tmp_path / "joey" / "train.en").read_text(encoding="utf-8").splitlines()
    tgt = (tmp_path / "joey" / "train.ko").read_text(encoding="utf-8").splitlines()
    assert [[tok.token_to_id(p) for p in line.split(" ")] for line in src] == [
        r["src_ids"][::-1] for r in rows
    ]
    assert [[tok.token_to_id(p) for p in line.split(" ")] for line in tgt] == [
        r["tgt_ids"] for r in rows
    ]


def test_joey_luong_is_our_luong_concat():
    from attention_lab.core.config import load_config
    from benchmarks import peers

    cfg = load_config(family="luong_concat", task="translate")
    dec = peers.luong_config(cfg.model)["decoder"]
    assert cfg.model.attention == "concat" and cfg.model.input_feeding
    assert (dec["rnn_type"], dec["attention"], dec["input_feeding"], dec["init_hidden"]) == (
        "lstm",
        "bahdanau",
        True,
        "last",
    )
    assert dec["hidden_size"] == cfg.model.hidden_dim and dec["num_layers"] == cfg.model.layers


def test_pieces_that_joey_would_split_are_refused():
    from benchmarks import peers

    class Tok:
        def id_to_token(self, i):
            return ["▁a", "b c", "d\u2028e"][i]

    assert peers.tokens(Tok(), [0]) == "▁a"
    for bad in (1, 2):
        with pytest.raises(ValueError, match="would not survive"):
            peers.tokens(Tok(), [0, bad])


def test_joey_rnn_size():
    from benchmarks import peers

    # what Joey NMT 2.3 logs ("Total params") for it
    assert peers.rnn_params(2000, 128, 128, 224) == 1_819_616
    # 256 and 240 are > 10% larger
    assert peers.rnn_hidden(2000, 128, 128, 256, ours=1_724_112) == 224
    assert peers.rnn_hidden(2000, 128, 128, 256, ours=2_100_000) == 256


def test_summary_and_verdict():
    from benchmarks.peers import summarise, verdict

    side = {
        "starts": [0.0, 1.0, 2.0, 3.0],
        "ends": [0.5, 1.5, 2.5, 3.5],
        "cpu_starts": [0.0, 0.5, 1.0, 1.5],
        "cpu_ends": [0.25, 0.75, 1.25, 1.75],
        "tokens": [10, 20, 30, 40],
    }
    s = summarise(side, skip=1)
    assert s["timed_updates"] == 3 and s["ms_per_update"] == pytest.approx(2500 / 3)
    assert s["cpu_ms_per_update"] == pytest.approx(1250 / 3) and s[
        "tokens_per_cpu_s"
    ] == pytest.approx(90 / 1.25)
    assert s["tokens_per_s"] == pytest.approx(90 / 2.5) and s["train_tokens"] == 100
    with pytest.raises(RuntimeError):
        summarise({**side, "ends": side["ends"][:3]}, skip=1)
    fast = {"cpu_ms_per_update": 1.0, "ms_per_update": 3.0, "val_loss": 1.01}
    slow = {"cpu_ms_per_update": 2.0, "ms_per_update": 2.0, "val_loss": 1.0}
    # by CPU time, not wall time
    assert verdict(fast, slow)["met"] and not verdict(slow, fast)["met"]
    assert not verdict({**fast, "val_loss": 1.1}, slow)["equal_quality"]


def test_mean_over_seeds():
    from benchmarks.peers import mean_side

    sides = [
        {"params": 7, "val_loss": 1.0, "greedy": {"sentences": 5, "seconds": 1.0}},
        {"params": 7, "val_loss": 2.0, "greedy": {"sentences": 5, "seconds": 3.0}},
    ]
    assert mean_side(sides) == {
        "params": 7,
        "val_loss": 1.5,
        "greedy": {"sentences": 5, "seconds": 2.0},
        "val_losses": [1.0, 2.0],
    }


def test_the_committed_section_is_what_its_figures_render():
    """The section in reports/benchmarks.md is render() of the `peers` figures beside it (what
    --rerender writes)."""
    import re

    from benchmarks.peers import SECTION, render
    from tests.conftest import ROOT

    figures = json.loads((ROOT / "reports" / "benchmarks.json").read_text(encoding="utf-8"))[
        SECTION
    ]
    text = (ROOT / "reports" / "benchmarks.md").read_text(encoding="utf-8")
    committed = re.search(
        rf"<!-- {SECTION}:start -->\n(.*?)\n<!-- {SECTION}:end -->", text, re.DOTALL
    ).group(1)
    assert committed == "\n".join(render(figures))


def test_ours_to_early_stopping_is_the_committed_study_s_best_trial():
    """peers_converged.ours: the train stage's seed-0 run as tuned/<family>.yaml records it (a
    complete trial ended by early stopping), its best validation loss and updates."""
    import yaml

    from benchmarks.peers_converged import FAMILIES, ours
    from tests.conftest import ROOT

    for family in FAMILIES:
        study = yaml.safe_load((ROOT / "tuned" / f"{family}.yaml").read_text(encoding="utf-8"))
        mine = ours(family)
        assert (
            mine["val_loss"] == study["study"]["best_value"]
            and mine["stopped_by"] == "early stopping"
        )
        assert mine["updates"] > 0 and mine["study"] == study["study"]["name"]


def test_the_committed_converged_section_is_what_its_figures_render():
    """The section `peers_converged` of reports/benchmarks.md is render() of its figures beside
    it."""
    import re

    from benchmarks.peers_converged import SECTION, render
    from tests.conftest import ROOT

    figures = json.loads((ROOT / "reports" / "benchmarks.json").read_text(encoding="utf-8"))[
        SECTION
    ]
    text = (ROOT / "reports" / "benchmarks.md").read_text(encoding="utf-8")
    committed = re.search(
        rf"<!-- {SECTION}:start -->\n(.*?)\n<!-- {SECTION}:end -->", text, re.DOTALL
    ).group(1)
    assert committed == "\n".join(render(figures))
    assert {r["family"] for r in figures["rows"]} == {"bahdanau", "transformer"}
    # both ran to the rule's end
    assert all(r["joey"]["stopped_by"] == "early stopping" for r in figures["rows"])


def test_explained_names_the_difference_that_closes_the_gap(monkeypatch):
    """Where Joey ends better, the section puts the family's ablations toward Joey beside it (seed 0
    against Joey's seed-0 run) and Joey's switched runs beside ours, and says which difference
    closes the gap."""
    import benchmarks.peers_converged as pc

    monkeypatch.setattr(
        pc,
        "probes",
        lambda family: [
            {"name": family, "set": {}, "losses": [0.200, 0.190, 0.210]},
            {
                "name": f"{family}_xavier",
                "set": {"model": {"init": "xavier"}},
                "losses": [0.246, 0.250, 0.242],
            },
            {
                "name": f"{family}_new_query",
                "set": {"model": {"query": "new"}},
                "losses": [0.180, 0.170, 0.190],
            },
        ],
    )
    switched = {
        "val_loss": 0.199,
        "updates": 3500,
        "stopped_by": "early stopping",
        "command": "c",
        "date": "d",
    }
    row = {
        "family": "bahdanau",
        "ours": {"val_loss": 0.200},
        "joey": {"val_loss": 0.178},
        "joey_switches": {"no_source_eos": switched},
    }
    text = "\n".join(pc.explained(row, 0.02))
    assert (
        "seed 0 of `bahdanau_new_query` ends at most 2% above Joey's: that difference explains"
        " the gap" in text
    )
    assert "| `bahdanau_xavier` | `model.init: xavier` | 0.246 | 0.246 | 3 |" in text
    assert "| `bahdanau` | as trained | 0.200 | 0.200 | 3 |" in text
    assert (
        "loss 0.199 after 3,500 updates (early stopping), against 0.178 as Joey runs it and ours"
        " 0.200: within 2% of ours, so this difference explains the gap." in text
    )
    row["joey_switches"]["no_source_eos"]["val_loss"] = 0.180
    rows = [
        {"name": "bahdanau", "set": {}, "losses": [0.2]},
        {"name": "b_x", "set": {"m": 1}, "losses": [0.25]},
    ]
    monkeypatch.setattr(pc, "probes", lambda family: rows)
    text = "\n".join(pc.explained(row, 0.02))
    assert "none ends within 2% of Joey's on seed 0: these do not explain the gap" in text
    assert "still better than ours, so this difference does not explain the gap on its own." in text
