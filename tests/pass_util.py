"""Shared by the IR passes' tests (tests/test_fuse_*.py, ...)."""


def only_passes(monkeypatch, *names):
    """Runs with only the named IR passes (of those a run's BuildStrategy asks for), the others disabled: a pass's own
    tests count its rewrites, which the passes on by default (fusion) would change further."""
    from fluidlite import core
    others = [p["name"] for p in core.passes() if p["name"] not in names]
    monkeypatch.setenv("FLUIDLITE_DISABLE_PASSES", ",".join(others) or "none")
