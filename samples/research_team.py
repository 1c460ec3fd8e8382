"""A research team: a lead agent splits a topic into sub-questions, hands each to a researcher
(a child task of its own, with its own record and invocations), and merges their answers.

The "model" and the tools are deterministic fakes (no network, no API key) whose calls take
measurable time, so a short invocation budget forces continuations, in the lead and in the
researchers alike. One sub-question has no sources: its researcher fails, and the lead
tolerates one failure (``Completion(tolerated_failure_count=1)``) and says what is missing.
The merged report depends only on the topic, never on where the continuations fell.

Run it locally (the local runtime runs the researchers too):
    continuum run samples.research_team:lead --input '{"topic": "tides"}' --budget 2
"""

from __future__ import annotations

import hashlib
import time

from pydantic import BaseModel

from continuum import Completion, Continuum, TaskContext

app = Continuum()

#: What the fake model asks about any topic; the last has no sources (its researcher fails).
ANGLES = (
    "what causes {topic}",
    "how {topic} are measured",
    "how {topic} vary over a month",
    "what {topic} do to coastlines",
    "how {topic} were explained before Newton",
    "what {topic} will be like in the year 3000",
)
UNKNOWABLE = "in the year 3000"


class Team(BaseModel):
    """The lead's state: the topic and how to run the team."""

    topic: str
    questions: int = len(ANGLES)
    max_concurrency: int = 3
    tolerated_failures: int = 1
    latency_scale: float = 1.0


class Question(BaseModel):
    """A researcher's state: one sub-question, and the notes it has gathered."""

    topic: str
    question: str
    latency_scale: float = 1.0


class Answer(BaseModel):
    question: str
    text: str
    sources: list[str]


class NoSourcesError(Exception):
    """A search found nothing to read."""


def _digest(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def _pause(scale: float, low_s: float, high_s: float, *seed: object) -> None:
    """Take a deterministic, seeded amount of time between ``low_s`` and ``high_s``."""
    span = (_digest(*seed) % 1000) / 1000
    time.sleep(scale * (low_s + span * (high_s - low_s)))


# -- the lead ----------------------------------------------------------------------------------


@app.step
def plan(topic: str, questions: int, scale: float) -> list[str]:
    """The fake model splits the topic into sub-questions."""
    _pause(scale, 0.3, 0.6, "plan", topic)
    return [angle.format(topic=topic) for angle in ANGLES[:questions]]


@app.step
def merge(topic: str, answers: list[Answer], missing: list[str], scale: float) -> str:
    """The fake model writes the report from the researchers' answers."""
    _pause(scale, 0.3, 0.6, "merge", topic, len(answers))
    lines = [f"Report on {topic} ({len(answers)} answers):"]
    lines += [f"- {a.question}: {a.text} [{', '.join(a.sources)}]" for a in answers]
    lines += [f"- unanswered: {q}" for q in missing]
    return "\n".join(lines)


@app.task(state=Team)
def lead(ctx: TaskContext[Team]) -> str:
    """Plan, fan out to one researcher per sub-question, and merge what comes back."""
    s = ctx.state
    questions = plan(s.topic, s.questions, s.latency_scale)
    inputs = [
        Question(topic=s.topic, question=q, latency_scale=s.latency_scale).model_dump()
        for q in questions
    ]
    batch = ctx.map_tasks(
        "researcher",
        inputs,
        max_concurrency=s.max_concurrency,
        completion=Completion(tolerated_failure_count=s.tolerated_failures),
    )
    answers = [Answer.model_validate(item.result) for item in batch.succeeded()]
    missing = [questions[item.index] for item in batch.failed()]
    return merge(s.topic, answers, missing, s.latency_scale)


# -- a researcher -------------------------------------------------------------------------------


@app.step
def search(question: str, scale: float) -> list[str]:
    """The fake search: two or three sources, or none for what cannot be known."""
    _pause(scale, 0.2, 0.5, "search", question)
    if UNKNOWABLE in question:
        raise NoSourcesError(f"no sources for {question!r}")
    wanted = 2 + _digest("sources", question) % 2
    return [f"source-{_digest('source', question, i) % 1000:03d}" for i in range(wanted)]


@app.step
def read(question: str, source: str, scale: float) -> str:
    """The fake reader: a deterministic note from one source."""
    _pause(scale, 0.2, 0.5, "read", question, source)
    return f"{source} says {_digest('note', question, source) % 100}"


@app.step
def answer(question: str, notes: list[str], scale: float) -> str:
    """The fake model answers the sub-question from the notes."""
    _pause(scale, 0.2, 0.5, "answer", question)
    total = sum(int(note.rsplit(" ", 1)[-1]) for note in notes)
    return f"finding {total % 1000} from {len(notes)} notes"


@app.task(state=Question)
def researcher(ctx: TaskContext[Question]) -> dict[str, object]:
    """Search, read each source, answer: one step each, replayed after a continuation."""
    s = ctx.state
    sources = search(s.question, s.latency_scale)
    notes = [read(s.question, source, s.latency_scale) for source in sources]
    text = answer(s.question, notes, s.latency_scale)
    return Answer(question=s.question, text=text, sources=sources).model_dump()
