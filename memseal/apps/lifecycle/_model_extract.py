"""The model extractor plug-in: a model draws beliefs, and its outputs replay from the run.

A host plugs a model into the belief builds in one of two ways:

* any object with ``async extract(turns) -> [Belief]`` (:class:`Extractor`);
* a :class:`BeliefModel`, anything with ``async complete(prompt) -> str``,
  wrapped in :class:`ModelExtractor`: it writes the prompt (the
  instructions, then the turns as JSON lines) and reads the reply through a
  strict decoder (``{"beliefs": [{"text", "kind", "confidence", "subject",
  "sources"}]}``). A reply that does not decode, or cites a turn it was not
  shown, fails the attempt (the job is retried, see :mod:`._retry`), never
  half-read.

A model is not deterministic, so a job whose extractor does not declare
``deterministic = True`` records what it drew: the *plan*, a ``scratch``
learning in the job's run (keyed ``plan``, a signed ``memory_stored``
entry) whose text is canonical JSON of the beliefs (:func:`encode_plan`).
The beliefs written are always the recorded plan's, and a round asks the
model once:

1. a resumed job (killed after its plan was recorded) finds the key ``plan``
   recorded in its run and does not ask the model: a call under that key
   diverges from the recorded store, whose arguments (carried by the
   :class:`ReplayDivergence`, read from the run's signed ``memory_tool_call``
   entry and checked against it) are decoded and replayed from their memo;
2. a retry (the attempt after one that failed once its plan was recorded;
   its failure marker says ``planned``) reads that attempt's plan the same
   way, from the earlier run opened ``strict`` (nothing live, nothing
   written), and records it as its own plan: the model is not asked again in
   the round. A re-queue opens a new round, which asks it afresh;
3. should a resumed job still get a fresh answer (a host's recorder that
   cannot say what its run holds), the store keyed ``plan`` diverges and the
   recorded plan stands, the fresh answer dropped;
4. a strict replay (CI) never asks the model: it reads the recorded plan the
   same way and replays every step from its memo.

:class:`RuleExtractor` declares ``deterministic = True``: its plan is its
code, and nothing more is recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from memseal.ledger.errors import InvalidRequest, ReplayDivergence, StorageError
from memseal.memory import RecordedTools

from ._extract import Belief, SourceTurn

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "PLAN_TAG",
    "BeliefModel",
    "ModelExtractor",
    "decode_plan",
    "encode_plan",
    "is_deterministic",
    "planned",
    "recorded_plan",
]

#: The tag of a job's recorded plan.
PLAN_TAG: Final = "memseal-job-plan"
_MAX_BELIEFS: Final = 50

DEFAULT_INSTRUCTIONS: Final = (
    "Read the conversation turns below, one JSON object a line (item, role, text). "
    "List what the user stated about themselves, their preferences and their decisions, "
    'as JSON: {"beliefs": [{"text": "...", "kind": "fact" or "decision", '
    '"confidence": 0 to 1, "subject": "one-value topic or null", '
    '"sources": ["the item ids it came from"]}]}. Reply with that JSON only.'
)


@runtime_checkable
class BeliefModel(Protocol):
    """A model a :class:`ModelExtractor` asks: a prompt in, the reply's text out."""

    async def complete(self, prompt: str) -> str:
        """The model's reply to ``prompt``."""
        ...


