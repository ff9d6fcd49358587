"""Hostile results folders (issue 40): whatever a folder holds, the report runs no script and links
nowhere outside the folder, and names reach matplotlib as text, never as mathtext.

Each page is opened in a real headless Chromium (``--dump-dom``): every payload would write the
marker ``"own" + "ed"`` (assembled at run time, so it is in no payload's text) into the title or the
body; the dumped DOM must not contain it, and the Content-Security-Policy must head the page."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from suite.analysis.analyze import analyze  # noqa: E402
from suite.analysis.figures import plain  # noqa: E402
from suite.analysis.markup import href_ok, link, md_html  # noqa: E402
from suite.analysis.report import write_report  # noqa: E402

from test_analyze import write_run  # noqa: E402

# ----------------------------------------------------------------------------- mathtext


@pytest.mark.parametrize("name", [r"ls$\frac{$", "$x$", r"a\$b$", "$$", "50$", "plain"])
def test_plain_text_is_drawn_as_written(name):
    fig = plt.figure()
    text = fig.text(0, 0, plain(name))
    assert text._preprocess_math(text.get_text()) == (name, False)  # what matplotlib draws: the name, not math
    fig.canvas.draw()
    plt.close(fig)


def test_a_variant_named_like_mathtext_analyses(tmp_path):
    root = tmp_path / "demo"
    for seed in range(2):
        for depth in (6, 12):
            write_run(root, "preln", depth, seed, ablation="cost $5$")
            write_run(root, r"ls$\frac{$", depth, seed, acc=0.95, ablation="cost $5$", scales=True)
    analyze(root)  # a ParseSyntaxException before: 117 lines of traceback
    figures = {p.name for p in (root / "figures").glob("*.png")}
    from suite.analysis.markup import safe

    name = safe(r"ls$\frac{$")
    assert {"accuracy_vs_depth.png", "loss_vs_step.png", "scales_" + name + ".png"} <= figures
    assert name.startswith("ls--frac--")  # the name's safe part, then its hash


# ----------------------------------------------------------------------------- links


@pytest.mark.parametrize("url", ["runs/abc/config.yaml", "tables/summary.md", "runs/a%20b/metrics.jsonl", "#runs",
                                 "docs/x.md#frag", "data:image/png;base64,iVBORw0KGgo=", "figures/a.pdf"])
def test_paths_inside_the_folder_and_png_data_are_links(url):
    assert href_ok(url)


@pytest.mark.parametrize("url", [
    "", "#", "javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
    "java\nscript:alert(1)", "vbscript:msgbox(1)", "file:///etc/passwd", "http://example.com/x", "//example.com/x",
    "/etc/passwd", "../secret", "runs/../../secret", "runs/%2e%2e/%2E%2E/secret", ".%2e/x", "\\\\host\\share",
    "runs\\..\\..\\x", "C:/Windows", "data:text/html;base64,PHNjcmlwdD4=", "data:image/svg+xml;base64,PHN2Zz4=",
    "data:image/png;base64,AA\"onerror=x", "runs/x?q=1", "%2fetc/passwd", "runs/a%3Ab",
    # issue 61: a folder's own page runs its script when clicked; links go only to the kinds of file the suite writes
    "evil.html", "EVIL.HTML", "runs/a/page.svg", "x.xhtml", "x.htm", "runs/abc", "evil.html#x"])
def test_anything_else_is_not_a_link(url):
    assert not href_ok(url)


def test_link_encodes_a_path_and_refuses_one_that_leaves():
    assert link("runs/a b/config.yaml") == "runs/a%20b/config.yaml"
    assert link("runs/ü/config.yaml") == "runs/%C3%BC/config.yaml"
    assert link("../x") is None and link("/etc/passwd") is None and link("javascript:alert(1)") is None


def test_markdown_keeps_no_html_and_no_hostile_link():
    out = md_html('<script>alert(1)</script>\n\n| a | b<br>c |\n|--|--|\n| <img src=x onerror="alert(1)"> | x |\n\n'
                  "[a](javascript:alert(1)) [b](vbscript:x) [c](file:///etc/passwd) [d](data:text/html,x) "
                  "![e](data:image/svg+xml;base64,AA) <javascript:alert(1)> [f](../../x) [ok](runs/x/config.yaml)")
    assert "<script" not in out and "<img src=x" not in out and "&lt;script&gt;" in out
    assert "b<br />" in out  # the tables' one tag is a line break
    assert re.findall(r'(?:href|src)="([^"]*)"', out) == ["runs/x/config.yaml"]


# ----------------------------------------------------------------------------- pages in Chromium

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
MARK = "own" + "ed"  # what a payload that ran would write; no payload contains it whole
IMG = """<img src=x onerror="document.title='own'+'ed'">"""
SCRIPT = "<script>document.title='own'+'ed';document.body.append('own'+'ed')</script>"
SVG = """<svg onload="document.body.append('own'+'ed')"></svg>"""


def chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


needs_chromium = pytest.mark.skipif(chromium() is None, reason="no Chromium here (.ci/run installs Debian's `chromium`)")


def dump_dom(page: Path) -> str:
    """The DOM of ``page`` after load and 2 s of (virtual) time: what any handler or script has done."""
    out = subprocess.run([chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=2000",
                          "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "<html" in out.stdout, out.stderr[-2000:]
    return out.stdout


class Elements(HTMLParser):
    """Every element's tag, its event-handler attributes and its hrefs and srcs."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [f"{tag} {k}" for k, _ in attrs if k.startswith("on")]
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "action", "formaction", "xlink:href")]


