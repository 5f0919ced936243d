"""The English→Korean generator: determinism, gold alignments, length control, Korean morphology."""

import random

import pytest

from attention_lab.translate.data.generator import generate, generated_splits, monotone, sample_pair
from attention_lab.translate.data.korean import (
    ADJECTIVES,
    NOUNS,
    VERBS,
    Verb,
    has_batchim,
    particle,
)

MIX = {"1-10": 0.3, "11-20": 0.3, "21-30": 0.2, "31-40": 0.1, "41-60": 0.1}


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return generate(600, seed=7, length_mix=MIX)


def test_same_seed_same_pairs_and_different_seed_different_pairs(pairs):
    assert generate(600, seed=7, length_mix=MIX) == pairs
    assert generate(600, seed=8, length_mix=MIX) != pairs


def test_alignment_indices_in_range_and_every_korean_word_aligned(pairs):
    for p in pairs:
        src, tgt = p["src"].split(), p["tgt"].split()
        assert all(0 <= i < len(src) and 0 <= j < len(tgt) for i, j in p["align"]), p
        assert {j for _, j in p["align"]} == set(range(len(tgt))), p
        unaligned = {w for i, w in enumerate(src) if i not in {i for i, _ in p["align"]}}
        assert unaligned <= {"the", "a", "an"}, p


def test_alignment_is_non_monotonic(pairs):
    crossing = sum(
        any(i1 < i2 and j1 > j2 for i1, j1 in p["align"] for i2, j2 in p["align"]) for p in pairs
    )
    assert crossing > len(pairs) // 2


def test_the_monotone_control_keeps_the_words_and_follows_the_source_order(pairs):
    """monotone: the same Korean words, each at its first aligned English word, the alignment
    renumbered: no pair crosses by first-aligned word, where most built-in pairs do."""
    for p in pairs:
        m, words = monotone(p), p["tgt"].split()
        assert m["src"] == p["src"] and sorted(m["tgt"].split()) == sorted(words)
        moved = {j: m["tgt"].split().index(w) for j, w in enumerate(words) if words.count(w) == 1}
        assert sorted(m["align"]) == m["align"]
        assert all([i, moved[j]] in m["align"] for i, j in p["align"] if j in moved)
        first = [min(i for i, j in m["align"] if j == t) for t in range(len(words))]
        assert first == sorted(first), m


def test_a_bad_order_is_named():
    """data.order must be korean or monotone, and monotone needs the generator's alignments."""
    from omegaconf import OmegaConf

    from attention_lab.core.config import ConfigError
    from attention_lab.translate.prepare import splits

    for data in (
        {"source": "generated", "order": "sideways"},
        {"source": "tsv", "order": "monotone"},
    ):
        with pytest.raises(
            ConfigError, match=f"data.order='{data['order']}': expected one of korean, monotone"
        ):
            splits(OmegaConf.create({"data": data}))


def test_text_is_lowercase_single_spaced_hangul():
    p = sample_pair(random.Random(0), 20, 30)
    assert p["src"] == p["src"].lower() and "  " not in p["src"] and p["src"] == p["src"].strip()
    assert all("\uac00" <= c <= "\ud7a3" for w in p["tgt"].split() for c in w)


@pytest.mark.parametrize(
    ("lo", "hi"), [(1, 10), (11, 20), (21, 30), (31, 40), (41, 60), (45, 60), (58, 60)]
)
def test_length_range_is_hit(lo, hi):
    rng = random.Random(lo)
    for _ in range(30):
        assert lo <= len(sample_pair(rng, lo, hi)["src"].split()) <= hi


def test_length_mix_sets_the_share_of_each_range(pairs):
    lengths = [len(p["src"].split()) for p in pairs]
    assert sum(41 <= n <= 60 for n in lengths) == 60 and sum(n <= 10 for n in lengths) == 180
    assert max(lengths) >= 45


def test_impossible_length_is_refused():
    with pytest.raises(ValueError, match="cannot build"):
        sample_pair(random.Random(0), 1, 1)


def test_generated_splits_are_disjoint_and_test_is_stratified():
    splits = generated_splits(3, 300, 40, 5, MIX, [(1, 10), (11, 20), (41, 1000)])
    train = {p["src"] for p in splits["train"]}
    assert len(splits["valid"]) == 40 and not train & {
        p["src"] for p in splits["valid"] + splits["test"]
    }
    lengths = sorted(len(p["src"].split()) for p in splits["test"])
    assert (
        len(lengths) == 15
        and lengths[4] <= 10 < lengths[5]
        and 41 <= lengths[10]
        and lengths[-1] <= 60
    )


@pytest.mark.parametrize(
    ("noun", "topic", "subject", "obj", "direction"),
    [
        ("책", "책은", "책이", "책을", "책으로"),
        ("사과", "사과는", "사과가", "사과를", "사과로"),
        ("학교", "학교는", "학교가", "학교를", "학교로"),
        ("집", "집은", "집이", "집을", "집으로"),
        ("서울", "서울은", "서울이", "서울을", "서울로"),
        ("교실", "교실은", "교실이", "교실을", "교실로"),
    ],
)
def test_particles_follow_batchim(noun, topic, subject, obj, direction):
    assert [particle(noun, r) for r in ("topic", "subject", "object", "direction")] == [
        topic,
        subject,
        obj,
        direction,
    ]
    assert particle(noun, "and") == noun + ("과" if has_batchim(noun) else "와")
    assert particle(noun, "dative") == noun + "에게" and particle(noun, "in") == noun + "에서"


@pytest.mark.parametrize(
    ("stem", "irregular", "forms"),
    [
        ("읽", "", ("읽는다", "읽었다", "읽는", "읽은")),
        ("가", "", ("간다", "갔다", "가는", "간")),
        ("보", "", ("본다", "봤다", "보는", "본")),
        ("마시", "", ("마신다", "마셨다", "마시는", "마신")),
        ("만들", "", ("만든다", "만들었다", "만드는", "만든")),
        ("찾", "", ("찾는다", "찾았다", "찾는", "찾은")),
        ("공부하", "", ("공부한다", "공부했다", "공부하는", "공부한")),
        ("주", "", ("준다", "줬다", "주는", "준")),
        ("쓰", "", ("쓴다", "썼다", "쓰는", "쓴")),
        ("쉬", "", ("쉰다", "쉬었다", "쉬는", "쉰")),
        ("듣", "d", ("듣는다", "들었다", "듣는", "들은")),
        ("돕", "b", ("돕는다", "도왔다", "돕는", "도운")),
    ],
)
def test_verb_endings(stem, irregular, forms):
    v = Verb(stem, irregular)
    assert (v.present(), v.past(), v.adnominal(), v.adnominal(past=True)) == forms
    assert (
        v.connective("고") == stem + "고"
        and v.connective("지만", past=True) == forms[1][:-1] + "지만"
    )


def test_lexicon_size_and_one_korean_word_per_english_word():
    assert 60 <= len(NOUNS) <= 120 and 25 <= len(VERBS) and 30 <= len(ADJECTIVES)
    assert len({n.en for n in NOUNS}) == len(NOUNS) and all(" " not in n.ko for n in NOUNS)


def test_translation_is_a_function_of_the_source():
    """No coin flips the source cannot see (e.g. topic vs subject marker): one source, one
    reference."""
    seen: dict[str, str] = {}
    for pair in generate(5000, seed=11, length_mix={"1-10": 1.0}):
        assert seen.setdefault(pair["src"], pair["tgt"]) == pair["tgt"], pair["src"]
