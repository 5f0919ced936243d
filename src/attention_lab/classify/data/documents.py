"""Deterministic multi-sentence reviews whose label is decided by a few key sentences, with gold
rationales. `rationale["sentences"]` lists the key sentence indices; `rationale["words"]` lists
[sentence, word] pairs of the words that carry the verdict: the deciding adjectives or verbs, their
negators, and the words of neutral verdicts ("fine", "nothing", "special"). Text is lowercase,
punctuation split off. How the documents are built, and why: docs/design.md, "Why the modules are as
they are"."""

from __future__ import annotations

import itertools
import random
from functools import cache

LABELS = ("negative", "neutral", "positive")
MIN_SENTENCES, MAX_SENTENCES = 3, 30
# key sentences per document: 1 to min(MAX_KEYS, 1 + sentences // KEY_EVERY)
MAX_KEYS, KEY_EVERY = 3, 6
# side-topic opinions per document: 1 to 1 + (non-key sentences) // DISTRACTOR_EVERY
DISTRACTOR_EVERY = 10

POSITIVE = (
    "good",
    "great",
    "wonderful",
    "excellent",
    "lovely",
    "fantastic",
    "superb",
    "pleasant",
    "amazing",
)
NEGATIVE = (
    "bad",
    "awful",
    "terrible",
    "horrible",
    "dreadful",
    "poor",
    "disappointing",
    "unpleasant",
    "nasty",
)
LIKED = ("loved", "liked", "enjoyed", "adored")
DISLIKED = ("hated", "disliked", "loathed", "regretted")
WHO = (
    "we",
    "i",
    "my wife",
    "my husband",
    "my friend",
    "everyone in our group",
    "my parents",
    "the kids",
)

# Verdict templates, shared by key sentences (S = the reviewed subject) and distractors (S = a side
# topic). Slots: {S} subject, {P} deciding adjective, {A} an adjective that does not decide (the
# superseded first impression), {N} a negative adjective in neutral verdicts, {V} a verb of liking
# or disliking, {W} who speaks. Words marked * are key words. Kinds: how the verdict follows from
# the polarity of {P} / {V}.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "plain": (
        "overall {S} was {P} .",
        "{S} was really {P} .",
        "i have to say {S} was {P} .",
        "in my opinion {S} was {P} .",
        "honestly , {S} was {P} from start to finish .",
        "{W} thought {S} was {P} .",
    ),
    "verb": (
        "{W} {V} {S} .",
        "{W} really {V} {S} .",
        "to be honest {W} {V} {S} .",
    ),
    "negated": (
        "{S} was *not {P} at all .",
        "{S} was *not {P} , *not even a little .",
        "*nobody could call {S} {P} .",
        "i would *never say {S} was {P} .",
        "{W} did *not think {S} was {P} .",
    ),
    "contrast": (
        "at first {S} seemed {A} , but in the end it was {P} .",
        "{S} looked {A} from outside , but it was actually {P} .",
        "some reviews said {S} was {A} , but for us it was {P} .",
        "{S} was {P} , even though the reviews said it was {A} .",
        "although it seemed {A} at first , {S} turned out {P} .",
    ),
    "neutral": (
        "overall {S} was *fine , *nothing *special .",
        "{S} was *neither {P} *nor {N} .",
        "{S} was *not {P} but *not {N} either .",
        "{S} was *okay , *just *average .",
        "{S} was {P} in some ways and {N} in others .",
        "{S} was {P} , but also quite {N} .",
        "{W} found {S} *average , *neither *great *nor *terrible .",
    ),
}
# for verdicts of polarity +1 / -1
KIND_WEIGHTS = {"plain": 3, "verb": 2, "negated": 2, "contrast": 2}
# verdict polarity = FLIP * polarity of {P} / {V}
FLIP = {"plain": 1, "verb": 1, "negated": -1, "contrast": 1}
CUM_WEIGHTS = tuple(itertools.accumulate(KIND_WEIGHTS.values()))

