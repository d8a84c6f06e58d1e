"""Setup for the translation benchmarks (GNMT, Transformer): the Ding pairs and the mini task.

`prepare(data_root)` writes, under `data_root/translation/`:

- `ding/`: the German-English example sentence pairs of the Ding dictionary (Debian package
  `trans-de-en`, /usr/share/trans/de-en) with at most 12 English words, English -> German, split
  into a fixed held-out test set (chosen by a hash of the English sentence, so it does not depend
  on file order) and a training set; `spm.model` is a joint sentencepiece model trained on the
  training split.
- `mini/`: the CPU-minutes task. The *source* side is the real English sentences of those pairs,
  restricted to sentences whose words all lie in a frequent vocabulary. The *target* side is a
  pseudo-language generated from the English by the fixed rules of `PseudoLanguage` (a
  deterministic function of the English sentence; see docs/translation.md): a lexical mapping
  (the Ding dictionary's German word where it has a single-word entry, else a made-up word),
  determiners and adjectives that agree with the grammatical gender of their noun, adjectives after
  the noun, and the finite verb moved to the end of subordinate clauses.

Each directory holds `train.src`, `train.tgt`, `test.src`, `test.tgt` (one sentence a line),
`spm.model` and `manifest.json` (counts, baselines, a version key). Setup is idempotent: a
directory whose manifest carries the current version key is left alone.

`python -m t4bench.data.translation [DATA_ROOT]` runs it and prints the baselines.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DING_PATH = Path(os.environ.get("T4BENCH_DING_PATH", "/usr/share/trans/de-en"))
#: bump when anything below changes what is written
VERSION = "4"
MAX_EN_WORDS = 12
TEST_SIZE = {"ding": 1000, "mini": 500}
MINI_VOCAB = 600
SPM_VOCAB = {"ding": 6000, "mini": 1000}
TARGET_FILES = ("train.src", "train.tgt", "test.src", "test.tgt", "spm.model", "manifest.json")

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
            for part_index, (de, en) in enumerate(zip(de_parts, en_parts)):
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
            if not _WORD.match(en_word) or en_word != en_word.lower() and tag != "m":
                continue
            entry = LexEntry(word.lower(), tag, (rank[0] + de_index + en_index, en_index, rank[2]))
            key = en_word.lower()
            if key not in lexicon or entry.rank < lexicon[key].rank:
                lexicon[key] = entry


def split_test(items: Sequence[tuple[str, str]], test_size: int) -> tuple[list, list]:
    """A fixed held-out split: the `test_size` pairs with the smallest hash of the source side."""

    def key(pair: tuple[str, str]) -> str:
        return hashlib.sha1(pair[0].encode()).hexdigest()

    ordered = sorted(items, key=key)
    return ordered[test_size:], ordered[:test_size]


def tokenize_en(text: str) -> list[str]:
    return _TOKEN.findall(normalize_en(text).lower())


def detok(tokens: Iterable[str]) -> str:
    return re.sub(r" ([.,!?;:])", r"\1", " ".join(tokens))


# ---------------------------------------------------------------------------------------------
# the mini pseudo-language

ARTICLES = {"the": {"m": "der", "f": "die", "n": "das", "pl": "die"},
            "a": {"m": "ein", "f": "eine", "n": "ein", "pl": "einige"}}
ARTICLES["an"] = ARTICLES["a"]
#: agreement suffix of non-article determiners and attributive adjectives, by the noun's gender
AGREE = {"m": "er", "f": "e", "n": "es", "pl": "en"}
DETERMINERS = {
    "this": "dies", "that": "jen", "these": "dies", "those": "jen", "my": "mein", "your": "dein",
    "his": "sein", "her": "ihr", "its": "sein", "our": "unser", "their": "ihr", "some": "manch",
    "any": "irgendein", "no": "kein", "every": "jed", "each": "jed", "another": "ander",
    "which": "welch", "what": "welch", "all": "all",
}
PRONOUNS = {
    "i": "ich", "you": "du", "he": "er", "she": "sie", "it": "es", "we": "wir", "they": "sie",
    "me": "mich", "him": "ihn", "us": "uns", "them": "sie", "myself": "mich", "there": "da",
    "himself": "sich", "herself": "sich", "itself": "sich", "yourself": "dich",
    "themselves": "sich", "who": "wer", "something": "etwas", "nothing": "nichts",
    "everything": "alles", "anything": "irgendwas", "someone": "jemand", "everyone": "jeder",
}
SUBORDINATORS = {
    "because": "weil", "if": "wenn", "when": "als", "although": "obwohl", "while": "während",
    "before": "bevor", "after": "nachdem", "since": "seit", "until": "bis", "unless": "außer",
    "whether": "ob", "though": "obgleich", "that": "dass",
}
AUXILIARIES = {
    "am": "bin", "is": "ist", "are": "sind", "was": "war", "were": "waren", "be": "sein",
    "been": "gewesen", "being": "seiend", "have": "haben", "has": "hat", "had": "hatte",
    "do": "tun", "does": "tut", "did": "tat", "can": "kann", "could": "könnte", "will": "wird",
    "would": "würde", "shall": "soll", "should": "sollte", "may": "mag", "might": "möchte",
    "must": "muss", "not": "nicht",
}
FUNCTION_WORDS = {
    "and": "und", "but": "aber", "or": "oder", "to": "zu", "of": "von", "in": "in", "on": "auf",
    "at": "an", "for": "für", "with": "mit", "from": "aus", "by": "durch", "about": "über",
    "as": "wie", "than": "als", "so": "so", "very": "sehr", "too": "zu", "up": "hoch",
    "out": "aus", "into": "hinein", "over": "über", "off": "ab", "down": "runter", "how": "wie",
    "why": "warum", "where": "wo", "here": "hier", "now": "jetzt", "then": "dann", "just": "nur",
    "only": "nur", "also": "auch", "still": "noch", "yet": "schon", "again": "wieder",
    "always": "immer", "never": "nie", "ever": "je", "like": "wie", "more": "mehr",
    "most": "meist", "much": "viel", "many": "viele", "well": "gut", "even": "sogar",
}
#: the hand-written function-word table (articles in their neuter form)
CLOSED_CLASS = {**FUNCTION_WORDS, **SUBORDINATORS, **AUXILIARIES, **DETERMINERS, **PRONOUNS,
                **{article: forms["n"] for article, forms in ARTICLES.items()}}
CONTRACTIONS = {"n't": ["not"], "'m": ["am"], "'re": ["are"], "'ll": ["will"], "'ve": ["have"],
                "'d": ["would"], "'s": ["is"]}
IRREGULAR_NEG = {"can't": ["can", "not"], "won't": ["will", "not"], "cannot": ["can", "not"],
                 "shan't": ["shall", "not"], "let's": ["let", "us"]}
CLAUSE_END = {",", ".", "!", "?", ";", ":", "and", "but", "or"}
PREPOSITIONS = {"to", "of", "in", "on", "at", "for", "with", "from", "by", "about", "into", "over",
                "without", "against", "during", "upon", "towards", "through", "under", "after"}
#: (class, target form, index of the English token)
Unit = tuple[str, str, int]
_SUFFIXES = (("ies", "y", "s"), ("es", "", "s"), ("s", "", "s"), ("ied", "y", "ed"),
             ("ed", "e", "ed"), ("ed", "", "ed"), ("ing", "e", "ing"), ("ing", "", "ing"))
#: verb endings of inflected English forms whose stem is in the lexicon (plural nouns take "en")
_INFLECT = {"s": "t", "ed": "te", "ing": "end"}


def _made_up_word(word: str) -> str:
    digest = hashlib.sha1(word.encode()).digest()
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = 2 + digest[0] % 2
    return "".join(consonants[digest[1 + 2 * i] % 14] + vowels[digest[2 + 2 * i] % 5]
                   for i in range(syllables)) + consonants[digest[9] % 14]


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
        for table, pos in ((ARTICLES, "art"), (DETERMINERS, "det"), (PRONOUNS, "pron"),
                           (AUXILIARIES, "aux"), (FUNCTION_WORDS, "func")):
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
                chunks.append(("np", self._render_np(tokens, words, i, end, head)))
                i = end
                continue
            if word.pos in ("aux", "verb") or (tokens[i] == "not" and chunks
                                                and chunks[-1][0] == "verb"):
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
    def _render_np(tokens, words, start, end, head) -> list[Unit]:
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
        modifiers = [(w.pos, w.target + AGREE[gender] if w.pos == "adj" else w.target, j)
                     for j, w in span if w.pos != "noun"]
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
    def _clauses(chunks):
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
    def _verb_final(clause, subordinate: bool) -> list[Unit]:
        """The clause's first verb group moves to its end (subject-object-verb order); in a
        subordinate clause its first (finite) verb also goes last within the group."""
        verbs = [j for j, (kind, _) in enumerate(clause) if kind == "verb"]
        if verbs:
            group = list(clause[verbs[0]][1])
            if subordinate and len(group) > 1:
                group = group[1:] + group[:1]
            rest = clause[: verbs[0]] + clause[verbs[0] + 1 :]
            clause = rest + [("verb", group)]
        return [unit for _, units in clause for unit in units]
# ---------------------------------------------------------------------------------------------
# baselines and setup


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """SacreBLEU (13a tokenization, exp smoothing) of detokenized hypotheses, 0-100: the metric of
    the baselines here and of the models (`t4bench.translation.corpus_bleu`)."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def word_by_word_ding(sentence: str, lexicon: dict[str, LexEntry]) -> str:
    """Each English word replaced by the Ding lexicon's German word (kept when it has none)."""
    out = []
    for token in tokenize_en(sentence):
        entry = lexicon.get(token)
        word = CLOSED_CLASS.get(token) or (entry.german if entry else token)
        out.append(word.capitalize() if entry and entry.tag in AGREE else word)
    text = detok(out)
    return text[:1].upper() + text[1:]


