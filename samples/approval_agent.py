"""An agent that drafts a post, waits for a person to approve it, and only then publishes.

The drafting model and the publishing service are deterministic fakes (no network, no key)
that take measurable time. The approval is a callback: the task hands its id to a reviewer
(here: it prints it) and waits for days if need be, with no Lambda running while it waits. A
reviewer who rejects the draft sends a note; the agent revises and asks again, at most three
times. No answer within two days fails the approval and the post is shelved.

Run it locally and approve it in one command (a virtual clock: the wait takes no time):
    continuum run samples.approval_agent:publish --input '{"topic": "tides"}' \\
        --answer 'approval={"approved": true}'

Or on the dev server, from two terminals:
    continuum dev samples.approval_agent:app            # terminal 1
    continuum start publish --app samples.approval_agent:app --input '{"topic": "tides"}'
    continuum status TASK_ID                            # lists the callback id
    continuum callback complete CALLBACK_ID --result '{"approved": true}'
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta

from pydantic import BaseModel

from continuum import CallbackTimeoutError, Continuum, TaskContext

app = Continuum()

#: How long a reviewer has to answer.
REVIEW_TIMEOUT = timedelta(days=2)
MAX_REVISIONS = 3


class Review(BaseModel):
    """A reviewer's answer to the approval callback."""

    approved: bool
    note: str = ""


class Post(BaseModel):
    """What the next worker must know: the topic, the drafts so far, and the reviews."""

    topic: str
    drafts: list[str] = []
    reviews: list[Review] = []
    url: str | None = None


def _think(*seed: object) -> None:
    """Take a deterministic amount of time (0.2-0.5 s), as a model call would."""
    span = int.from_bytes(hashlib.sha256("|".join(map(str, seed)).encode()).digest()[:2], "big")
    time.sleep(0.2 + 0.3 * span / 65535)


@app.step
def draft(topic: str, notes: list[str]) -> str:
    """The model writes a draft, taking the reviewers' notes into account."""
    _think(topic, *notes)
    revision = f" (revised for: {'; '.join(notes)})" if notes else ""
    return f"Why {topic} matter: a short explainer{revision}."


@app.step
def ask_for_review(callback_id: str, text: str) -> str:
    """Send the draft to a reviewer with the id that answers it (here: print both)."""
    print(f"review requested: {text!r}\n  answer with: continuum callback complete {callback_id}")
    return callback_id


@app.step(effect=True)
def post_online(text: str) -> str:
    """Publish (an effect: the journal is saved right after it, so it never runs twice)."""
    _think("publish", text)
    return f"https://example.org/posts/{hashlib.sha256(text.encode()).hexdigest()[:10]}"


@app.task(state=Post)
def publish(ctx: TaskContext[Post]) -> str | None:
    """One turn per draft: write it, wait for the review, publish or revise."""
    post = ctx.state
    post.drafts.append(draft(post.topic, [r.note for r in post.reviews if r.note]))
    approval = ctx.create_callback("approval", timeout=REVIEW_TIMEOUT)
    ask_for_review(approval.id, post.drafts[-1])
    try:
        review = Review.model_validate(approval.result())
    except CallbackTimeoutError:
        return f"shelved: no review of {post.topic!r} within {REVIEW_TIMEOUT.days} days"
    post.reviews.append(review)
    if review.approved:
        post.url = post_online(post.drafts[-1])
        return f"published {post.url} after {len(post.drafts)} draft(s)"
    if len(post.drafts) >= MAX_REVISIONS:
        return f"abandoned after {len(post.drafts)} rejected drafts"
    return None  # another turn: a revised draft