def assert_inert(page: Path) -> str:
    """Open ``page`` in Chromium: no script ran, nothing became markup that could run, the CSP is the
    first element of <head>, every link and image passes :func:`href_ok`. Returns the page's text."""
    text = page.read_text()
    assert re.match(r'<!DOCTYPE html>\s*<html[^>]*><head><meta http-equiv="Content-Security-Policy" content="([^"]*)"',
                    text) and CSP in text.split("<head>", 1)[1].split(">", 1)[0]
    dom = dump_dom(page)
    assert MARK not in dom  # neither the title nor the body was written to
    assert re.search(r'<head><meta http-equiv="Content-Security-Policy"', dom)
    seen = Elements()
    seen.feed(dom)
    assert seen.handlers == []
    assert not {"script", "iframe", "object", "embed", "form", "base"} & set(seen.tags)
    assert seen.urls and all(href_ok(u) for u in seen.urls), [u[:80] for u in seen.urls if not href_ok(u)]
    return text


@needs_chromium
def test_the_browser_check_catches_a_script_that_runs(tmp_path):
    """The check can fail: the same payloads on a page without escaping or CSP run and are caught."""
    page = tmp_path / "bad.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body>{IMG}{SCRIPT}</body></html>")
    assert MARK in dump_dom(page)
    with pytest.raises(AssertionError):
        assert_inert(page)


@needs_chromium
def test_the_csp_alone_stops_a_missed_escape(tmp_path):
    page = tmp_path / "csp.html"
    page.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
                    f"<title>t</title></head><body>{IMG}{SCRIPT}{SVG}</body></html>")
    assert MARK not in dump_dom(page)


HOSTILE = {"name": "demo", "base": {"data": {"name": "digits"}},
           "grid": {"model.depth": [12], "data.root": [IMG, "plain"]},
           "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
           "seeds": 3, "primary": {"scheme": "layerscale", "baseline": "preln", "where": {"data.root": IMG, "model.depth": 12}}}


