"""decoding.py: greedy and beam search over NumPy step functions (a transition table, a toy
attention RNN)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attention_lab.infer.decoding import (
    beam_search,
    greedy,
    length_penalty,
    max_decode_len,
    pad_batch,
    search,
)

PAD, BOS, EOS, UNK = 0, 1, 2, 3
NEVER = (PAD, BOS, UNK)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def table_step(table: np.ndarray):
    """Step over a Markov table: log_probs = log table[prev]; state counts steps; attention is
    one-hot on step."""
    log_table = np.log(np.maximum(table, 1e-12)).astype(np.float32)

    def step(prev, state, memory):
        (count,), (mask,) = state, memory
        attn = np.zeros(mask.shape, dtype=np.float32)
        attn[np.arange(len(prev)), np.minimum(count[:, 0], mask.shape[1] - 1)] = 1.0
        return log_table[prev], (count + 1,), attn

    return step


def table_inputs(batch: int = 1, src_len: int = 4):
    return (np.zeros((batch, 1), dtype=np.int64),), (np.ones((batch, src_len), dtype=bool),)


class ToyAttentionRNN:
    """A random NumPy encoder-decoder with additive-free dot attention, enough to exercise batching
    and padding."""

    def __init__(self, vocab: int = 17, hidden: int = 8, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.emb = rng.normal(size=(vocab, hidden)).astype(np.float32)
        self.w = (rng.normal(size=(2 * hidden, hidden)) * 0.7).astype(np.float32)
        self.out = (rng.normal(size=(2 * hidden, vocab)) * 1.5).astype(np.float32)

    def encode(self, src, mask):
        memory = np.tanh(self.emb[src]) * mask[..., None]  # (B, S, H)
        h0 = memory.sum(1) / mask.sum(1, keepdims=True)  # (B, H)
        return (h0.astype(np.float32),), (memory.astype(np.float32), mask)

    def step(self, prev, state, memory):
        (h,), (mem, mask) = state, memory
        h = np.tanh(np.concatenate([self.emb[prev], h], 1) @ self.w)  # (B, H)
        scores = np.einsum("bsh,bh->bs", mem, h)
        scores = np.where(mask, scores, -np.inf)
        attn = np.exp(scores - scores.max(1, keepdims=True))
        attn /= attn.sum(1, keepdims=True)  # (B, S)
        ctx = np.einsum("bs,bsh->bh", attn, mem)
        logits = np.concatenate([h, ctx], 1) @ self.out  # (B, V)
        logits -= logits.max(1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        return log_probs.astype(np.float32), (h.astype(np.float32),), attn.astype(np.float32)


def toy_batch(n: int = 6, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 17, size=rng.integers(1, 9)).tolist() for _ in range(n)]


def run_toy(model, sentences, fn, **kw):
    src, mask = pad_batch(sentences)
    state, memory = model.encode(src, mask)
    return fn(model.step, state, memory, max_decode_len(mask, 1.5), **kw)


# tokens: 0 pad, 1 bos, 2 eos, 3 A, 4 B, 5 C, 6 D
TRAP = np.zeros((7, 7))
TRAP[BOS, [3, 4, EOS]] = [0.5, 0.4, 0.1]  # greedy takes A ...
TRAP[3, [5, 6, EOS]] = [0.4, 0.3, 0.3]  # ... then C: p(A C </s>) = 0.2
TRAP[4, EOS] = 1.0  # beam finds B </s>: 0.4
TRAP[5, EOS] = TRAP[6, EOS] = 1.0
TRAP[[PAD, EOS], EOS] = 1.0


def test_beam_finds_higher_scoring_hypothesis_than_greedy():
    state, memory = table_inputs()
    g = greedy(table_step(TRAP), state, memory, np.array([5]))[0]
    b = beam_search(table_step(TRAP), state, memory, np.array([5]), beam=2, len_penalty=0.0)[0]
    assert g.tokens == [3, 5] and b.tokens == [4]
    assert b.logprob > g.logprob
    assert b.score == pytest.approx(np.log(0.4), abs=1e-5)
    assert g.score == pytest.approx(np.log(0.2), abs=1e-5)


def test_attention_has_one_row_per_token():
    state, memory = table_inputs(src_len=6)
    g = greedy(table_step(TRAP), state, memory, np.array([5]))[0]
    assert g.attention.shape == (2, 6)
    np.testing.assert_array_equal(g.attention.argmax(1), [0, 1])
    b = beam_search(table_step(TRAP), state, memory, np.array([5]), beam=3, len_penalty=1.0)[0]
    assert b.attention.shape == (len(b.tokens), 6)


def test_max_len_stops_without_eos():
    loop = np.zeros((7, 7))
    loop[:, [3, 4, EOS]] = [0.6, 0.399, 0.001]  # eos never ranks among the best extensions
    state, memory = table_inputs(batch=3)
    max_len = np.array([1, 3, 5])
    for hyps in (
        greedy(table_step(loop), state, memory, max_len),
        beam_search(table_step(loop), state, memory, max_len, beam=2, len_penalty=0.0),
    ):
        assert [len(h.tokens) for h in hyps] == [1, 3, 5]


def exhaustive_best(table: np.ndarray, max_len: int, alpha: float) -> list[int]:
    """The best hypothesis by logprob / lp over every token sequence up to max_len steps."""
    logt = np.log(np.maximum(table, 1e-12)).astype(np.float32).astype(np.float64)
    best, best_score = None, -np.inf
    for steps in range(1, max_len + 1):
        for seq in itertools.product(range(table.shape[0]), repeat=steps):
            if EOS in seq[:-1] or (steps < max_len and seq[-1] != EOS):
                continue
            raw = sum(logt[p, t] for p, t in zip((BOS,) + seq[:-1], seq))
            score = raw / length_penalty(steps, alpha)
            if score > best_score + 1e-12:
                best, best_score = [t for t in seq if t != EOS], score
    return best


def test_length_penalty_changes_the_winner_and_wide_beam_is_exact():
    rng = np.random.default_rng(3)
    table = rng.dirichlet(np.ones(4) * 0.7, size=4)
    # an early eos is cheap, longer hypotheses pay more log-prob
    table[BOS, EOS] = 0.3
    table /= table.sum(1, keepdims=True)
    state, memory = table_inputs()
    winners = {}
    for alpha in (0.0, 1.0, 4.0):
        hyp = beam_search(
            table_step(table), state, memory, np.array([4]), beam=4**4, len_penalty=alpha
        )[0]
        assert hyp.tokens == exhaustive_best(table, 4, alpha)
        winners[alpha] = len(hyp.tokens)
    assert winners[0.0] < winners[4.0]


def test_beam_one_equals_greedy_on_toy_model():
    model = ToyAttentionRNN()
    sents = toy_batch(12)
    g = run_toy(model, sents, greedy)
    b = run_toy(model, sents, beam_search, beam=1, len_penalty=1.0)
    assert [h.tokens for h in g] == [h.tokens for h in b]
    for x, y in zip(g, b):
        np.testing.assert_allclose(x.attention, y.attention, atol=1e-6)
        assert x.logprob == pytest.approx(y.logprob, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_batch_equals_one_sentence_at_a_time(beam):
    model = ToyAttentionRNN(seed=4)
    sents = toy_batch(7, seed=5)
    batch = run_toy(model, sents, search, beam=beam, len_penalty=1.0)
    for sent, hyp in zip(sents, batch):
        single = run_toy(model, [sent], search, beam=beam, len_penalty=1.0)[0]
        assert single.tokens == hyp.tokens
        assert single.score == pytest.approx(hyp.score, abs=1e-4)
        np.testing.assert_allclose(
            single.attention[:, : len(sent)], hyp.attention[:, : len(sent)], atol=1e-5
        )
        # padding gets no attention
        assert np.abs(hyp.attention[:, len(sent) :]).max(initial=0.0) == 0.0


@pytest.mark.parametrize("beam", [1, 2])
def test_finished_rows_leave_the_batch(beam):
    model = ToyAttentionRNN(seed=2)
    sizes = []

    def step(prev, state, memory):
        sizes.append(len(prev))
        return model.step(prev, state, memory)

    src, mask = pad_batch(toy_batch(5, seed=7))
    state, memory = model.encode(src, mask)
    max_len = np.array([1, 2, 3, 8, 8])
    search(step, state, memory, max_len, beam=beam, len_penalty=1.0)
    assert sizes[0] == 5 * beam and sizes[1] <= 4 * beam and sizes[2] <= 3 * beam
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 8


def test_beam_scores_use_gnmt_length_penalty():
    model = ToyAttentionRNN(seed=6)
    for hyp in run_toy(model, toy_batch(4, seed=8), beam_search, beam=3, len_penalty=0.6):
        with_eos, without = (hyp.logprob / length_penalty(len(hyp.tokens) + d, 0.6) for d in (1, 0))
        assert hyp.score == pytest.approx(with_eos, rel=1e-6) or hyp.score == pytest.approx(
            without, rel=1e-6
        )


def test_pad_batch_and_budget():
    src, mask = pad_batch([[5, 6, 7], [8]])
    np.testing.assert_array_equal(src, [[5, 6, 7], [8, 0, 0]])
    np.testing.assert_array_equal(mask, [[True, True, True], [True, False, False]])
    np.testing.assert_array_equal(max_decode_len(mask, 2.0), [16, 12])
    with pytest.raises(ValueError):
        pad_batch([[]])


# tokens: 0 pad, 1 bos, 2 eos, 3 unk, 4 A, 5 B; unk is the most likely next token everywhere, then
# pad and bos
UNK_FIRST = np.zeros((6, 6))
UNK_FIRST[:, [UNK, PAD, BOS, 4, 5, EOS]] = [0.5, 0.15, 0.1, 0.12, 0.08, 0.05]


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_banned_ids_are_never_emitted(beam):
    state, memory = table_inputs(batch=2)
    max_len = np.array([4, 6])
    free = search(table_step(UNK_FIRST), state, memory, max_len, beam=beam, len_penalty=1.0)
    # without a ban the search does emit <unk>
    assert all(UNK in h.tokens for h in free)
    hyps = search(
        table_step(UNK_FIRST), state, memory, max_len, beam=beam, len_penalty=1.0, banned=NEVER
    )
    for h in hyps:
        assert not set(h.tokens) & set(NEVER), h.tokens
        assert np.isfinite(h.score) and h.attention.shape == (len(h.tokens), 4)
    # greedy: the best allowed token, A, until max_len
    if beam == 1:
        assert [h.tokens for h in hyps] == [[4] * 4, [4] * 6]
        # the model's log-probs, not renormalised
        assert hyps[0].logprob == pytest.approx(4 * np.log(0.12), abs=1e-5)


def test_a_ban_changes_nothing_where_the_banned_ids_were_not_chosen():
    state, memory = table_inputs()
    for fn, kw in ((greedy, {}), (beam_search, {"beam": 2, "len_penalty": 0.0})):
        plain = fn(table_step(TRAP), state, memory, np.array([5]), **kw)[0]
        banned = fn(table_step(TRAP), state, memory, np.array([5]), banned=(PAD, BOS), **kw)[0]
        assert (plain.tokens, plain.score, plain.logprob) == (
            banned.tokens,
            banned.score,
            banned.logprob,
        )
    model = ToyAttentionRNN(seed=4)
    sents = toy_batch(7, seed=5)
    plain = run_toy(model, sents, greedy)
    # ids greedy never chose
    unused = set(range(17)) - {t for h in plain for t in h.tokens} - {EOS}
    banned = run_toy(model, sents, greedy, banned=tuple(unused))
    assert len(unused) > 3 and [h.tokens for h in banned] == [h.tokens for h in plain]
    assert [h.score for h in banned] == [h.score for h in plain]


def test_the_ban_leaves_the_step_output_alone_and_refuses_eos():
    state, memory = table_inputs()
    seen = []

    def step(prev, state, memory):
        out = table_step(UNK_FIRST)(prev, state, memory)
        seen.append(out[0])
        return out

    greedy(step, state, memory, np.array([2]), banned=NEVER)
    # -inf went into a copy, not into the step's array
    assert all(np.isfinite(lp).all() for lp in seen)
    for fn in (greedy, beam_search):
        with pytest.raises(ValueError, match="include eos"):
            fn(table_step(UNK_FIRST), state, memory, np.array([2]), banned=(UNK, EOS))
