"""The documents' screenshots (``make screenshots``, ``scripts/screenshots.py``) are there, used and current.

* Every image a Markdown document shows exists.
* Every screenshot is shown by a document, where that document lives: one in
  ``assets/screenshots/`` by README.md, one in ``docs/screenshots/`` by a document in docs/.
* Every screenshot has its entry in ``assets/screenshots/manifest.json`` (and every entry its
  image), made by ``scripts/screenshots.py`` from a commit, and shows only protocol labels the
  pages use now (``core.report.fmt``): a renamed label makes its screenshots stale until
  ``make screenshots`` runs again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from scripts.screenshots import MANIFEST, SHOTS, labels_in, protocol_labels, refused_in

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"assets/screenshots": "README.md", "docs/screenshots": "docs/*.md"}
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+\.(?:png|jpe?g|gif|svg))>?(?:\s+\"[^\"]*\")?\s*\)", re.IGNORECASE)
SKIP = {".git", ".venv", "node_modules", "shared", "test-artifacts"}


def _documents() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.md")
                  if not any(part in SKIP or part.startswith(".") for part in p.relative_to(ROOT).parts[:-1]))


def _shown(doc: Path) -> set[Path]:
    """The images ``doc`` shows, as resolved paths."""
    text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {(doc.parent / target.split("#")[0]).resolve() for target in IMAGE.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)}


def _screenshots() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.png"))


def stale_entries(manifest: dict, labels: list[str]) -> list[str]:
    """Entries that name a label the pages no longer use, or show refused text, or lack a commit."""
    bad = []
    for name, entry in manifest.items():
        gone = [lab for lab in entry.get("protocol_labels", []) if lab not in labels]
        if gone:
            bad.append(f"{name}: shows {gone}, no longer a protocol label")
        if refused_in(" ".join(entry.get("protocol_labels", []))):
            bad.append(f"{name}: shows a retired label")
        if not re.fullmatch(r"[0-9a-f]{40}", str(entry.get("commit", ""))):
            bad.append(f"{name}: no commit recorded")
    return bad


def test_every_image_a_document_shows_exists():
    missing = [f"{doc.relative_to(ROOT)} -> {img}" for doc in _documents() for img in _shown(doc) if not img.is_file()]
    assert not missing, "images shown but not there:\n" + "\n".join(missing)


def test_every_screenshot_is_shown_where_its_document_lives():
    assert _screenshots(), "no screenshots: run make screenshots"
    unused = []
    for folder, pattern in FOLDERS.items():
        shown = set().union(*(_shown(d) for d in ROOT.glob(pattern)))
        unused += [f"{p.relative_to(ROOT)} (not shown by {pattern})" for p in (ROOT / folder).glob("*.png")
                   if p.resolve() not in shown]
    assert not unused, ("screenshots no document there shows: delete them, or move them where the document that "
                        "shows them lives (its folder in scripts/screenshots.py SHOTS):\n" + "\n".join(unused))


def test_every_screenshot_is_made_by_the_script_and_in_the_manifest():
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    files = {str(p.relative_to(ROOT)) for p in _screenshots()}
    listed = {e["path"] for e in manifest.values()}
    assert files == listed, f"images without a manifest entry: {sorted(files - listed)}; " \
                            f"entries without an image: {sorted(listed - files)}"
    made = {f"{s.folder}/{s.name}.png" for s in SHOTS}
    assert files <= made, f"screenshots scripts/screenshots.py does not make: {sorted(files - made)}"


def test_no_screenshot_is_stale_against_the_protocol_labels():
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    bad = stale_entries(manifest, protocol_labels())
    assert not bad, "stale screenshots (run make screenshots):\n" + "\n".join(bad)


def test_the_checks_catch_what_they_should():
    labels = protocol_labels()
    ok = {"path": "x.png", "commit": "a" * 40, "protocol_labels": ["Adam 4k"]}
    assert stale_entries({"ok": ok}, labels) == []
    assert stale_entries({"old": {**ok, "protocol_labels": ["converged"]}}, labels)
    assert stale_entries({"renamed": {**ok, "protocol_labels": ["Adam 4k"]}}, [lab for lab in labels if lab != "Adam 4k"])
    assert stale_entries({"nocommit": {**ok, "commit": ""}}, labels)
    # the longest label a text shows counts once, not the shorter ones inside it
    assert labels_in("Adam, cosine, 4,000 iterations: the short budget (best validation kept) · RIM · Adam 4k",
                     labels) == ["Adam 4k", "Adam, cosine, 4,000 iterations: the short budget (best validation kept)"]
    assert refused_in("runs under /tmp/pytest-of-root/pytest-3/home") and refused_in("RIM converged s4")
    assert not refused_in("RIM (paper's method) · Adam 4k · seed 4 (pretrained)")
    doc = ROOT / "README.md"
    assert (ROOT / "assets" / "screenshots" / "x.png").resolve() in {
        (doc.parent / t).resolve() for t in IMAGE.findall("| ![a](assets/screenshots/x.png) |")}
