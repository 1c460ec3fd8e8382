"""``python -m continuum.cli``: the continuum command."""

from continuum.cli import main

raise SystemExit(main())
