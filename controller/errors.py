"""The error a run raises for its user: one line, no traceback (``controller.cli`` prints it)."""


class ExperimentError(RuntimeError):
    """A run could not be set up or did not complete (one line for the user)."""