SUBJECTS = {  # the reviewed subject, per domain; a product review picks one product
    "restaurant": ("the restaurant", "this restaurant", "the place", "our dinner there"),
    "hotel": ("the hotel", "this hotel", "our stay", "the place"),
    "product": ("the {X}", "this {X}", "my new {X}"),
}
PRODUCTS = (
    "blender",
    "laptop",
    "kettle",
    "vacuum cleaner",
    "coffee machine",
    "phone",
    "toaster",
    "camera",
)
SIDE_TOPICS = (
    "the parking lot next door",
    "the weather",
    "the taxi ride there",
    "the traffic on the way",
    "the airport",
    "the film we saw afterwards",
    "my friend 's phone case",
    "the bus back home",
    "the shop across the street",
    "my neighbour 's dog",
    "the music in the car",
    "the museum nearby",
    "the train journey",
    "the city centre",
    "the football match on tv",
    "my old laptop",
    "the bakery around the corner",
    "the concert last week",
)
FILLERS = {  # neutral sentences; {S} here mentions the subject without judging it
    "any": (
        "we arrived on a {DAY} .",
        "we went there with {WHO} .",
        "it was our first visit to {CITY} .",
        "i am writing this review a few days later .",
        "it was raining when we got there .",
        "we paid by card .",
        "{S} is about ten minutes from the station .",
        "i read about {S} online .",
        "my sister recommended {S} to us .",
        "we came back home on {DAY} evening .",
        "the trip took {NUM} hours .",
    ),
    "restaurant": (
        "the menu has {NUM} pages .",
        "we ordered the soup and the fish .",
        "we sat by the window .",
        "the waiter brought water to the table .",
        "{S} opens at six in the evening .",
        "we shared a dessert .",
        "there were {NUM} other tables .",
        "we booked {S} a week in advance .",
    ),
    "hotel": (
        "our room was on the {ORD} floor .",
        "we checked in at {NUM} o'clock .",
        "breakfast is served until ten .",
        "{S} has {NUM} floors .",
        "we stayed for {NUM} nights .",
        "the lift is next to the reception .",
        "we booked {S} a month in advance .",
    ),
    "product": (
        "i bought {S} {WHEN} .",
        "{S} came in a {COLOR} box .",
        "the manual has {NUM} pages .",
        "i use {S} mostly at home .",
        "{S} replaced an older model .",
        "delivery took {NUM} days .",
    ),
}
FILL = {
    "DAY": ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    "CITY": ("london", "paris", "berlin", "madrid", "rome", "lisbon", "vienna", "dublin"),
    "NUM": ("two", "three", "four", "five", "six", "seven", "eight", "ten", "twelve"),
    "ORD": ("second", "third", "fourth", "fifth", "seventh"),
    "WHEN": ("last month", "in march", "two weeks ago", "for my birthday", "on sale"),
    "COLOR": ("white", "black", "blue", "grey", "red"),
    "WHO": WHO,
}


@cache
def _tokens(template: str) -> tuple[str, ...]:
    """A template split into tokens (cached: templates are reused millions of times)."""
    return tuple(template.split())


def _verdict(rng: random.Random, subject: str, polarity: int) -> tuple[list[str], list[int]]:
    """One verdict sentence on `subject` with the given polarity: (words, indices of key words)."""
    if polarity == 0:
        template, sign = rng.choice(TEMPLATES["neutral"]), 1
    else:
        kind = rng.choices(tuple(KIND_WEIGHTS), cum_weights=CUM_WEIGHTS)[0]
        template, sign = rng.choice(TEMPLATES[kind]), polarity * FLIP[kind]
    words: list[str] = []
    keys: list[int] = []
    for token in _tokens(template):
        key = token.startswith("*") or token in ("{P}", "{V}", "{N}")
        if token == "{S}":
            out = _tokens(subject)
        # in a contrast the first impression {A} has the opposite polarity
        elif token in ("{P}", "{A}"):
            out = [rng.choice(POSITIVE if (sign > 0) == (token == "{P}") else NEGATIVE)]
        elif token == "{N}":
            out = [rng.choice(NEGATIVE)]
        elif token == "{V}":
            out = [rng.choice(LIKED if sign > 0 else DISLIKED)]
        elif token == "{W}":
            out = rng.choice(WHO).split()
        else:
            out = [token.lstrip("*")]
        if key:
            keys.extend(range(len(words), len(words) + len(out)))
        words.extend(out)
    return words, keys


def _filler(rng: random.Random, domain: str, subject: str) -> list[str]:
    """A neutral sentence with no opinion (it may mention the subject)."""
    pool = FILLERS["any"] if rng.random() < 0.5 else FILLERS[domain]
    template = rng.choice(pool)
    if "{" not in template:
        return list(_tokens(template))
    words = []
    for token in _tokens(template):
        if token == "{S}":
            words.extend(_tokens(subject))
        elif token.startswith("{"):
            words.extend(rng.choice(FILL[token[1:-1]]).split())
        else:
            words.append(token)
    return words


