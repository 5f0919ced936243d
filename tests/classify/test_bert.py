"""models/bert.py and models/hf_bert.py: our BERT's contracts, and parity with transformers on
all-MiniLM-L6-v2."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from torch import Tensor

from attention_lab.classify.export import ClassifierGraph
from attention_lab.classify.models.bert import Bert, BertClassifier, BertConfig, BertPretraining
from attention_lab.classify.models.hf_bert import (
    config_from_hf,
    load_hf_bert,
    minilm_dir,
    state_dict_from_hf,
)
from attention_lab.nn.export import all_dynamic, check_dynamic
from attention_lab.nn.layers import EncoderLayer
from tests.conftest import ROOT
from tests.tiny_models import TINY, tiny_model

V, C = 50, 3
SIZES = TINY["bert"]
# (segment A, segment B | None): a pair, a single sentence, a longer pair, so that two rows are
# padded
PAIRS = [
    ("The cat sat on the mat.", "It was warm there."),
    ("Attention is all you need", None),
    (
        "BERT reads both directions at once, unlike a left-to-right language model.",
        "Masked tokens are predicted from their left and right context.",
    ),
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_bert(**kw) -> Bert:
    torch.manual_seed(0)
    return Bert(BertConfig(V, **{**SIZES, **kw})).eval()


def tiny_classifier() -> BertClassifier:
    return tiny_model("bert", V, num_classes=C)


def pad(docs: list[list[int]], T: int | None = None) -> tuple[Tensor, Tensor]:
    """Right-pad word-id lists with 0 -> ids (B, T) long, mask (B, T) bool."""
    T = T or max(map(len, docs))
    ids = torch.zeros(len(docs), T, dtype=torch.long)
    for b, doc in enumerate(docs):
        ids[b, : len(doc)] = torch.tensor(doc)
    return ids, ids != 0


def random_docs(lengths: list[int], seed: int) -> list[list[int]]:
    """Word ids in [4, V): no pad, [CLS] (2) or [SEP] (3)."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(4, V, (n,), generator=gen).tolist() for n in lengths]


# ---------------------------------------------------------------- parity with
# transformers.BertModel on real weights


@pytest.fixture(scope="module")
def minilm():
    """(transformers BertModel, our Bert) on all-MiniLM-L6-v2, eval mode, loaded from the installed
    package only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        transformers = pytest.importorskip("transformers")
        hf = transformers.BertModel.from_pretrained(
            minilm_dir(), attn_implementation="eager"
        ).eval()
    ours, config = load_hf_bert(minilm_dir())
    assert (config.layers, config.hidden, config.heads, config.vocab_size) == (6, 384, 12, 30522)
    return hf, ours


def minilm_batch() -> tuple[Tensor, Tensor, Tensor]:
    """PAIRS through the package's tokenizer.json ([CLS] A [SEP] B [SEP]), right-padded by hand:
    ids, mask, segments."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    encodings = [tok.encode(a) if b is None else tok.encode(a, b) for a, b in PAIRS]
    S = max(len(e.ids) for e in encodings)
    ids, segments = (
        torch.zeros(len(PAIRS), S, dtype=torch.long),
        torch.zeros(len(PAIRS), S, dtype=torch.long),
    )
    for i, e in enumerate(encodings):
        ids[i, : len(e.ids)], segments[i, : len(e.ids)] = (
            torch.tensor(e.ids),
            torch.tensor(e.type_ids),
        )
    mask = torch.arange(S) < torch.tensor([len(e.ids) for e in encodings]).unsqueeze(1)  # (B, S)
    return ids, mask, segments


@torch.inference_mode()
def test_minilm_parity_with_transformers(minilm):
    hf, ours = minilm
    ids, mask, segments = minilm_batch()
    # padding, pairs, and a single
    assert (~mask).any() and (segments == 1).any() and segments[1].eq(0).all()
    ref = hf(
        input_ids=ids, attention_mask=mask.long(), token_type_ids=segments, output_attentions=True
    )
    hidden, pooled, attentions = ours(ids, mask, segments, need_weights=True)
    hidden_diff = (hidden - ref.last_hidden_state)[mask].abs().max().item()  # real positions only
    pooled_diff = (pooled - ref.pooler_output).abs().max().item()
    assert hidden_diff <= 1e-4, hidden_diff
    assert pooled_diff <= 1e-4, pooled_diff
    assert len(attentions) == len(ref.attentions) == 6
    for layer, (a, r) in enumerate(zip(attentions, ref.attentions)):
        # ALL rows, padded query rows included: both models let a padded query attend to the real
        # keys only
        assert a.shape == r.shape == (len(PAIRS), 12, ids.shape[1], ids.shape[1])
        diff = (a - r).abs().max().item()
        assert diff <= 1e-5, (layer, diff)
        # exactly zero weight on padded keys
        assert a.masked_select(~mask[:, None, None, :]).eq(0).all()
    # without need_weights the fused kernel runs: same hidden states
    fused, _, none = ours(ids, mask, segments)
    assert none == () and (fused - hidden)[mask].abs().max() <= 1e-5


