"""RIMscope: the dashboard's entry point. Navigation only; each page is a thin file in pages/.
On the server's first script run it starts the warm-up of the shared caches (pages/ui/cache.py)."""

import streamlit as st

from pages.ui import start_warmup

st.set_page_config(page_title="RIMscope", page_icon="🔬", layout="wide")
start_warmup()

pages = [
    st.Page("pages/overview.py", title="Overview", icon="🏠", default=True),
    st.Page("pages/train.py", title="Train", icon="🏋️"),
    st.Page("pages/models.py", title="Models", icon="📦"),
    st.Page("pages/mechanisms.py", title="Mechanisms", icon="🧩"),
    st.Page("pages/robustness.py", title="Robustness", icon="🌫️"),
    st.Page("pages/compare.py", title="Compare", icon="📊"),
]
st.navigation(pages).run()
