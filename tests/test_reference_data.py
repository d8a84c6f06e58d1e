"""Reference datasets from their public downloads (`t4bench.data.prepare wmt16|wmt17 --from DIR`,
`t4bench.data.check NAME DIR`) on small excerpts written here in the downloads' own formats
(nothing downloads): each prepare turns its excerpt into what the trainer reads, and the trainer
(the reference model, shrunk) runs one epoch on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from PIL import Image

from t4bench.benchmarks.shared_seq2seq import wmt
from t4bench.data import check, prepare

EN = ["the house is small .", "i see the cat .", "we like green trees .", "she reads a book .", "it is cold today ."]
DE = [
    "das Haus ist klein .",
    "ich sehe die Katze .",
    "wir mögen grüne Bäume .",
    "sie liest ein Buch .",
    "heute ist es kalt .",
]


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _sgm(path: Path, lang: str, lines: list[str]) -> None:
    segs = "".join(f'<seg id="{i}">{s.replace("&", "&amp;")}</seg>\n' for i, s in enumerate(lines, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'<refset setid="newstest2014" srclang="any" trglang="{lang}">\n<doc sysid="ref" docid="1" origlang="en">\n'
        f"{segs}</doc>\n</refset>\n",
        encoding="utf-8",
    )


def downloads(root: Path, name: str, repeat: int = 40) -> Path:
    """The training corpora and newstest2014 as the reference download scripts extract them: WMT16
    with the test set as .sgm (dev.tgz), WMT17 with plain newstest2014.{en,de}."""
    corpus = wmt.CORPORA[name]
    for i, stem in enumerate(corpus.train):
        folder = root / f"archive{i}" / "training"
        _write(folder / f"{stem}.en", EN * repeat)
        _write(folder / f"{stem}.de", DE * repeat)
    if name == "wmt16":
        _sgm(root / "dev" / "dev" / wmt._TEST_SGM[0], "en", EN)
        _sgm(root / "dev" / "dev" / wmt._TEST_SGM[1], "de", DE)
    else:
        _write(root / "test_data" / "newstest2014.en", EN)
        _write(root / "test_data" / "newstest2014.de", DE)
    return root


@pytest.mark.parametrize("name", ["wmt16", "wmt17"])
def test_prepare_writes_what_the_trainer_reads(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = downloads(tmp_path / "src", name)
    out = tmp_path / "out"
    assert prepare.main([name, "--from", str(source), "--out", str(out), "--vocab-size", "80"]) == 0
    n_train = len(wmt.CORPORA[name].train) * len(EN) * 40
    assert (out / "train.src").read_text(encoding="utf-8").splitlines() == (EN * 40) * len(wmt.CORPORA[name].train)
    assert (out / "test.tgt").read_text(encoding="utf-8").splitlines() == DE
    assert json.loads((out / "manifest.json").read_text())["train_pairs"] == n_train
    assert check.main([name, str(out)]) == 0
    assert f"{n_train} training pairs, {len(EN)} test pairs" in capsys.readouterr().out


def test_missing_download_and_damaged_output_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = downloads(tmp_path / "src", "wmt17")
    (source / "archive0" / "training" / "news-commentary-v12.de-en.de").unlink()
    assert prepare.main(["wmt17", "--from", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "news-commentary-v12.de-en.de" in err
    assert not (tmp_path / "out").exists()  # nothing half-written
    # an excerpt whose sides disagree in length
    good = downloads(tmp_path / "src2", "wmt17")
    _write(good / "archive1" / "training" / "commoncrawl.de-en.de", DE[:3])
    assert prepare.main(["wmt17", "--from", str(good), "--out", str(tmp_path / "out2")]) == 2
    assert "commoncrawl.de-en.de" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "src2"]  # no half-written output, no leftovers
    assert check.main(["wmt16", str(tmp_path / "nothing")]) == 2
    assert "spm.model" in capsys.readouterr().err


def test_check_ml20m_imagenet_coco(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ml = tmp_path / "ml-20m"
    _write(ml / "ratings.csv", ["userId,movieId,rating,timestamp", "1,2,3.5,1112486027"])
    assert check.main(["ml-20m", str(ml)]) == 0
    _write(ml / "ratings.csv", ["user,item", "1,2"])
    assert check.main(["ml-20m", str(ml)]) == 2
    net = tmp_path / "imagenet"
    for split in ("train", "val"):
        (net / split / "n01440764").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(net / split / "n01440764" / "a.JPEG", "JPEG")
    assert check.main(["imagenet", str(net)]) == 0
    (net / "val" / "n09999999").mkdir()
    assert check.main(["imagenet", str(net)]) == 2
    cc = tmp_path / "coco"
    for split in ("train2017", "val2017"):
        (cc / split).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(cc / split / "1.jpg", "JPEG")
        ann = {
            "images": [{"id": 1, "file_name": "1.jpg", "width": 8, "height": 8}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4]}],
            "categories": [{"id": 1, "name": "x"}],
        }
        (cc / "annotations").mkdir(exist_ok=True)
        (cc / "annotations" / f"instances_{split}.json").write_text(json.dumps(ann))
    assert check.main(["coco2017", str(cc)]) == 0
    (cc / "annotations" / "instances_val2017.json").write_text("{")
    assert check.main(["coco2017", str(cc)]) == 2
    lines = capsys.readouterr()
    assert len(lines.out.strip().splitlines()) == 3
    errors = lines.err.strip().splitlines()
    assert len(errors) == 3 and "instances_val2017.json" in errors[-1] and "n09999999" in errors[1]


#: the reference model shrunk so one epoch on the excerpt takes seconds on a CPU
SHRUNK = {
    "gnmt": ["model.arch.hidden=16", "model.arch.num_layers=2", "model.batch_size=16"],
    "transformer": [
        "model.arch.d_model=16",
        "model.arch.heads=2",
        "model.arch.ff=32",
        "model.arch.layers=1",
        "model.batch_size=16",
    ],
}


@pytest.mark.parametrize(("name", "model"), [("wmt16", "gnmt"), ("wmt17", "transformer")])
def test_reference_trainer_runs_an_epoch_on_the_prepared_excerpt(tmp_path: Path, name: str, model: str) -> None:
    out = tmp_path / "data"
    assert (
        prepare.main([name, "--from", str(downloads(tmp_path / "src", name)), "--out", str(out), "--vocab-size", "80"])
        == 0
    )
    args = [f"model={model}", "scale=reference", "hw=cpu", f"model.data.path={out}", "max_epochs=1", "progress=off"]
    proc = run_cli(*args, *SHRUNK[model], store=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.params["model.data.path"] == str(out)
    assert run.data.tags["t4bench.scale"] == "reference"
    assert run.data.metrics["epoch"] == 1 and "eval_quality" in run.data.metrics  # BLEU on the newstest2014 excerpt