@pytest.fixture(scope="module")
def minilm_state() -> dict[str, Tensor]:
    from safetensors.torch import load_file

    return load_file(str(minilm_dir() / "model.safetensors"))


def test_state_dict_from_hf_names_missing_and_unknown_keys(minilm_state):
    config = config_from_hf(json.loads((minilm_dir() / "config.json").read_text()))
    # a 'bert.' prefix is fine
    ours = state_dict_from_hf({f"bert.{k}": v for k, v in minilm_state.items()}, config)
    assert ours.keys() == Bert(config).state_dict().keys()
    state = dict(minilm_state)
    del state["encoder.layer.3.attention.self.key.bias"]
    with pytest.raises(ValueError, match=r"encoder\.layer\.3\.attention\.self\.key\.bias"):
        state_dict_from_hf(state, config)
    with pytest.raises(ValueError, match="cls.predictions.bias"):
        state_dict_from_hf({**minilm_state, "cls.predictions.bias": torch.zeros(3)}, config)


def test_config_from_hf_rejects_other_activations_and_positions():
    config = json.loads((minilm_dir() / "config.json").read_text())
    assert config_from_hf(config).to_dict()["intermediate"] == 1536
    with pytest.raises(ValueError, match="hidden_act"):
        config_from_hf({**config, "hidden_act": "gelu_new"})
    with pytest.raises(ValueError, match="position_embedding_type"):
        config_from_hf({**config, "position_embedding_type": "relative_key"})


def test_load_hf_bert_names_the_missing_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_hf_bert(tmp_path)


# ---------------------------------------------------------------- our model


def test_config_round_trips_through_json():
    config = BertConfig(V, **SIZES)
    assert BertConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@torch.inference_mode()
def test_bert_shapes_and_attention_rows():
    model = tiny_bert()
    ids, mask = pad(random_docs([7, 3, 5], 0))
    segments = (torch.arange(7) >= 2).long().expand(3, 7) * mask
    hidden, pooled, attentions = model(ids, mask, segments, need_weights=True)
    assert hidden.shape == (3, 7, 16) and pooled.shape == (3, 16)
    assert len(attentions) == 2 and all(a.shape == (3, 2, 7, 7) for a in attentions)
    for a in attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones(3, 2, 7))
        assert a.masked_select(~mask[:, None, None, :]).eq(0).all()
    assert model(ids, mask)[2] == ()
    last = model(ids, mask, segments, need_weights=True, last_only=True)[2]
    assert len(last) == 1 and torch.equal(last[0], attentions[-1])


def test_bert_initialisation():
    model = tiny_bert(hidden=64, intermediate=128)
    w = model.layers[0].attn.W_q.weight
    assert abs(w.std().item() - 0.02) < 0.004 and model.layers[0].attn.W_q.bias.eq(0).all()
    assert model.embeddings.word.weight[0].eq(0).all()  # the padding row
    assert model.layers[1].norm2.weight.eq(1).all() and model.layers[1].norm2.bias.eq(0).all()


def test_pretraining_heads_and_tied_decoder():
    torch.manual_seed(0)
    model = BertPretraining(BertConfig(V, **SIZES)).eval()
    # tied: one tensor, one storage
    assert model.decoder.weight is model.bert.embeddings.word.weight
    assert model.decoder.bias.eq(0).all()
    ids, mask = pad(random_docs([6, 4], 1))
    mlm, pair = model(ids, mask, torch.zeros_like(ids))
    assert mlm.shape == (2, 6, V) and pair.shape == (2, 2)
    mlm.sum().backward()
    assert model.bert.embeddings.word.weight.grad is not None


