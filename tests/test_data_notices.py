"""What a loader leaves out of training is counted, logged and said once (issue 25.4): NCF users
with a single rating (leave-one-out holds it out for the test, so none of theirs trains), as a
real `python -m t4bench` process on a small generated MovieLens file; translation pairs with an
empty side or too long (the benchmark, and `data.prepare wmt17`), in-process on files written
here. COCO's dropped boxes and images: tests/test_bad_inputs_units.py."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from t4bench.benchmarks.ncf import movielens

REPO = Path(__file__).resolve().parents[1]
HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def ratings(folder: Path, users: int = 40, single: int = 3) -> Path:
    """`users` users rating 12 of 59 items each, the last `single` of them one item only."""
    rng = random.Random(0)
    rows, stamp = [], 0
    for user in range(1, users + 1):
        for item in rng.sample(range(1, 60), 1 if user > users - single else 12):
            stamp += 1
            rows.append(f"{user}\t{item}\t4\t{stamp}\n")
    path = folder / "movielens-100k" / "ml-100k.inter"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + "".join(rows))
    return path


def test_loader_counts_single_rating_users(tmp_path: Path) -> None:
    path = ratings(tmp_path)
    data = movielens.load("movielens-100k", path.parent)
    assert data.single_rating_users == 3 and data.num_users == 40
    assert len(data.train_users) == 37 * 11  # each other user's latest rating is held out


def test_run_says_it_once_and_logs_it(tmp_path: Path) -> None:
    ratings(tmp_path / "data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": uri,
        "T4BENCH_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "t4bench", "max_epochs=1", "progress=plain", "hw.telemetry.enabled=false"]
    command += ["tracking.system_metrics_interval_s=0", f"hydra.run.dir={tmp_path / 'out'}"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("data: ")]
    assert said == [
        "data: 3 of 40 users have a single rating: it is their held-out test item, so they add nothing to training"
    ]
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.metrics["data_single_rating_users"] == 3


def test_translation_pairs_with_an_empty_side_or_too_long_are_counted(tmp_path: Path) -> None:
    """The mini task's files with 3 pairs lacking a side and 2 over max_len written in: the benchmark
    trains on the rest and its notes say both counts."""
    import shutil

    import torch
    from conftest import DATA_ROOT, compose

    from t4bench.benchmark import benchmark_class
    from t4bench.pytorch.context import RunContext

    mini = DATA_ROOT / "translation" / "mini"
    if not (mini / "spm.model").is_file():
        pytest.skip("translation mini not prepared")
    folder = tmp_path / "mini"
    shutil.copytree(mini, folder)
    from t4bench.benchmarks.shared_seq2seq.parts import Tokenizer

    tokenizer = Tokenizer(mini / "spm.model")
    pairs = zip(
        (mini / "train.src").read_text(encoding="utf-8").splitlines()[:200],
        (mini / "train.tgt").read_text(encoding="utf-8").splitlines()[:200],
        strict=True,
    )
    short = [(s, t) for s, t in pairs if max(len(ids) for ids in tokenizer.encode([s, t])) <= 20][:40]
    src, tgt = [s for s, _ in short], [t for _, t in short]
    long = " ".join(src[:8])  # far over max_len=20 subword tokens
    src += ["", "The house is small .", "", long, src[0]]
    tgt += ["Ein Satz .", "", "", tgt[0], " ".join(tgt[:8])]
    (folder / "train.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (folder / "train.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    cfg = compose(["model=gnmt", f"model.data.path={folder}", "model.data.max_len=20"])
    ctx = RunContext(
        device=torch.device("cpu"), precision="fp32", rank=0, world_size=1, local_rank=0, seed=0, data_root=DATA_ROOT
    )
    bench = benchmark_class(cfg)(cfg, ctx)
    assert bench.dataset_train_size() == 40
    assert dict(bench.data_notes()) == {
        "dropped_empty_pairs": (
            3,
            "dropped 3 of 45 training pairs with an empty side (a sentence without its translation)",
        ),
        "dropped_long_pairs": (
            2,
            "dropped 2 of 45 training pairs longer than model.data.max_len=20 subword tokens on a side",
        ),
    }


def test_wmt_prepare_says_what_it_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m t4bench.data.prepare wmt17 --from DIR` on an excerpt in the download's format with
    an empty line on each side and an over-long pair: one line with the count."""
    from t4bench.benchmarks.shared_seq2seq import wmt
    from t4bench.data import prepare

    en = ["the house is small .", "i see the cat .", "we like green trees .", "she reads a book ."] * 30
    de = ["das Haus ist klein .", "ich sehe die Katze .", "wir mögen grüne Bäume .", "sie liest ein Buch ."] * 30
    en += ["", "a pair without its english side", "word " * (wmt.MAX_WORDS + 1)]
    de += ["ein Satz ohne Englisch", "", "Wort " * 3]
    for i, stem in enumerate(wmt.CORPORA["wmt17"].train):
        folder = tmp_path / "src" / f"archive{i}" / "training"
        folder.mkdir(parents=True)
        (folder / f"{stem}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
        (folder / f"{stem}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "src" / "test_data").mkdir()
    (tmp_path / "src" / "test_data" / "newstest2014.en").write_text("the house is small .\n", encoding="utf-8")
    (tmp_path / "src" / "test_data" / "newstest2014.de").write_text("das Haus ist klein .\n", encoding="utf-8")
    files = len(wmt.CORPORA["wmt17"].train)
    argv = ["wmt17", "--from", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--vocab-size", "60"]
    assert prepare.main(argv) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("data: ")]
    assert said == [
        f"data: dropped {3 * files} of {123 * files} training pairs with an empty side or over {wmt.MAX_WORDS} words"
    ]
