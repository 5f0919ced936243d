"""Deterministic English→Korean sentence pairs with gold word alignments, grown to a requested
length. English is SVO, Korean SOV with every modifier before the noun, so the alignment is
non-monotonic; text is lowercase, words separated by single spaces, no punctuation. `align` lists
[src_word, tgt_word] pairs (0-based indices into `src.split()` and `tgt.split()`; a Korean word is
an eojeol); English articles are unaligned and every Korean word is aligned to at least one English
word (the convention in full: docs/design.md, "Why the modules are as they are")."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from functools import cache

from attention_lab.translate.data.korean import (
    ADJECTIVES,
    ADVERBS,
    ANIMATE,
    NOUNS,
    PERSON,
    VERBS,
    VERY,
    Adjective,
    Adverb,
    Noun,
    VerbEntry,
    particle,
)

# relative clauses per noun phrase level: a relative clause holds no further relative clause
MAX_DEPTH = 1
# coordinated main clauses: long sentences grow mostly by coordination, as real ones do
MAX_CLAUSES = 5
MAX_WORDS = 60  # longest test sentences (an open-ended last bucket is capped here)
P_PAST, P_PREDICATE = 0.35, 0.12
OPS = {
    "adj": 3,
    "very": 1,
    "rel": 4,
    "loc": 2,
    "com": 1,
    "adv": 2,
    "time": 1,
    "coord": 1,
    "clause": 2,
}
ADJ_RANK = {a.en: i for i, a in enumerate(ADJECTIVES)}

En = list[tuple[str, int | None]]  # English words with their alignment key
Ko = list[tuple[str, set[int]]]  # Korean eojeol with the keys of the English words they align to


@dataclass
class NP:
    """A noun with its article, adjectives and optional relative clause."""

    noun: Noun
    det: str | None
    depth: int
    adjs: list[Adjective] = field(default_factory=list)
    very: bool = False
    rel: Clause | None = None


@dataclass
class Slot:
    """One argument position: one NP or two joined by "and", all of a kind the verb accepts."""

    nps: list[NP]
    kinds: frozenset[str]


@dataclass
class Clause:
    """A verb (or predicate adjective) with its arguments; `gap` is the role taken by a relative
    clause's head."""

    depth: int
    verb: VerbEntry | None = None
    pred: Adjective | None = None
    frame: str = "pred"
    subj: Slot | None = None
    obj: Slot | None = None
    dat: Slot | None = None
    goal: Slot | None = None
    loc: Slot | None = None
    com: Slot | None = None
    adv: Adverb | None = None
    time: Adverb | None = None
    very: bool = False
    gap: str | None = None
    head: NP | None = None

    @property
    def topic(self) -> bool:
        """A main clause's definite subject is the topic (은/는); new, indefinite ones and embedded
        subjects take 이/가.

        Deciding it from the English article keeps the translation a function of the source (no coin
        flip).
        """
        return self.gap is None and self.subj is not None and self.subj.nps[0].det == "the"


@cache
def nouns_for(kinds: frozenset[str]) -> tuple[Noun, ...]:
    """Nouns whose kind or tags are in `kinds`."""
    return tuple(n for n in NOUNS if n.kind in kinds or n.tags & kinds)


@cache
def verbs_for(subject: str | None, objects_of: Noun | None) -> tuple[tuple[VerbEntry, str], ...]:
    """(verb, frame) pairs taking a `subject`-kind subject, or `objects_of` as direct object."""
    out = []
    for v in VERBS:
        for frame in sorted(v.frames):
            takes_subject = subject is not None and subject in v.subjects
            takes_object = (
                objects_of is not None
                and frame in ("tr", "ditr")
                and objects_of in nouns_for(v.objects)
            )
            if takes_subject or takes_object:
                out.append((v, frame))
    return tuple(out)


