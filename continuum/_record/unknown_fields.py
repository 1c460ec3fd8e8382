"""What the stored models do with a field they do not know: one written by a newer release.

A part of the record is read, changed and written back: a field this release does not know
is kept (:class:`KeepsUnknownFields`), so that a newer worker in a rolling deploy finds it
again. An object that is read and never written back (an inbox object, a message) drops it
(:class:`IgnoresUnknownFields`).
"""

from pydantic import BaseModel, ConfigDict


class KeepsUnknownFields(BaseModel):
    """A model written back after it is read: fields a newer release added are kept."""

    model_config = ConfigDict(extra="allow", validate_assignment=False, populate_by_name=True)


class IgnoresUnknownFields(BaseModel):
    """A model only read where it is not written: fields a newer release added are dropped."""

    model_config = ConfigDict(extra="ignore")
