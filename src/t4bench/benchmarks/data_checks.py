"""What every loader needs to reject damaged data in one line: the error type and an image opener.

A `DataError` names the file (and the line or record) and what is wrong with it; the command line
prints it as `t4bench: error: ...` and exits 2, like any other bad input. It lives beside the
benchmark folders that read with it, below the dataset commands (`t4bench.data`) that list them.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from t4bench.errors import DatasetMissingError

#: what torch's DataLoader puts before a worker's traceback when it re-raises the worker's error
_WORKER_MARK = "\nOriginal Traceback"


class DataError(DatasetMissingError):
    """A dataset file that exists but cannot be used: the message names the file and the record."""

    def __init__(self, message: str) -> None:
        # torch's DataLoader re-raises a worker's exception as type(err)(text + worker traceback):
        # keep only the original message, the traceback's last line
        if _WORKER_MARK in message:
            last = message.rstrip().splitlines()[-1]
            message = last.split(f"{type(self).__name__}: ", 1)[-1]
        super().__init__(message)


def open_rgb(path: str | Path) -> Image.Image:
    """The image at `path`, decoded now and in RGB; DataError naming the file when it is truncated,
    not an image, or unreadable (PIL decodes lazily: a bad file would fail later, anonymously)."""
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"{path}: unreadable image ({detail})") from None


def image_loader(path: str) -> Image.Image:
    """`loader=` for torchvision's ImageFolder: `open_rgb`."""
    return open_rgb(path)


def read_lines(path: Path, limit: int | None = None) -> list[str]:
    """The lines of a UTF-8 text file (newlines stripped, the first `limit`); DataError naming the
    file and line for bytes that are not UTF-8, and for a file without a single line."""
    lines: list[str] = []
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                if limit and len(lines) >= limit:
                    break
                try:
                    lines.append(raw.decode("utf-8").rstrip("\r\n"))
                except UnicodeDecodeError as err:
                    raise DataError(
                        f"{path}:{number}: not UTF-8 text ({err.reason} at column {err.start + 1})"
                    ) from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not lines:
        raise DataError(f"{path}: empty file (one sentence per line expected)")
    return lines


def count_lines(path: Path) -> int:
    """Lines in a text file, counted without decoding them (the preflight's structure check: a few
    seconds for WMT's 4.5M lines); DataError naming the file when it is unreadable or empty, in
    `read_lines`' words."""
    try:
        with open(path, "rb") as handle:
            count = sum(1 for _ in handle)
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not count:
        raise DataError(f"{path}: empty file (one sentence per line expected)")
    return count


def check_parallel(source: Path, target: Path) -> None:
    """`read_parallel`'s structure, without reading the sentences: both files non-empty, with as
    many lines each (their bytes are checked when the run reads them)."""
    src, tgt = count_lines(source), count_lines(target)
    if src != tgt:
        raise DataError(_misaligned(source, src, target, tgt))


def _misaligned(source: Path, src: int, target: Path, tgt: int) -> str:
    return f"{source} has {src} lines but {target} has {tgt}: parallel files need one sentence pair per line"


def read_parallel(source: Path, target: Path, limit: int | None = None) -> tuple[list[str], list[str]]:
    """Sentence-aligned files (line i of one translates line i of the other): DataError naming
    both when their line counts differ (cutting to the shorter one would hide a misalignment),
    plus `read_lines`' checks."""
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise DataError(_misaligned(source, len(src), target, len(tgt)))
    return (src[:limit], tgt[:limit]) if limit else (src, tgt)
