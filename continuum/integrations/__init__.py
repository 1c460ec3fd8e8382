"""Integrations with other libraries, each behind an optional extra (the core imports none)."""
