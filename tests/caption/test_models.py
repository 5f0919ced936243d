"""models.captioner and tasks.captioning: shapes, the decoder-step contract, attention, the doubly
stochastic term."""

import numpy as np
import pytest
import torch

from attention_lab.caption.models.captioner import DigitCNN
from attention_lab.caption.models.show_tell import ShowTell
from attention_lab.caption.module import doubly_stochastic_penalty
from attention_lab.caption.search import caption_batch
from tests.tiny_models import tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def small(family: str):
    return tiny_model(family, 14)


def test_cnn_grid_and_coordinates():
    cnn = DigitCNN([4, 8])
    out = cnn(torch.zeros(2, 16, 64))
    assert out.shape == (2, 4 * 16, 8)
    # a blank canvas still tells cells apart (CoordConv)
    assert not torch.allclose(out[0, 0], out[0, -1])


@pytest.mark.parametrize("family", ["show_tell", "show_attend_tell"])
def test_forward_equals_looped_decode_steps(family):
    model = small(family)
    images, tgt = torch.rand(3, 16, 64), torch.randint(4, 14, (3, 5))
    logits, attn = model(images, tgt)
    assert logits.shape == (3, 5, 14) and attn.shape == (3, 5, 64)
    memory, state = model.encode(images)
    for t in range(5):
        step, state, a = model.decode_step(tgt[:, t], state, memory, model.grid_mask(memory))
        assert torch.allclose(step, logits[:, t], atol=1e-6) and torch.allclose(a, attn[:, t])
    if model.has_attention:
        assert torch.allclose(attn.sum(-1), torch.ones(3, 5), atol=1e-5)
    else:
        assert attn.abs().sum() == 0


def test_show_tell_feeds_the_image_once_or_beside_every_word():
    """image_input=first: the image is x_{-1} only (Vinyals); every_step: the step's input is [word;
    image], so the image changes every step's output, and the looped steps still equal the
    teacher-forced forward."""
    images, tgt = torch.rand(2, 16, 64), torch.randint(4, 14, (2, 3))
    for mode in ("first", "every_step"):
        torch.manual_seed(0)
        model = ShowTell(
            14, height=16, width=64, channels=[4, 8], emb_dim=8, hidden_dim=16, image_input=mode
        ).eval()
        assert model.lstm.input_size == (16 if mode == "every_step" else 8)
        memory, state = model.encode(images)
        other = torch.rand_like(memory)  # the same state, another image's grid at this step
        step, _, _ = model.decode_step(tgt[:, 0], state, memory, model.grid_mask(memory))
        moved, _, _ = model.decode_step(tgt[:, 0], state, other, model.grid_mask(other))
        assert torch.allclose(step, moved) == (mode == "first")
    with pytest.raises(ValueError, match="image_input='sometimes'"):
        ShowTell(14, height=16, width=64, channels=[4, 8], image_input="sometimes")


def test_bad_canvas_size_names_the_divisor():
    with pytest.raises(ValueError, match="divisible by 4"):
        ShowTell(14, height=18, width=64, channels=[4, 8])


def test_doubly_stochastic_penalty():
    attn = torch.zeros(1, 3, 4)
    # three steps on three cells: only cell 3 is never attended
    attn[0, 0, 0] = attn[0, 1, 1] = attn[0, 2, 2] = 1.0
    tgt_out = torch.tensor([[5, 2, 0]])  # the third step is padding: it does not count
    assert doubly_stochastic_penalty(attn, tgt_out).tolist() == [2.0]  # cells 2 and 3 got nothing
    assert doubly_stochastic_penalty(attn, torch.tensor([[5, 6, 2]])).tolist() == [1.0]


def test_caption_batch_greedy_matches_argmax_loop():
    model = small("show_attend_tell")
    images = torch.rand(2, 16, 64)
    hyps = caption_batch(model, images, max_len=4)
    memory, state = model.encode(images)
    prev = torch.ones(2, dtype=torch.long)
    tokens = [[], []]
    done = [False, False]
    for _ in range(4):
        logits, state, _ = model.decode_step(prev, state, memory, model.grid_mask(memory))
        logits[:, [0, 1, 3]] = -torch.inf  # caption_batch never emits <pad>, <s> or <unk>
        prev = logits.argmax(-1)
        for b in range(2):
            if not done[b]:
                done[b] = int(prev[b]) == 2
                if not done[b]:
                    tokens[b].append(int(prev[b]))
    assert [h.tokens for h in hyps] == tokens
    assert all(h.attention.shape == (len(h.tokens), 64) for h in hyps)
    assert np.isfinite([h.score for h in hyps]).all()


def test_show_attend_tell_projects_the_annotations_once_per_image():
    """encode returns [a_i; U a_i]: decode steps reuse the projection, and attend exactly as
    projecting each step."""
    model = small("show_attend_tell").eval()
    images = torch.rand(2, 16, 64)
    memory, state = model.encode(images)
    d = model.cnn.out_dim
    a = memory[..., :d]
    torch.testing.assert_close(memory[..., d:], model.attention.project_keys(a))
    mask = model.grid_mask(memory)
    _, _, alpha = model.decode_step(torch.tensor([1, 1]), state, memory, mask)
    _, expected = model.attention(state[0], a, a, mask)
    torch.testing.assert_close(alpha, expected)
