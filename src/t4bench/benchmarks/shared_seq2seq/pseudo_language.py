"""The mini translation task's target language: a deterministic function of the English sentence.

Rules (docs/translation.md): a lexical mapping (the Ding dictionary's German word where it has a
single-word entry, else a made-up word), determiners and adjectives that agree with the grammatical
gender of their noun, adjectives after the noun, prepositions after their noun phrase, and the
verb group at the end of its clause (the finite verb last in subordinate clauses).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from t4bench.benchmarks.shared_seq2seq.ding import IRREGULAR_FORMS, LexEntry, detok, tokenize_en
from t4bench.benchmarks.shared_seq2seq.pseudo_words import (
    AGREE,
    ARTICLES,
    AUXILIARIES,
    CLAUSE_END,
    CONTRACTIONS,
    DETERMINERS,
    FUNCTION_WORDS,
    IRREGULAR_NEG,
    PREPOSITIONS,
    PRONOUNS,
    SUBORDINATORS,
)

#: (class, target form, index of the English token)
Unit = tuple[str, str, int]
#: (chunk kind: np | verb | prep | sub | end | other, its units)
Chunk = tuple[str, list[Unit]]
_SUFFIXES = (
    ("ies", "y", "s"),
    ("es", "", "s"),
    ("s", "", "s"),
    ("ied", "y", "ed"),
    ("ed", "e", "ed"),
    ("ed", "", "ed"),
    ("ing", "e", "ing"),
    ("ing", "", "ing"),
)
#: verb endings of inflected English forms whose stem is in the lexicon (plural nouns take "en")
_INFLECT = {"s": "t", "ed": "te", "ing": "end"}


def _made_up_word(word: str) -> str:
    digest = hashlib.sha1(word.encode()).digest()
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = 2 + digest[0] % 2
    return (
        "".join(consonants[digest[1 + 2 * i] % 14] + vowels[digest[2 + 2 * i] % 5] for i in range(syllables))
        + consonants[digest[9] % 14]
    )


@dataclass(frozen=True)
class Word:
    """One English word of the mini vocabulary: its class, its target form, a noun's gender."""

    pos: str  # det | art | pron | sub | aux | verb | noun | adj | adv | func | punct | other
    target: str
    gender: str = "n"


