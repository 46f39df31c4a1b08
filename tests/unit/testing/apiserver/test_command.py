"""The emulator's command-line options, as any parser gets them from add_arguments."""

from __future__ import annotations

import argparse

import pytest

from kubereflector.testing.apiserver._command import add_arguments


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="emulator")
    add_arguments(parser)
    return parser.parse_args(argv)


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The message argparse exits with (status 2) for ``argv``."""
    parser = argparse.ArgumentParser(prog="emulator")
    add_arguments(parser)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_defaults() -> None:
    args = parse()
    assert vars(args) == {
        "host": "127.0.0.1",
        "port": 0,
        "write_kubeconfig": None,
        "seed_pods": 0,
        "no_tls": False,
        "tls": False,
        "token": None,
        "no_auth": False,
        "bookmark_interval": 60.0,
        "history_limit": 10_000,
    }


def test_every_option() -> None:
    args = parse(
        "--host=0.0.0.0",
        "--port=6443",
        "--write-kubeconfig=kc.yaml",
        "--seed-pods=12",
        "--no-tls",
        "--token=s3cret",
        "--bookmark-interval=0.5",
        "--history-limit=0",
    )
    assert (args.host, args.port, args.write_kubeconfig, args.seed_pods) == (
        "0.0.0.0",
        6443,
        "kc.yaml",
        12,
    )
    assert (args.no_tls, args.token, args.no_auth) == (True, "s3cret", False)
    assert (args.bookmark_interval, args.history_limit) == (0.5, 0)


def test_insecure_http_is_no_tls_and_tls_is_accepted() -> None:
    assert parse("--insecure-http").no_tls is True
    assert parse("--tls").no_tls is False  # HTTPS is the default; --tls changes nothing


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--port", "65536"),
            "argument --port: invalid port 65536 (0 to 65535; 0 picks a free one)",
        ),
        (("--port", "-1"), "argument --port: invalid port -1"),
        (("--port", "http"), "argument --port: not an integer: 'http'"),
        (("--seed-pods", "-3"), "argument --seed-pods: must be >= 0 (got -3)"),
        (("--history-limit", "-1"), "argument --history-limit: must be >= 0 (got -1)"),
        (("--bookmark-interval", "0"), "argument --bookmark-interval: must be > 0 (got 0)"),
        (("--bookmark-interval", "nan"), "argument --bookmark-interval: must be > 0 (got nan)"),
        (("--bookmark-interval", "soon"), "not a number of seconds: 'soon'"),
        (("--token", ""), "argument --token: must not be empty (use --no-auth for no token)"),
        (("--token", "t", "--no-auth"), "argument --no-auth: not allowed with argument --token"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    assert message in usage_error(capsys, *argv)
