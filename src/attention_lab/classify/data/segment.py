"""English prose split into sentences and words (Penn Treebank style), for documents read from
a user's corpus and for the texts the classify service receives.

A commented regex splitter, not a library: syntok (the best fit) took 4 s on the BBC corpus and
splits "Mr." in two, pysbd about 20 s, and NLTK's punkt needs a model download; this one reads BBC
in about 1 s.
"""

from __future__ import annotations

import re

# Abbreviations whose period never ends a sentence (they precede a name or a clause) and stay one
# word. Company suffixes (Inc., Ltd., Co.) and "etc." are left out on purpose: they often do end a
# sentence.
ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "mx",
        "dr",
        "prof",
        "st",
        "mt",
        "rev",
        "hon",
        "gen",
        "gov",
        "sen",
        "rep",
        "col",
        "lt",
        "capt",
        "sgt",
        "cpl",
        "maj",
        "adm",
        "supt",
        "insp",
        "det",
        "jr",
        "sr",
        "vs",
        "approx",
        "dept",
        "univ",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)
# only before a number
NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "vol", "p", "pp", "fig", "art", "ch"})

# A sentence may end at . ! ? (or a run of them, "..."), plus closing quotes/brackets, followed by
# whitespace and an uppercase letter, a digit, a currency sign or an opening quote/bracket. A
# lowercase next word never starts a sentence ("Acme Inc. said"). The candidate is vetoed when the
# word before a single "." is an abbreviation (Mr.), an initial (J. K. Rowling) or a dotted acronym
# (U.S., e.g.).
BOUNDARY = re.compile(r"""([.!?]+)["'”’)\]]*\s+(?=["'“‘(\[]*[A-Z0-9£$€])""")
# "J", "U.S", "e.g": the word before the final period
INITIAL = re.compile(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]")

WORD = re.compile(
    r"(?:https?://|www\.)\S+[^\s.,;:!?)\]\"']"  # URLs
    # e-mail addresses (possessive ++: no backtracking on every plain word)
    r"|[\w.+-]++@\w+(?:\.\w+)+"
    r"|(?:[A-Za-z]\.){2,}"  # dotted acronyms and abbreviations: U.S., e.g., a.m.
    r"|[A-Z]\.(?=\s+[A-Z])"  # initials: J. K. Rowling
    # numbers: 1.13bn, 464,000, 10:30, 3/4, 1990s (the $ and % are words)
    r"|\d+(?:[.,:/]\d+)*[^\W\d_]*"
    # words (high-speed, O'Brien) with a period before the next word
    r"|\w+(?:[-'’]\w+)*(?:\.(?=\s+\w))?"
    r"|([^\w\s])\1*"  # any other mark; a run of the same mark stays together: "...", "--"
)
# AOL's → AOL 's, don't → do n't (PTB)
CLITIC = re.compile(r"(?i)^(\w.*?)(n['’]t|['’](?:s|re|ve|ll|d|m))$")


def split_sentences(text: str) -> list[str]:
    """Sentences of English prose; every line break (so every paragraph) ends a sentence too."""
    sentences = []
    for line in text.splitlines():
        start = 0
        for m in BOUNDARY.finditer(line):
            before = line[start : m.start()].rsplit(maxsplit=1)
            if (
                m.group(1) == "."
                and before
                and _keeps_period(before[-1].lstrip("\"'“‘(["), line[m.end() :])
            ):
                continue
            sentences.append(line[start : m.end()].strip())
            start = m.end()
        sentences.append(line[start:].strip())
    return [s for s in sentences if s]


def split_words(sentence: str) -> list[str]:
    """Words of a sentence with punctuation split off ("profit," → "profit", ","); case is kept."""
    words = []
    for m in WORD.finditer(sentence):
        word = m.group()
        if word[-1] == "." and word[0] != "." and not _keeps_period(word[:-1], sentence[m.end() :]):
            # "Inc. said": a period that is not an abbreviation's is a word of its own
            words += [word[:-1], "."]
        elif ("'" in word or "’" in word) and (clitic := CLITIC.match(word)):
            words += clitic.groups()
        else:
            words.append(word)
    return words


def _keeps_period(stem: str, after: str) -> bool:
    """Whether `stem` + "." is one word: an abbreviation (Mr.), an acronym (U.S.) or No. before a
    number."""
    lower = stem.lower()
    return (
        bool(INITIAL.fullmatch(stem))
        or lower in ABBREVIATIONS
        or (lower in NUMBER_ABBREVIATIONS and after.lstrip()[:1].isdigit())
    )
