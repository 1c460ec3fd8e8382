"""Offline checks of the SAM template, infra/template.yaml (no AWS account, no Docker).

cfn-lint reads the template and the CloudFormation that the SAM translator makes of it (cfn-lint
no longer translates SAM itself, so a broken Events block would pass); the other tests read the
translated resources, the handlers, the environment the code reads, and the packaging.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "infra" / "template.yaml"
SAM = yaml_parse(TEMPLATE.read_text())
GLOBALS = SAM["Globals"]["Function"]
SERVERLESS_FUNCTION = "AWS::Serverless::Function"
FUNCTIONS = sorted(k for k, r in SAM["Resources"].items() if r["Type"] == SERVERLESS_FUNCTION)
NO_VALUE = {"Ref": "AWS::NoValue"}
RECORDS = "<StateBucket.Arn>/<TaskPrefix>/*"  # the only wildcard a policy may hold
# Stand-ins for the stack's resources, to give a handler the environment Lambda would.
FAKE_REFS = {
    "StateBucket": "continuum-state",
    "ContinuationQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/continuation",
    "DeadLetterQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/dead-letter",
}
# Modules only the local runtime, the CLI or the tests need: never imported on a cold start.
NOT_ON_LAMBDA = {"moto", "rich", "freezegun", "pytest", "hypothesis"}
# Read by the code but not set by the template: variables only the local CLI reads, and
# CONTINUUM_SIGNING_KEY, optional (no signing unless set; see infra/DEPLOY.md).
NOT_SET_ON_LAMBDA = {"CONTINUUM_SIGNING_KEY"}


class NoManagedPolicies:
    """SAM's ManagedPolicyLoader lists IAM's managed policies; this template names none."""

    def load(self) -> dict[str, str]:
        raise AssertionError("the template refers to a managed policy by name")


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    """The template translated to CloudFormation, offline."""
    sam = copy.deepcopy(SAM)
    sam["Globals"]["Function"]["CodeUri"] = "s3://artifacts/continuum.zip"  # as `sam package`
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        return transform(sam, {}, NoManagedPolicies())


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def branches(node: Any) -> list[Any]:
    """Every value a possibly conditional node can take; AWS::NoValue drops out."""
    if isinstance(node, dict) and "Fn::If" in node:
        return branches(node["Fn::If"][1]) + branches(node["Fn::If"][2])
    return [] if node == NO_VALUE else [node]


def render(node: Any) -> str:
    """A policy value as text, structurally: Ref X -> <X>; GetAtt X.Arn, ${X.Arn} -> <X.Arn>."""
    if isinstance(node, str):
        return node
    ((fn, arg),) = node.items()
    if fn == "Ref":
        return f"<{arg}>"
    if fn == "Fn::GetAtt":
        return "<" + ".".join(as_list(arg)) + ">"
    if fn == "Fn::Sub" and isinstance(arg, str):
        return re.sub(r"\$\{([^!}][^}]*)\}", r"<\1>", arg)
    raise AssertionError(f"cannot read {node} without deploying it")


def value(node: Any, template: dict[str, Any], params: dict[str, Any] | None = None) -> Any:
    """Resolve a parameter Ref (its default unless given) and Fn::FindInMap; else as is."""
    params = params or {}
    if isinstance(node, dict) and node.get("Ref") in template["Parameters"]:
        return params.get(node["Ref"], template["Parameters"][node["Ref"]].get("Default"))
    if isinstance(node, dict) and "Fn::FindInMap" in node:
        name, first, second = (value(key, template, params) for key in node["Fn::FindInMap"])
        return template["Mappings"][name][str(first)][second]
    return node


def allow_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(resource id, statement) for each Allow statement of each policy in the template."""
    for name, res in template["Resources"].items():
        props = res.get("Properties", {})
        documents = [policy["PolicyDocument"] for policy in props.get("Policies", [])]
        documents += [props["PolicyDocument"]] if "PolicyDocument" in props else []
        for document in documents:
            for node in as_list(document["Statement"]):
                yield from ((name, s) for s in branches(node) if s["Effect"] == "Allow")


