"""The tables' markup (Markdown and LaTeX cells, tables, renderers, files), deterministic to the byte; and the report's
Markdown to HTML, with the one check every link of the report goes through."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import pandas as pd
from markdown_it import MarkdownIt

from suite import store



def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` as CSV at full precision, ``\\n`` line ends, atomically; formula-like text is
    :func:`suite.store.neutral` (``suite.results`` reads it back as it was)."""
    text = frame.copy()
    for col in text.columns:
        if not pd.api.types.is_numeric_dtype(text[col]) and not pd.api.types.is_bool_dtype(text[col]):
            text[col] = text[col].map(store.neutral)
    store.atomic_write_text(path, text.to_csv(index=False, lineterminator="\n"))
    return path


def write_text(text: str, path: Path) -> Path:
    """Write ``text`` as UTF-8 with ``\\n`` line ends (identical bytes on every platform), atomically."""
    store.atomic_write_text(path, text)
    return path


TEX_ESCAPES = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                             "<": r"$<$", ">": r"$>$"})


@dataclass(frozen=True)
class Markup:
    """The few bits of syntax that differ between Markdown and LaTeX cells."""

    name: str
    dash: str
    dagger: str
    ddagger: str
    geq: str
    sep: str

    def esc(self, text: str) -> str:
        """The suite's own words (a note, a cell's numbers), one line, escaped where the markup needs it."""
        text = one_line(text)  # a line break in a cell or a comment would end it: the rest would be live markup
        if self.name == "md":
            return text.replace("\\", "\\\\").replace("|", "\\|")
        return text.translate(TEX_ESCAPES)

    def data(self, text: object) -> str:
        """A value read from a results folder (a name, a key's value: never trusted) as markup that shows exactly
        that text, on one line: in Markdown, never a link, image, tag, emphasis or code (:func:`md_escape`)."""
        text = one_line(str(text))
        return md_escape(text) if self.name == "md" else text.translate(TEX_ESCAPES)

    def bold(self, text: str) -> str:
        return f"**{text}**" if self.name == "md" else rf"\textbf{{{text}}}"

    def code(self, text: str) -> str:
        """``text`` (a key, a name) in a code font; in Markdown, text a code span cannot hold as it is (a backtick, a
        ``|`` that would split a table's cell) is :meth:`data` instead."""
        if self.name != "md":
            return rf"\texttt{{{self.esc(text)}}}"
        text = one_line(text)
        return self.data(text) if "`" in text or "|" in text or not text.strip() else f"`{text}`"

    def lines(self, parts: list[str]) -> str:
        """One cell on several lines."""
        if self.name == "md":
            return "<br>".join(parts)
        return r"\begin{tabular}[t]{@{}c@{}}" + r" \\ ".join(parts) + r"\end{tabular}"


MD = Markup("md", dash="—", dagger="†", ddagger="‡", geq="≥", sep=" · ")
TEX = Markup("tex", dash="---", dagger=r"$^{\dagger}$", ddagger=r"$^{\ddagger}$", geq=r"$\geq$", sep=r" $\cdot$ ")


@dataclass
class Table:
    """One rendered table; every string is already in the target markup."""

    caption: str
    label: str
    corner: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]
    notes: list[str] = field(default_factory=list)


