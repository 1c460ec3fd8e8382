"""What a user declares: steps and their options (``steps``), the app's settings
(``settings``), observers and their events (``observers``), callbacks (``callbacks``) and the
completion policies of a batch (``completion``).

May import: errors, _base, backends, _record.
"""
