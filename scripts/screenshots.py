"""The documents' screenshots, made by one command: ``make screenshots``
(``python -m scripts.screenshots [NAME ...]``).

It starts the dashboard as the browser tests do (``tests/browser/conftest.py``'s
``running_server``: the shipped ``pretrained/`` models, a run store of its own, offline) but with
an empty data folder, so every page shows what a new user sees without a data set: the bundled
MNIST sample. Headless Debian Chromium (``/usr/bin/chromium``) drives it at 1280 x 800; each
shot is cropped to what its caption names (from the first to the last element ``SHOTS`` gives)
and written where the document that shows it lives: ``assets/screenshots/`` for README,
``docs/screenshots/`` for docs/. ``MANIFEST`` records, per image, its caption, the commit it was
made at and the protocol labels it shows (``core.report.fmt``), which
``tests/test_screenshots.py`` checks against the current labels. A shot whose text names a
retired label, or a temporary folder, is refused, and nothing of it is written.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "assets" / "screenshots" / "manifest.json"
VIEWPORT = {"width": 1280, "height": 800}
TRAIN_ITERATIONS = 1500  # the Train shot's demo run: RIM learns the bundled sample well past chance
MIN_DEMO_ACCURACY = 50.0  # percent on the 200 test images; chance is 10
# text no screenshot may show: the retired name of the 4,000-iteration protocol, a temporary folder
REFUSED = [re.compile(r"\bconverged\b", re.IGNORECASE), re.compile(r"/tmp/|pytest-|rimscope-shots")]


def protocol_labels() -> list[str]:
    """Every protocol label the pages show (``core.report.fmt``), longest first."""
    from core.report import fmt

    labels = {*fmt.PROTOCOL_NAMES.values(), *fmt.PROTOCOL_SHORT.values(), *fmt.PROTOCOL_SWITCH_TITLES.values(),
              *fmt.SCHEDULE_TITLES.values()}
    return sorted(labels, key=len, reverse=True)


def labels_in(text: str, labels: list[str]) -> list[str]:
    """The labels ``text`` shows, each once; a label inside a longer one found already is not counted again."""
    found = []
    for label in labels:  # longest first
        if label in text:
            found.append(label)
            text = text.replace(label, "\0")
    return sorted(found)


def refused_in(text: str) -> list[str]:
    return [m.group(0) for pattern in REFUSED for m in pattern.finditer(text)]


@dataclass
class Shot:
    name: str
    folder: str  # relative to the repository: where the document that shows it lives
    caption: str
    path: str  # the page's URL path and query
    first: Callable  # page -> the locator the crop starts at
    last: Callable  # page -> the locator the crop ends at
    prepare: Callable | None = None  # page, server -> None: what to do before the shot

    @property
    def file(self) -> Path:
        return REPO / self.folder / f"{self.name}.png"


# ------------------------------------------------------------------------------ driving the pages


def _draw_seven(page, server) -> None:
    from tests.browser.helpers import INSIDE, choose_input, draw_on_canvas, settle

    page.get_by_text(INSIDE).first.wait_for()
    choose_input(page, "Draw")
    page.get_by_text("The canvas is empty").wait_for()
    draw_on_canvas(page, [(60, 60), (220, 60), (190, 120), (160, 185), (135, 240)])  # a "7"
    page.get_by_text("What the model sees: your drawing").wait_for()
    page.get_by_text(INSIDE).first.wait_for()
    settle(page)


def _flip_cell(server) -> tuple[int, int, int]:
    """(test image, row, LSTM) of a single forced cell that changes the shipped MNIST RIM's answer."""
    from core import catalog
    from core.data.datasets import load_dataset
    from core.eval.interventions import decisive_cell
    from core.training.weights import load_weights

    entries = [e for e in catalog.pretrained_entries("mnist", Path(server["pretrained"])) if e.model == "rim"]
    model, _ = load_weights(catalog.preferred_entry(entries).stem)
    data = load_dataset("mnist", "test", data_dir=server["data_dir"], download=False)
    cell = decisive_cell(model, data.images)
    if cell is None:
        raise SystemExit("no single forced cell changes the shipped RIM's answer on the 30 least decided images")
    return cell


def _intervene(page, server) -> None:
    """Open Intervene on an image where one forced cell changes the answer, and click that cell."""
    from tests.browser.helpers import WAIT_S, poll, settle

    idx, t, i = _flip_cell(server)
    page.goto(f"{server['url']}/mechanisms?mech_idx={idx}&mech_more=Intervene", wait_until="commit")
    cell = page.locator(f'.st-key-iv_mask rect.cell[data-cell="{t},{i}"]')
    cell.wait_for()
    settle(page)
    cell.scroll_into_view_if_needed()
    cell.hover()
    cell.click()
    poll(lambda: page.get_by_text(re.compile(r"→ after the intervention .* changed")).count(), WAIT_S,
         what="a changed prediction after the click")
    settle(page)


