"""Setup for the translation benchmarks (GNMT, Transformer): the Ding pairs and the mini task.

`prepare(data_root)` writes, under `data_root/translation/`:

- `ding/`: the German-English example sentence pairs of the Ding dictionary (Debian package
  `trans-de-en`, /usr/share/trans/de-en) with at most 12 English words, English -> German, split
  into a fixed held-out test set (chosen by a hash of the English sentence, so it does not depend
  on file order) and a training set; `spm.model` is a joint sentencepiece model trained on the
  training split.
- `mini/`: the CPU-minutes task. The *source* side is the real English sentences of those pairs,
  restricted to sentences whose words all lie in a frequent vocabulary. The *target* side is a
  pseudo-language generated from the English by the fixed rules of
  `t4bench.benchmarks.shared_seq2seq.pseudo_language.PseudoLanguage` (a deterministic function of the English sentence;
  see docs/translation.md): a lexical mapping (the Ding dictionary's German word where it has a
  single-word entry, else a made-up word), determiners and adjectives that agree with the
  grammatical gender of their noun, adjectives after the noun, and the finite verb moved to the end
  of subordinate clauses.

Each directory holds `train.src`, `train.tgt`, `test.src`, `test.tgt` (one sentence a line),
`spm.model` and `manifest.json` (counts, baselines, a version key). Setup is idempotent: a
directory whose manifest carries the current version key is left alone.

`python -m t4bench.benchmarks.shared_seq2seq.translation [DATA_ROOT]` runs it and prints the baselines. The Ding file
is read by `t4bench.benchmarks.shared_seq2seq.ding`; the model-side pieces (tokenizer, batches, loss, decoding) are
`t4bench.benchmarks.shared_seq2seq.parts`.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from t4bench.benchmarks.shared_seq2seq import ding
from t4bench.benchmarks.shared_seq2seq.ding import LexEntry, detok, read_ding, tokenize_en
from t4bench.benchmarks.shared_seq2seq.pseudo_language import PseudoLanguage
from t4bench.benchmarks.shared_seq2seq.pseudo_words import AGREE, CLOSED_CLASS

#: (source, target) sentence pairs
Pairs = list[tuple[str, str]]

#: bump when anything below changes what is written
VERSION = "4"
MAX_EN_WORDS = 12
TEST_SIZE = {"ding": 1000, "mini": 500}
MINI_VOCAB = 600
SPM_VOCAB = {"ding": 6000, "mini": 1000}
TARGET_FILES = ("train.src", "train.tgt", "test.src", "test.tgt", "spm.model", "manifest.json")


def split_test(items: Sequence[tuple[str, str]], test_size: int) -> tuple[Pairs, Pairs]:
    """A fixed held-out split: the `test_size` pairs with the smallest hash of the source side."""

    def key(pair: tuple[str, str]) -> str:
        return hashlib.sha1(pair[0].encode()).hexdigest()

    ordered = sorted(items, key=key)
    return ordered[test_size:], ordered[:test_size]


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """SacreBLEU (13a tokenization, exp smoothing) of detokenized hypotheses, 0-100: the metric of
    the baselines here and of the models (`t4bench.benchmarks.shared_seq2seq.benchmark`)."""
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


#: the tokenizer every translation set gets (the minis and the WMT corpora): BPE over both sides,
#: ids pad 0 / unk 1 / bos 2 / eos 3 as the models expect
SPM_SETTINGS: dict[str, Any] = {
    "model_type": "bpe",
    "character_coverage": 1.0,
    "pad_id": 0,
    "unk_id": 1,
    "bos_id": 2,
    "eos_id": 3,
    "hard_vocab_limit": False,
    "num_threads": 2,
    "minloglevel": 2,
}


def run_sentencepiece(vocab_size: int, **source: Any) -> None:
    """Train the tokenizer with `SPM_SETTINGS`; `source` says where the sentences come from and
    where the model goes (sentencepiece's own keyword names)."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(vocab_size=vocab_size, **SPM_SETTINGS, **source)


def train_sentencepiece(directory: Path, sentences: Iterable[str], vocab_size: int) -> None:
    # written through model_writer so the file does not record the output path: the same
    # bytes wherever the data root is
    model = io.BytesIO()
    run_sentencepiece(
        vocab_size, sentence_iterator=iter(list(sentences)), model_writer=model, shuffle_input_sentence=False
    )
    (directory / "spm.model").write_bytes(model.getvalue())


def _version_key(kind: str) -> str:
    stat = ding.DING_PATH.stat()
    return f"{VERSION}:{kind}:{stat.st_size}:{SPM_VOCAB[kind]}:{MINI_VOCAB}:{TEST_SIZE[kind]}"


def _is_current(directory: Path, kind: str) -> bool:
    manifest = directory / "manifest.json"
    if not all((directory / name).exists() for name in TARGET_FILES):
        return False
    return json.loads(manifest.read_text()).get("version") == _version_key(kind)


def _finish(
    directory: Path, kind: str, train: Pairs, test: Pairs, baselines: dict[str, float], extra: dict[str, Any]
) -> None:
    _write(directory, "train.src", (s for s, _ in train))
    _write(directory, "train.tgt", (t for _, t in train))
    _write(directory, "test.src", (s for s, _ in test))
    _write(directory, "test.tgt", (t for _, t in test))
    train_sentencepiece(directory, [s for s, _ in train] + [t for _, t in train], SPM_VOCAB[kind])
    manifest = {
        "version": _version_key(kind),
        "train": len(train),
        "test": len(test),
        "baselines_bleu": baselines,
        **extra,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _form(token: str) -> str:
    return next((ending for ending in ("ing", "ed", "s") if token.endswith(ending)), "")


def mini_pairs(ding_en: Sequence[str], lexicon: dict[str, LexEntry]) -> tuple[Pairs, list[str]]:
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
    if not ding.DING_PATH.exists():
        raise DatasetMissingError(
            f"{ding.DING_PATH} not found: install the Debian package trans-de-en "
            "(apt-get install trans-de-en) or set T4BENCH_DING_PATH to the Ding de-en file"
        )
    de_en, lexicon = read_ding(ding.DING_PATH)
    en_de = [(en, de) for de, en in de_en if len(en.split()) <= MAX_EN_WORDS]
    if not _is_current(ding_dir, "ding"):
        ding_dir.mkdir(parents=True, exist_ok=True)
        train, test = split_test(en_de, TEST_SIZE["ding"])
        baselines = {
            "copy": bleu([s for s, _ in test], [t for _, t in test]),
            "word_by_word": bleu([word_by_word_ding(s, lexicon) for s, _ in test], [t for _, t in test]),
        }
        _finish(ding_dir, "ding", train, test, baselines, {"source": str(ding.DING_PATH)})
    if not _is_current(mini_dir, "mini"):
        mini_dir.mkdir(parents=True, exist_ok=True)
        pairs, vocab = mini_pairs(sorted({en for en, _ in en_de}), lexicon)
        train, test = split_test(pairs, TEST_SIZE["mini"])
        lang = PseudoLanguage(lexicon)
        table = word_by_word_table(train, lang)
        baselines = {
            "copy": bleu([s for s, _ in test], [t for _, t in test]),
            "word_by_word": bleu([_word_by_word_mini(s, table, lang) for s, _ in test], [t for _, t in test]),
        }
        _finish(mini_dir, "mini", train, test, baselines, {"source": str(ding.DING_PATH), "english_vocab": len(vocab)})


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    data_root = Path(args[0] if args else os.environ.get("T4BENCH_DATA_DIR", "data"))
    prepare(data_root)
    for kind in ("mini", "ding"):
        manifest = json.loads((data_root / "translation" / kind / "manifest.json").read_text())
        print(kind, {k: manifest[k] for k in ("train", "test", "baselines_bleu")})


if __name__ == "__main__":
    main()