class _ReplyBelief(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: str
    kind: Literal["fact", "decision"] = "fact"
    confidence: float = 0.8
    subject: str | None = None
    sources: tuple[str, ...] = ()
    preference: bool = False


class _Reply(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    beliefs: tuple[_ReplyBelief, ...]


class _Plan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    v: Literal[1]
    job: str
    beliefs: tuple[Belief, ...]


_reply_decoder = msgspec.json.Decoder(_Reply)
_plan_decoder = msgspec.json.Decoder(_Plan)
_encoder = msgspec.json.Encoder(order="deterministic")


def is_deterministic(extractor: object) -> bool:
    """Whether ``extractor`` says the same turns always give it the same beliefs."""
    return getattr(extractor, "deterministic", False) is True


def encode_plan(job: str, beliefs: Sequence[Belief]) -> str:
    """A job's plan as canonical JSON (the text of its recorded ``scratch`` learning)."""
    return _encoder.encode(_Plan(v=1, job=job, beliefs=tuple(beliefs))).decode()


def decode_plan(job: str, arguments: object) -> list[Belief]:
    """The beliefs of a recorded plan store's ``arguments``, or :class:`StorageError`
    naming what is wrong (a plan of another job, or not a plan at all)."""
    text: Any = None
    if isinstance(arguments, dict):
        learning = arguments.get("learning")
        if isinstance(learning, dict):
            text = learning.get("text")
    if not isinstance(text, str):
        raise StorageError(f"job {job}: the recorded plan is not a stored learning")
    try:
        plan = _plan_decoder.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise StorageError(f"job {job}: the recorded plan does not decode: {exc}") from None
    if plan.job != job:
        raise StorageError(f"job {job}: the recorded plan is job {plan.job}'s")
    return list(plan.beliefs)


class ModelExtractor:
    """An :class:`Extractor` that asks a :class:`BeliefModel` (see the module docstring).

    Not deterministic: a job using it records its plan and replays it.
    """

    deterministic: Final = False

    def __init__(self, model: BeliefModel, *, instructions: str = DEFAULT_INSTRUCTIONS) -> None:
        if not isinstance(model, BeliefModel):
            raise InvalidRequest("`model` must have an async complete(prompt) method")
        if not isinstance(instructions, str) or not instructions.strip():
            raise InvalidRequest("`instructions` must be non-empty text")
        self.model = model
        self.instructions = instructions

    def prompt(self, turns: Sequence[SourceTurn]) -> str:
        """The prompt for ``turns``: the instructions, then a JSON line a turn."""
        lines = [
            _encoder.encode({"item": t.item, "role": t.role, "text": t.text}).decode()
            for t in turns
        ]
        return self.instructions + "\n\n" + "\n".join(lines)

    async def extract(self, turns: Sequence[SourceTurn]) -> Sequence[Belief]:
        """The beliefs the model's reply lists, each citing turns it was shown."""
        reply = await self.model.complete(self.prompt(turns))
        if not isinstance(reply, str):
            raise StorageError("the model's reply is not text")
        try:
            decoded = _reply_decoder.decode(reply.strip())
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise StorageError(f"the model's reply is not the beliefs JSON: {exc}") from None
        if len(decoded.beliefs) > _MAX_BELIEFS:
            raise StorageError(
                f"the model listed {len(decoded.beliefs)} beliefs; at most {_MAX_BELIEFS}"
            )
        shown = {t.item for t in turns}
        beliefs: list[Belief] = []
        for index, said in enumerate(decoded.beliefs):
            if not said.text.strip() or not 0 <= said.confidence <= 1:
                raise StorageError(f"the model's belief {index} has no text or a bad confidence")
            unknown = [s for s in said.sources if s not in shown]
            if unknown:
                raise StorageError(
                    f"the model's belief {index} cites turns it was not shown: {unknown[:3]}"
                )
            beliefs.append(
                Belief(
                    text=" ".join(said.text.split()),
                    kind=said.kind,
                    confidence=said.confidence,
                    subject=said.subject,
                    sources=said.sources,
                    preference=said.preference,
                )
            )
        return beliefs


async def recorded_plan(tools: RecordedTools, job: str) -> list[Belief]:
    """The plan recorded under the key ``plan`` in the run ``tools`` are bound to (opened
    ``strict``: nothing live, nothing written), read from its signed entry; or
    :class:`StorageError` when the run recorded none."""
    return decode_plan(job, _recorded_arguments(job, await _probe(tools, job)))


async def _probe(tools: RecordedTools, job: str) -> ReplayDivergence:
    """The divergence a call under the key ``plan`` meets in a run that recorded the key
    (or a strict run): it carries the recorded call, checked against its signed entry."""
    probe: dict[str, Any] = {"ids": [f"plan-of-{job}"]}
    try:
        await tools.call("memory_get", probe, key="plan")
    except ReplayDivergence as exc:
        return exc
    raise StorageError(f"job {job}: its run recorded no plan")


def _recorded_key(tools: RecordedTools, key: str) -> bool:
    # memseal's recorded tools say what their run holds; a wrapper a host passes in their
    # place (one that injects faults, say) may not, and its run then counts as holding none.
    ask = getattr(tools, "is_recorded_key", None)
    return callable(ask) and ask(key) is True


async def planned(
    tools: RecordedTools,
    job: str,
    extract: Callable[[], Awaitable[list[Belief]]],
    mode: str,
    earlier: Callable[[], Awaitable[list[Belief] | None]] | None = None,
) -> list[Belief]:
    """The beliefs a job of a non-deterministic extractor writes: its run's recorded plan,
    else an earlier attempt's of the round (``earlier``), else, the first time, what
    ``extract`` draws; recorded as this run's plan (see the module docstring)."""
    if mode == "strict" or _recorded_key(tools, "plan"):
        # CI, or a resumed run that recorded its plan: the model is never asked.
        return await _recorded_plan(tools, job, await _probe(tools, job))
    reused = None if earlier is None else await earlier()
    beliefs = reused if reused is not None else await extract()
    arguments = {
        "learning": {"text": encode_plan(job, beliefs), "learning_kind": "scratch"},
        "tags": [PLAN_TAG, f"plan:{job}"],
    }
    try:
        await tools.call("memory_store", arguments, key="plan")
    except ReplayDivergence as exc:
        # Resumed after the plan was recorded: the model said something else this time;
        # what was planned (and perhaps partly written) is what stands.
        return await _recorded_plan(tools, job, exc)
    return beliefs


def _recorded_arguments(job: str, divergence: ReplayDivergence) -> Any:
    recorded = divergence.recorded
    if not isinstance(recorded, dict) or recorded.get("tool") != "memory_store":
        raise StorageError(f"job {job}: the run's `plan` step is not a recorded plan")
    return recorded.get("arguments")


async def _recorded_plan(
    tools: RecordedTools, job: str, divergence: ReplayDivergence
) -> list[Belief]:
    arguments = _recorded_arguments(job, divergence)
    beliefs = decode_plan(job, arguments)
    # The recorded call again, from its memo: the step is consumed, nothing is written.
    await tools.call("memory_store", arguments, key="plan")
    return beliefs
