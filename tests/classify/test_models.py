"""models/ document classifiers: the output contract, padding invariance, a learnable toy task, ONNX
round trip."""

from __future__ import annotations

import json
import random

import onnx
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import Tensor, nn

from attention_lab.classify.export import export_and_check_classifier
from attention_lab.classify.models.bigru_max import BiGRUMax
from attention_lab.classify.models.bow import BagOfTricks
from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.classify.models.han import HAN
from attention_lab.classify.models.self_attentive import SelfAttentive
from attention_lab.classify.models.transformer_encoder import TransformerEncoderClassifier
from attention_lab.infer.tokenization import train_word_tokenizer
from attention_lab.nn.attention import attention_penalty
from attention_lab.nn.layers import sinusoids
from tests.conftest import ROOT
from tests.tiny_models import DOCS, LABELS, tiny_model

V, C = 30, 3
CLASSES = {
    "bow": BagOfTricks,
    "bigru_max": BiGRUMax,
    "han": HAN,
    "self_attentive": SelfAttentive,
    # BERT has its own tests (test_bert.py)
    "transformer_encoder": TransformerEncoderClassifier,
}
ATTENTION = {"han", "self_attentive", "transformer_encoder"}
WEIGHTS = ("word", "sentence", "hops")

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


def tiny(family: str) -> DocumentClassifier:
    return tiny_model(family, V, num_classes=C)


def random_docs(n: int, seed: int, low: int = 4) -> list[list[list[int]]]:
    """n documents of 1-4 sentences of 1-5 word ids in [low, V)."""
    rng = random.Random(seed)
    return [
        [
            [rng.randrange(low, V) for _ in range(rng.randint(1, 5))]
            for _ in range(rng.randint(1, 4))
        ]
        for _ in range(n)
    ]


def encode(
    docs: list[list[list[int]]], hierarchical: bool, extra: int = 0
) -> tuple[Tensor, Tensor]:
    """ids and mask, right-padded with id 0: (B, N, L) sentences or (B, T) all words; `extra` more
    padding per axis."""
    if hierarchical:
        N, L = max(map(len, docs)) + extra, max(len(s) for d in docs for s in d) + extra
        ids = torch.zeros(len(docs), N, L, dtype=torch.long)
        for b, doc in enumerate(docs):
            for n, sentence in enumerate(doc):
                ids[b, n, : len(sentence)] = torch.tensor(sentence)
    else:
        flat = [[w for s in doc for w in s] for doc in docs]
        ids = torch.zeros(len(docs), max(map(len, flat)) + extra, dtype=torch.long)
        for b, words in enumerate(flat):
            ids[b, : len(words)] = torch.tensor(words)
    return ids, ids != 0


def check_weights(out: dict[str, Tensor], mask: Tensor) -> None:
    """Every attention tensor: exactly zero at padding, sums to 1 over the real positions of each
    non-empty row."""
    masks = {"word": mask, "sentence": mask.any(-1), "hops": mask.unsqueeze(1)}
    for name in WEIGHTS:
        if name in out:
            w, m = out[name], masks[name].expand(out[name].shape)
            assert (w.masked_fill(m, 0) == 0).all(), name
            rows = m.any(-1)
            torch.testing.assert_close(w.sum(-1)[rows], torch.ones(int(rows.sum())), msg=name)
            assert (w.sum(-1)[~rows] == 0).all(), name


@pytest.mark.parametrize("family", sorted(CLASSES))
def test_config_instantiates_the_family(family):
    cfg = OmegaConf.load(ROOT / "conf" / "model" / f"{family}.yaml")
    model = instantiate(cfg, vocab_size=V, num_classes=C, pad_id=0)
    assert isinstance(model, CLASSES[family]) and isinstance(model, DocumentClassifier)
    assert model.vocab_size == V and model.num_classes == C and model.pad_id == 0


@pytest.mark.parametrize("family", sorted(CLASSES))
def test_outputs_follow_the_contract(family):
    model = tiny(family)
    ids, mask = encode(random_docs(4, seed=1), model.hierarchical)
    assert mask[:, -1].any() and not mask.all()  # real padding in the batch
    with torch.no_grad():
        out = model(ids, mask)
    assert tuple(out) == model.output_names and model.output_names[0] == "logits"
    assert out["logits"].shape == (4, C)
    if family in ATTENTION:
        assert out["word"].shape == ids.shape
    if family == "han":
        assert out["sentence"].shape == ids.shape[:2]
    if family == "self_attentive":
        assert out["hops"].shape == (4, 3, ids.shape[1]) and out["penalty"].shape == (4,)
        torch.testing.assert_close(out["word"], out["hops"].mean(1))
        # ‖AAᵀ − I‖²_F, Lin eq. 8
        torch.testing.assert_close(out["penalty"], attention_penalty(out["hops"]))
    check_weights(out, mask)


