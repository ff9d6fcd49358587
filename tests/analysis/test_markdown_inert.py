"""Markdown from a results folder shows its names as written: a variant, a grid value, a cause, a title or a device
that holds Markdown (a link, an image, a tag, emphasis, code) is text in findings.md and tables/*.md, as the
report already shows it (results folders travel between people; GitHub renders their Markdown)."""

import html
import json
import random
import re
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from suite.analysis.analyze import analyze
from suite.analysis.markup import MD, md_escape, md_plain

from test_analyze import write_run

RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])  # raw HTML on, as GitHub's
PAYLOAD = ("[x](https://e.example/)<b>v</b>`c`*e*_u_ ~~s~~ &amp; $m$ ![i](https://e.example/i.png) <https://e.example> "
           "http://e.example/x<img src=x> www.e.example<b>w</b>")


def shown(markdown: str) -> str:
    """CommonMark's HTML, the empty comment md_escape puts after an ``@`` left out (a browser shows nothing of it)."""
    return RENDER.render(markdown).replace("@<!-- -->", "@")


def github(markdown: str) -> str:
    """GitHub's own renderer (cmark-gfm: tables, strikethrough, autolinks), raw HTML kept as GitHub's sanitiser
    keeps <img> and <b>: a bare address there is linked up to the next space, backslashes included."""
    from cmarkgfm import github_flavored_markdown_to_html
    from cmarkgfm.cmark import Options

    return github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE).replace("@<!-- -->", "@")


def as_text(text: str) -> str:
    """``text`` as the renderer writes it in HTML."""
    return html.escape(text, quote=False).replace('"', "&quot;")


@pytest.mark.parametrize("text", [
    PAYLOAD, "http://a.b/x<img src=x>", "www.a.b<b>x</b>", "<1@x.com>", "x@evil.com", "mailto:x@e.co", "x\\@e.co", "x&#64;e.co", "a@b@c.d", "a_b_c", "_a_", "x._y_", "a < b", "a<b", "<b>", "</b>", "<!-- c -->", "R&D", "&#65;", "&lt;", "\\", "\\*",
    "a\\", "`", "``x``", "*", "**b**", "[x]", "[x]: https://e.example", "~x~", "a|b", "$x$", "ümlaut_ok", "1. x"])
def test_escaped_text_renders_as_itself(text):
    assert shown(f"x {md_escape(text)} y") == f"<p>x {as_text(text)} y</p>\n"
    assert github(f"x {md_escape(text)} y") == f"<p>x {as_text(text)} y</p>\n"


def test_random_markdown_renders_as_itself():
    """Strings of Markdown's own characters, seeded: each one, escaped, is a paragraph of exactly that text, in
    CommonMark and on GitHub (with its autolinks: a bare address's link took in the backslash before a tag)."""
    rng = random.Random(0)
    alphabet = "ab _*`[]()<>!&#;:/|~\\$-=+.1hw@"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))).strip()
        if text:
            assert shown(f"x {md_escape(text)} y") == f"<p>x {as_text(text)} y</p>\n", text
            assert github(f"x {md_escape(text)} y") == f"<p>x {as_text(text)} y</p>\n", text


@pytest.mark.parametrize("text", [PAYLOAD, "a|b", "plain_name", "`tick`", "x*y"])
def test_a_cell_and_its_code_hold_the_text(text):
    table = shown(f"| a | b |\n|--|--|\n| {MD.data(text)} | {MD.code(text)} |\n")
    cells = re.findall(r"<td>(.*?)</td>", table)
    assert cells[0] == as_text(text)
    assert re.sub(r"</?code>", "", cells[1]) == as_text(text)


def test_the_terminal_copy_drops_the_escapes():
    assert md_plain(f"**{md_escape(PAYLOAD)} scores higher.**") == f"{PAYLOAD} scores higher."


def hostile(root: Path) -> Path:
    """Two schemes at two depths and two rates, some runs diverged; one scheme, the ablation's name, the data, the
    device and ablation.yaml's free text all hold :data:`PAYLOAD`."""
    root.mkdir(parents=True)
    spec = {"name": "demo", "base": {"data": {"name": "digits"}},
            "grid": {"model.depth": [6, 12], "train.lr": [1e-3, 4e-3]},
            "variants": {"preln": {"model.residual": "preln"}, PAYLOAD: {"model.residual": "layerscale"}},
            "seeds": 4, "superseded_by": PAYLOAD, "rates_from": PAYLOAD,
            "rates": [{"variant": PAYLOAD, "model.depth": 6, "train.lr": 1e-3, "at_edge": PAYLOAD}],
            "primary": {"scheme": PAYLOAD, "baseline": "preln", "where": {"model.depth": 12, "train.lr": 1e-3}}}
    (root / "ablation.yaml").write_text(yaml.safe_dump(spec))
    extra = {"data.name": PAYLOAD, "device_name": PAYLOAD, "train.steps": 30, "train.batch_size": 8}
    for depth in (6, 12):
        for lr in (1e-3, 4e-3):
            for seed in range(4):
                for name, acc in (("preln", 0.7), (PAYLOAD, 0.9)):
                    bad = lr > 2e-3 and (name == "preln" or seed == 0) and depth == 12
                    folder = write_run(root, name, depth, seed, status="diverged" if bad else "ok", lr=lr,
                                       acc=acc + 0.01 * seed, ablation=PAYLOAD, extra=extra)
                    summary = json.loads((folder / "summary.json").read_text())
                    (folder / "summary.json").write_text(json.dumps({**summary, "seed": seed}))
    return root


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    root = hostile(tmp_path_factory.mktemp("markdown") / "demo")
    analyze(root, figures=False)
    return root


def test_findings_and_tables_show_the_payload_as_text(analysed):
    files = [analysed / "findings.md", *sorted((analysed / "tables").glob("*.md"))]
    assert len(files) > 3
    findings = shown(files[0].read_text())
    text = as_text(PAYLOAD)
    # the payload reached the title, the answer, the regime, the rates, the superseded line and the comparisons
    assert findings.count(text) >= 8, findings
    for f in files:
        for page in (shown(f.read_text()), github(f.read_text())):
            for made in ('href="https://e.example', 'src="https://e.example', "<img", "<b>", "<em>e</em>", "<em>u</em>",
                         "<code>c</code>", "<s>s</s>", "<del>s</del>", "http://e.example/x%5C"):
                assert made not in page, (f.name, made)
        assert "&amp;amp;" in page or f.name != "findings.md"  # the entity is shown as written, not decoded


def test_the_plan_table_shows_the_payload_as_text(analysed):
    from suite.analysis.plan import plan_table, render

    page = shown(render(plan_table(analysed, 0.05, 0.8, None), 0.8))
    assert as_text(PAYLOAD) in page and "<img" not in page and 'href="https://e.example' not in page


def test_the_report_shows_nothing_of_the_break_after_an_at():
    """The page's renderer keeps no raw HTML, so the comment after an ``@`` is read as nothing, not shown as text;
    a name that holds the comment itself still shows it."""
    from suite.analysis.markup import md_html

    assert md_html(f"x {md_escape('a@b.co')} y") == "<p>x a@b.co y</p>\n"
    assert md_html(f"x {md_escape('@<!-- -->')} y") == "<p>x @&lt;!-- --&gt; y</p>\n"
