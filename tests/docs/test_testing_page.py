"""docs/testing.md documents every public helper of ``continuum.testing``: each name, and each
public method and property of the handles and the runner a test uses."""

from __future__ import annotations

import pytest

import continuum.testing as testing
from tests.fresh import ROOT

PAGE = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
USED = (testing.TaskRunner, testing.TaskHandle, testing.CallbackHandle, testing.StepRun)


@pytest.mark.parametrize("name", testing.__all__)
def test_the_testing_page_names_every_public_helper(name):
    assert f"`{name}" in PAGE or f"**`{name}" in PAGE, name


@pytest.mark.parametrize(
    ("owner", "member"),
    [(cls.__name__, m) for cls in USED for m in vars(cls) if not m.startswith("_")],
)
def test_the_testing_page_documents_every_method_of_the_runner_and_its_handles(owner, member):
    assert f"`{member}" in PAGE or f".{member}" in PAGE, (owner, member)
