"""evaluate.py (translate): decode_corpus's input order, forced_word_attention's word matrices and
evaluate's test/* metrics on a tiny random-weight model. evaluate_family through the evaluate stage:
tests/stages/test_faults.py (`evaluated`) and tests/e2e/test_pipeline.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from attention_lab.core.files import write_jsonl
from attention_lab.infer.tokenization import EOS, never_emitted, train_tokenizer, word_ids
from attention_lab.results import metrics
from attention_lab.translate.data.batches import collate, load_split
from attention_lab.translate.evaluate import decode_corpus, evaluate, forced_word_attention
from attention_lab.translate.search import translate_batch
from tests.tiny_models import PAIRS, ROOT, tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# out of length order, one source in the 11-20 word bucket
TEST = [
    PAIRS[2],
    (
        "the cat sat on the mat and a dog runs in the park",
        "고양이가 매트 위에 앉았고 개가 공원에서 달린다",
    ),
    PAIRS[0],
    ("my friend", "내 친구"),
    PAIRS[3],
    PAIRS[1],
]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(
        [s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1
    )


def rows_of(tok, folder, align: bool = True) -> list[dict]:
    """The TEST pairs as the evaluate stage reads them (load_split of a prepared test.jsonl), each
    word aligned to the same-numbered word when `align`."""
    folder.mkdir(exist_ok=True)
    lines = [
        {
            "id": f"test-{i}",
            "src": s,
            "tgt": t,
            **(
                {"align": [[k, k] for k in range(min(len(s.split()), len(t.split())))]}
                if align
                else {}
            ),
        }
        for i, (s, t) in enumerate(TEST)
    ]
    write_jsonl(folder / "test.jsonl", lines)
    return load_split(folder, "test", tok)


def model_of(tok, family: str = "bahdanau"):
    """The family at tiny sizes with eos pushed down: every hypothesis has tokens."""
    model = tiny_model(family, tok.get_vocab_size())
    with torch.no_grad():
        [bias] = [
            p for p in model.parameters() if p.dim() == 1 and p.shape[0] == tok.get_vocab_size()
        ]
        bias[EOS] -= 30.0
    return model


def config(batch_size: int = 4):
    buckets = OmegaConf.load(ROOT / "conf" / "task" / "translate.yaml").task.buckets
    return OmegaConf.create(
        {
            "evaluate": {
                "beam": 2,
                "len_penalty": 1.0,
                "max_len_ratio": 0.5,
                "batch_size": batch_size,
            },
            "task": {"buckets": buckets},
        }
    )


def test_decode_corpus_keeps_input_order_across_length_sorted_batches(tok, tmp_path):
    """Batches of 2 sources sorted by length, hypotheses back in input order: each one the source
    translated alone; never a banned id; the seconds it took."""
    model, src = model_of(tok), [r["src_ids"] for r in rows_of(tok, tmp_path)]
    hyps, seconds = decode_corpus(
        model, src, beam=2, len_penalty=1.0, max_len_ratio=0.5, batch_size=2
    )
    alone = [
        translate_batch(model, [s], beam=2, len_penalty=1.0, max_len_ratio=0.5)[0] for s in src
    ]
    assert [h.tokens for h in hyps] == [a.tokens for a in alone] and all(h.tokens for h in hyps)
    assert [h.attention.shape[1] for h in hyps] == [len(s) for s in src]
    assert seconds > 0
    # two ids the first decoding emitted
    banned = tuple(sorted({t for h in hyps for t in h.tokens}))[:2]
    again, _ = decode_corpus(
        model, src, 2, 1.0, 0.5, batch_size=2, banned=(*never_emitted(tok), *banned)
    )
    assert not {t for h in again for t in h.tokens} & set(banned)


def test_forced_word_attention_is_one_row_per_target_word_over_source_words(tok, tmp_path):
    """(target words, source words) per row, each target word's weights summing to 1; the same in
    any batch size."""
    model, rows = model_of(tok), rows_of(tok, tmp_path)
    whole, fed = forced_word_attention(model, tok, rows)
    for matrices in (whole, fed):
        assert [a.shape for a in matrices] == [
            (len(r["tgt"].split()), len(r["src"].split())) for r in rows
        ]
        for a in matrices:
            np.testing.assert_allclose(a.sum(1), 1.0, atol=1e-5)
            assert (a >= 0).all()
    alone = forced_word_attention(model, tok, rows, batch_size=1)
    for a, b in zip([*whole, *fed], [*alone[0], *alone[1]], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_the_fed_rows_are_the_predicting_rows_one_step_later(tok, tmp_path):
    """Luong et al.'s convention: target token t's row is the one that reads it (predicts token t +
    1)."""
    model, rows = model_of(tok), rows_of(tok, tmp_path)
    _, fed = forced_word_attention(model, tok, rows[:1])
    batch = collate(rows[:1])
    with torch.inference_mode():
        _, attn = model(batch["src"], batch["src_mask"], batch["tgt_in"])  # (1, n + 1, S)
    n = len(rows[0]["tgt_ids"])
    expected = metrics.word_attention(
        attn[0, 1 : n + 1].numpy(), word_ids(tok, rows[0]["src"]), word_ids(tok, rows[0]["tgt"])
    )
    np.testing.assert_allclose(fed[0], expected, atol=1e-6)


def test_evaluate_scores_the_hypotheses_in_row_order(tok, tmp_path):
    """test/* keys: corpus scores, BLEU of each length bucket present, decoding speed from the
    hypotheses' tokens; the detokenized texts in row order; test/aer (test/aer_fed) 0 when the gold
    alignment is the attention's own hard alignment (of the rows that read each token)."""
    model, rows = model_of(tok), rows_of(tok, tmp_path)
    scores, texts, attentions, counts = evaluate(model, tok, rows, config(batch_size=4))
    hyps, _ = decode_corpus(model, [r["src_ids"] for r in rows], 2, 1.0, 0.5, 4, never_emitted(tok))
    assert texts == tok.decode_batch([h.tokens for h in hyps], skip_special_tokens=True) and all(
        texts
    )
    assert {
        "test/bleu",
        "test/chrf",
        "test/exact_match",
        "test/bleu_signature",
        "test/chrf_signature",
        "test/bleu_len_1_10",
        "test/bleu_len_11_20",
        "test/aer",
    } <= set(scores)
    assert not any(
        k.startswith("test/bleu_len_")
        for k in set(scores) - {"test/bleu_len_1_10", "test/bleu_len_11_20"}
    )
    n_tokens = sum(len(h.tokens) + 1 for h in hyps)  # eos counted
    assert scores["test/decode_tokens_per_s"] == pytest.approx(
        n_tokens / scores["test/decode_seconds"]
    )
    assert scores["test/decode_sentences_per_s"] == pytest.approx(
        len(rows) / scores["test/decode_seconds"]
    )
    assert 0 <= scores["test/aer"] <= 1 and len(attentions) == len(rows)
    for name in ("test/aer", "test/aer_fed"):  # the ledger's per-item counts sum to the corpus AER
        hit, total = np.sum(counts[name], axis=0)
        assert len(counts[name]) == len(rows) and scores[name] == pytest.approx(1 - 2 * hit / total)
    for r, a in zip(rows, attentions, strict=True):
        r["align"] = [list(p) for p in metrics.hard_alignment(a)]
    assert evaluate(model, tok, rows, config())[0]["test/aer"] == 0.0
    _, fed = forced_word_attention(model, tok, rows)
    for r, a in zip(rows, fed, strict=True):
        r["align"] = [list(p) for p in metrics.hard_alignment(a)]
    assert evaluate(model, tok, rows, config())[0]["test/aer_fed"] == 0.0


def test_no_alignment_scores_without_gold_alignments_or_attention(tok, tmp_path):
    """Rows without `align`, or a family without attention (seq2seq_gru): no test/aer and no word
    attentions."""
    scores, texts, attentions, counts = evaluate(
        model_of(tok), tok, rows_of(tok, tmp_path, align=False), config()
    )
    assert (
        not {"test/aer", "test/aer_fed"} & set(scores)
        and attentions is None
        and len(texts) == len(TEST)
    )
    assert counts == {}
    scores, _, attentions, counts = evaluate(
        model_of(tok, "seq2seq_gru"), tok, rows_of(tok, tmp_path), config()
    )
    assert (
        "test/aer" not in scores and attentions is None and "test/bleu" in scores and counts == {}
    )
