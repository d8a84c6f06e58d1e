"""Translation pieces on fixtures: the mini pseudo-language rules, the Ding reader, setup
(deterministic, idempotent), the sentencepiece tokenizer, batching, the loss and SacreBLEU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import DATA_ROOT
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from t4bench.benchmarks.gnmt.model import GNMT
from t4bench.benchmarks.shared_seq2seq import ding
from t4bench.benchmarks.shared_seq2seq import translation as data
from t4bench.benchmarks.shared_seq2seq.ding import LexEntry
from t4bench.benchmarks.shared_seq2seq.parts import (
    BOS,
    EOS,
    PAD,
    Tokenizer,
    bucketed_batches,
    collate,
    label_smoothed_loss,
)
from t4bench.benchmarks.shared_seq2seq.pseudo_language import PseudoLanguage, Word
from t4bench.benchmarks.shared_seq2seq.translation import bleu as corpus_bleu
from t4bench.errors import DatasetMissingError


def entry(german: str, tag: str) -> LexEntry:
    return LexEntry(german, tag, (0, 0, 0))


@pytest.fixture
def lang() -> PseudoLanguage:
    return PseudoLanguage(
        {
            "man": entry("mann", "m"),
            "woman": entry("frau", "f"),
            "house": entry("haus", "n"),
            "children": entry("kinder", "pl"),
            "book": entry("buch", "n"),
            "old": entry("alt", "adj"),
            "small": entry("klein", "adj"),
            "see": entry("sehen", "verb"),
            "read": entry("lesen", "verb"),
            "know": entry("wissen", "verb"),
            "live": entry("leben", "verb"),
        }
    )


# -- the pseudo-language rules on handcrafted sentences --------------------------------------


def test_lexical_mapping_uses_the_dictionary_and_inflects_verbs(lang: PseudoLanguage) -> None:
    assert lang.word("book").target == "buch"
    assert lang.word("read").target == "lesen"
    assert lang.word("reads").target == "lesent"  # 3rd person -s -> -t on the Ding verb
    assert lang.word("houses") == Word("noun", "hausen", "pl")


def test_words_without_an_entry_get_a_fixed_made_up_word(lang: PseudoLanguage) -> None:
    made_up = lang.word("zorbl").target
    assert made_up == PseudoLanguage({}).word("zorbl").target  # a function of the word alone
    assert made_up != "zorbl" and made_up.isalpha() and len(made_up) >= 5
    assert lang.word("qwerty").target != made_up


def test_articles_and_adjectives_agree_with_the_noun_and_follow_it(lang: PseudoLanguage) -> None:
    assert lang.translate("The old man.") == "der mann alter."
    assert lang.translate("A small woman.") == "eine frau kleine."
    assert lang.translate("The small house.") == "das haus kleines."
    assert lang.translate("This woman sees these children.") == "diese frau diesen kinder sehent."


def test_prepositions_follow_their_noun_phrase_and_verbs_go_last(lang: PseudoLanguage) -> None:
    # subject - object - verb; "in the old house" -> "das haus altes in"
    assert lang.translate("The old man sees the small house.") == "der mann alter das haus kleines sehent."
    assert lang.translate("The children live in the old house.") == "die kinder das haus altes in leben."


def test_subordinate_clauses_put_the_finite_verb_last(lang: PseudoLanguage) -> None:
    assert lang.translate("I know that he can read the book.") == "ich wissen dass er das buch lesen kann."
    assert (
        lang.translate("He reads because he can not see the house.") == "er lesent weil er das haus nicht sehen kann."
    )
    # "that" before a noun phrase stays a determiner
    assert lang.translate("I know that man.") == "ich jener mann wissen."


def test_contractions_are_expanded_before_the_rules(lang: PseudoLanguage) -> None:
    assert PseudoLanguage.expand(["i", "can't", "see", "it", "isn't", "i'm"]) == [
        "i",
        "can",
        "not",
        "see",
        "it",
        "is",
        "not",
        "i",
        "am",
    ]
    assert lang.translate("He can't read the book.") == "er das buch kann nicht lesen."


# -- the Ding reader and setup on a fixture dictionary -----------------------------------------

DING_FIXTURE = """\
# Version :: fixture
Haus {n} | Häuser {pl} | Das Haus ist alt. :: house | houses | The house is old.
Mann {m} | Der Mann liest ein Buch. :: man | The man reads a book.
Frau {f} | Die Frau sieht das Haus. :: woman | The woman sees the house.
Buch {n} | Ich lese das Buch. :: book | I read the book.
alt {adj} | Der Mann ist alt. :: old | The man is old.
klein {adj} | Das Haus ist klein. :: small | The house is small.
sehen {vt} | Ich sehe den Mann. :: to see | I see the man.
lesen {vt} | Sie liest ein altes Buch. :: to read | She reads an old book.
gehen {vi} | Er geht nach Hause. :: to go {went; gone} | He goes home.
Kind {n} | Das Kind sieht die Frau. :: child | The child sees the woman.
Kinder {pl} | Die Kinder lesen. :: children | The children read.
Tisch {m} | Das Buch ist auf dem Tisch. :: table | The book is on the table.
Stuhl {m} | Der Stuhl ist klein. :: chair | The chair is small.
Garten {m} | Die Kinder sind im Garten. :: garden | The children are in the garden.
"""


@pytest.fixture
def ding_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "de-en"
    path.write_text(DING_FIXTURE, encoding="utf-8")
    monkeypatch.setattr(ding, "DING_PATH", path)
    monkeypatch.setattr(data, "TEST_SIZE", {"ding": 3, "mini": 3})
    monkeypatch.setattr(data, "SPM_VOCAB", {"ding": 80, "mini": 80})
    return path


def test_read_ding_gives_sentence_pairs_and_a_tagged_lexicon(ding_file: Path) -> None:
    pairs, lexicon = ding.read_ding(ding_file)
    assert ("Das Haus ist alt.", "The house is old.") in pairs
    assert ("Er geht nach Hause.", "He goes home.") in pairs
    assert len(pairs) == 14
    assert lexicon["house"] == LexEntry("haus", "n", lexicon["house"].rank)
    assert lexicon["houses"].tag == "pl" and lexicon["man"].tag == "m" and lexicon["woman"].tag == "f"
    assert lexicon["old"].tag == "adj"
    assert lexicon["see"] == LexEntry("sehen", "verb", lexicon["see"].rank)  # "to see" -> see
    assert ding.IRREGULAR_FORMS["went"] == "go"


def test_prepare_is_deterministic_and_idempotent(ding_file: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    data.prepare(first)
    written = {p.relative_to(first): p.read_bytes() for p in first.rglob("*") if p.is_file()}
    assert {str(p) for p in written} == {
        f"translation/{kind}/{name}" for kind in ("mini", "ding") for name in data.TARGET_FILES
    }
    mtimes = {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()}
    data.prepare(first)  # up to date: nothing rewritten
    assert mtimes == {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()}
    data.prepare(second)  # elsewhere: the same bytes, sentencepiece model included
    assert written == {p.relative_to(second): p.read_bytes() for p in second.rglob("*") if p.is_file()}

    ding_dir = first / "translation" / "ding"
    train = (ding_dir / "train.src").read_text().splitlines()
    test = (ding_dir / "test.src").read_text().splitlines()
    assert len(test) == 3 and len(train) == 11 and not set(train) & set(test)
    manifest = json.loads((ding_dir / "manifest.json").read_text())
    assert manifest["train"] == 11 and set(manifest["baselines_bleu"]) == {"copy", "word_by_word"}

    mini = first / "translation" / "mini"
    _, lexicon = ding.read_ding(ding_file)
    lang = PseudoLanguage(lexicon)
    for split in ("train", "test"):
        sources = (mini / f"{split}.src").read_text().splitlines()
        targets = (mini / f"{split}.tgt").read_text().splitlines()
        assert targets == [lang.translate(s) for s in sources]


def test_prepare_without_the_ding_file_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ding, "DING_PATH", tmp_path / "missing")
    with pytest.raises(DatasetMissingError, match="trans-de-en"):
        data.prepare(tmp_path / "root")


# -- tokenizer, batches, loss, BLEU ---------------------------------------------------------------


def test_tokenizer_round_trips_the_fixture_and_reserves_special_ids(ding_file: Path, tmp_path: Path) -> None:
    data.prepare(tmp_path)
    tokenizer = Tokenizer(tmp_path / "translation" / "ding" / "spm.model")
    pairs, _ = ding.read_ding(ding_file)
    lines = [text for pair in pairs for text in pair]
    ids = tokenizer.encode(lines)
    assert tokenizer.decode(ids) == lines
    assert all(i > EOS for row in ids for i in row)  # pad/unk/bos/eos never come out of text


@pytest.mark.parametrize("kind", ["mini", "ding"])
def test_tokenizer_round_trips_the_prepared_test_split(kind: str) -> None:
    directory = DATA_ROOT / "translation" / kind
    tokenizer = Tokenizer(directory / "spm.model")
    lines = [line for side in ("src", "tgt") for line in (directory / f"test.{side}").read_text().splitlines()]
    assert len(lines) == 2 * data.TEST_SIZE[kind]
    assert tokenizer.decode(tokenizer.encode(lines)) == lines


def test_collate_pads_and_shifts_the_target() -> None:
    batch = collate([([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])])
    assert batch.src.tolist() == [[5, 6, 7], [5, PAD, PAD]]
    assert batch.src_len == (3, 1)
    assert batch.tgt_in.tolist() == [[BOS, 8, 9, PAD, PAD], [BOS, 8, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS, PAD, PAD], [8, 9, 10, 11, EOS]]
    assert batch.tokens == int((batch.tgt_out != PAD).sum()) == 8  # counted on the host


def test_gnmt_encodes_a_batch_without_padding_unpacked_as_packing_would() -> None:
    # a batch without padding skips pack_padded_sequence (no host-device copies a step): the
    # bidirectional layer must give what the packed path gives, and in training the dropout after
    # it must draw the same mask (it follows the memory layout)
    torch.manual_seed(0)
    model = GNMT(vocab_size=50, hidden=16, num_layers=3, dropout=0.3).train()
    x = torch.randn(3, 7, 16)
    outputs = []
    for pack in (True, False):
        torch.manual_seed(1)
        y = model.bidirectional(x, (7, 7, 7), pack=pack)
        outputs.append((y, model.dropout(y)))
    torch.testing.assert_close(outputs[0][0], outputs[1][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(outputs[0][1], outputs[1][1], rtol=1e-5, atol=1e-6)
    # the packed path sorts on the host: the same values as torch's own unsorted packing, gradients
    # of the weights included, with tied lengths in a batch of more than 16 rows (where a stable
    # sort and torch's order tied rows differently)
    lengths = tuple(int(n) for n in torch.randint(2, 8, (24,), generator=torch.Generator().manual_seed(3)))
    assert len(set(lengths)) < len(lengths) and max(lengths) == 7
    x = torch.randn(24, 7, 16, requires_grad=True)

    def torch_packing(inputs: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(inputs, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(model.enc_bi(packed)[0], batch_first=True, total_length=7)[0]

    results = []
    for encode in (torch_packing, lambda inputs: model.bidirectional(inputs, lengths, pack=True)):
        model.zero_grad()
        x.grad = None
        out = encode(x)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append([out.detach(), x.grad.clone(), *(p.grad.clone() for p in model.enc_bi.parameters())])
    for ours, reference in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(ours, reference, rtol=0, atol=0)
    # encode picks the path: a padded batch packs, so its other rows are as in the unpadded batch
    model.eval()
    src = torch.randint(4, 50, (3, 7))
    with torch.no_grad():
        full, shorter = model.encode(src, (7, 7, 7)), model.encode(src, (7, 5, 7))
    assert full.shape == (3, 7, 32 // 2)
    torch.testing.assert_close(shorter[[0, 2]], full[[0, 2]], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(shorter[1, :5], full[1, :5], atol=1e-4)  # row 1's backward direction


def test_bucketed_batches_cover_every_pair_once_and_group_lengths() -> None:
    lengths = [(i * 7) % 23 + 1 for i in range(1000)]
    batches = bucketed_batches(lengths, 10, torch.Generator().manual_seed(0), bucket_batches=5)
    assert sorted(i for batch in batches for i in batch) == list(range(1000))
    assert all(len(batch) == 10 for batch in batches)

    def spread(groups: list[list[int]]) -> float:
        return sum(max(lengths[i] for i in g) - min(lengths[i] for i in g) for g in groups) / len(groups)

    order = torch.randperm(1000, generator=torch.Generator().manual_seed(0)).tolist()
    unsorted = [order[i : i + 10] for i in range(0, 1000, 10)]
    assert spread(batches) < spread(unsorted) / 3  # lengths within a batch are close
    again = bucketed_batches(lengths, 10, torch.Generator().manual_seed(0), bucket_batches=5)
    other = bucketed_batches(lengths, 10, torch.Generator().manual_seed(1), bucket_batches=5)
    assert again == batches and other != batches


def test_label_smoothed_loss_matches_torch_and_ignores_padding() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4, 11, generator=generator)
    target = torch.randint(4, 11, (3, 4), generator=generator)
    target[0, 2:] = PAD
    expected = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD, label_smoothing=0.1)
    assert label_smoothed_loss(logits, target, 0.1).item() == pytest.approx(expected.item(), rel=1e-5)


def test_bleu_is_sacrebleu_on_detokenized_text() -> None:
    references = ["Das Haus ist alt.", "Der Mann liest ein Buch."]
    assert corpus_bleu(references, references) == pytest.approx(100.0)
    assert corpus_bleu(["Das Haus ist alt .", "Der Mann liest ein Buch ."], references) == pytest.approx(100.0)
    assert 0.0 < corpus_bleu(["Das Haus ist klein.", "Der Mann liest ein Buch."], references) < 100.0
    assert corpus_bleu(["xx yy zz", "qq rr ss tt"], references) < 1.0


def test_trivial_quality_is_the_copy_baseline_and_parallel_files_are_checked(tmp_path: Path) -> None:
    """The translation benchmarks log the copy baseline (source as its own translation) as their
    trivial quality, far under the mini target; unequal parallel files stop with one line."""
    import shutil

    import sacrebleu
    import torch
    from conftest import DATA_ROOT, compose

    from t4bench.benchmark import benchmark_class
    from t4bench.benchmarks.data_checks import DataError
    from t4bench.pytorch.context import RunContext

    if not (DATA_ROOT / "translation" / "mini" / "train.src").is_file():
        pytest.skip("translation mini not prepared")
    ctx = RunContext(
        device=torch.device("cpu"), precision="fp32", rank=0, world_size=1, local_rank=0, seed=0, data_root=DATA_ROOT
    )
    cfg = compose(["model=transformer", f"paths.data_root={DATA_ROOT}"])
    bench = benchmark_class(cfg)(cfg, ctx)
    trivial = bench.trivial_quality()
    assert trivial["bleu"] == pytest.approx(sacrebleu.corpus_bleu(bench.test_src, [bench.test_ref]).score)
    assert 0.0 < trivial["bleu"] < cfg.model.target.bleu / 10

    broken = tmp_path / "mini"
    shutil.copytree(DATA_ROOT / "translation" / "mini", broken)
    lines = (broken / "test.tgt").read_text(encoding="utf-8").splitlines()
    (broken / "test.tgt").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    cfg = compose(["model=transformer", f"model.data.path={broken}"])
    with pytest.raises(DataError, match=r"test\.src has \d+ lines but .*test\.tgt has \d+: parallel files"):
        benchmark_class(cfg)(cfg, ctx)
