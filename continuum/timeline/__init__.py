"""The timeline of a task as one self-contained HTML page, and the dev server's pages.

``continuum inspect TASK_ID --html FILE`` writes :func:`timeline_page`; ``continuum dev`` and
``continuum ui`` serve the same page per task, a task list (``listing``), and forms that answer
callbacks, send signals and cancel (``continuum.timeline.server``).

May import: errors, _record, _waits, _ops.
"""

from continuum.timeline.model import timeline_data
from continuum.timeline.page import Notice, Served, timeline_page

__all__ = ["Notice", "Served", "timeline_data", "timeline_page"]