def grants(template: dict[str, Any], role: str) -> dict[str, set[str]]:
    """Action -> the resources (rendered) that a role may act on."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, statement in allow_statements(template):
        for action in as_list(statement["Action"]) if name == role else []:
            for resource in as_list(statement["Resource"]):
                out[action].update(map(render, branches(resource)))
    return out


def event_sources(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function id -> the properties of its event source mapping."""
    mappings = resources(template, "AWS::Lambda::EventSourceMapping").values()
    return {m["Properties"]["FunctionName"]["Ref"]: m["Properties"] for m in mappings}


def environment(function: str) -> dict[str, Any]:
    """A function's environment variables, Globals merged in as SAM does."""
    own = SAM["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {})
    return {**GLOBALS.get("Environment", {}).get("Variables", {}), **own}


@pytest.mark.parametrize("which", ["sam", "translated"])
def test_cfn_lint_reports_nothing(which: str, cfn: dict[str, Any], tmp_path: Path) -> None:
    path = TEMPLATE
    if which == "translated":
        path = tmp_path / "translated.json"
        path.write_text(json.dumps(cfn, indent=1))
    exe = Path(sys.executable).with_name("cfn-lint")
    cmd = str(exe) if exe.exists() else shutil.which("cfn-lint") or "cfn-lint"
    result = subprocess.run([cmd, str(path)], capture_output=True, text=True, check=False)
    assert result.returncode in (0, 8), result.stdout + result.stderr  # 8: informational only


def test_event_sources_report_batch_item_failures(cfn: dict[str, Any]) -> None:
    sources = event_sources(cfn)
    assert set(sources) == {"WorkerFunction", "DeadLetterFunction"}
    queues = {"WorkerFunction": "ContinuationQueue", "DeadLetterFunction": "DeadLetterQueue"}
    for function, queue in queues.items():
        assert sources[function]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
        assert sources[function]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    worker = sources["WorkerFunction"]
    assert value(worker["BatchSize"], cfn) == 1  # the messages of a batch share one deadline
    assert worker["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "MaximumConcurrency"}}
    assert cfn["Parameters"]["MaximumConcurrency"]["MinValue"] == 2


@pytest.mark.parametrize("timeout", SAM["Parameters"]["FunctionTimeout"]["AllowedValues"])
def test_visibility_timeout_is_six_function_timeouts(cfn: dict[str, Any], timeout: int) -> None:
    params = {"FunctionTimeout": timeout}  # every allowed value, the default among them
    for function, source in event_sources(cfn).items():
        queue = cfn["Resources"][source["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function_timeout = value(cfn["Resources"][function]["Properties"]["Timeout"], cfn, params)
        visibility = value(queue["VisibilityTimeout"], cfn, params)
        assert int(visibility) >= 6 * int(function_timeout), function


def test_state_bucket_is_versioned_encrypted_private_and_tls_only(cfn: dict[str, Any]) -> None:
    bucket = cfn["Resources"]["StateBucket"]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == bucket["UpdateReplacePolicy"] == "Retain"
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": {"Fn::If": ["UseKmsKey", "aws:kms", "AES256"]},
        "KMSMasterKeyID": {"Fn::If": ["UseKmsKey", {"Ref": "KmsKeyArn"}, NO_VALUE]},
    }
    assert rule["BucketKeyEnabled"] == {"Fn::If": ["UseKmsKey", True, NO_VALUE]}
    assert value({"Ref": "KmsKeyArn"}, cfn) == ""  # SSE-S3 unless a key is given
    flags = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
    assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(flags, True)
    (policy,) = resources(cfn, "AWS::S3::BucketPolicy").values()
    assert policy["Properties"]["Bucket"] == {"Ref": "StateBucket"}
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", "*", "s3:*")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {render(r) for r in deny["Resource"]} == {"<StateBucket.Arn>", "<StateBucket.Arn>/*"}


def test_lifecycle_expires_superseded_checkpoints_and_finished_tasks(cfn: dict[str, Any]) -> None:
    from continuum.store import FINISHED_TAG  # the tag the library puts on a finished record

    lifecycle = cfn["Resources"]["StateBucket"]["Properties"]["LifecycleConfiguration"]
    rules = {rule["Id"]: rule for rule in lifecycle["Rules"]}
    key, _, tag_value = FINISHED_TAG.partition("=")
    assert rules["ExpireFinishedTasks"]["TagFilters"] == [{"Key": key, "Value": tag_value}]
    assert rules["ExpireFinishedTasks"]["ExpirationInDays"] == {"Ref": "FinishedTaskRetentionDays"}
    superseded = rules["ExpireSupersededCheckpoints"]["NoncurrentVersionExpiration"]
    assert superseded == {"NoncurrentDays": {"Ref": "NoncurrentVersionRetentionDays"}}
    for rule in rules.values():
        assert rule["Status"] == "Enabled"
        assert render(rule["Prefix"]) == "<TaskPrefix>/"
        # A current object expires only with the finished tag: a live task's record never does.
        assert "ExpirationInDays" not in rule or rule.get("TagFilters")


def test_queues_are_standard_encrypted_and_redrive_to_the_dead_letter_queue(
    cfn: dict[str, Any],
) -> None:
    queues = {k: q["Properties"] for k, q in resources(cfn, "AWS::SQS::Queue").items()}
    assert set(queues) == {"ContinuationQueue", "DeadLetterQueue"}
    for props in queues.values():
        assert props["SqsManagedSseEnabled"] is True
        assert not props.get("FifoQueue")  # per-message delays need a standard queue
    assert queues["ContinuationQueue"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
        "maxReceiveCount": {"Ref": "MaxReceiveCount"},
    }
    retention = {k: props["MessageRetentionPeriod"] for k, props in queues.items()}
    assert retention["DeadLetterQueue"] > retention["ContinuationQueue"]


def test_no_policy_allows_a_wildcard_action_or_resource(cfn: dict[str, Any]) -> None:
    statements = list(allow_statements(cfn))
    assert statements
    for owner, statement in statements:
        assert not {"NotAction", "NotResource", "NotPrincipal"} & set(statement), owner
        for action in as_list(statement["Action"]):
            assert "*" not in action, (owner, action)
        for resource in as_list(statement.get("Resource", [])):
            for text in map(render, branches(resource)):
                assert text.startswith("<"), (owner, text)  # this stack's resource or parameter
                assert "*" not in text.removesuffix(RECORDS), (owner, text)
    roles = resources(cfn, "AWS::IAM::Role")
    assert set(roles) == {"WorkerRole", "DeadLetterRole"}  # the template's own: SAM made none
    assert not [name for name, role in roles.items() if "ManagedPolicyArns" in role["Properties"]]


QUEUE_ACTIONS = ["ReceiveMessage", "DeleteMessage", "GetQueueAttributes"]
COMMON_GRANTS = {
    **{
        f"s3:{a}": {RECORDS} for a in ("GetObject", "PutObject", "PutObjectTagging", "DeleteObject")
    },
    "s3:ListBucket": {"<StateBucket.Arn>"},  # so a missing record reads as 404, not 403
    **{f"kms:{a}": {"<KmsKeyArn>"} for a in ("Decrypt", "GenerateDataKey")},  # if a key is given
}


@pytest.mark.parametrize(
    ("role", "log_group", "queue", "queue_actions"),
    [
        ("WorkerRole", "WorkerLogGroup", "ContinuationQueue",
         [*QUEUE_ACTIONS, "SendMessage", "ChangeMessageVisibility"]),
        ("DeadLetterRole", "DeadLetterLogGroup", "DeadLetterQueue", QUEUE_ACTIONS),
    ],
)  # fmt: skip
def test_each_role_reaches_only_its_log_group_task_records_and_queue(
    cfn: dict[str, Any], role: str, log_group: str, queue: str, queue_actions: list[str]
) -> None:
    assert grants(cfn, role) == {
        **{f"logs:{a}": {f"<{log_group}.Arn>"} for a in ("CreateLogStream", "PutLogEvents")},
        **COMMON_GRANTS,
        **{f"sqs:{a}": {f"<{queue}.Arn>"} for a in queue_actions},
    }


def test_outputs_name_what_the_cli_and_an_operator_need(cfn: dict[str, Any]) -> None:
    wanted = {"StateBucketName", "ContinuationQueueUrl", "DeadLetterQueueUrl", "TaskPrefix"}
    assert wanted | {"WorkerFunctionName", "DeadLetterFunctionName"} <= set(cfn["Outputs"])


PROBE = """\
import importlib, json, sys
handler = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
print(json.dumps({"callable": callable(handler), "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("function", FUNCTIONS)
def test_handler_imports_as_lambda_would(function: str) -> None:
    """A fresh interpreter in the code root, with the function's environment (defaults)."""
    props = {**GLOBALS, **SAM["Resources"][function]["Properties"]}
    module, _, attribute = props["Handler"].rpartition(".")
    env = {"PATH": os.environ["PATH"], "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, node in environment(function).items():
        if isinstance(node, str):
            env[name] = node
        elif "Ref" in node:  # an Fn::If value is optional: absent with the default parameters
            env[name] = FAKE_REFS.get(node["Ref"]) or str(value(node, SAM))
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module.replace("/", "."), attribute],
        cwd=(TEMPLATE.parent / props["CodeUri"]).resolve(),
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["callable"], props["Handler"]
    assert not NOT_ON_LAMBDA & {m.partition(".")[0] for m in report["modules"]}


GETENV = re.compile(r"(os\.)?(getenv|environ\.get)")


def env_reads(path: Path) -> set[str]:
    """X of os.environ.get(X), os.environ[X] and os.getenv(X), X a string literal."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        key = None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args and GETENV.fullmatch(ast.unparse(node.func)):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
    return found


def test_template_sets_exactly_the_environment_the_code_reads() -> None:
    sources = [p for d in ("continuum", "handlers") for p in sorted((ROOT / d).rglob("*.py"))]
    reads = set().union(*map(env_reads, sources))
    sets = set().union(*map(environment, FUNCTIONS))
    by_lambda = ("AWS_", "LAMBDA_", "_")  # Lambda itself sets these: AWS_REGION, _HANDLER, ...
    unset = {n for n in reads - sets - NOT_SET_ON_LAMBDA if not n.startswith(by_lambda)}
    assert not unset, f"read by the code, not set by infra/template.yaml: {sorted(unset)}"
    # Powertools reads its variables inside its own package.
    unread = {n for n in sets - reads if not n.startswith("POWERTOOLS_")}
    assert not unread, f"set by infra/template.yaml, read by no code: {sorted(unread)}"


def test_requirements_file_is_generated_from_pyproject() -> None:
    script = [sys.executable, str(ROOT / "infra" / "gen_requirements.py"), "--check"]
    result = subprocess.run(script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("function", FUNCTIONS)
def test_build_packages_only_the_lambda_code(function: str, tmp_path: Path) -> None:
    assert SAM["Resources"][function]["Metadata"] == {"BuildMethod": "makefile"}
    out = tmp_path / "artifacts"
    result = subprocess.run(
        ["make", "-s", "-f", str(ROOT / "infra" / "build.mk"), f"build-{function}",
         f"ARTIFACTS_DIR={out}", "LAMBDA_PIP=echo pip", "LAMBDA_COMPILE_PYTHON="],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["continuum", "handlers", "samples"]
    assert not list(out.rglob("__pycache__"))
    (pip,) = [line for line in result.stdout.splitlines() if line.startswith("pip install")]
    assert f"-r {ROOT / 'infra' / 'requirements.txt'}" in pip
    assert f"--python-version {GLOBALS['Runtime'].removeprefix('python')}" in pip
    machine = {"arm64": "aarch64", "x86_64": "x86_64"}[GLOBALS["Architectures"][0]]
    platforms = re.findall(r"--platform (\S+)", pip)
    assert platforms
    assert all(p.endswith(f"_{machine}") for p in platforms), platforms


@pytest.mark.parametrize(
    "path", sorted((ROOT / "tests" / "events").glob("sqs_*.json")), ids=lambda p: p.name
)
def test_sqs_event_files_have_the_shape_lambda_sends(path: Path) -> None:
    from aws_lambda_powertools.utilities.parser.models import SqsModel

    event = SqsModel.model_validate_json(path.read_text())
    assert event.Records
    assert all(r.eventSource == "aws:sqs" for r in event.Records)
