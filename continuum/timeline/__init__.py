"""The timeline of a task as one self-contained HTML page, and the dev server's pages.

``continuum inspect TASK_ID --html FILE`` writes :func:`timeline_page`; ``continuum dev``
serves the same page per task, a task list, and forms that answer callbacks, send signals
and cancel (``continuum.timeline.server``).

May import: errors, _base, backends, _record, _define, _steps, _waits, _fanout, _turn, _worker,
_ops, _app, _local, continuum.
"""

from continuum.timeline.model import timeline_data
from continuum.timeline.page import Notice, Served, timeline_page

__all__ = ["Notice", "Served", "timeline_data", "timeline_page"]
