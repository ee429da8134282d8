"""Run ``facetlake``'s real entry point (``pipelines.cli.main``) in the test process."""

from __future__ import annotations

import sys

import pytest


def run_main(monkeypatch, capsys, argv) -> tuple[int, str]:
    """``facetlake ARGV`` through ``main()`` (its one-line error handling included, debug
    tracebacks off): the exit status and what it wrote to stderr."""
    from pipelines import cli

    monkeypatch.delenv("FACETLAKE_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["facetlake", *argv])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    return exc.value.code, capsys.readouterr().err