class PseudoLanguage:
    """The fixed rules that turn an English sentence into the mini task's target sentence."""

    def __init__(self, lexicon: dict[str, LexEntry]) -> None:
        self.lexicon = lexicon
        self._cache: dict[str, Word] = {}

    def word(self, token: str) -> Word:
        if token not in self._cache:
            self._cache[token] = self._classify(token)
        return self._cache[token]

    def _classify(self, token: str) -> Word:
        for table, pos in (
            (ARTICLES, "art"),
            (DETERMINERS, "det"),
            (PRONOUNS, "pron"),
            (AUXILIARIES, "aux"),
            (FUNCTION_WORDS, "func"),
        ):
            if token in table:
                return Word(pos, token if pos == "art" else table[token])  # type: ignore[arg-type]
        if token in SUBORDINATORS:
            return Word("sub", SUBORDINATORS[token])
        if not token[0].isalpha():
            return Word("punct" if not token[0].isdigit() else "other", token)
        entry = self.lexicon.get(token)
        if entry is not None:
            return self._from_entry(entry)
        lemma = IRREGULAR_FORMS.get(token)
        if lemma in self.lexicon:
            return Word("verb", self.lexicon[lemma].german + "te")
        for ending, replacement, kind in _SUFFIXES:
            stem = token[: -len(ending)] + replacement
            if token.endswith(ending) and len(stem) > 2 and stem in self.lexicon:
                base = self._from_entry(self.lexicon[stem])
                if kind == "s" and base.pos == "noun":
                    return Word("noun", base.target + "en", "pl")
                return Word("verb", base.target + _INFLECT[kind])
        return Word("other", _made_up_word(token))

    @staticmethod
    def _from_entry(entry: LexEntry) -> Word:
        if entry.tag in AGREE:
            return Word("noun", entry.german, entry.tag)
        return Word(entry.tag, entry.german)

    @staticmethod
    def expand(tokens: Sequence[str]) -> list[str]:
        """Undo English contractions: "isn't" -> is not, "I'm" -> i am, "can't" -> can not."""
        out: list[str] = []
        for token in tokens:
            if token in IRREGULAR_NEG:
                out.extend(IRREGULAR_NEG[token])
                continue
            for ending, expansion in CONTRACTIONS.items():
                if token.endswith(ending) and len(token) > len(ending):
                    out.extend([token[: -len(ending)], *expansion])
                    break
            else:
                out.append(token)
        return out

    def translate(self, sentence: str) -> str:
        return detok(self.translate_tokens(self.expand(tokenize_en(sentence))))

    def translate_tokens(self, tokens: Sequence[str]) -> list[str]:
        return [form for _, form, _ in self.aligned(tokens)]

    def aligned(self, tokens: Sequence[str]) -> list[Unit]:
        """(class, target form, index of the English token) in target order."""
        chunks = self._chunks(tokens)
        chunks = self._postpositions(chunks)
        out: list[Unit] = []
        for clause, subordinate in self._clauses(chunks):
            out.extend(self._verb_final(clause, subordinate))
        return out

    def _chunks(self, tokens: Sequence[str]) -> list[tuple[str, list[Unit]]]:
        """Noun phrases (rendered: agreement, adjectives after the noun), verb groups, the rest."""
        words = [self.word(t) for t in tokens]
        chunks: list[tuple[str, list[Unit]]] = []
        i = 0
        while i < len(tokens):
            word = words[i]
            that_det = tokens[i] == "that" and self._starts_np(words, i + 1)
            if tokens[i] == "that" and not that_det:
                # "that" before a clause, not a noun phrase, opens a subordinate clause ("dass")
                word = Word("sub", SUBORDINATORS["that"])
            if word.pos in ("art", "det", "adj") or that_det:
                end, head = self._noun_phrase(words, i)
                if head is not None:
                    chunks.append(("np", self._render_np(tokens, words, i, end, head)))
                    i = end
                    continue
            if word.pos == "noun":
                end, head = self._noun_phrase(words, i)
                assert head is not None  # a phrase that starts at a noun always has a head
                chunks.append(("np", self._render_np(tokens, words, i, end, head)))
                i = end
                continue
            if word.pos in ("aux", "verb") or (tokens[i] == "not" and chunks and chunks[-1][0] == "verb"):
                if chunks and chunks[-1][0] == "verb":
                    chunks[-1][1].append((word.pos, word.target, i))
                else:
                    chunks.append(("verb", [(word.pos, word.target, i)]))
                i += 1
                continue
            if word.pos == "art":
                unit = ("art", ARTICLES[tokens[i]]["n"], i)
            elif word.pos == "det" or that_det:
                unit = ("det", DETERMINERS[tokens[i]], i)
            else:
                unit = (word.pos, word.target, i)
            kind = {"pron": "np", "sub": "sub", "punct": "end"}.get(word.pos, "other")
            if tokens[i] in PREPOSITIONS:
                kind = "prep"
            elif tokens[i] in CLAUSE_END:
                kind = "end"
            chunks.append((kind, [unit]))
            i += 1
        return chunks

    @staticmethod
    def _starts_np(words: Sequence[Word], i: int) -> bool:
        return i < len(words) and words[i].pos in ("adj", "noun", "adv")

    @staticmethod
    def _noun_phrase(words: Sequence[Word], start: int) -> tuple[int, int | None]:
        """(end, index of the head noun) of [det] (adv|adj)* noun+ starting at `start`."""
        i = start + 1 if words[start].pos not in ("adj", "noun") else start
        while i < len(words) and words[i].pos in ("adv", "adj"):
            i += 1
        if i >= len(words) or words[i].pos != "noun":
            return start, None
        while i + 1 < len(words) and words[i + 1].pos == "noun":
            i += 1
        return i + 1, i

    @staticmethod
    def _render_np(tokens: Sequence[str], words: Sequence[Word], start: int, end: int, head: int) -> list[Unit]:
        gender = words[head].gender
        out: list[Unit] = []
        first = start
        if words[start].pos == "art":
            out.append(("art", ARTICLES[tokens[start]][gender], start))
            first += 1
        elif words[start].pos in ("det", "sub"):
            out.append(("det", DETERMINERS[tokens[start]] + AGREE[gender], start))
            first += 1
        span = list(enumerate(words[first:end], first))
        nouns = [(w.pos, w.target, j) for j, w in span if w.pos == "noun"]
        modifiers = [
            (w.pos, w.target + AGREE[gender] if w.pos == "adj" else w.target, j) for j, w in span if w.pos != "noun"
        ]
        return out + nouns + modifiers

    @staticmethod
    def _postpositions(chunks: list[tuple[str, list[Unit]]]) -> list[tuple[str, list[Unit]]]:
        """A preposition follows its noun phrase: "in the house" -> "das haus in"."""
        out = list(chunks)
        i = 0
        while i + 1 < len(out):
            if out[i][0] == "prep" and out[i + 1][0] == "np":
                out[i], out[i + 1] = out[i + 1], ("np", out[i][1])
                i += 2
            else:
                i += 1
        return out

    @staticmethod
    def _clauses(chunks: list[Chunk]) -> Iterator[tuple[list[Chunk], bool]]:
        """Split at punctuation and conjunctions; a clause opened by a subordinator is marked."""
        clause: list[tuple[str, list[Unit]]] = []
        subordinate = False
        for kind, units in chunks:
            if kind in ("end", "sub"):
                if clause:
                    yield clause, subordinate
                clause = []
                if kind == "end":
                    yield [(kind, units)], False
                    subordinate = False
                    continue
                subordinate = True
            clause.append((kind, units))
        if clause:
            yield clause, subordinate

    @staticmethod
    def _verb_final(clause: list[Chunk], subordinate: bool) -> list[Unit]:
        """The clause's first verb group moves to its end (subject-object-verb order); in a
        subordinate clause its first (finite) verb also goes last within the group."""
        verbs = [j for j, (kind, _) in enumerate(clause) if kind == "verb"]
        if verbs:
            group = list(clause[verbs[0]][1])
            if subordinate and len(group) > 1:
                group = group[1:] + group[:1]
            rest = clause[: verbs[0]] + clause[verbs[0] + 1 :]
            clause = [*rest, ("verb", group)]
        return [unit for _, units in clause for unit in units]