def hostile_folder(root: Path, variant: str = "layerscale", ablation: str = "demo", spec: dict | None = None) -> Path:
    """Runs of ``HOSTILE`` (``variant`` against preln, at both data.root values), ablation.yaml as the
    results folder keeps it: the grid value and primary.where hold an <img onerror> (case 1)."""
    root.mkdir(parents=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump(spec or HOSTILE))
    for i, data_root in enumerate(HOSTILE["grid"]["data.root"]):
        for name, acc in (("preln", 0.7), (variant, 0.9)):
            for seed in range(3):
                folder = write_run(root, name, 12, 10 * i + seed, acc=acc + 0.01 * seed, ablation=ablation)
                summary = json.loads((folder / "summary.json").read_text())
                (folder / "summary.json").write_text(json.dumps({**summary, "seed": seed, "data.root": data_root}))
    return root


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    root = hostile_folder(tmp_path_factory.mktemp("hostile") / "demo")
    analyze(root)
    return root


def copy(analysed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(analysed, tmp_path / "demo"))


@needs_chromium
def test_1_a_grid_value_with_primary_where_on_it(analysed, tmp_path):
    root = copy(analysed, tmp_path)
    assert "onerror" in (root / "findings.md").read_text()  # the value did reach the answer and the tables
    text = assert_inert(write_report(root))
    assert "Primary comparison" in text and "&lt;img src=x onerror=" in text


@needs_chromium
@pytest.mark.parametrize("field", ["variant", "ablation"])
def test_2_3_summary_fields_of_a_shared_folder(tmp_path, field):
    payload = {"variant": IMG, "ablation": SCRIPT + SVG}[field]
    root = hostile_folder(tmp_path / "demo", **{field: payload})
    spec = HOSTILE if field == "ablation" else {**HOSTILE, "primary": {**HOSTILE["primary"], "scheme": IMG},
                                                "variants": {"preln": {}, IMG: {"model.residual": "layerscale"}}}
    (root / "ablation.yaml").write_text(yaml.safe_dump(spec))
    analyze(root, baseline="preln", figures=field == "variant")
    text = assert_inert(write_report(root))
    assert ("&lt;img src=x onerror=" if field == "variant" else "&lt;script&gt;") in text


@needs_chromium
def test_4_html_in_the_folders_primary_where(analysed, tmp_path):
    """ablation.yaml edited in the results folder: an axis value nobody ran, and primary.where on it."""
    root = copy(analysed, tmp_path)
    spec = {**HOSTILE, "description": SCRIPT, "grid": {**HOSTILE["grid"], "model.depth": [12, SVG]},
            "primary": {**HOSTILE["primary"], "where": {"data.root": IMG, "model.depth": SVG}}}
    (root / "ablation.yaml").write_text(yaml.safe_dump(spec))
    analyze(root, figures=False, force=True)
    text = assert_inert(write_report(root))
    start = text.index('id="answer"')
    answer = text[start:text.index("<section", start)]  # up to the next section (no figures: none drawn)
    assert "&lt;svg onload=" in answer and "Not tested" in answer


@needs_chromium
def test_5_a_script_appended_to_a_table_and_to_findings(analysed, tmp_path):
    """The page renders the analysis, not the Markdown files: what is appended to them never reaches it;
    and the Markdown renderer the page uses for the analysis's text keeps the same input inert."""
    from suite.analysis.markup import md_html

    root = copy(analysed, tmp_path)
    table = f"\n{SCRIPT}\n\n| a | {IMG} |\n|--|--|\n| {SVG} | [x](javascript:document.title='own'+'ed') |\n"
    prose = (f"\n\n{SCRIPT}\n\n<iframe src=\"javascript:parent.document.title='own'+'ed'\"></iframe>\n\n"
             "[click](javascript:alert(1)) [up](../../secret) <file:///etc/passwd> "
             "![x](data:text/html;base64,PHNjcmlwdD4=) [home](/etc/passwd)\n")
    with open(root / "tables" / "summary.md", "a") as f:
        f.write(table)
    with open(root / "findings.md", "a") as f:
        f.write(prose)
    text = assert_inert(write_report(root))
    assert "&lt;script&gt;" not in text and "javascript:" not in text and "iframe" not in text
    rendered = md_html(table + prose)
    assert "<script" not in rendered and "<iframe" not in rendered and rendered.count("&lt;script&gt;") >= 2
    assert not re.search(r'(href|src)="(javascript:|\.\./|/|file:|data:text)', rendered)