@pytest.mark.parametrize("family", sorted(CLASSES))
def test_padding_does_not_change_outputs(family):
    model = tiny(family)
    docs = random_docs(5, seed=2)
    with torch.no_grad():
        out = model(*encode(docs, model.hierarchical))
        # each document alone, with more padded words (and padded sentences)
        for b, doc in enumerate(docs):
            ids, mask = encode([doc], model.hierarchical, extra=2)
            alone = model(ids, mask)
            torch.testing.assert_close(
                alone["logits"], out["logits"][b : b + 1], atol=1e-5, rtol=1e-5
            )
            for name in WEIGHTS:
                if name in alone:
                    real = tuple(
                        slice(0, min(n, m))
                        for n, m in zip(out[name].shape[1:], alone[name].shape[1:])
                    )
                    torch.testing.assert_close(
                        alone[name][(slice(None), *real)],
                        out[name][(slice(b, b + 1), *real)],
                        atol=1e-5,
                        rtol=1e-5,
                    )
            check_weights(alone, mask)


def test_bag_of_tricks_hashes_ordered_bigrams():
    model = tiny("bow")
    a, b = torch.tensor([[7, 9, 0]]), torch.tensor([[9, 7, 0]])
    with torch.no_grad():  # the same bag of words, different bigrams
        assert not torch.allclose(model(a, a != 0)["logits"], model(b, b != 0)["logits"])


def toy_task(n: int, seed: int) -> tuple[list[list[list[int]]], Tensor]:
    """Label 1 iff token 5 occurs, in one word of one sentence; other words are ids >= 6."""
    rng, docs = random.Random(seed), random_docs(n, seed, low=6)
    labels = torch.tensor([i % 2 for i in range(n)])
    for doc, label in zip(docs, labels):
        if label:
            sentence = rng.choice(doc)
            sentence[rng.randrange(len(sentence))] = 5
    return docs, labels


