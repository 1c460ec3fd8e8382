"""What every command shares: one-line errors, checked flags, and where the stack is.

A command module imports the helpers it needs from here:

- :class:`CliError`: raise it with one line for the user; ``main`` prints ``error: ...``, exit 2.
- :func:`seconds` / :func:`count`: argparse types that refuse zero, negative and non-finite values.
- :func:`add_stack_options` and :class:`Stack`: the bucket, queue, prefix, endpoint and region,
  from flags or the environment that the stack's ``CliEnvironment`` output (or
  ``continuum dev``) sets; :meth:`Stack.client` is a client that needs no app.
- :func:`add_app_option` and :func:`load_app`: ``--app`` / ``CONTINUUM_APP``, for the commands
  that need the tasks' code (``start``); others never import it.
- :func:`explain`: the one line that says what an AWS error means (a missing bucket or queue,
  no region, no credentials, an endpoint that does not answer) and what to do.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from continuum._app.backend_config import BUCKET_ENV, DEFAULT_PREFIX, PREFIX_ENV, QUEUE_URL_ENV
from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from continuum._app.app import Continuum
    from continuum._ops.client import Client
    from continuum.backends.queue import ContinuationQueue

#: What creates a bucket and a queue, for errors that find one missing.
CREATE_HINT = (
    "deploy the stack (sam deploy --guided; its CliEnvironment output sets them) or run "
    "`continuum dev` locally and paste the export line it prints"
)
#: What a command that needs moto says when continuum was installed without it.
LOCAL_HINT = "the local runtime needs moto: pip install 'continuum-lambda[local]'"
NO_REGION = (
    "no AWS region: pass --region or set AWS_REGION (the stack's CliEnvironment output and "
    "`continuum dev` set AWS_DEFAULT_REGION)"
)
_MISSING_QUEUE = {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
_DENIED = {"AccessDenied", "AccessDeniedException", "403", "InvalidAccessKeyId"}


class CliError(Exception):
    """A mistake the user can fix, said in one line (no traceback)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line: ``continuum run: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def grace_seconds(text: str) -> float:
    """An argparse type: zero or a positive, finite number of seconds."""
    return 0.0 if text.strip() in ("0", "0.0") else seconds(text)


def count(text: str) -> int:
    """An argparse type: a positive whole number."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


#: What every JSON flag takes besides the JSON itself, for its help.
JSON_SOURCES = "as JSON; @FILE reads it from a file, - from standard input"


#: Control characters a terminal acts on (escape sequences, carriage returns), written as
#: escapes: what a task wrote (its error, its result, a tool's arguments) is shown, not obeyed.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(32), *range(127, 160)) if c not in (9, 10)}


def terminal_safe(text: str) -> str:
    """``text`` with the control characters a terminal would act on escaped (tabs and line
    breaks kept)."""
    return text.translate(_CONTROLS)


def parse_input(text: str, *, flag: str = "--input") -> Any:
    """The value of a JSON flag (``--input`` by default), or a one-line error. ``@FILE`` reads
    the JSON from a file and ``-`` from standard input, so that a large value need not pass
    the shell's limit on one command line."""
    source = flag
    if text == "-":
        text, source = sys.stdin.read(), f"{flag} - (standard input)"
    elif text.startswith("@"):
        path = text[1:]
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"{flag} {text}: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CliError(
                f"{flag} {text}: {path} is not UTF-8 text (JSON is UTF-8; a shell's redirect "
                "may have written UTF-16: save it as UTF-8)"
            ) from None
        source = f"{flag} @{path}"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{source} is not valid JSON: {exc}") from None


def need_local_runtime() -> None:
    """A one-line error unless moto (``continuum-lambda[local]``) is installed."""
    try:
        import moto  # noqa: F401
    except ImportError:
        raise CliError(LOCAL_HINT) from None


# -- the app ---------------------------------------------------------------------------------