def _train_demo(page, server) -> None:
    """A demo run of RIM on the bundled MNIST sample (the Adam protocol's settings with fewer
    iterations and a smaller validation split), to its end; one that does not learn is refused."""
    from tests.browser.helpers import WAIT_S, fill_inputs, poll, settle

    page.get_by_text("Your runs").wait_for()
    page.get_by_text("Adam, cosine, 4,000 iterations (best of a validation split)", exact=True).click()
    settle(page)
    page.get_by_role("button", name="Remove Parallel LSTMs").click()
    settle(page)
    page.get_by_text(re.compile("Train a quick demo on the bundled MNIST sample")).click()
    settle(page)
    # the sample's 800 training images: 100 of them are the validation split (the protocol's 5,000 do not fit)
    fill_inputs(page, (("Iterations", str(TRAIN_ITERATIONS)), ("Validation images (from the training data)", "100"),
                       ("Test accuracy every (iterations)", "100")), each=settle)
    button = page.get_by_role("button", name="Start 1 run")
    poll(button.is_enabled, WAIT_S, what="an enabled Start button")
    button.click()
    progress = page.locator('[data-testid="stProgress"]')
    poll(lambda: any(t.startswith(("completed", "failed", "diverged")) for t in progress.all_inner_texts()),
         1800, every=2, what="the demo run to finish")
    texts = progress.all_inner_texts()
    if not any(t.startswith("completed") for t in texts):
        raise SystemExit(f"the demo run did not complete: {texts}")
    final = page.get_by_text("final test accuracy").first
    final.wait_for()
    accuracy = re.search(r"final test accuracy ([\d.]+) %", final.inner_text())
    if not accuracy or float(accuracy.group(1)) < MIN_DEMO_ACCURACY:
        raise SystemExit(f"the demo run did not learn: {final.inner_text()!r} (at least {MIN_DEMO_ACCURACY} % wanted)")
    settle(page)


def _heading(text):
    return lambda page: page.locator("h1, h2, h3").filter(has_text=text).first


def _text(text, exact=False):
    return lambda page: page.get_by_text(text, exact=exact).first


def _key(key):
    return lambda page: page.locator(f".st-key-{key}").first


SHOTS = [
    Shot("mechanisms-draw", "assets/screenshots", "Mechanisms: which LSTMs are active at each row",
         "mechanisms?mech_dataset=mnist", _heading(re.compile(r"^Inside RIM .*, row by row$")),
         _key("mech_timeline"), _draw_seven),
    Shot("mechanisms-intervene", "assets/screenshots", "Intervene: force LSTMs on or off",
         "mechanisms", lambda page: page.get_by_role("tab", name="Intervene").first,
         _text(re.compile("set by the intervention")), _intervene),
    Shot("robustness-noise", "docs/screenshots", "Robustness: error as noise grows",
         "robustness?rb_dataset=mnist", _heading("Error against noise strength"),
         _text(re.compile(r"^Bands: 95% intervals")), None),
    Shot("compare", "docs/screenshots", "Compare: the paper's claims beside ours",
         "compare?cmp_tab=Paper%27s+claims+vs+ours&cmp_schedule=converged", _heading("The paper's claims vs ours"),
         _text(re.compile(r"^✅ holds, ❌ does not hold")), None),
    Shot("train-run", "docs/screenshots", "Train: background runs",
         "train", _heading("Your runs"), _key("mine_acc"), _train_demo),
    Shot("overview", "docs/screenshots", "Overview: the method in one diagram",
         "", _heading("How the method works"),
         lambda page: page.locator('[data-testid="stExpander"]').filter(has_text="The six steps in words").first, None),
    Shot("models", "docs/screenshots", "Models: the shipped models in one table",
         "models", _heading("Models"), lambda page: page.get_by_role("button", name=re.compile("Table as CSV")).first,
         None),
]


# ------------------------------------------------------------------------------ the shot

