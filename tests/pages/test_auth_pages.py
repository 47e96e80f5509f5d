"""Run ownership on the Train and Models pages (pages/ui/auth.py) through AppTest.

Without sign-in (the default: no ``[auth]`` in secrets.toml, so ``st.user`` has no
``is_logged_in``) every run on the machine is the user's in every fresh session, whoever's id
it records and whatever ``?owner=`` says. With sign-in, a user acts on their own runs only,
and someone not signed in starts nothing and acts on nothing. The queue is paused
(RIMSCOPE_MAX_CONCURRENT=0): nothing trains here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.runs.store import RunStore
from core.training.config import TrainConfig
from pages.ui.auth import Viewer, owner_id

PAGES = Path(__file__).resolve().parents[2] / "pages"
TRAIN, MODELS = str(PAGES / "train.py"), str(PAGES / "models.py")


def user(sub: str) -> dict:
    return {"is_logged_in": True, "iss": "https://id.example", "sub": sub, "email": f"{sub}@example.com"}


@pytest.fixture
def home(tiny_mnist_home, monkeypatch):
    monkeypatch.setenv("RIMSCOPE_MAX_CONCURRENT", "0")
    return tiny_mnist_home


def page(path: str, st_user: dict | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(path, default_timeout=120)
    if st_user is not None:
        at.user = st_user
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


def keys(at: AppTest, *prefixes: str) -> list[str]:
    return sorted(b.key for b in at.button if (b.key or "").startswith(prefixes))


def cfg() -> TrainConfig:
    return TrainConfig(dataset="mnist", model="parallel_lstm", iterations=20, holdout_sample=False)


def test_without_sign_in_every_run_is_editable_in_a_fresh_session(home):
    store = RunStore()
    # runs recorded by other tabs, an old URL owner, another account, and none at all
    rids = [store.submit(cfg(), owner=o) for o in ("0123456789abcdef", owner_id(user("bob")), "")]
    at = page(TRAIN, query={"owner": "ffffffffffffffff"})  # AppTest's default st.user: no sign-in
    assert not at.exception
    assert keys(at, "stop_") == sorted(f"stop_{r}" for r in rids)
    assert not [e for e in at.expander if e.label.startswith("Runs of other users")]
    assert "owner" not in at.query_params  # the URL no longer carries (or grants) an owner
    assert not [b for b in at.button if (b.key or "").startswith("train_sign_in")]
    at.button(key=f"stop_{rids[1]}").click().run()
    assert not at.exception and RunStore().get(rids[1]).status == "stopped"
    # a second fresh session (another tab) sees the same runs as its own; its Start works
    other_tab = page(TRAIN)
    assert keys(other_tab, "stop_") == sorted(f"stop_{r}" for r in rids if r != rids[1])
    assert keys(other_tab, "resume_") == [f"resume_{rids[1]}"]
    other_tab.checkbox(key="train_holdout").uncheck().run()
    other_tab.number_input(key="train_iterations").set_value(10).run()
    other_tab.button(key="train_start").click().run()
    assert not other_tab.exception and len(RunStore().list_runs()) == 5  # rim + parallel LSTMs, seed 0


def test_with_sign_in_others_runs_are_read_only_and_their_actions_refused(home):
    store = RunStore()
    alices = store.submit(cfg(), owner=owner_id(user("alice")))
    bobs = store.submit(cfg(), owner=owner_id(user("bob")))
    at = page(TRAIN, user("alice"), query={"owner": owner_id(user("bob"))})
    assert not at.exception
    assert keys(at, "stop_") == [f"stop_{alices}"]
    assert any(e.label == "Runs of other users (1, read-only)" for e in at.expander)
    # the check sits in the action: a Stop button rendered for alice, clicked once the session is
    # bob's (st.user changes within a session on sign-out and sign-in), is refused by the store
    at.user = user("bob")
    at.button(key=f"stop_{alices}").click().run()
    assert not at.exception
    assert any("started by another user; only they can stop it" in e.value for e in at.error)
    assert RunStore().get(alices).status == "queued" and RunStore().get(bobs).status == "queued"


def test_not_signed_in_starts_nothing_and_acts_on_nothing(home):
    store = RunStore()
    rid = store.submit(cfg(), owner=owner_id(user("alice")))
    at = page(TRAIN, {"is_logged_in": False})
    assert not at.exception
    assert at.button(key="train_start").disabled
    assert any("Sign in to start runs" in i.value for i in at.info)
    assert [b.label for b in at.button if (b.key or "").startswith("train_sign_in")] == ["Sign in"]
    assert not keys(at, "stop_", "resume_", "del_")
    assert any(e.label == "Runs of other users (1, read-only)" for e in at.expander)
    assert RunStore().get(rid).status == "queued"


def test_models_page_without_sign_in_lets_any_run_be_deleted(page_env):
    from tests.pages.helpers import valid_weights

    w, m = valid_weights()
    rid = RunStore().import_weights(w, m, "mnist", owner="someone-from-another-tab")
    at = AppTest.from_file(MODELS, default_timeout=120)
    at.session_state["models_open"] = f"run:{rid}"
    at.run()
    assert not at.exception
    assert [b for b in at.button if b.key == f"models_del_{rid}"]  # another tab's run is this user's too
    at.checkbox(key=f"models_del_ok_{rid}").check().run()
    at.button(key=f"models_del_{rid}").click().run()
    assert not at.exception and RunStore().get(rid) is None


def test_models_page_signed_out_cannot_upload(page_env):
    at = page(MODELS, {"is_logged_in": False})
    assert not at.exception
    assert any("Sign in to upload models" in i.value for i in at.info)
    assert at.button(key="models_import").disabled


def test_viewer_rules():
    nobody, alice = Viewer(sign_in=True), Viewer(sign_in=True, user_id=owner_id(user("alice")), name="a")
    local = Viewer(sign_in=False)
    run = type("Run", (), {"owner": alice.user_id})()
    assert local.owns(run) and local.may_start and local.actor is None
    assert alice.owns(run) and alice.may_start and alice.actor == alice.user_id
    assert not nobody.owns(run) and not nobody.may_start and nobody.actor == ""
    assert owner_id({"sub": "x", "iss": "https://a"}) != owner_id({"sub": "x", "iss": "https://b"})
    assert owner_id({"iss": "https://a"}) == ""


def test_one_sign_in_button_per_named_provider(home):
    at = AppTest.from_file(TRAIN, default_timeout=120)
    at.user = {"is_logged_in": False}
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
                          "google": {"client_id": "g", "client_secret": "s", "server_metadata_url": "https://g/x"},
                          "microsoft": {"client_id": "m", "client_secret": "s", "server_metadata_url": "https://m/x"}}
    at.run()
    assert not at.exception
    labels = [b.label for b in at.button if (b.key or "").startswith("train_sign_in")]
    assert labels == ["Sign in with google", "Sign in with microsoft"]