def _key_polarities(rng: random.Random, label: str, n_sentences: int) -> list[int]:
    """Polarities of the key sentences (1 to 3, more in longer documents); their sum has the label's
    sign."""
    n = rng.randint(1, min(MAX_KEYS, 1 + n_sentences // KEY_EVERY))
    if label != "neutral":
        return [1 if label == "positive" else -1] * n
    # pros and cons cancel out
    mixed = [1, -1] + [0] * (n - 2) if n >= 2 and rng.random() < 0.5 else [0] * n
    rng.shuffle(mixed)
    return mixed


def sample_document(rng: random.Random, label: str, n_sentences: int) -> dict:
    """One review of `n_sentences` sentences whose key sentences decide `label`."""
    domain = rng.choice(tuple(SUBJECTS))
    product = rng.choice(PRODUCTS)
    subjects = [s.replace("{X}", product) for s in SUBJECTS[domain]]
    sides = [t for t in SIDE_TOPICS if domain != "product" or not t.endswith(product)]
    polarities = _key_polarities(rng, label, n_sentences)
    positions = sorted(rng.sample(range(n_sentences), len(polarities)))
    others = [i for i in range(n_sentences) if i not in positions]
    distractors = set(
        rng.sample(others, min(len(others), rng.randint(1, 1 + len(others) // DISTRACTOR_EVERY)))
    )
    sentences: list[list[str]] = []
    key_words: list[list[int]] = []
    for i in range(n_sentences):
        if i in positions:
            words, keys = _verdict(rng, rng.choice(subjects), polarities[positions.index(i)])
            key_words.extend([i, k] for k in keys)
        elif i in distractors:
            words, _ = _verdict(rng, rng.choice(sides), rng.choice((-1, 0, 1)))
        else:
            words = _filler(rng, domain, rng.choice(subjects))
        sentences.append(words)
    return {
        "label": label,
        "sentences": sentences,
        "rationale": {"sentences": positions, "words": key_words},
    }


def _text(doc: dict) -> str:
    return "\n".join(" ".join(s) for s in doc["sentences"])


def _draw(rng: random.Random, plan: list[tuple[str, int, int]], seen: set[str]) -> list[dict]:
    """One document per (label, min_sentences, max_sentences) in `plan`, redrawn until unseen, then
    shuffled."""
    docs = []
    for label, lo, hi in plan:
        while True:
            doc = sample_document(rng, label, rng.randint(lo, hi))
            if (text := _text(doc)) not in seen:
                seen.add(text)
                docs.append(doc)
                break
    rng.shuffle(docs)
    return docs


def generated_documents(
    seed: int,
    n_train: int,
    n_valid: int,
    n_test_per_bucket: int,
    buckets: list[tuple[int, int]],
    n_unlabelled: int = 0,
) -> dict[str, list[dict]]:
    """{"train", "valid", "test", "unlabelled"} reviews; test has `n_test_per_bucket` per
    sentence-count bucket, labels balanced; unlabelled keeps the text alone (sentences), drawn last
    from its own seed stream."""
    for lo, hi in buckets:
        if not MIN_SENTENCES <= lo <= hi <= MAX_SENTENCES:
            raise ValueError(
                f"bucket ({lo}, {hi}): expected {MIN_SENTENCES} <= lo <= hi <= {MAX_SENTENCES}"
            )
    plans = {
        "train": [(LABELS[i % len(LABELS)], MIN_SENTENCES, MAX_SENTENCES) for i in range(n_train)],
        "valid": [(LABELS[i % len(LABELS)], MIN_SENTENCES, MAX_SENTENCES) for i in range(n_valid)],
        "test": [
            (LABELS[i % len(LABELS)], lo, hi)
            for lo, hi in buckets
            for i in range(n_test_per_bucket)
        ],
        "unlabelled": [
            (LABELS[i % len(LABELS)], MIN_SENTENCES, MAX_SENTENCES) for i in range(n_unlabelled)
        ],
    }
    seen: set[str] = set()  # shared, so no document text appears in two splits
    splits = {
        split: _draw(random.Random(f"documents/{split}/{seed}"), plan, seen)
        for split, plan in plans.items()
    }
    splits["unlabelled"] = [{"sentences": doc["sentences"]} for doc in splits["unlabelled"]]
    return splits