@pytest.mark.parametrize("family", sorted(CLASSES))
def test_training_learns_a_toy_task(family):
    model = tiny(family).train()
    docs, labels = toy_task(64, seed=3)
    ids, mask = encode(docs, model.hierarchical)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        out = model(ids, mask)
        loss = nn.functional.cross_entropy(out["logits"], labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    # the attention has learned where token 5 is: high accuracy on unseen documents
    if family in ATTENTION:
        docs, labels = toy_task(64, seed=4)
        ids, mask = encode(docs, model.hierarchical)
        with torch.no_grad():
            out = model.eval()(ids, mask)
        assert (out["logits"].argmax(-1) == labels).float().mean() >= 0.9
        # one attention layer over the words: it must point at token 5
        if family != "transformer_encoder":
            word = (
                out["word"] * out["sentence"].unsqueeze(-1) if model.hierarchical else out["word"]
            )
            # (positives, 1)
            top = ids.flatten(1).gather(1, word.flatten(1).argmax(1, keepdim=True))[labels == 1]
            assert (top == 5).float().mean() >= 0.9


@pytest.mark.parametrize("family", sorted(CLASSES))
def test_onnx_round_trip(family, tmp_path):
    """The export stage's path (classify.export): one graph (ids, mask) -> outputs with dynamic
    batch and lengths, in agreement with torch in onnxruntime on documents shaped unlike the export
    example."""
    model = tiny(family)
    tokenizer = tmp_path / "tokenizer.json"
    train_word_tokenizer(DOCS * 2, vocab_size=100, min_frequency=1).save(str(tokenizer))
    out = tmp_path / "onnx"
    parity = export_and_check_classifier(
        model, out, family, tokenizer, LABELS, max_sentences=5, max_words=8
    )
    graph_inputs = onnx.load(str(out / "model.onnx"), load_external_data=False).graph.input
    assert [i.name for i in graph_inputs] == ["ids", "mask"]
    # no axis frozen
    assert all(d.dim_param for i in graph_inputs for d in i.type.tensor_type.shape.dim)

    # the penalty is a training loss term, not exported
    names = [k for k in model.output_names if k != "penalty"]
    assert json.loads((out / "meta.json").read_text())["outputs"] == names
    assert (
        parity["ok"]
        and parity["prediction_identical"]
        and sorted(parity["max_abs_diff"]) == sorted(names)
    )
    assert all(d <= 1e-4 for d in parity["max_abs_diff"].values()), parity["max_abs_diff"]


def test_transformer_encoder_positions_option():
    """conf/model picks ALiBi; the class default stays the committed sinusoids (older checkpoints'
    configs lack the key); both schemes have the same parameters, ALiBi none of its own."""
    assert OmegaConf.load(ROOT / "conf" / "model" / "transformer_encoder.yaml").positions == "alibi"
    assert tiny("transformer_encoder").positions == "alibi"
    plain = TransformerEncoderClassifier(V, C, d_model=16, heads=2, d_ff=24)
    assert plain.positions == "sinusoidal"
    alibi = tiny_model("transformer_encoder", V, num_classes=C, positions="alibi")
    sinus = tiny_model("transformer_encoder", V, num_classes=C, positions="sinusoidal")
    assert all(
        torch.equal(a, b) for a, b in zip(alibi.state_dict().values(), sinus.state_dict().values())
    )
    assert list(alibi.state_dict()) == list(sinus.state_dict())
    with pytest.raises(ValueError, match="positions"):
        TransformerEncoderClassifier(V, C, positions="rotary")


@torch.no_grad()
def test_sinusoidal_positions_are_the_committed_forward():
    """positions=sinusoidal: embeddings + Vaswani's sinusoids, then the layers with no score bias,
    bit for bit."""
    model = tiny_model("transformer_encoder", V, num_classes=C, positions="sinusoidal")
    ids, mask = encode(random_docs(4, seed=5), hierarchical=False)
    B, T = ids.shape
    x = torch.cat([model.cls.expand(B, 1, -1), model.embed(ids) * model.d_model**0.5], 1)
    x = x + sinusoids(torch.arange(T + 1), model.d_model)
    keys = torch.cat([mask.new_ones(B, 1), mask], 1).unsqueeze(1)
    for i, layer in enumerate(model.layers):
        # the last layer's weights are an output
        x, _ = layer(x, keys, need_weights=i == len(model.layers) - 1)
    assert torch.equal(model(ids, mask)["logits"], model.out(model.norm(x[:, 0])))


@torch.no_grad()
def test_alibi_reads_order_by_distance():
    """Swapping two words changes the prediction; the symmetric bias -m·|i - j| cannot tell a
    document from its reversal ([CLS] has no bias), whereas absolute sinusoids can."""
    docs = [[[5, 9, 13, 17, 21, 25]]]
    ids, mask = encode(docs, hierarchical=False)
    swapped, reversed_ = ids[:, [1, 0, 2, 3, 4, 5]], ids.flip(1)
    alibi = tiny_model("transformer_encoder", V, num_classes=C, positions="alibi")
    sinus = tiny_model("transformer_encoder", V, num_classes=C, positions="sinusoidal")
    logits = alibi(ids, mask)["logits"]
    assert not torch.allclose(alibi(swapped, mask)["logits"], logits, atol=1e-4)
    torch.testing.assert_close(alibi(reversed_, mask)["logits"], logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        alibi(reversed_, mask)["word"], alibi(ids, mask)["word"].flip(1), atol=1e-5, rtol=1e-5
    )
    assert not torch.allclose(
        sinus(reversed_, mask)["logits"], sinus(ids, mask)["logits"], atol=1e-4
    )


def test_onnx_round_trip_with_sinusoidal_positions(tmp_path):
    """The committed scheme exports too (the ALiBi default is test_onnx_round_trip's)."""
    model = tiny_model("transformer_encoder", V, num_classes=C, positions="sinusoidal")
    tokenizer = tmp_path / "tokenizer.json"
    train_word_tokenizer(DOCS * 2, vocab_size=100, min_frequency=1).save(str(tokenizer))
    parity = export_and_check_classifier(
        model,
        tmp_path / "onnx",
        "transformer_encoder",
        tokenizer,
        LABELS,
        max_sentences=5,
        max_words=8,
    )
    assert parity["ok"] and parity["prediction_identical"]
    assert all(d <= 1e-4 for d in parity["max_abs_diff"].values()), parity["max_abs_diff"]
