"""search.py: greedy and beam search over real translate families with random weights, through the
torch adapter (attention_lab.nn.decoder_step): beam 1 == greedy, a batch == one sentence at a
time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_lab.infer.decoding import beam_search, max_decode_len, pad_batch
from attention_lab.infer.tokenization import NEVER_EMITTED
from tests.infer.test_decoding import EOS, toy_batch
from tests.tiny_models import TRANSLATE, tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def eos_shy_model(family: str, vocab_size: int = 40):
    """The family at tiny sizes, in training mode, with eos made unlikely."""
    model = tiny_model(family, vocab_size).train()
    with torch.no_grad():  # make eos unlikely so the hypotheses are long enough to compare
        for p in model.parameters():
            if p.dim() == 1 and p.shape[0] == vocab_size:
                p[EOS] -= 2.0
    return model


@pytest.mark.parametrize("family", sorted(TRANSLATE))
def test_real_models_beam_one_greedy_and_batching(family):
    from attention_lab.nn.decoder_step import torch_encode, torch_step
    from attention_lab.translate.search import translate_batch

    model = eos_shy_model(family)
    sents = toy_batch(6, seed=9)
    greedy_hyps = translate_batch(model, sents, beam=1, len_penalty=0.0, max_len_ratio=1.0)
    # translate_batch restores the mode it found
    assert model.training
    src, mask = pad_batch(sents)
    state, memory = torch_encode(model.eval(), src, mask)
    beam_one = beam_search(
        torch_step(model),
        state,
        memory,
        max_decode_len(mask, 1.0),
        beam=1,
        len_penalty=0.7,
        banned=NEVER_EMITTED,
    )
    assert [h.tokens for h in beam_one] == [h.tokens for h in greedy_hyps]
    assert any(len(h.tokens) > 2 for h in greedy_hyps)
    beam = translate_batch(model, sents, beam=3, len_penalty=1.0, max_len_ratio=1.0)
    for sent, g, b in zip(sents, greedy_hyps, beam):
        assert g.attention.shape == (len(g.tokens), len(sent))
        single = translate_batch(model, [sent], beam=3, len_penalty=1.0, max_len_ratio=1.0)[0]
        assert single.tokens == b.tokens and single.score == pytest.approx(b.score, abs=1e-4)
        np.testing.assert_allclose(single.attention, b.attention, atol=1e-5)
        # local: window/Gaussian
        if model.has_attention and len(g.tokens) and not family.startswith("luong_local"):
            np.testing.assert_allclose(g.attention.sum(1), 1.0, atol=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_never_hold_pad_bos_or_unk(beam):
    from attention_lab.translate.search import translate_batch

    model = tiny_model("bahdanau", 40)
    with torch.no_grad():  # <unk> first by far, then <pad> and <s>; eos unlikely
        model.output.W_o.bias[[3, 0, 1, EOS]] = torch.tensor([40.0, 30.0, 30.0, -30.0])
    sents = toy_batch(4, seed=3)
    assert all(set(h.tokens) == {3} for h in translate_batch(model, sents, beam=beam, banned=()))
    for h, sent in zip(translate_batch(model, sents, beam=beam, max_len_ratio=1.0), sents):
        assert len(h.tokens) == len(sent) + 10 and not set(h.tokens) & {0, 1, 3, EOS}