@needs_chromium
def test_a_hostile_analysis_json_is_rendered_inert(analysed, tmp_path):
    """The page is rendered from analysis.json, which travels with the folder: markup in its title, answer,
    findings, tables, legends and figure sections stays text, and no link leaves the folder."""
    import json

    root = copy(analysed, tmp_path)
    path = root / "analysis.json"
    written = json.loads(path.read_text())
    hostile = f"{SCRIPT} {IMG} {SVG} [x](javascript:alert(1)) [up](../../secret) <iframe src=\"javascript:1\"></iframe>"
    written["title"] = hostile
    written["answer"] = [hostile]
    written["findings"] = [{"name": f["name"], "lines": [*f["lines"], hostile]} for f in written["findings"]]
    for table in written["tables"]:
        table["tables"] = [t + f"\n| {SCRIPT} |\n" for t in table["tables"]]
        table["notes"] = [hostile]
    written["figures"] = {name: {**fig, "part": hostile} for name, fig in written["figures"].items()}
    path.write_text(json.dumps(written))
    text = assert_inert(write_report(root))
    assert "<script" not in text and "<iframe" not in text and "<svg onload" not in text
    assert text.count("&lt;script&gt;") >= 4 and not re.search(r'(href|src)="(javascript:|\.\./)', text)


@needs_chromium
def test_6_run_dirs_that_leave_the_folder_are_not_links(analysed, tmp_path):
    root = copy(analysed, tmp_path)
    shutil.rmtree(root / "runs")  # a folder shared without its runs: runs.csv is the source of truth
    runs = pd.read_csv(root / "runs.csv")
    hostile = ["javascript:alert(1)", "../../etc", "/etc", "runs/../../x", "data:text/html,x", IMG]
    runs.loc[: len(hostile) - 1, "run_dir"] = hostile
    runs.to_csv(root / "runs.csv", index=False)
    (root / "figures").mkdir(exist_ok=True)
    shutil.copy(next((root / "figures").glob("*.png")), root / "figures" / f'a"{IMG.replace("/", "")}.png')
    text = assert_inert(write_report(root))
    assert "javascript:alert(1)" not in re.findall(r'href="([^"]*)"', text)
    assert text.count("<tr><td>") >= len(hostile)


# ----------------------------------------------------------------------------- YAML read from a folder

BOMB = "name: bomb\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 9)) + "primary: *a8\n"


def test_an_alias_bomb_in_a_folders_ablation_yaml_is_refused_not_expanded(tmp_path):
    """`suite analyze` and `suite report` read a results folder's ablation.yaml through the same guard as an
    ablation file: refused in one line (analyze) or left out (the report's design), never expanded."""
    import time

    from suite.results import AnalysisError
    from suite.analysis.primary import read
    from suite.results import readable_ablation

    root = tmp_path / "shared"
    write_run(root, "preln", 6, 0)
    (root / "ablation.yaml").write_text(BOMB)
    started = time.perf_counter()
    with pytest.raises(AnalysisError, match="alias bomb") as err:
        read(root)
    assert "\n" not in str(err.value)
    assert readable_ablation(root) == {}  # the report's design is left out, not expanded
    assert time.perf_counter() - started < 5  # expanded, 10^9 values would take minutes and gigabytes


# ----------------------------------------------------------------------------- review of the report (round nine)


