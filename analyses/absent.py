"""What a saved result lacks: :class:`Absent`, the error a Result's accessor raises when the number it is asked for
was never computed (a window, an overlap or a threshold the run did not use).

The claims judge an :class:`Absent` (and a null or non-finite number) "not testable", with its words. Any other
error from an accessor -- a ``KeyError`` of a misspelt row key, an ``AttributeError``, a ``TypeError`` -- is the
code's, and is raised: a programming error is never a verdict.

    >>> from analyses.absent import Absent
    >>> str(Absent("k at n = 100, p = 0.9"))
    'k at n = 100, p = 0.9'
    >>> isinstance(Absent("x"), KeyError)  # callers that treat a missing key as a result to skip keep doing so
    True
"""


class Absent(KeyError):
    """A number a result does not hold: the run that wrote it did not compute it (its words say which)."""

    def __str__(self) -> str:  # the words as given (a KeyError would quote them)
        return str(self.args[0]) if self.args else ""