TEXT_IN_CLIP_JS = """(clip) => {
  const out = []; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const r = document.createRange();
  while (w.nextNode()) {
    const n = w.currentNode; if (!n.textContent.trim()) continue;
    r.selectNodeContents(n);
    for (const b of r.getClientRects()) {
      if (b.width && b.bottom > clip.y && b.top < clip.y + clip.height && b.right > clip.x
          && b.left < clip.x + clip.width) { out.push(n.textContent); break; }
    }
  }
  // a data frame draws its cells on a canvas; its text is in the element's hidden accessible table
  for (const el of document.querySelectorAll('[data-testid="stDataFrame"]')) {
    const b = el.getBoundingClientRect();
    if (b.height && b.bottom > clip.y && b.top < clip.y + clip.height) out.push(el.textContent);
  }
  return out.join("\\n");
}"""


def grow_to_content(page) -> None:
    """Streamlit scrolls inside <main>: make the viewport as tall as the content, so that every
    element has its place on the page and none is scrolled."""
    from tests.browser.helpers import poll, settle, stable_box

    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return Math.max(m ? m.scrollHeight : 0, document.documentElement.scrollHeight); }")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": int(min(max(height, VIEWPORT["height"]), 12_000))})
    poll(stable_box(page.locator('[data-testid="stMain"]')), 60, what="the relayout")
    settle(page, 60)


def take(page, shot: Shot, server: dict, commit: str, labels: list[str]) -> dict:
    """Open the page, do what the shot needs, crop from its first to its last element; the
    manifest entry, or SystemExit when the crop shows refused text."""
    from tests.browser.helpers import assert_no_errors, settle

    page.set_viewport_size(VIEWPORT)
    page.goto(f"{server['url']}/{shot.path}", wait_until="commit")
    page.locator("h1").first.wait_for()
    settle(page)
    if shot.prepare:
        shot.prepare(page, server)
    first, last = shot.first(page), shot.last(page)
    first.wait_for()
    last.wait_for()
    settle(page)
    assert_no_errors(page, shot.name)
    grow_to_content(page)
    top, bottom = first.bounding_box(), last.bounding_box()
    column = page.locator('[data-testid="stMainBlockContainer"]').first.bounding_box()
    pad = 12
    clip = {"x": column["x"], "y": max(top["y"] - pad, 0), "width": column["width"]}
    clip["height"] = bottom["y"] + bottom["height"] + pad - clip["y"]
    if clip["height"] < 50:
        raise SystemExit(f"{shot.name}: its last element is above its first ({top} / {bottom})")
    text = page.evaluate(TEXT_IN_CLIP_JS, clip)
    bad = refused_in(text)
    if bad:
        raise SystemExit(f"{shot.name}: the crop shows refused text {sorted(set(bad))}; nothing written")
    shot.file.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot.file), clip=clip, animations="disabled", timeout=120_000)
    print(f"{shot.file.relative_to(REPO)}: {int(clip['width'])} x {int(clip['height'])} px", flush=True)
    return {"path": str(shot.file.relative_to(REPO)), "caption": shot.caption, "commit": commit,
            "protocol_labels": labels_in(text, labels), "viewport": f"{VIEWPORT['width']}x{VIEWPORT['height']}"}


def head_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"only these shots (default: all): {', '.join(s.name for s in SHOTS)}")
    args = parser.parse_args(argv)
    unknown = set(args.names) - {s.name for s in SHOTS}
    if unknown:
        parser.error(f"unknown shot(s) {sorted(unknown)}; known: {', '.join(s.name for s in SHOTS)}")
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, browser_missing_reason, running_server

    reason = browser_missing_reason()
    if reason:
        print(f"cannot make screenshots: {reason}", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    shots = [s for s in SHOTS if not args.names or s.name in args.names]
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    commit, labels = head_commit(), protocol_labels()
    with tempfile.TemporaryDirectory(prefix="rimscope-shots-") as tmp:
        root = Path(tmp)
        (root / "no-data").mkdir()
        with running_server(root, env_extra={"RIMSCOPE_DATA_DIR": str(root / "no-data")}) as server, \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for shot in shots:
                    context = browser.new_context(viewport=VIEWPORT)
                    context.set_default_timeout(300_000)
                    page = context.new_page()
                    page.rimscope_errors = []
                    page.rimscope_server = server
                    page.on("pageerror", lambda exc, pg=page: pg.rimscope_errors.append(str(exc)))
                    try:
                        manifest[shot.name] = take(page, shot, server, commit, labels)
                    except BaseException:
                        failed = REPO / "test-artifacts" / "screenshots" / f"FAILED-make-{shot.name}.png"
                        failed.parent.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(failed), full_page=True)
                        print(f"{shot.name} failed; the page as it was: {failed.relative_to(REPO)}", file=sys.stderr)
                        raise
                    finally:
                        context.close()
                    MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=1, ensure_ascii=False) + "\n")
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