def test_classifier_builds_cls_doc_sep():
    model = tiny_classifier()
    ids, mask = pad(random_docs([5, 2, 4], 2))
    x, m = model.bert_inputs(ids, mask)
    assert x.shape == m.shape == (3, 7)
    for b, n in enumerate([5, 2, 4]):
        assert x[b].tolist() == [2, *ids[b, :n].tolist(), 3] + [0] * (5 - n)
        assert m[b].tolist() == [True] * (n + 2) + [False] * (5 - n)
    assert model.max_tokens == SIZES["max_positions"] - 2


@torch.inference_mode()
def test_classifier_outputs_and_padding_invariance():
    model = tiny_classifier()
    ids, mask = pad(random_docs([6, 2, 4], 3), T=8)  # two columns of padding for every document
    out = model(ids, mask)
    assert list(out) == ["logits", "word", "attentions"]
    assert out["logits"].shape == (3, C) and out["word"].shape == (3, 8)
    assert out["attentions"].shape == (3, 2, 2, 10, 10)  # (B, layers, heads, T + 2, T + 2)
    assert out["word"].masked_select(~mask).eq(0).all()
    torch.testing.assert_close(out["word"].sum(-1), torch.ones(3))
    alone = model(*pad(random_docs([6, 2, 4], 3)[1:2]))
    torch.testing.assert_close(alone["logits"], out["logits"][1:2], atol=1e-5, rtol=0)
    torch.testing.assert_close(alone["word"], out["word"][1:2, :2], atol=1e-5, rtol=0)
    maps = model.attention_maps(ids, mask)
    assert len(maps) == 2 and all(a.shape == (3, 2, 10, 10) for a in maps)
    assert torch.equal(torch.stack(maps, 1), out["attentions"])
    assert "attentions" not in model.train()(ids, mask)


@pytest.mark.slow  # it exports: `make test-fast` leaves it out
def test_classifier_onnx_round_trip(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = tiny_classifier()
    ids, mask = pad(random_docs([5, 3, 2], 4))  # example: B = 3, T = 5
    path = tmp_path / "bert.onnx"
    names = list(model.output_names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            ClassifierGraph(model, names),
            (ids, mask),
            str(path),
            dynamo=True,
            opset_version=20,
            input_names=["ids", "mask"],
            output_names=names,
            dynamic_shapes=(all_dynamic(ids), all_dynamic(mask)),
            verbose=False,
        )
    check_dynamic(path, {"ids": [0, 1], "mask": [0, 1]})
    ids, mask = pad(random_docs([9, 1, 4, 7, 2], 5))  # B = 5, T = 9: unlike the example
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"ids": ids.numpy(), "mask": mask.numpy()})
    with torch.inference_mode():
        ref = model(ids, mask)
    for name, value in zip(names, got):
        np.testing.assert_allclose(value, ref[name].numpy(), atol=1e-4, rtol=0, err_msg=name)


@torch.inference_mode()
def test_bertviz_head_and_model_views_read_our_attentions():
    """The per-layer (batch, heads, query, key) tuple is what bertviz takes: its views embed our
    weights as they are."""
    from bertviz import head_view, model_view

    model = tiny_classifier()
    ids, mask = pad(random_docs([4], 6))
    maps = model.attention_maps(ids, mask)  # 2 layers of (1, 2, 6, 6)
    tokens = ["[CLS]", "w1", "w2", "w3", "w4", "[SEP]"]
    for view in (head_view, model_view):
        html = view(maps, tokens, html_action="return").data
        params, _ = json.JSONDecoder().raw_decode(
            html, html.index("{", html.index("const params = "))
        )
        got = np.array(params["attention"][0]["attn"])  # (layers, heads, query, key)
        np.testing.assert_allclose(got, torch.stack([m[0] for m in maps]).numpy(), atol=1e-6)
        assert params["attention"][0]["left_text"] == tokens


# ---------------------------------------------------------------- bert is transformer_encoder's
# pretrained twin


def shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


