"""RIMscope: the dashboard's entry point. Navigation only; each page is a thin file in pages/.
On the server's first script run it starts the warm-up of the shared caches (pages/ui/cache.py)."""

import sys

import streamlit as st

st.set_page_config(page_title="RIMscope", page_icon="🔬", layout="wide")
if "pages.ui" not in sys.modules:  # the server's first run: PyTorch, pandas and plotly are imported now
    with st.spinner("Starting up: loading PyTorch and the plotting libraries (only on the first visit after "
                    "the server starts)…"):
        import pages.ui  # noqa: F401
from pages.ui.auth import account_box  # noqa: E402
from pages.ui.cache import first_run_over, start_warmup  # noqa: E402

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
try:
    st.navigation(pages).run()
finally:  # also after st.stop() / st.rerun() inside a page
    first_run_over()
