"""One public door: everything users need is in ``continuum.__all__``, sorted."""

from __future__ import annotations

import continuum


def test_all_is_sorted_and_importable():
    assert continuum.__all__ == sorted(continuum.__all__)
    for name in continuum.__all__:
        assert getattr(continuum, name) is not None


def test_the_names_design_md_promises_are_public():
    for name in ("Continuum", "TaskContext", "Client", "TaskStatus", "ContinuumError"):
        assert name in continuum.__all__
    app = continuum.Continuum(bucket="b", queue_url="q")
    assert callable(app.handler)
    assert isinstance(app.client(), continuum.Client)
