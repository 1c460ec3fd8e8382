"""``continuum dev --port``: the timeline pages, the address a person opens, are on the port
given, and never on one that browsers refuse; the stack's endpoint takes the next port."""

from __future__ import annotations

import pytest

from continuum.cli import main
from continuum.cli.common import CliError
from continuum.cli.dev import BROWSER_UNSAFE_PORTS, UI_PORT, dev_ports


def test_the_pages_are_on_the_port_given_and_the_stack_on_the_next():
    assert dev_ports(5070, None) == (5070, 5071)
    assert dev_ports(5070, 6100) == (5070, 6100)
    assert dev_ports(0, None) == (0, 0)
    assert dev_ports(UI_PORT, None) == (UI_PORT, UI_PORT + 1)


def test_the_default_pages_port_is_one_browsers_open():
    assert UI_PORT not in BROWSER_UNSAFE_PORTS


@pytest.mark.parametrize("port", [5060, 5061, 6000, 6666, 10080])
def test_a_port_browsers_refuse_is_a_one_line_error_before_anything_starts(capsys, port):
    assert main(["dev", "samples.research_team:app", "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"error: --port {port} is a port browsers refuse to open (ERR_UNSAFE_PORT): the "
        f"timeline pages would not show; pass another, such as {UI_PORT}"
    ]


def test_the_stack_may_sit_on_a_port_browsers_refuse():
    assert dev_ports(5059, None) == (5059, 5060)  # boto3 opens any port
    assert dev_ports(5060, None, ui=False) == (None, 5061)


def test_the_pages_and_the_stack_cannot_share_a_port():
    with pytest.raises(CliError, match="each needs its own port"):
        dev_ports(5070, 5070)
