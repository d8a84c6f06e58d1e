"""The Ding German-English dictionary (Debian package `trans-de-en`): its example sentence pairs,
a single-word English -> German lexicon, and the English tokenization both translation sets use.

`read_ding()` also fills `IRREGULAR_FORMS` (past forms of irregular English verbs) from the
dictionary's verb entries, for the pseudo-language's inflection rules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DING_PATH = Path(os.environ.get("T4BENCH_DING_PATH", "/usr/share/trans/de-en"))

_ANNOTATION = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\]|<[^>]*>|\([^)]*\))")
_SENT_START = re.compile(r"^[A-ZÄÖÜ\"'‘“„]")
_SENT_END = re.compile(r"[.!?]$")
_REJECT = re.compile(r"[/()\[\]{}<>…;~]|\.\.\.")
_WORD = re.compile(r"^[a-zäöüß]+(?:[-'][a-zäöüß]+)*$", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")
_POS_TAGS = {
    "{m}": "m",
    "{f}": "f",
    "{n}": "n",
    "{pl}": "pl",
    "{adj}": "adj",
    "{adv}": "adv",
    "{v}": "verb",
    "{vt}": "verb",
    "{vi}": "verb",
    "{vr}": "verb",
}


#: past forms of irregular English verbs ("went" -> "go"), filled from the Ding verb entries
IRREGULAR_FORMS: dict[str, str] = {}


def _first_sentence(part: str) -> str:
    """'A.; B.' (alternative renderings) -> 'A.'"""
    return re.split(r"(?<=[.!?]);\s+", part.strip())[0]


def _is_sentence(text: str) -> bool:
    return bool(_SENT_START.match(text) and _SENT_END.search(text) and not _REJECT.search(text))


def normalize_en(text: str) -> str:
    return text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')


@dataclass(frozen=True)
class LexEntry:
    german: str
    #: m | f | n | pl | adj | adv | verb
    tag: str
    rank: tuple[int, int, int]


def read_ding(path: Path = DING_PATH) -> tuple[list[tuple[str, str]], dict[str, LexEntry]]:
    """(German, English) example sentence pairs and a single-word English -> German lexicon."""
    pairs: dict[tuple[str, str], None] = {}
    lexicon: dict[str, LexEntry] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if line.startswith("#") or " :: " not in line:
                continue
            german, english = line.rstrip("\n").split(" :: ", 1)
            de_parts, en_parts = german.split(" | "), english.split(" | ")
            if len(de_parts) != len(en_parts):
                continue
            for part_index, (de, en) in enumerate(zip(de_parts, en_parts, strict=True)):
                de, en = _first_sentence(de), _first_sentence(en)
                if _is_sentence(de) and _is_sentence(en):
                    pairs[(de, normalize_en(en))] = None
                    continue
                _add_lexicon(lexicon, de, en, (part_index, 0, number))
    return list(pairs), lexicon


def _add_lexicon(lexicon: dict[str, LexEntry], de: str, en: str, rank: tuple[int, int, int]) -> None:
    de_alts = [a.strip() for a in de.split(";")]
    irregular = re.match(r"^to ([a-z]+) \{([a-z]+); ([a-z]+)\}", en)
    if irregular:
        for form in irregular.groups()[1:]:
            IRREGULAR_FORMS.setdefault(form, irregular.group(1))
    en_alts = [a.strip() for a in _ANNOTATION.sub("", en).split(";")]
    for de_index, de_alt in enumerate(de_alts):
        tags = re.findall(r"\{[^}]*\}", de_alt)
        tag = _POS_TAGS.get(tags[0]) if tags else None
        word = _ANNOTATION.sub("", de_alt).strip()
        if tag is None or not _WORD.match(word):
            continue
        for en_index, en_alt in enumerate(en_alts):
            en_word = _ANNOTATION.sub("", normalize_en(en_alt)).strip()
            if tag == "verb":
                if not en_word.startswith("to "):
                    continue
                en_word = en_word[3:]
            if not _WORD.match(en_word) or (en_word != en_word.lower() and tag != "m"):
                continue
            entry = LexEntry(word.lower(), tag, (rank[0] + de_index + en_index, en_index, rank[2]))
            key = en_word.lower()
            if key not in lexicon or entry.rank < lexicon[key].rank:
                lexicon[key] = entry


def tokenize_en(text: str) -> list[str]:
    return _TOKEN.findall(normalize_en(text).lower())


def detok(tokens: Iterable[str]) -> str:
    return re.sub(r" ([.,!?;:])", r"\1", " ".join(tokens))
