"""Which step a run's next call gets: the numbering rules of a durable run, on their own.

A run numbers its calls 0, 1, 2, ... and a step is consumed only when its
entry commits. :class:`StepBook` keeps the numbers a :class:`Run` object has
handed out and the rules it hands them out by:

* **positional steps**: an unkeyed call takes the next step from the unkeyed
  cursor, skipping the steps keyed calls of this run took; the cursor follows
  the unkeyed calls' own order, which keyed calls (replayed in any order) never
  move, so an unkeyed call is never handed the step of the unkeyed call after it;
* **keyed steps**: a new keyed call takes the first step past every step handed
  out that no current recorded call holds;
* **explicit steps** (:meth:`claim`): a caller numbering its own steps moves
  both past the step it claims;
* **re-issues**: a call that fails before its entry commits gives its step back;
  the next call takes the lowest given-back step (so a failure never leaves a
  gap), and a step handed out again is a re-issue until its entry commits (its
  entry is written only if no memo appeared there meanwhile: a commit whose
  outcome was unknown may have landed).

The book holds numbers only: what is recorded, the lease, the memos and the
locks stay with the run (``run.py``, ``_live.py``, ``_lease.py``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["StepBook"]


class StepBook:
    """The steps one :class:`Run` object handed out, and the next one to hand out."""

    def __init__(self) -> None:
        #: One more than the highest step handed out so far.
        self.issued = 0
        self._cursor = 0  # where unkeyed calls are numbered from
        self._keyed: set[int] = set()  # steps keyed calls of this run took
        self._holes: set[int] = set()  # steps given back, not yet handed out again
        self._reissued: set[int] = set()  # steps given back whose entry has not committed

    def next_step(self) -> int:
        """The step the next unkeyed call takes (a given-back step first)."""
        return min(self._holes) if self._holes else self._unkeyed_from()

    def _unkeyed_from(self) -> int:
        step = self._cursor
        while step in self._keyed:
            step += 1
        return step

    def _refill(self) -> int | None:
        if not self._holes:
            return None
        step = min(self._holes)
        self._holes.discard(step)
        return step

    def take(self) -> int:
        """Hand out the next step to an unkeyed call."""
        step = self._refill()
        if step is not None:
            return step
        step = self._unkeyed_from()
        self._cursor = step + 1
        self.issued = max(self.issued, step + 1)
        return step

    def take_free(self, start: int, held: Callable[[int], bool]) -> int:
        """Hand out a step to a new keyed call: a given-back one, else the first step at or
        past ``start`` and every step handed out that ``held`` (a current recorded call's)
        does not claim."""
        step = self._refill()
        if step is None:
            step = max(self.issued, start)
            while held(step):
                step += 1
            self.issued = step + 1
        self._keyed.add(step)
        return step

    def keyed(self, step: int) -> None:
        """A keyed call took ``step`` (its recorded step, or a fresh one): unkeyed calls skip it."""
        self._keyed.add(step)

    def claim(self, step: int) -> None:
        """An explicit call of ``step``: the next steps handed out come after it."""
        self.issued = max(self.issued, step + 1)
        self._cursor = max(self._cursor, step + 1)
        self._holes.discard(step)

    def skip_to(self, step: int) -> None:
        """Number the next calls from ``step`` on (a reopened run continuing)."""
        self.issued = max(self.issued, step)
        self._cursor = max(self._cursor, step)

    def entered(self, step: int) -> None:
        """A call of ``step`` got the step's turn: the step is its own now."""
        self._holes.discard(step)
        self.issued = max(self.issued, step + 1)

    def give_back(self, step: int) -> None:
        """The call of ``step`` failed before its entry committed: hand the step out again.

        The last step handed out is taken back outright (with any given-back steps just
        below it), so the numbering ends where the run's recorded steps do."""
        self._reissued.add(step)
        self._keyed.discard(step)
        if step != self.issued - 1:
            self._holes.add(step)
            return
        self.issued = step
        while self.issued - 1 in self._holes:
            self.issued -= 1
            self._holes.discard(self.issued)
        self._cursor = min(self._cursor, self.issued)

    def is_reissue(self, step: int) -> bool:
        """Whether ``step`` was given back and handed out again, and has not committed since."""
        return step in self._reissued

    def committed(self, step: int) -> None:
        """The entry of ``step`` committed: it is no longer a re-issue."""
        self._reissued.discard(step)
