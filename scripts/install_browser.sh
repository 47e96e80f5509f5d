#!/usr/bin/env bash
# Install the headless browser used by the UI tests (Debian packages only) and
# smoke-test it.  Idempotent: apt-get runs only when something is missing.
#
#   sudo bash scripts/install_browser.sh            # as root on Debian 12 (bookworm)
#   PYTHON=.venv/bin/python bash scripts/install_browser.sh
#
# Playwright's own browser download (`playwright install`) is NOT used: it needs
# network access outside the package registries.  Tests launch the Debian build:
#   p.chromium.launch(executable_path="/usr/bin/chromium",
#                     args=["--headless", "--no-sandbox", "--disable-gpu",
#                           "--disable-background-networking"])
set -euo pipefail

CHROMIUM=/usr/bin/chromium
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$REPO_ROOT/.venv/bin/python}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# 1. chromium + chromium-driver from Debian (apt-get update only if missing).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update
    $SUDO apt-get install -y chromium chromium-driver
fi

# 1b. A colour emoji font, so the page icons in the navigation render in screenshots
#     (without one, headless Chromium draws empty boxes). Cosmetic: a failure is not fatal.
if ! fc-list 2>/dev/null | grep -qi "emoji"; then
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y fonts-noto-color-emoji \
        || { $SUDO apt-get update && $SUDO apt-get install -y fonts-noto-color-emoji; } \
        || echo "note: fonts-noto-color-emoji not installed; page icons show as boxes" >&2
fi

# 2. Smoke test: headless Chromium renders a page.
# (stderr carries harmless D-Bus errors in containers; it is silenced here.)
dom="$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --disable-background-networking --dump-dom about:blank 2>/dev/null)"
case "$dom" in
    *"<body>"*) echo "chromium OK: $("$CHROMIUM" --version 2>/dev/null)" ;;
    *) echo "chromium --dump-dom failed: '$dom'" >&2; exit 1 ;;
esac

# 3. Playwright (Python client from the package registry) driving the Debian chromium, if a
#    Python environment is present.  The package is in requirements-dev.txt.
if [ -x "$PYTHON" ]; then
    if ! "$PYTHON" -c "import playwright" >/dev/null 2>&1; then
        "$PYTHON" -m pip install "playwright>=1.45"
    fi
    "$PYTHON" - "$CHROMIUM" <<'PY'
import sys
import tempfile

from playwright.sync_api import sync_playwright

with sync_playwright() as p:
    browser = p.chromium.launch(
        executable_path=sys.argv[1],
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    page = browser.new_page()
    page.goto("data:text/html,<h1>hi</h1>")
    assert page.inner_text("h1") == "hi"
    with tempfile.NamedTemporaryFile(suffix=".png") as f:
        page.screenshot(path=f.name)
        size = len(open(f.name, "rb").read())
    assert size > 0
    print(f"playwright OK: chromium {browser.version}, screenshot {size} bytes")
    browser.close()
PY
else
    echo "no Python at $PYTHON; skipped the Playwright check" >&2
fi
