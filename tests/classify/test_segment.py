"""Sentence and word splitting of real prose (Penn Treebank style)."""

import pytest

from attention_lab.classify.data.segment import split_sentences, split_words


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Mr. Smith paid $1.13bn to the U.S. firm. It rose 3.5% on Monday.",
            ["Mr. Smith paid $1.13bn to the U.S. firm.", "It rose 3.5% on Monday."],
        ),
        (
            'Some firms, e.g. Google, grew. He said: "It\'s done." Then he left... Why? No!',
            [
                "Some firms, e.g. Google, grew.",
                'He said: "It\'s done."',
                "Then he left...",
                "Why?",
                "No!",
            ],
        ),
        (
            (
                "J. K. Rowling lives at No. 10 Downing St. in London. Acme Inc. said so. Acme Inc."
                " The end."
            ),
            [
                "J. K. Rowling lives at No. 10 Downing St. in London.",
                "Acme Inc. said so.",
                "Acme Inc.",
                "The end.",
            ],
        ),
        (
            "Headline without a full stop\n\nFirst paragraph.\nSecond line. 2005 was better.",
            [
                "Headline without a full stop",
                "First paragraph.",
                "Second line.",
                "2005 was better.",
            ],
        ),
    ],
)
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


@pytest.mark.parametrize(
    ("sentence", "words"),
    [
        (
            "Profits at US media giant TimeWarner jumped 76% to $1.13bn (£600m).",
            [
                "Profits",
                "at",
                "US",
                "media",
                "giant",
                "TimeWarner",
                "jumped",
                "76",
                "%",
                "to",
                "$",
                "1.13bn",
                "(",
                "£",
                "600m",
                ")",
                ".",
            ],
        ),
        (
            "Mr. O'Brien's high-speed firm, AOL, lost 464,000 users; it doesn't say why.",
            [
                "Mr.",
                "O'Brien",
                "'s",
                "high-speed",
                "firm",
                ",",
                "AOL",
                ",",
                "lost",
                "464,000",
                "users",
                ";",
                "it",
                "does",
                "n't",
                "say",
                "why",
                ".",
            ],
        ),
        (
            "The U.S. deal, e.g. at 10:30 - wait... see www.bbc.co.uk/news or ask a@b.com.",
            [
                "The",
                "U.S.",
                "deal",
                ",",
                "e.g.",
                "at",
                "10:30",
                "-",
                "wait",
                "...",
                "see",
                "www.bbc.co.uk/news",
                "or",
                "ask",
                "a@b.com",
                ".",
            ],
        ),
        ("Acme Inc. said no.", ["Acme", "Inc", ".", "said", "no", "."]),
    ],
)
def test_split_words(sentence, words):
    assert split_words(sentence) == words