class Grower:
    """Builds one sentence: a base clause grown by random modifiers until it reaches a target
    length."""

    def __init__(self, rng: random.Random, past: bool):
        self.rng, self.past = rng, past
        self.clauses: list[Clause] = []  # main clauses, joined by self.links
        self.links: list[str] = []
        self.all_clauses: list[Clause] = []
        self.slots: list[Slot] = []
        self.keys = itertools.count()  # alignment keys, restarted by each render

    def np(self, kinds: frozenset[str], depth: int) -> NP:
        noun = self.rng.choice(nouns_for(kinds))
        det = {"count": self.rng.choice(("the", "a")), "mass": "the"}.get(noun.article)
        return NP(noun, det, depth)

    def slot(self, kinds: frozenset[str], depth: int) -> Slot:
        return Slot([self.np(kinds, depth)], kinds)

    def clause(self, depth: int, gap: str | None = None, head: NP | None = None) -> Clause | None:
        """A base clause; with `gap` a relative clause about `head` (None when no verb fits)."""
        rng = self.rng
        if gap is None and rng.random() < P_PREDICATE:
            adj = rng.choice(ADJECTIVES)
            return Clause(depth, pred=adj, subj=self.slot(adj.kinds, depth))
        choices = (
            verbs_for(
                head.noun.kind if gap == "subj" else None, head.noun if gap == "obj" else None
            )
            if gap
            else verbs_for("person", None)
        )
        if not choices:
            return None
        verb, frame = rng.choice(choices)
        c = Clause(depth, verb=verb, frame=frame, gap=gap, head=head)
        if gap != "subj":
            c.subj = self.slot(verb.subjects, depth)
        if frame in ("tr", "ditr") and gap != "obj":
            c.obj = self.slot(verb.objects, depth)
        if frame == "ditr":
            c.dat = self.slot(PERSON, depth)
        if frame == "motion":
            c.goal = self.slot(frozenset({"place"}), depth)
        return c

    def register(self, c: Clause) -> None:
        self.all_clauses.append(c)
        self.slots += [s for s in (c.subj, c.obj, c.dat, c.goal, c.loc, c.com) if s is not None]

    def nps(self) -> list[NP]:
        return [np for s in self.slots for np in s.nps]

    def grow(self, op: str):
        """A (length increase, attach) proposal for `op`, or None when it does not apply here."""
        rng = self.rng
        if op == "clause":
            if len(self.clauses) >= MAX_CLAUSES or (c := self.clause(0)) is None:
                return None
            link = rng.choice(("and", "and", "but"))
            return 1 + len(self.render_clause(c, "final")[0]), lambda: self.add_clause(c, link)
        if op == "very":
            targets = [x for x in self.nps() if x.adjs] + [
                c for c in self.all_clauses if c.verb is None
            ]
            target = rng.choice(targets) if targets else None
            return (
                (1, lambda: setattr(target, "very", True)) if target and not target.very else None
            )
        if op in ("adj", "rel"):
            np = rng.choice(self.nps())
            if op == "adj":
                fits = [a for a in ADJECTIVES if np.noun.kind in a.kinds and a not in np.adjs]
                if len(np.adjs) >= 2 or not fits:
                    return None
                adj = rng.choice(fits)
                return 1, lambda: np.adjs.append(adj) or np.adjs.sort(key=lambda a: ADJ_RANK[a.en])
            if np.rel is not None or np.depth >= MAX_DEPTH:
                return None
            gap = "subj" if np.noun.kind in ANIMATE and rng.random() < 0.6 else "obj"
            if (c := self.clause(np.depth + 1, gap, np)) is None:
                return None
            return len(self.render_clause(c, "rel")[0]), lambda: (
                setattr(np, "rel", c),
                self.register(c),
            )
        c = rng.choice(self.all_clauses)
        if op == "coord":
            s = rng.choice(self.slots)
            if len(s.nps) > 1:
                return None
            np = self.np(s.kinds, s.nps[0].depth)
            return 1 + len(self.render_np(np, "object")[0]), lambda: s.nps.append(np)
        if c.verb is None:
            return None
        if op == "loc" and c.loc is None and c.frame != "motion":
            s = self.slot(frozenset({"place"}), c.depth)
            return 1 + len(self.render_np(s.nps[0], "in")[0]), lambda: (
                setattr(c, "loc", s),
                self.slots.append(s),
            )
        if op == "com" and c.com is None:
            s = self.slot(ANIMATE, c.depth)
            return 1 + len(self.render_np(s.nps[0], "and")[0]), lambda: (
                setattr(c, "com", s),
                self.slots.append(s),
            )
        if op == "adv" and c.adv is None:
            adv = rng.choice([a for a in ADVERBS if not a.time])
            return 1, lambda: setattr(c, "adv", adv)
        if op == "time" and c.time is None and c.gap is None:
            tense = "past" if self.past else "present"
            adv = rng.choice([a for a in ADVERBS if a.time and a.tense in ("", tense)])
            return len(adv.en.split()), lambda: setattr(c, "time", adv)
        return None

    def add_clause(self, c: Clause, link: str | None) -> None:
        if link:
            self.links.append(link)
        self.clauses.append(c)
        self.register(c)

    # rendering: both languages at once, so alignment keys match

    def render_np(self, np: NP, role: str, keys: tuple[int, ...] = ()) -> tuple[En, Ko]:
        """English 'det very adjs noun rel' and Korean 'rel very adjs noun+particle'; `keys` join
        the noun eojeol."""
        key = next(self.keys)
        en: En = [(VERY.en, k := next(self.keys))] if np.very else []
        ko: Ko = [(VERY.ko, {k})] if np.very else []
        for i, adj in enumerate(np.adjs):
            k = next(self.keys)
            en.append((adj.en, k))
            ko.append((adj.adnominal if i == len(np.adjs) - 1 else adj.stem + "고", {k}))
        en.append((np.noun.en, key))
        ko.append((particle(np.noun.ko, role), {key, *keys}))
        if np.rel is not None:
            rel_en, rel_ko = self.render_clause(np.rel, "rel")
            en += rel_en
            ko = rel_ko + ko
        if np.det:
            det = "an" if np.det == "a" and en[0][0][0] in "aeiou" else np.det
            en.insert(0, (det, None))
        return en, ko

    def render_slot(self, s: Slot, role: str, prep: str | None = None) -> tuple[En, Ko]:
        """Coordinated NPs: English 'prep np and np', Korean 'np+과/와 np+particle' (prep on
        the last eojeol)."""
        key = next(self.keys) if prep else None
        en: En = [(prep, key)] if prep else []
        ko: Ko = []
        for i, np in enumerate(s.nps):
            last = i == len(s.nps) - 1
            and_key = None if last else next(self.keys)
            np_en, np_ko = self.render_np(
                np, role if last else "and", (key,) if last and key else (and_key,)
            )
            en += np_en + ([("and", and_key)] if not last else [])
            ko += np_ko
        return en, ko

    def render_clause(self, c: Clause, form: str) -> tuple[En, Ko]:
        """English S V O PPs adverbs; Korean S time loc com dat O goal adverb V (form:
        final|and|but|rel)."""
        en: En = []
        ko: Ko = []
        verb_keys: set[int] = set()
        if c.gap:
            verb_keys.add(k := next(self.keys))
            en.append(("who" if c.gap == "subj" and c.head.noun.kind == "person" else "that", k))
        if c.subj is not None:
            s_en, s_ko = self.render_slot(c.subj, "topic" if c.topic else "subject")
            en += s_en
            ko += s_ko
        time_at = len(ko)
        plural = c.subj is not None and len(c.subj.nps) > 1
        verb_keys.add(k := next(self.keys))
        if c.verb is None:
            en.append(
                (("were" if plural else "was") if self.past else ("are" if plural else "is"), k)
            )
            if c.very:
                en.append((VERY.en, kv := next(self.keys)))
                ko.append((VERY.ko, {kv}))
            en.append((c.pred.en, k))
        else:
            base, third, past = c.verb.en
            en.append((past if self.past else base if plural else third, k))
        parts = [
            (c.loc, c.verb.locative if c.verb else "", (c.loc.nps[-1].noun.prep if c.loc else "")),
            (c.com, "and", "with"),
            (c.dat, "dative", "to"),
            (c.obj, "object", None),
            (c.goal, "direction", "to"),
        ]
        after: list[En] = [[] for _ in parts]
        for i, (s, role, prep) in enumerate(parts):
            if s is not None:
                s_en, s_ko = self.render_slot(s, role, prep)
                after[i] = s_en
                ko += s_ko
                if s is c.com:
                    ko.append(("함께", {s_en[0][1]}))
        en += after[3] + after[2] + after[4] + after[1] + after[0]
        if c.adv is not None:
            en.append((c.adv.en, k := next(self.keys)))
            ko.append((c.adv.ko, {k}))
        if c.time is not None:
            k = next(self.keys)
            en += [(w, k) for w in c.time.en.split()]
            ko.insert(time_at, (c.time.ko, {k}))
        ko.append((self.korean_predicate(c, form), verb_keys))
        return en, ko

    def korean_predicate(self, c: Clause, form: str) -> str:
        past = self.past
        if c.verb is None:
            adj = c.pred
            return {
                "final": adj.past if past else adj.present,
                "and": adj.stem + "고",
                "but": (adj.past[:-1] if past else adj.stem) + "지만",
            }[form]
        v = c.verb.ko
        if form == "rel":
            return v.adnominal(past)
        if form == "final":
            return v.past() if past else v.present()
        return v.connective("고") if form == "and" else v.connective("지만", past)

    def render(self) -> dict:
        self.keys = itertools.count()
        en: En = []
        ko: Ko = []
        for i, c in enumerate(self.clauses):
            link = self.links[i] if i < len(self.links) else None
            c_en, c_ko = self.render_clause(c, link or "final")
            en += c_en
            ko += c_ko
            if link:
                k = next(self.keys)
                en.append((link, k))
                ko[-1][1].add(k)
        where: dict[int, list[int]] = {}
        for j, (_, keys) in enumerate(ko):
            for k in keys:
                where.setdefault(k, []).append(j)
        align = [[i, j] for i, (_, k) in enumerate(en) if k is not None for j in where.get(k, ())]
        return {
            "src": " ".join(w for w, _ in en),
            "tgt": " ".join(w for w, _ in ko),
            "align": sorted(align),
        }


