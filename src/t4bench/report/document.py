"""The report as plain data (sections of text, tables and figures) and its two renderings:
report.md (GitHub-flavoured tables, relative image links) and a static report.html (no scripts,
no network: it opens from the artifact store or a file system as it is)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    table: pd.DataFrame | None = None
    figures: list[Path] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section] = field(default_factory=list)


def cell(value: object, digits: int = 3) -> str:
    """Readable cell text; NaN is "–" (missing, never 0)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞"
        return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def pm(mean: float, std: float, digits: int = 3) -> str:
    if math.isnan(mean):
        return "–"
    return f"{cell(mean, digits)} ± {cell(std, 2)}"


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    body = ["| " + " | ".join(cell(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def to_markdown(doc: Document, out: Path) -> str:
    lines = [f"# {doc.title}", ""]
    for section in doc.sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        if section.table is not None and not section.table.empty:
            lines += [markdown_table(section.table), ""]
        for figure in section.figures:
            rel = figure.relative_to(out).as_posix()
            lines += [f"![{figure.stem}]({rel})", ""]
    return "\n".join(lines)


_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f0f0f0}td{text-align:right}td:first-child{text-align:left}img{max-width:100%;margin:0.5em 0}"""


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = [
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    ]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _inline_code(text: str) -> str:
    """`code` spans, the only markdown the paragraphs use."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(doc: Document, out: Path) -> str:
    body: list[str] = [f"<h1>{html.escape(doc.title)}</h1>"]
    for section in doc.sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        body += [f"<p>{_inline_code(p)}</p>" for p in section.paragraphs]
        if section.table is not None and not section.table.empty:
            body.append(_html_table(section.table))
        for figure in section.figures:
            rel = html.escape(figure.relative_to(out).as_posix())
            body.append(f'<p><img src="{rel}" alt="{html.escape(figure.stem)}"></p>')
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(doc.title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write(doc: Document, out: Path) -> Sequence[Path]:
    md, page = out / "report.md", out / "report.html"
    md.write_text(to_markdown(doc, out), encoding="utf-8")
    page.write_text(to_html(doc, out), encoding="utf-8")
    return md, page
