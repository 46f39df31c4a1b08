"""The credential implementations on their own: TokenFileAuth.

ExecAuth has test_exec_auth.py; the kubeconfig rules that choose an Auth for a
user are in test_config.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kubereflector.client import Auth, ConfigError, TokenFileAuth
from kubereflector.testing import FakeClock

# -- token files ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_token_file_is_reread_after_its_period(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("one\n")
    auth = TokenFileAuth(path, reread_after=60, clock=clock)
    assert isinstance(auth, Auth)
    assert (await auth.authorize()).headers == {"Authorization": "Bearer one"}
    path.write_text("two")
    clock.step(59)
    assert (await auth.authorize()).headers == {"Authorization": "Bearer one"}
    clock.step(1)
    assert (await auth.authorize()).headers == {"Authorization": "Bearer two"}


@pytest.mark.asyncio
async def test_token_file_is_reread_after_invalidate(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    auth = TokenFileAuth(path, clock=FakeClock())
    first = await auth.authorize()
    assert (await auth.authorize()) is first  # cached: same object
    path.write_text("two")
    auth.invalidate()
    assert (await auth.authorize()).headers == {"Authorization": "Bearer two"}


@pytest.mark.asyncio
async def test_token_file_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        await TokenFileAuth(tmp_path / "absent").authorize()
    assert str(caught.value).startswith(f"token file '{tmp_path / 'absent'}' cannot be read")
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(ConfigError, match="is empty"):
        await TokenFileAuth(tmp_path / "empty").authorize()


@pytest.mark.asyncio
async def test_token_file_that_is_not_text(tmp_path: Path) -> None:
    (tmp_path / "token").write_bytes(b"\xff\xfe-not-utf8")
    with pytest.raises(ConfigError, match="is not UTF-8 text") as caught:
        await TokenFileAuth(tmp_path / "token").authorize()
    assert caught.value.__context__ is None


@pytest.mark.asyncio
async def test_token_file_keeps_the_old_token_when_a_reread_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    auth = TokenFileAuth(path, clock=FakeClock())
    await auth.authorize()
    path.unlink()
    auth.invalidate()
    with caplog.at_level(logging.WARNING, logger="kubereflector"):
        assert (await auth.authorize()).headers == {"Authorization": "Bearer one"}
    assert "keeping the token in use" in caplog.text
    assert str(path) in caplog.text