def sample_pair(rng: random.Random, min_words: int, max_words: int) -> dict:
    """One {"src", "tgt", "align"} pair with min_words <= len(src.split()) <= max_words."""
    if max_words < 2 or min_words > max_words:
        raise ValueError(
            f"cannot build a sentence of {min_words}-{max_words} words (the shortest has 2)"
        )
    ops, weights = list(OPS), list(OPS.values())
    while True:
        g = Grower(rng, past=rng.random() < P_PAST)
        base = g.clause(0)
        length = len(g.render_clause(base, "final")[0])
        if length > max_words:
            continue
        g.add_clause(base, None)
        target, misses = rng.randint(min_words, max_words), 0
        while length < target and misses < 30:
            proposal = g.grow(rng.choices(ops, weights)[0])
            if proposal is None or length + proposal[0] > max_words:
                misses += 1
                continue
            proposal[1]()
            length += proposal[0]
        if length >= min_words:
            pair = g.render()
            assert len(pair["src"].split()) == length, pair
            return pair


def parse_range(name: str) -> tuple[int, int]:
    """'11-20' -> (11, 20)."""
    try:
        lo, hi = (int(x) for x in name.split("-"))
    except ValueError as err:
        raise ValueError(f"length range {name!r}: expected 'min-max', e.g. '11-20'") from err
    if not 1 <= lo <= hi:
        raise ValueError(f"length range {name!r}: expected 1 <= min <= max")
    return lo, hi


