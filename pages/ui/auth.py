"""Who is using the page, and which runs are theirs.

Two modes, set by the server's configuration, never by the URL:

* **No sign-in** (the default: one person on their own machine). The user is the machine's
  owner: every run in the store is theirs, in every tab and after every reload.
* **Sign-in** (an ``[auth]`` section in ``.streamlit/secrets.toml``: Streamlit's ``st.login``
  with an OpenID Connect provider; docs/deployment.md). A signed-in user owns the runs they
  start and sees everyone else's read-only; someone not signed in sees every run read-only
  and starts none.

The pages pass ``Viewer.actor`` to the run store's stop, resume and delete
(``core.runs.schema.may_act`` decides), so the rule holds in the action itself, whatever
buttons a page shows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from core.runs.schema import may_act


@dataclass(frozen=True)
class Viewer:
    """The person behind this session, as far as runs are concerned."""

    sign_in: bool  # sign-in is configured on this server
    user_id: str = ""  # recorded as the owner of the runs they start; "" when not signed in
    name: str = ""  # how the page names them

    @property
    def signed_in(self) -> bool:
        return self.sign_in and bool(self.user_id)

    @property
    def actor(self) -> str | None:
        """Who acts, for the run store: None (the machine's owner) without sign-in."""
        return self.user_id if self.sign_in else None

    @property
    def may_start(self) -> bool:
        """May start runs and upload models: always without sign-in, else once signed in."""
        return not self.sign_in or self.signed_in

    def owns(self, run) -> bool:
        """Whether this person may stop, resume or delete ``run`` (anything with ``.owner``)."""
        return may_act(getattr(run, "owner", ""), self.actor)


def owner_id(user: Mapping) -> str:
    """The owner id of a signed-in account: its OpenID Connect issuer and subject (the pair
    that names one account for good, unlike an e-mail address), hashed to a fixed length.
    "" when the account has no subject."""
    sub = str(user.get("sub") or "")
    if not sub:
        return ""
    iss = str(user.get("iss") or "")
    return "user-" + hashlib.sha256(f"{iss}\n{sub}".encode()).hexdigest()[:24]


def current_viewer() -> Viewer:
    """This session's viewer, from ``st.user``: Streamlit sets ``is_logged_in`` exactly when
    sign-in is configured, and fills the rest from the provider's signed identity token."""
    user = st.user.to_dict()
    if "is_logged_in" not in user:
        return Viewer(sign_in=False)
    if not user.get("is_logged_in"):
        return Viewer(sign_in=True)
    name = next((str(user[k]) for k in ("name", "email", "preferred_username") if user.get(k)), "you")
    return Viewer(sign_in=True, user_id=owner_id(user), name=name)


def _providers() -> list[str | None]:
    """The providers set up under ``[auth]``: None for settings at its top level, else the
    names of its ``[auth.NAME]`` sections."""
    try:
        section = st.secrets.get("auth") or {}
    except Exception:  # no secrets file: st.user would not say sign-in is on
        return [None]
    named = [k for k, v in section.items() if isinstance(v, Mapping)]
    return [None] if "client_id" in section or not named else named


def sign_in_buttons(key: str) -> None:
    """A sign-in button per configured provider (Streamlit's login flow)."""
    for provider in _providers():
        label = "Sign in" if provider is None else f"Sign in with {provider}"
        if st.button(label, key=f"{key}_{provider or 'default'}", type="primary", icon=":material/login:"):
            if provider is None:
                st.login()
            else:
                st.login(provider)


def account_box() -> None:
    """Who is signed in, with sign-in and sign-out, in the sidebar; nothing without sign-in."""
    viewer = current_viewer()
    if not viewer.sign_in:
        return
    with st.sidebar:
        if viewer.signed_in:
            st.caption(f"Signed in as **{viewer.name}**. Your runs are yours alone; everyone else's are "
                       "read-only for you.")
            if st.button("Sign out", key="auth_sign_out", icon=":material/logout:"):
                st.logout()
        elif st.user.get("is_logged_in"):
            st.warning("Your account has no user id (the provider sent no subject), so it cannot own runs.")
            if st.button("Sign out", key="auth_sign_out", icon=":material/logout:"):
                st.logout()
        else:
            st.caption("Sign in to train models and manage your runs.")
            sign_in_buttons("auth_sidebar")


def sign_in_prompt(what: str, key: str) -> None:
    """Say that ``what`` needs signing in, with the buttons to do it (only when sign-in is on
    and nobody is signed in)."""
    viewer = current_viewer()
    if viewer.sign_in and not viewer.signed_in:
        st.info(f"Sign in to {what}. Everyone's runs stay visible, read-only, without signing in.")
        sign_in_buttons(key)
