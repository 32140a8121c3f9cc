"""User-facing errors.

Anything a user can cause (an unknown model name, a missing corpus, an over-long text, an
unsafe checkpoint) raises :class:`ProbeError` with one line that names the problem. The CLIs
print that line and exit non-zero; they never show a traceback for it.
"""


class ProbeError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class CorpusError(ProbeError):
    """The corpus is missing, unreadable, empty or malformed."""


class CheckpointError(ProbeError):
    """A named checkpoint is unknown, unavailable offline, or unsafe to load."""