def test_a_folder_nested_hundreds_deep_or_with_a_mistyped_grid_is_a_page_not_a_traceback(analysed, tmp_path):
    """A description nested 400 deep loads (the reader stops near 500) and then could not be written back for the
    design section (RecursionError); a grid value that is not a list, or variants that are not a mapping, were a
    TypeError in the answer's figure kinds and in `suite analyze`, which now says so in one line."""
    from suite.analysis.primary import read
    from suite.results import AnalysisError

    root = copy(analysed, tmp_path)
    spec = yaml.safe_load((root / "ablation.yaml").read_text())
    (root / "ablation.yaml").write_text(yaml.safe_dump({**spec, "description": "D"}).replace(
        "description: D", "description: " + "[" * 400 + "0" + "]" * 400))
    assert "nested too deeply to show" in write_report(root).read_text()
    for bad in ({"grid": {"model.depth": 48}}, {"variants": 5}, {"variants": [1, 2]}, {"grid": {5: [1]}}):
        (root / "ablation.yaml").write_text(yaml.safe_dump({**spec, **bad}))
        with pytest.raises(AnalysisError, match="variants or grid are not as an ablation file has them"):
            read(root)
        assert "<h2>Answer</h2>" in write_report(root).read_text()


def test_the_page_and_its_warnings_carry_no_control_or_bidi_character(analysed, tmp_path):
    """A right-to-left override in a run's error reordered its cell, and a figure's file name put an escape
    sequence and a line of its own on the terminal."""
    root = copy(analysed, tmp_path)
    runs = pd.read_csv(root / "runs.csv")
    runs["error"] = runs["error"].astype(object)
    runs.loc[0, "error"] = "ok \u202etxt.exe"
    runs.to_csv(root / "runs.csv", index=False)
    shutil.copy(next((root / "figures").glob("*.png")), root / "figures" / "evil\x1b[31mRED\nerror: fake.png")
    warned = []
    text = write_report(root, warn=warned.append).read_text()
    assert "\u202e" not in text and "ok txt.exe" in text
    assert warned and all("\x1b" not in w and "\n" not in w for w in warned)


def test_run_ids_json_through_a_link_is_not_read(analysed, tmp_path):
    root = copy(analysed, tmp_path)
    outside = tmp_path / "ids.json"
    outside.write_text(json.dumps(list(range(1000))))
    (root / "run_ids.json").symlink_to(outside)
    assert "Incomplete sweep" not in write_report(root).read_text()


def test_a_sparkline_of_losses_a_float_apart_is_finite():
    from suite.analysis.report import sparkline_points

    points = sparkline_points([(0, -1e308), (10, 1e308), (20, 1.0)])
    assert "nan" not in points and points.endswith("120.0,12.0")  # 1.0: half way


def test_a_log_of_one_huge_line_is_read_no_further_than_the_sampling_budget(tmp_path, monkeypatch):
    """Above SPARK_READ_ALL the sparkline samples the log; one 5 MiB line made each of its 400 offsets read the
    line again (800 MiB a run)."""
    import io

    from suite.analysis import report

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metrics.jsonl").write_bytes(b'{"kind":"train","step":0,"loss":1.0,"x":"' + b"a" * (5 << 20) + b'"}\n')
    read = []
    real = report.files.open_regular

    class Counted(io.BufferedReader):
        def readline(self, size=-1):
            line = super().readline(size)
            read.append(len(line))
            return line

    monkeypatch.setattr(report.files, "open_regular",
                        lambda *a, **k: Counted(real(*a, **k).detach()))
    assert report._sparkline(folder) == ""
    assert 0 < sum(read) <= report.SPARK_READ_ALL


def test_a_label_from_data_is_cut_so_a_figure_stays_a_figure():
    """A 100,000-character config value (runs.csv's cell limit) in a section title drew PNGs 1.5 million pixels wide."""
    import io

    from suite.analysis.figures import MAX_LABEL

    fig, buf = plt.figure(), io.BytesIO()
    fig.suptitle(plain("x" * 100_000))
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    assert len(plain("x" * 100_000)) == MAX_LABEL and plain("$" * 10) == r"\$" * 10
    width = int.from_bytes(buf.getvalue()[16:20], "big")  # the PNG header's width
    assert width < 4000