def add_app_argument(parser: argparse.ArgumentParser) -> None:
    """The optional positional ``MODULE:APP`` (default ``$CONTINUUM_APP``) of dev and worker."""
    parser.add_argument(
        "app", nargs="?", default=None, metavar="MODULE:APP", help="the app, e.g. tides:app "
        "(default: $CONTINUUM_APP)",
    )  # fmt: skip


def budget_option(parser: argparse.ArgumentParser, *, default: float | None, help: str) -> None:
    """``--budget SECONDS``: the emulated invocation's deadline, a positive number."""
    parser.add_argument("--budget", type=seconds, default=default, metavar="SECONDS", help=help)


def add_app_option(parser: argparse.ArgumentParser) -> None:
    """``--app MODULE:APP`` (default ``$CONTINUUM_APP``)."""
    parser.add_argument(
        "--app", default=None, metavar="MODULE:APP", help="the app (default: $CONTINUUM_APP)"
    )


def app_target(given: str | None, command: str) -> str:
    """``given``, else ``$CONTINUUM_APP``, else a one-line error naming both."""
    target = given or os.environ.get("CONTINUUM_APP")
    if not target:
        raise CliError(
            f"continuum {command} needs the app: pass MODULE:APP (--app for start) or set "
            "CONTINUUM_APP (the stack's CliEnvironment output and `continuum dev` set it)"
        )
    return target


def load_app(target: str) -> Continuum:
    """Import the app ``MODULE:APP`` (the current directory is importable)."""
    from continuum._app.app import Continuum
    from continuum._app.loading import load_target

    return load_target(target, Continuum, what="the app")


# -- where the stack is ----------------------------------------------------------------------


def add_stack_options(parser: argparse.ArgumentParser, *, queue: bool = True) -> None:
    """The flags that say where the records (and, with ``queue``, the continuations) are."""
    group = parser.add_argument_group("where the stack is (flags win over the environment)")
    group.add_argument("--bucket", default=None, help="the state bucket ($CONTINUUM_BUCKET)")
    if queue:
        group.add_argument(
            "--queue-url", default=None, help="the continuation queue ($CONTINUUM_QUEUE_URL)"
        )
    group.add_argument("--prefix", default=None, help="the record prefix ($CONTINUUM_PREFIX)")
    group.add_argument(
        "--endpoint-url", default=None, help="an S3/SQS endpoint such as continuum dev's "
        "($AWS_ENDPOINT_URL)",
    )  # fmt: skip
    group.add_argument("--region", default=None, help="the AWS region ($AWS_REGION)")


