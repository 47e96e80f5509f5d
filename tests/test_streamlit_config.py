"""`.streamlit/config.toml`: every option is one this Streamlit knows, with a value of its type.

Streamlit only warns about an unknown option in the server log, so a misspelt or removed
option would silently do nothing; this test makes it fail instead.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from streamlit import config as st_config

CONFIG = Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml"


def _options() -> list[tuple[str, object]]:
    data = tomllib.loads(CONFIG.read_text())
    return [(f"{section}.{key}", value) for section, table in data.items() for key, value in table.items()]


def test_config_file_has_options():
    names = [name for name, _ in _options()]
    assert "server.fileWatcherType" in names and "runner.postScriptGC" in names


@pytest.mark.parametrize("name,value", _options(), ids=[n for n, _ in _options()])
def test_option_is_known_with_matching_type(name, value):
    options = st_config.get_config_options()
    assert name in options, f"{name} is not an option of this Streamlit"
    default = options[name].default_val
    if default is not None and not callable(default):
        assert isinstance(value, type(default)), f"{name} = {value!r}, Streamlit's default is {default!r}"


def test_streamlit_reads_the_file(monkeypatch):
    """Parsed from the repository's file, the settings the app relies on take effect."""
    monkeypatch.chdir(CONFIG.parent.parent)
    try:
        st_config.get_config_options(force_reparse=True)
        assert st_config.get_option("runner.postScriptGC") is False
        assert st_config.get_option("server.fileWatcherType") == "none"
        assert st_config.get_option("client.showErrorDetails") == "none"
    finally:
        monkeypatch.undo()
        st_config.get_config_options(force_reparse=True)