def test_bert_and_transformer_encoder_are_twins():
    """conf/model/bert.yaml and conf/model/transformer_encoder.yaml build the same encoder (layers,
    positions, widths, dropout): the pretraining gain is measured between twins. bert has only what
    pretraining adds (segment embeddings and the pooler, trained by the sentence-order head) and a
    [CLS] token row where the other has a [CLS] vector."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    def build(family):
        return instantiate(
            OmegaConf.load(ROOT / "conf" / "model" / f"{family}.yaml"),
            vocab_size=V,
            num_classes=C,
            pad_id=0,
        )

    scratch, bert = build("transformer_encoder"), build("bert")
    encoder = bert.bert
    assert (
        scratch.positions == encoder.config.positions == "alibi"
        and encoder.config.layout == "pre_ln"
    )
    assert encoder.embeddings.position is None and isinstance(
        encoder.embeddings.norm, torch.nn.Identity
    )
    assert len(scratch.layers) == len(encoder.layers) > 0
    for ours, theirs in zip(scratch.layers, encoder.layers):
        assert type(ours) is type(theirs) is EncoderLayer and shapes(ours) == shapes(theirs)
        assert ours.self_attn.heads == theirs.self_attn.heads and ours.drop.p == theirs.drop.p
        assert ours.self_attn.dropout == theirs.self_attn.dropout
    assert shapes(scratch.norm) == shapes(encoder.norm)
    assert scratch.embed.weight.shape[1] == encoder.embeddings.word.weight.shape[1]
    assert scratch.drop.p == encoder.embeddings.drop.p
    outside = {n for n in shapes(encoder) if not n.startswith(("layers.", "norm."))}
    assert outside == {
        "embeddings.word.weight",
        "embeddings.segment.weight",
        "pooler.weight",
        "pooler.bias",
    }
    assert {n for n in shapes(scratch) if not n.startswith(("layers.", "norm."))} == {
        "cls",
        "embed.weight",
        "out.weight",
        "out.bias",
    }


def test_the_twins_train_by_the_same_recipe():
    """bert and transformer_encoder also train alike (schedule, stopping, batch, label fractions;
    params.yaml family_params): only their tuned values (searched with the same budget) and bert's
    WordPiece cap may differ."""
    from attention_lab.stages.common import stage_config

    scratch, bert = (
        stage_config(["task=classify", f"family={f}"], tuned=False).train
        for f in ("transformer_encoder", "bert")
    )
    differ = {k for k in set(scratch) | set(bert) if scratch.get(k) != bert.get(k)}
    assert differ <= {"lr", "max_tokens"}, differ
    assert scratch.min_epochs == 25 and list(scratch.label_fractions) == [0.1, 1.0]


def test_bert_minilm_keeps_berts_layout():
    from omegaconf import OmegaConf

    minilm = OmegaConf.load(ROOT / "conf" / "model" / "bert_minilm.yaml")
    assert (minilm.positions, minilm.layout) == ("learned", "post_ln")
    # HF configs, old config.json
    assert (BertConfig(V).positions, BertConfig(V).layout) == ("learned", "post_ln")
    with pytest.raises(ValueError, match="positions"):
        BertConfig(V, positions="rotary")


@torch.inference_mode()
def test_pre_ln_alibi_bert_masks_padding_and_ignores_it():
    model = tiny_bert(positions="alibi", layout="pre_ln")
    ids, mask = pad(random_docs([7, 3, 5], 0))
    hidden, _, attentions = model(ids, mask, need_weights=True)
    assert hidden.shape == (3, 7, 16) and len(attentions) == 2
    for a in attentions:
        assert a.masked_select(~mask[:, None, None, :]).eq(0).all()
    alone, _, _ = model(*pad(random_docs([7, 3, 5], 0)[1:2]))
    torch.testing.assert_close(alone, hidden[1:2, :3], atol=1e-5, rtol=1e-5)
    fast, _, _ = model(ids, mask)
    # fused kernel == explicit softmax, with the bias
    torch.testing.assert_close(fast, hidden, atol=1e-5, rtol=1e-5)


def test_pretrained_twin_loads_into_the_bert_family():
    """pretrain@bert saves BertPretraining(conf/model/bert.yaml sizes).bert; fine-tuning loads it
    strictly."""
    torch.manual_seed(0)
    classifier = tiny_classifier()
    pretrained = BertPretraining(classifier.config)
    ids, mask = pad(random_docs([6, 4], 1))
    mlm, pair = pretrained(ids, mask, torch.zeros_like(ids))
    assert mlm.shape == (2, 6, V) and pair.shape == (2, 2)
    classifier.bert.load_state_dict(pretrained.bert.state_dict())  # strict