@dataclass(frozen=True)
class Stack:
    """Where a command finds the records and the continuation queue, and how to reach them."""

    bucket: str | None
    queue_url: str | None
    #: None: the app's own prefix when there is an app, else DEFAULT_PREFIX.
    prefix: str | None
    endpoint_url: str | None
    region: str | None
    #: The clients made so far, by service: each is made once, when first asked for.
    _clients: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Stack:
        """The flags, each falling back to its environment variable."""
        return cls(
            bucket=args.bucket or os.environ.get(BUCKET_ENV) or None,
            queue_url=getattr(args, "queue_url", None) or os.environ.get(QUEUE_URL_ENV) or None,
            prefix=args.prefix or os.environ.get(PREFIX_ENV) or None,
            endpoint_url=args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None,
            region=args.region,
        )

    def need_bucket(self) -> str:
        if not self.bucket:
            raise CliError(f"no bucket: pass --bucket or set {BUCKET_ENV}; {CREATE_HINT}")
        return self.bucket

    def need_queue(self) -> str:
        if not self.queue_url:
            raise CliError(
                f"no continuation queue: pass --queue-url or set {QUEUE_URL_ENV}; {CREATE_HINT}"
            )
        return self.queue_url

    def boto_client(self, service: str) -> Any:
        """The client for ``service`` in this stack's region, at its endpoint, made once."""
        if service not in self._clients:
            self._clients[service] = self._session.create_client(
                service, endpoint_url=self.endpoint_url
            )
        return self._clients[service]

    @cached_property
    def _session(self) -> Any:
        # botocore's session makes the same clients as boto3's, and a command does not load
        # boto3's resources and transfer manager, which no command uses.
        import botocore.session

        session = botocore.session.get_session()
        if self.region:
            session.set_config_variable("region", self.region)
        if session.get_config_variable("region") is None:
            raise CliError(NO_REGION)
        return session

    def configure(self, app: Continuum) -> None:
        """Point ``app`` at this stack (what is not given stays as the app has it)."""
        app.configure(
            bucket=self.bucket,
            queue_url=self.queue_url,
            prefix=self.prefix,
            s3_client=self.boto_client("s3"),
            sqs_client=self.boto_client("sqs"),
        )

    def client(self) -> Client:
        """A client for status, resume and the like: it needs no app, only the stack.

        The queue is reached only by what sends a continuation, so ``status`` works without
        one. Signing keys, and the link endpoint that the status shows callbacks' links on,
        come from the environment, as on the functions.
        """
        from continuum._base.callback_links import environment_url
        from continuum._base.signing_keys import load_signing_keys
        from continuum._define.settings import Settings
        from continuum._ops.client import Client
        from continuum._record.blob_records import BlobRecords
        from continuum._record.continuation import Continuations
        from continuum.backends.s3 import S3RecordStore

        store = S3RecordStore(self.boto_client("s3"), self.need_bucket())
        keys = load_signing_keys()
        return Client(
            BlobRecords(store, prefix=self.prefix or DEFAULT_PREFIX),
            Continuations(_QueueOnFirstUse(self._queue), keys=keys),
            settings=Settings(signing_keys=keys, callback_url=environment_url()),
        )

    def _queue(self) -> ContinuationQueue:
        from continuum.backends.sqs import SQSContinuationQueue

        return SQSContinuationQueue(self.boto_client("sqs"), self.need_queue())


class _QueueOnFirstUse:
    """The continuation queue, made when something first sends: a command that only reads
    makes no SQS client, and without a queue configured only what sends fails, naming it."""

    def __init__(self, make: Callable[[], ContinuationQueue]) -> None:
        self._make = make
        self._queue: ContinuationQueue | None = None

    def __getattr__(self, name: str) -> Any:
        if self._queue is None:
            self._queue = self._make()
        return getattr(self._queue, name)


# -- what an error means ---------------------------------------------------------------------


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def explain(exc: BaseException, stack: Stack | None = None) -> str | None:
    """One line for an AWS failure anywhere in ``exc``'s chain; None if it is not one."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    for cause in _chain(exc):
        if isinstance(cause, NoRegionError):
            return NO_REGION
        if isinstance(cause, NoCredentialsError):
            return (
                "no AWS credentials: configure them (aws configure, AWS_PROFILE); against "
                "`continuum dev`, its export line sets stand-in ones"
            )
        if isinstance(cause, EndpointConnectionError):
            if stack and stack.endpoint_url:
                return f"cannot reach {stack.endpoint_url}: is `continuum dev` running there?"
            return f"cannot reach {cause.kwargs.get('endpoint_url', 'AWS')}: check the network"
        if isinstance(cause, ClientError):
            return _explain_client_error(cause, stack)
        if isinstance(cause, ConfigurationError):
            return str(cause)
    return None


def _explain_client_error(exc: Any, stack: Stack | None) -> str:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", "unknown"))
    operation = exc.operation_name
    bucket = stack.bucket if stack else None
    queue = stack.queue_url if stack else None
    if code == "NoSuchBucket":
        return f"the bucket {bucket or error.get('BucketName', '')!r} does not exist: {CREATE_HINT}"
    if code in _MISSING_QUEUE:
        return f"the queue {queue or ''!r} does not exist: {CREATE_HINT}"
    if code in _DENIED:
        return (
            f"access denied ({operation}): attach the stack's OperatorPolicyArn (or "
            "StartTasksPolicyArn, to start tasks only) to your identity"
        )
    return f"{operation} failed: {code}: {error.get('Message', '')}".rstrip(": ")
