"""WMT16 / WMT17 English->German from their public downloads, in the layout the GNMT / Transformer
reference-scale trainer reads (`t4bench.benchmarks.shared_seq2seq.benchmark`): `train.src` (English), `train.tgt`
(German), `test.src` / `test.tgt` (newstest2014), `spm.model` and `manifest.json`.

Which files, as the MLPerf Training v0.5 references fetch them (docs/reference_data.md):

- wmt16 (GNMT, mlperf/training `rnn_translator/download_dataset.sh`): Europarl v7
  `europarl-v7.de-en.{en,de}`, Common Crawl `commoncrawl.de-en.{en,de}`, News Commentary v11
  `news-commentary-v11.de-en.{en,de}`; test newstest2014 from WMT16 `dev.tgz`
  (`newstest2014-deen-src.de.sgm`, `newstest2014-deen-ref.en.sgm`).
- wmt17 (Transformer, mlperf/training `translation/data_download.py`): News Commentary v12
  `news-commentary-v12.de-en.{en,de}`, `commoncrawl.de-en.{en,de}`, `europarl-v7.de-en.{en,de}`;
  test `newstest2014.en` / `newstest2014.de` (plain text).

Each file is looked up by name anywhere under `--from DIR` (the archives extracted as they come);
a plain `newstest2014.{en,de}` and the `.sgm` pair are both accepted for the test set.

The references tokenize differently (GNMT: Moses + subword-nmt BPE, 32k merges; Transformer:
tensor2tensor subwords, ~33.7k); here one joint sentencepiece BPE model is trained on the training
text as t4bench's other translation data are (`t4bench.benchmarks.shared_seq2seq.translation`), so BLEU is comparable
with the targets only as far as the tokenizers are (docs/reference_data.md says so too).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from t4bench.benchmarks.data_checks import DataError, read_parallel
from t4bench.benchmarks.shared_seq2seq.translation import run_sentencepiece
from t4bench.errors import DatasetMissingError

#: pairs with more words than this on either side are dropped, as Moses' clean-corpus-n.perl
#: (1..80) drops them in the GNMT reference; the trainer then drops pairs over its max_len tokens
MAX_WORDS = 80
#: sentences sentencepiece samples from the training text (the full corpus is ~9M sentences)
SPM_SAMPLE = 2_000_000
FILES = ("train.src", "train.tgt", "test.src", "test.tgt", "spm.model", "manifest.json")


@dataclass(frozen=True)
class Corpus:
    """One dataset: its training corpora (file stems, + `.en` / `.de`), its test set, its tokenizer size."""

    name: str
    model: str
    train: tuple[str, ...]
    #: plain newstest2014 files, or the WMT .sgm pair (source, reference) in their place
    test_plain: tuple[str, str]
    test_sgm: tuple[str, str]
    vocab_size: int
    #: where conf/model_scale/<model>_reference.yaml reads it, under the data root
    directory: str


_TEST_PLAIN = ("newstest2014.en", "newstest2014.de")
_TEST_SGM = ("newstest2014-deen-ref.en.sgm", "newstest2014-deen-src.de.sgm")

CORPORA = {
    "wmt16": Corpus(
        "wmt16",
        "gnmt",
        ("europarl-v7.de-en", "commoncrawl.de-en", "news-commentary-v11.de-en"),
        _TEST_PLAIN,
        _TEST_SGM,
        32000,
        "wmt16_de_en",
    ),
    "wmt17": Corpus(
        "wmt17",
        "transformer",
        ("news-commentary-v12.de-en", "commoncrawl.de-en", "europarl-v7.de-en"),
        _TEST_PLAIN,
        _TEST_SGM,
        33708,
        "wmt17_de_en",
    ),
}

_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def _find(root: Path, name: str) -> Path | None:
    """`name` anywhere under `root` (the first in sorted order: the same every time)."""
    direct = root / name
    if direct.is_file():
        return direct
    return next(iter(sorted(p for p in root.rglob(name) if p.is_file())), None)


def read_sgm(path: Path) -> list[str]:
    """The segments of a WMT .sgm file in order (what Moses' input-from-sgm.perl extracts)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot be read as UTF-8 ({err})") from None
    segments = [html.unescape(m.group(1)).strip() for m in _SEG.finditer(text)]
    if not segments:
        raise DataError(f"{path}: no <seg> element (a WMT .sgm test file is expected)")
    return segments


def source_files(corpus: Corpus, root: Path) -> tuple[list[tuple[Path, Path]], tuple[Path, Path] | None, list[str]]:
    """(train (en, de) file pairs, test (en, de) pair or None, names of what is missing)."""
    missing: list[str] = []
    train: list[tuple[Path, Path]] = []
    for stem in corpus.train:
        en, de = _find(root, f"{stem}.en"), _find(root, f"{stem}.de")
        if en and de:
            train.append((en, de))
        else:
            missing += [f"{stem}.{lang}" for lang, p in (("en", en), ("de", de)) if p is None]
    test: tuple[Path, Path] | None = None
    for names in (corpus.test_plain, corpus.test_sgm):
        en, de = _find(root, names[0]), _find(root, names[1])
        if en and de:
            test = (en, de)
            break
    if test is None:
        missing.append(f"{' + '.join(corpus.test_plain)} (or {' + '.join(corpus.test_sgm)})")
    return train, test, missing


def _read_test(en: Path, de: Path) -> tuple[list[str], list[str]]:
    if en.suffix == ".sgm":
        src, tgt = read_sgm(en), read_sgm(de)
        if len(src) != len(tgt):
            raise DataError(f"{en} has {len(src)} segments but {de} has {len(tgt)}")
        return src, tgt
    return read_parallel(en, de)


def _keep(en: str, de: str) -> bool:
    return 0 < len(en.split()) <= MAX_WORDS and 0 < len(de.split()) <= MAX_WORDS


def _train_spm(out: Path, vocab_size: int) -> None:
    run_sentencepiece(
        vocab_size,
        input=[str(out / "train.src"), str(out / "train.tgt")],
        model_prefix=str(out / "spm"),
        # the full corpus is too big to fit: sample it; an excerpt gets a smaller vocabulary
        input_sentence_size=SPM_SAMPLE,
        shuffle_input_sentence=True,
    )
    (out / "spm.vocab").unlink(missing_ok=True)


def prepare_from(name: str, source: Path, out: Path, vocab_size: int | None = None) -> dict[str, object]:
    """Write `out/` from the extracted downloads under `source`; the manifest's contents."""
    corpus = CORPORA[name]
    if not source.is_dir():
        raise DatasetMissingError(f"{name}: --from {source} is not a directory")
    train, test, missing = source_files(corpus, source)
    if missing:
        raise DatasetMissingError(f"{name}: not found under {source}: {', '.join(missing)}")
    assert test is not None
    test_src, test_tgt = _read_test(*test)  # the small file first: a bad test set fails in a second
    # written next to `out` and moved in at the end: a failure leaves nothing half-written
    work = out.with_name(f".{out.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        manifest = _write(name, corpus, train, test, test_src, test_tgt, work, vocab_size)
        out.mkdir(parents=True, exist_ok=True)
        for file in FILES:
            (work / file).replace(out / file)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def _write(
    name: str,
    corpus: Corpus,
    train: list[tuple[Path, Path]],
    test: tuple[Path, Path],
    test_src: list[str],
    test_tgt: list[str],
    out: Path,
    vocab_size: int | None,
) -> dict[str, object]:
    pairs, dropped = 0, 0
    with (
        open(out / "train.src", "w", encoding="utf-8") as src,
        open(out / "train.tgt", "w", encoding="utf-8") as tgt,
    ):
        for en_file, de_file in train:
            en_lines, de_lines = read_parallel(en_file, de_file)
            for en, de in zip(en_lines, de_lines, strict=True):
                en, de = en.strip(), de.strip()
                if _keep(en, de):
                    src.write(en + "\n")
                    tgt.write(de + "\n")
                    pairs += 1
                else:
                    dropped += 1
    if not pairs:
        raise DataError(f"{name}: no training pair of 1-{MAX_WORDS} words on both sides in {train[0][0].parent}")
    (out / "test.src").write_text("".join(s + "\n" for s in test_src), encoding="utf-8")
    (out / "test.tgt").write_text("".join(t + "\n" for t in test_tgt), encoding="utf-8")
    _train_spm(out, vocab_size or corpus.vocab_size)
    manifest: dict[str, object] = {
        "dataset": name,
        "train_pairs": pairs,
        "dropped_pairs": dropped,
        "test_pairs": len(test_src),
        "train_files": [f"{e.name} + {d.name}" for e, d in train],
        "test_files": [test[0].name, test[1].name],
        "spm_vocab_requested": vocab_size or corpus.vocab_size,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def check(name: str, directory: Path) -> str:
    """One line saying the prepared directory is complete; DatasetMissingError/DataError naming
    what is missing or malformed."""
    import sentencepiece as spm

    missing = [f for f in FILES if not (directory / f).is_file()]
    if missing:
        raise DatasetMissingError(
            f"{name}: {directory} lacks {', '.join(missing)} (write it with "
            f"`python -m t4bench.data.prepare {name} --from DIR`)"
        )
    train_src, _ = read_parallel(directory / "train.src", directory / "train.tgt")
    test_src, _ = read_parallel(directory / "test.src", directory / "test.tgt")
    try:
        vocab = spm.SentencePieceProcessor(model_file=str(directory / "spm.model")).get_piece_size()
    except (OSError, RuntimeError) as err:
        raise DataError(f"{directory / 'spm.model'}: not a sentencepiece model ({err})") from None
    return f"{len(train_src)} training pairs, {len(test_src)} test pairs, sentencepiece vocabulary {vocab}"
