"""What becomes of an error that leaves a turn's code: what the record keeps of it
(:func:`error_info`, with where the user's code raised: :func:`traceback_of`), the step it names
by its path from the task (:func:`located`), and a control-flow exception or a refused call that
user code swallowed (:func:`check_unwinding`).
"""

from __future__ import annotations

from continuum._base.tracebacks import bounded_traceback
from continuum._record.model import ErrorInfo
from continuum._steps.control_flow import Abort, ControlFlow, Fenced
from continuum._steps.turn_state import TurnState
from continuum.errors import BatchError, ChildTaskError, ContinuumError, StepError


def check_unwinding(state: TurnState) -> None:
    """After the task's code returned (or raised something else): was a control-flow
    exception or a refused call swallowed by user code? Then re-raise or fail."""
    if isinstance(state.unwinding, Fenced | Abort):
        raise state.unwinding
    if isinstance(state.unwinding, ControlFlow):
        kind = type(state.unwinding).__name__
        raise Abort(
            ErrorInfo(
                type="ControlFlowSwallowed",
                message=(
                    f"the task caught continuum's {kind} exception (a bare `except:` or "
                    "`except BaseException:`), so its step was skipped and the turn "
                    "went on; continuing would save what that code did instead"
                ),
                turn=state.scope.record.turn,
            )
        )
    if state.refused is not None:
        raise Abort(error_info(state.refused, state.scope.record.turn))


def error_info(exc: BaseException, turn: int) -> ErrorInfo:
    """What the record keeps of an error that failed a turn."""
    error_type = exc.error_type if isinstance(exc, StepError) else type(exc).__name__
    message = exc.message if isinstance(exc, ContinuumError) else str(exc)
    step = exc.step if isinstance(exc, ContinuumError) else None
    return ErrorInfo(
        type=error_type, message=message, step=step, turn=turn, traceback=traceback_of(exc)
    )


def located(exc: Exception, path: str) -> None:
    """``exc`` leaves the child context at ``path``: the step it names (keyed in that
    context's journal) is named by its path from the task, once, however deep it came from."""
    if path and isinstance(exc, ContinuumError) and exc.step and not exc.step.startswith(path):
        exc.step = f"{path}{exc.step}"
        exc.args = (exc.rendered(),)


def traceback_of(exc: BaseException) -> str | None:
    """Where the user's code raised: a step's own traceback, a failed item's or child task's,
    or the task code's; continuum's other errors carry their facts instead."""
    match exc:
        case StepError():
            return exc.step_traceback
        case BatchError():
            kept = (e.traceback for _, e in exc.failures if isinstance(e, ErrorInfo))
            return next((text for text in kept if text), None)
        case ChildTaskError():
            return exc.child_traceback
        case ContinuumError():
            return None
    return bounded_traceback(exc)