def word_by_word_table(pairs: Sequence[tuple[str, str]], lang: PseudoLanguage) -> dict[str, str]:
    """The best context-free word-by-word lookup for the mini task: each English word's most
    frequent target form in the training pairs (the target forms are aligned through the rules)."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for src, _ in pairs:
        tokens = lang.expand(tokenize_en(src))
        for _, form, position in lang.aligned(tokens):
            counts[tokens[position]][form] += 1
    return {token: counter.most_common(1)[0][0] for token, counter in counts.items()}


def _word_by_word_mini(sentence: str, table: dict[str, str], lang: PseudoLanguage) -> str:
    tokens = lang.expand(tokenize_en(sentence))
    return detok(table.get(t, lang.word(t).target) for t in tokens)


def _write(directory: Path, name: str, lines: Iterable[str]) -> None:
    (directory / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def train_sentencepiece(directory: Path, sentences: Iterable[str], vocab_size: int) -> None:
    import sentencepiece as spm

    # written through model_writer so the file does not record the output path: the same
    # bytes wherever the data root is
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences)),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        hard_vocab_limit=False,
        num_threads=2,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    (directory / "spm.model").write_bytes(model.getvalue())


def _version_key(kind: str) -> str:
    stat = DING_PATH.stat()
    return f"{VERSION}:{kind}:{stat.st_size}:{SPM_VOCAB[kind]}:{MINI_VOCAB}:{TEST_SIZE[kind]}"


def _is_current(directory: Path, kind: str) -> bool:
    manifest = directory / "manifest.json"
    if not all((directory / name).exists() for name in TARGET_FILES):
        return False
    return json.loads(manifest.read_text()).get("version") == _version_key(kind)


def _finish(directory: Path, kind: str, train, test, baselines: dict[str, float], extra) -> None:
    _write(directory, "train.src", (s for s, _ in train))
    _write(directory, "train.tgt", (t for _, t in train))
    _write(directory, "test.src", (s for s, _ in test))
    _write(directory, "test.tgt", (t for _, t in test))
    train_sentencepiece(directory, [s for s, _ in train] + [t for _, t in train], SPM_VOCAB[kind])
    manifest = {"version": _version_key(kind), "train": len(train), "test": len(test),
                "baselines_bleu": baselines, **extra}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _form(token: str) -> str:
    return next((ending for ending in ("ing", "ed", "s") if token.endswith(ending)), "")


def mini_pairs(ding_en: Sequence[str], lexicon: dict[str, LexEntry]) -> tuple[list, list[str]]:
    """(English, pseudo-language) pairs whose English uses only the `MINI_VOCAB` most frequent
    tokens: every rarer word is replaced by a frequent word of the same class (word class, noun
    gender, ending -ing/-ed/-s), the same replacement wherever it occurs (chosen by a hash)."""
    lang = PseudoLanguage(lexicon)
    sentences = [tokenize_en(s) for s in ding_en]
    counts = collections.Counter(t for tokens in sentences for t in tokens)
    vocab = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MINI_VOCAB]]

    def key(token: str) -> tuple[str, str, str]:
        word = lang.word(token)
        return word.pos, word.gender if word.pos == "noun" else "", _form(token)

    by_class: dict[tuple[str, str, str], list[str]] = collections.defaultdict(list)
    for token in vocab:
        if "'" not in token:  # contractions stand for two words: never a replacement
            by_class[key(token)].append(token)
    frequent = set(vocab)

    def substitute(token: str) -> str | None:
        if token in frequent:
            return token
        candidates = by_class.get(key(token))
        if not candidates:
            return None
        return candidates[int(hashlib.sha1(token.encode()).hexdigest(), 16) % len(candidates)]

    pairs: dict[str, str] = {}
    for tokens in sentences:
        replaced = [substitute(t) for t in tokens]
        if None in replaced:
            continue
        text = detok(replaced)  # type: ignore[arg-type]
        text = text[:1].upper() + text[1:]
        pairs[text] = lang.translate(text)
    return sorted(pairs.items()), vocab


def prepare(data_root: Path) -> None:
    """Write data_root/translation/{ding,mini}; a no-op for directories that are up to date."""
    from t4bench.errors import DatasetMissingError

    root = Path(data_root) / "translation"
    ding_dir, mini_dir = root / "ding", root / "mini"
    if _is_current(ding_dir, "ding") and _is_current(mini_dir, "mini"):
        return
    if not DING_PATH.exists():
        raise DatasetMissingError(
            f"{DING_PATH} not found: install the Debian package trans-de-en "
            "(apt-get install trans-de-en) or set T4BENCH_DING_PATH to the Ding de-en file"
        )
    de_en, lexicon = read_ding(DING_PATH)
    en_de = [(en, de) for de, en in de_en if len(en.split()) <= MAX_EN_WORDS]
    if not _is_current(ding_dir, "ding"):
        ding_dir.mkdir(parents=True, exist_ok=True)
        train, test = split_test(en_de, TEST_SIZE["ding"])
        baselines = {
            "copy": bleu([s for s, _ in test], [t for _, t in test]),
            "word_by_word": bleu([word_by_word_ding(s, lexicon) for s, _ in test],
                                 [t for _, t in test]),
        }
        _finish(ding_dir, "ding", train, test, baselines, {"source": str(DING_PATH)})
    if not _is_current(mini_dir, "mini"):
        mini_dir.mkdir(parents=True, exist_ok=True)
        pairs, vocab = mini_pairs(sorted({en for en, _ in en_de}), lexicon)
        train, test = split_test(pairs, TEST_SIZE["mini"])
        lang = PseudoLanguage(lexicon)
        table = word_by_word_table(train, lang)
        baselines = {
            "copy": bleu([s for s, _ in test], [t for _, t in test]),
            "word_by_word": bleu([_word_by_word_mini(s, table, lang) for s, _ in test],
                                 [t for _, t in test]),
        }
        _finish(mini_dir, "mini", train, test, baselines,
                {"source": str(DING_PATH), "english_vocab": len(vocab)})


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    data_root = Path(args[0] if args else os.environ.get("T4BENCH_DATA_DIR", "data"))
    prepare(data_root)
    for kind in ("mini", "ding"):
        manifest = json.loads((data_root / "translation" / kind / "manifest.json").read_text())
        print(kind, {k: manifest[k] for k in ("train", "test", "baselines_bleu")})


if __name__ == "__main__":
    main()
