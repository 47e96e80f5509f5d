"""RIMscope: the dashboard's entry point. Navigation only; each page is a thin file in pages/.
On the server's first script run it starts the warm-up of the shared caches (pages/ui/cache.py).

Start the server with ``python app.py [streamlit options]`` (``make app``): it imports PyTorch,
pandas, plotly and the core modules the pages need first (a few seconds), then starts Streamlit,
so the server answers (and prints its URL) once the first page no longer waits for them; as
soon as the server is up it loads the default models and test data while the first browser loads
the page. ``streamlit run app.py`` serves the same app; there the first page does all of that itself.
"""

import sys
import threading

# what every first page imports (seconds on 2 cores, PyTorch most of them); no streamlit calls
PRELOAD = ("torch", "pandas", "plotly.graph_objects", "plotly.subplots", "core.data.datasets", "core.models.registry",
           "core.catalog", "core.runs.store", "core.runs.queue", "core.eval.predict", "core.eval.interventions",
           "core.report.plots.comparison", "core.report.plots.traces", "core.eval.scorer",
           "kaleido", "choreographer.browsers.chromium")  # the PNG export's check (optional: may be missing)


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the page that needs the module reports the problem
            continue
    try:
        from core.data.datasets import DATASETS, will_use_torchvision
        from core.report.plots.style import first_figure

        first_figure()
        if will_use_torchvision(next(iter(DATASETS))):  # the default data set's test split: from a download
            importlib.import_module("torchvision")
    except Exception:  # noqa: BLE001 - as above
        return


def serve(argv: list[str]) -> None:
    """``streamlit run`` this file with ``argv`` (Streamlit's options) after the imports. They run
    before the server, not beside it, so no script run imports the same modules in another thread
    at the same time."""
    from streamlit.web import cli

    _preload()
    _folder_navigation_off()
    threading.Thread(target=_warm_when_up, name="rimscope-before-first-page", daemon=True).start()
    cli.main(["run", __file__, *argv], prog_name="streamlit")


def _folder_navigation_off() -> None:
    """The patch of ``pages/ui/legacy.py``, made before the server starts: Streamlit's old
    folder-based navigation (a ``pages/`` folder beside the main script) is off from the start,
    so a deep link as the server's first request runs once, through ``st.navigation``, instead of
    being restarted by that patch. Private API, guarded: if it moves, the patch still applies."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a future Streamlit without the class
        return
    if getattr(PagesManager, "uses_pages_directory", False) is None:  # not decided yet
        PagesManager.uses_pages_directory = False


def _warm_when_up(timeout_s: float = 240.0) -> None:
    """Once the server's runtime exists: ``pages.ui.cache.warm_before_first_page`` (the default
    models and test data into the shared caches while the first browser loads the page)."""
    import time

    from streamlit import runtime

    deadline = time.monotonic() + timeout_s
    while not runtime.exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    try:
        from pages.ui.cache import stop_at_exit, warm_before_first_page

        stop_at_exit(threading.current_thread())  # the server's exit waits for its current step
        warm_before_first_page()
    except Exception:  # noqa: BLE001 - the first page loads what it needs itself
        return


def _launched_by_python() -> bool:
    """Whether this file runs as ``python app.py`` (Streamlit runs it as ``__main__`` too, in a script run)."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return __name__ == "__main__" and not runtime.exists() and get_script_run_ctx(suppress_warning=True) is None


if _launched_by_python():
    serve(sys.argv[1:])
    sys.exit(0)

import streamlit as st  # noqa: E402

st.set_page_config(page_title="RIMscope", page_icon="🔬", layout="wide")
if "pages.ui" not in sys.modules:  # the server's first run: PyTorch, pandas and plotly are imported now
    with st.spinner("Starting up: loading PyTorch and the plotting libraries (only on the first visit after "
                    "the server starts)…"):
        import pages.ui  # noqa: F401
from pages.ui.auth import account_box  # noqa: E402
from pages.ui.cache import script_run_over, script_run_started, start_warmup  # noqa: E402

script_run_started()  # the warm-up pauses between its points until this run is over
try:
    start_warmup()
    account_box()  # sign-in and sign-out in the sidebar, when the server has sign-in configured
    pages = [
        st.Page("pages/overview.py", title="Overview", icon="🏠", default=True),
        st.Page("pages/train.py", title="Train", icon="🏋️"),
        st.Page("pages/models.py", title="Models", icon="📦"),
        st.Page("pages/mechanisms.py", title="Mechanisms", icon="🧩"),
        st.Page("pages/robustness.py", title="Robustness", icon="🌫️"),
        st.Page("pages/compare.py", title="Compare", icon="📊"),
    ]
    st.navigation(pages).run()
finally:  # also after st.stop() / st.rerun() inside a page
    script_run_over()