def fmt_value(v: object) -> str:
    """A key value as text: floats in %g (0.001, 1e-05), others as str."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def fmt_rate(x: float) -> str:
    """A learning rate to 3 significant digits, in %g: 0.00316, 0.008."""
    return fmt_value(float(f"{x:.3g}"))


def fmt_ms(x: float) -> str:
    return f"{x:.0f}" if x >= 99.95 else f"{x:#.3g}"  # 3 significant digits: 9.48, 12.0, 123


def one_line(text: str) -> str:
    """``text`` on one line: every line break (Unicode's too: U+2028, U+0085 ...) a space, and control and format
    characters (bidi overrides, escape sequences) dropped; text from a results folder is never trusted."""
    return "".join(c for c in " ".join(text.splitlines()) if unicodedata.category(c) not in ("Cc", "Cf"))


MD_ALWAYS = frozenset("\\`*[]|~$")  # code, emphasis, links and images, table cells, strikethrough, math (GitHub)
MD_BREAK = "<!-- -->"  # raw HTML that shows as nothing: it ends a run of text, so no autolink spans it


def md_escape(text: str) -> str:
    """``text`` with a backslash before each character that could start Markdown (CommonMark, GitHub's tables,
    strikethrough, math and autolinks): the text renders as itself, never as a link, image, tag, emphasis or code.
    ``_`` inside a word, ``<`` before a space and ``&`` not before an entity stay as they are (they start nothing).
    GitHub links a bare ``http://`` or ``www.`` address up to the next space, backslashes included, which would free
    the character the backslash escaped: the ``:`` of ``://`` and the ``.`` after ``www`` are escaped, so none starts.
    It links a bare e-mail address from the text after escapes are read (``\\@`` and ``&#64;`` are linked too), so
    an empty comment, :data:`MD_BREAK`, follows each ``@``: it splits the address and shows as nothing."""
    out = []
    for i, c in enumerate(text):
        before, after = text[i - 1:i], text[i + 1:i + 2]
        if (c in MD_ALWAYS or c == "_" and not (before.isalnum() and after.isalnum())
                or c == "<" and after.strip() != "" or c == "&" and (after.isalnum() or after == "#")
                or c == ":" and text[i + 1:i + 3] == "//" or c == "." and text[max(0, i - 3):i].lower() == "www"):
            out.append("\\")
        out.append(c)
        if c == "@":
            out.append(MD_BREAK)
    return "".join(out)


def md(text: object) -> str:
    """A value from a results folder (a name, a key's value, a note that holds one) as Markdown: :meth:`Markup.data`."""
    return MD.data(text)


def md_plain(text: str) -> str:
    """Markdown written by this module as the text it shows (a terminal's copy): the escapes and ``**`` dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text.replace("**", "").replace("@" + MD_BREAK, "@"))


def missing(x: object) -> bool:
    """None or NaN: a cell with nothing to show."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def section_title(label: tuple, skeys: list[str]) -> str:
    return ", ".join(f"{k} = {fmt_value(v)}" for k, v in zip(skeys, label))


def slug(label: tuple, skeys: list[str]) -> str:
    """``slug((0.001,), ["train.lr"])`` -> ``-train.lr-0.001``: a file- and label-safe suffix."""
    return safe("".join(f"-{k}-{fmt_value(v)}" for k, v in zip(skeys, label)))


SAFE_BYTES = 100  # a name part's most bytes: a file name of several stays under the file system's 255


def safe(text: str) -> str:
    """Keep letters, digits and ``.-+``; anything else becomes ``-`` (file names, LaTeX labels). A name changed so,
    or longer than :data:`SAFE_BYTES`, ends in 8 hex digits of the text's hash: two names never share a file."""
    kept = "".join(c if c.isalnum() or c in ".-+" else "-" for c in text)
    if kept == text and len(kept.encode()) <= SAFE_BYTES:
        return kept
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return kept.encode()[:SAFE_BYTES - 9].decode(errors="ignore") + "-" + digest


def render_md(table: Table) -> str:
    head = f"| {table.corner} | " + " | ".join(table.columns) + " |"
    rule = "|:--|" + "|".join(":-:" for _ in table.columns) + "|"
    body = [f"| {label} | " + " | ".join(cells) + " |" for label, cells in table.rows]
    return "\n".join([f"### {table.caption}", "", head, rule, *body, "", "\n\n".join(table.notes), ""])


def render_tex(table: Table) -> str:
    cols = "l" + "c" * len(table.columns)
    head = f"{table.corner} & " + " & ".join(table.columns) + r" \\"
    body = [f"{label} & " + " & ".join(cells) + r" \\" for label, cells in table.rows]
    return "\n".join([
        r"\begin{table}[htbp]", r"\centering", rf"\caption{{{table.caption}}}", rf"\label{{{table.label}}}",
        r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%", rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule", head, r"\midrule", *body, r"\bottomrule", r"\end{tabular}}", r"\par\smallskip",
        r"\parbox{\linewidth}{\footnotesize " + r" \par ".join(table.notes) + "}", r"\end{table}", "",
    ])


def standalone_latex(fragment: str) -> str:
    """Wrap a fragment from :func:`document` into a document that ``pdflatex`` compiles."""
    return "\n".join([r"\documentclass{article}", r"\usepackage[T1]{fontenc}", r"\usepackage{booktabs}",
                      r"\usepackage{graphicx}", r"\begin{document}", fragment, r"\end{document}", ""])


# HTML for the report. Results folders travel, so every string read from one is untrusted: the Markdown converter
# keeps no raw HTML, and one function decides what may be a link.

DATA_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]*={0,2}")


def href_ok(url: str) -> bool:
    """Whether ``url`` may be a link in the report: a PNG data URI, or a relative path in the folder to a
    :data:`LINKABLE` file; no scheme, ``/``, ``..``, backslash, whitespace, control character or query (decoded)."""
    if DATA_PNG.fullmatch(url):
        return True
    path, _, fragment = url.partition("#")
    if not url or url.startswith("#") and not fragment:
        return False
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c in "\\?" for c in url):
        return False
    path = unquote(path)
    if ":" in path:  # a scheme (javascript:, data:, C:), or a name a browser could take for one
        return False
    if path and not path.lower().endswith(LINKABLE):  # a folder's own .html/.svg page would run its script
        return False
    return not path.startswith("/") and ".." not in path.split("/")


# What a page may link to: the kinds of file the suite writes, none a browser runs (.html, .svg, ...).
LINKABLE = (".yaml", ".jsonl", ".json", ".csv", ".md", ".tex", ".png", ".pdf", ".txt")


def link(path: str, anchor: bool = True) -> str | None:
    """The percent-encoded href of ``path`` (relative to the results folder), or None when :func:`href_ok` refuses it.
    ``anchor``: a ``#`` starts a fragment (docs/x.md#y); else it is part of a file name (a run folder ``x#y``)."""
    url = quote(path, safe="/#" if anchor else "/")
    return url if href_ok(url) else None


def _line_break(state, silent: bool) -> bool:
    """``<br>``, the one tag the tables write (:meth:`Markup.lines`), as a line break; raw HTML is off."""
    if not state.src.startswith("<br>", state.pos):
        return False
    if not silent:
        state.push("hardbreak", "br", 0)
    state.pos += 4
    return True


def _empty_comment(state, silent: bool) -> bool:
    """:data:`MD_BREAK`, the comment :func:`md_escape` puts after an ``@``, as nothing; raw HTML is off."""
    if not state.src.startswith(MD_BREAK, state.pos):
        return False
    state.pos += len(MD_BREAK)
    return True


_MD = MarkdownIt("commonmark", {"html": False}).enable("table")
_MD.validateLink = href_ok  # links and images: the same check as every other href of the page
_MD.inline.ruler.before("html_inline", "line_break", _line_break)
_MD.inline.ruler.before("html_inline", "empty_comment", _empty_comment)


def md_html(text: str) -> str:
    """Markdown (CommonMark and tables) as HTML: raw HTML and a link :func:`href_ok` refuses stay text."""
    return _MD.render(text)
