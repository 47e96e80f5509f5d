"""RIMscope: the dashboard's entry point. Navigation only; each page is a thin file in pages/."""

import streamlit as st

st.set_page_config(page_title="RIMscope", page_icon="🔬", layout="wide")

pages = [
    st.Page("pages/overview.py", title="Overview", icon="🏠", default=True),
    st.Page("pages/train.py", title="Train", icon="🏋️"),
    st.Page("pages/models.py", title="Models", icon="📦"),
    st.Page("pages/mechanisms.py", title="Mechanisms", icon="🧩"),
    st.Page("pages/robustness.py", title="Robustness", icon="🌫️"),
    st.Page("pages/compare.py", title="Compare", icon="📊"),
]
st.navigation(pages).run()