def quotas(n: int, shares: dict) -> dict:
    """Split n into integer counts proportional to shares (largest remainder)."""
    total = sum(shares.values())
    if total <= 0 or any(v < 0 for v in shares.values()):
        raise ValueError(f"length_mix {shares}: shares must be >= 0 and not all 0")
    exact = {k: n * v / total for k, v in shares.items()}
    counts = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: counts[k] - exact[k])[: n - sum(counts.values())]:
        counts[k] += 1
    return counts


def draw(
    rng: random.Random, counts: dict[tuple[int, int], int], seen: set[str] | None = None
) -> list[dict]:
    """`counts[(lo, hi)]` pairs per source-length range; with `seen`, only sources not in it (and
    adds them)."""
    pairs = []
    for (lo, hi), count in counts.items():
        got = tries = 0
        while got < count:
            pair, tries = sample_pair(rng, lo, hi), tries + 1
            if seen is not None:
                if pair["src"] in seen:
                    if tries > 100 * count + 1000:
                        raise ValueError(f"cannot find {count} new sentences of {lo}-{hi} words")
                    continue
                seen.add(pair["src"])
            pairs.append(pair)
            got += 1
    return pairs


def generate(n: int, seed: int, length_mix: dict[str, float]) -> list[dict]:
    """n pairs whose source lengths follow `length_mix` ({"1-10": 0.25, ...}), in shuffled order."""
    rng = random.Random(seed)
    pairs = draw(rng, quotas(n, {parse_range(k): v for k, v in length_mix.items()}))
    rng.shuffle(pairs)
    return pairs


def generated_splits(
    seed: int,
    n_train: int,
    n_valid: int,
    n_test_per_bucket: int,
    length_mix: dict[str, float],
    buckets: list[tuple[int, int]],
) -> dict[str, list[dict]]:
    """Train by `length_mix`, valid likewise and test stratified over `buckets`; valid/test sources
    unseen in train."""
    train = generate(n_train, seed, length_mix)
    seen = {p["src"] for p in train}
    valid_rng, test_rng = random.Random(seed + 1), random.Random(seed + 2)
    valid = draw(
        valid_rng, quotas(n_valid, {parse_range(k): v for k, v in length_mix.items()}), seen
    )
    valid_rng.shuffle(valid)
    for lo, _ in buckets:
        if lo > MAX_WORDS:
            raise ValueError(f"bucket starting at {lo} words: the generator stops at {MAX_WORDS}")
    test = draw(test_rng, {(lo, min(hi, MAX_WORDS)): n_test_per_bucket for lo, hi in buckets}, seen)
    return {"train": train, "valid": valid, "test": test}


def monotone(pair: dict) -> dict:
    """The pair with its target words in the source's order, each moved to its first aligned source
    word (ties keep their order) and the alignment renumbered: a control corpus on which Luong et
    al. 2015's local-m window, centred at p_t = t, can find the words it aligns."""
    words, first = pair["tgt"].split(), {}
    for s, t in pair["align"]:
        first[t] = min(first.get(t, s), s)
    # every word is aligned
    order = sorted(range(len(words)), key=lambda t: (first.get(t, MAX_WORDS), t))
    moved = {old: new for new, old in enumerate(order)}
    return {
        **pair,
        "tgt": " ".join(words[t] for t in order),
        "align": sorted([s, moved[t]] for s, t in pair["align"]),
    }
