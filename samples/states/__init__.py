"""The samples' state models, each in a module of its own: ``continuum start`` imports only the
model's module to check an input, not the sample's agent and what it imports."""
