"""The user-facing text speaks of the tool, not of how it was built: README.md, docs/, perf/ and
scripts/ must not mention sittings, lending, budgets or device time (results are dated tables with
GPU, commit and command instead). The pattern is the acceptance check of the docs, applied to every
tracked text file under those paths; docs/cluster.md included."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: as `grep -rniE` reads it: `lent\b` also catches "silent"/"equivalent", so the text avoids those too
BANNED = re.compile(r"session|sitting|lent |lent\b|device time|budget|no H200 came", re.IGNORECASE)
PATHS = ("README.md", "docs", "perf", "scripts")
TEXT = {".md", ".py", ".sh", ".csv", ".txt", ".yaml", ".json", ".html", ".patch", ""}


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", *PATHS], cwd=REPO, capture_output=True, check=True).stdout
    files = [REPO / name for name in listed.decode().split("\0") if name]
    return [f for f in files if f.is_file() and f.suffix in TEXT]


def _hits(text: str) -> list[str]:
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if BANNED.search(line)]


def test_pattern_catches_the_words_it_bans() -> None:
    assert _hits("results of the fifth Session\nno H200 came\nthe device time ran out") == [
        "1: results of the fifth Session",
        "2: no H200 came",
        "3: the device time ran out",
    ]
    assert _hits("on a lent machine\na silent fallback\nwithin the BUDGET_S") != []
    assert _hits("measured on one H100, 2026-12-06, commit abdac89") == []


def test_user_docs_have_none_of_the_words() -> None:
    files = _tracked_text_files()
    assert any(f.name == "README.md" for f in files) and any(f.parent.name == "docs" for f in files)
    found = {str(f.relative_to(REPO)): hits for f in files if (hits := _hits(f.read_text(errors="replace")))}
    assert found == {}
