"""What a user declares: steps and their options (``steps``), the app's settings
(``settings``), observers and their events (``observers``), callbacks (``callbacks``), the
completion policies of a batch (``completion``) and recurring schedules (``recurring``).

May import: errors, _base, backends, _record.
"""
