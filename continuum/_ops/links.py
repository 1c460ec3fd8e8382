"""The callback link endpoint, for what runs outside a task (the dev server's pages, the CLI).

It lives below, beside the answers it writes (``continuum._waits.link_endpoint``), so that the
link function's Lambda imports no more than a worker does; this module names it for the
operator's side, which may not reach down there itself.
"""

from __future__ import annotations

from continuum._base.callback_links import LINK_PATH
from continuum._waits.link_endpoint import LinkEndpoint, LinkResponse

__all__ = ["LINK_PATH", "LinkEndpoint", "LinkResponse"]
