"""Offline checks of the SAM templates (no AWS account, no Docker), in both flavors.

One source, continuum/scaffold/templates/template.yaml.tmpl, makes infra/template.yaml (the
"reference" flavor: this repository, makefile build) and the template.yaml that `continuum init`
writes (the "project" flavor: a project of your own, SAM's standard Python build of src/). Each
check runs on both, the project's being the file `init_project` wrote.

cfn-lint reads each template and the CloudFormation that the SAM translator makes of it (cfn-lint
no longer translates SAM itself, so a broken Events block would pass); the other tests read the
translated resources, the handlers, the environment the code reads, and the packaging.

SAM's translator and cfn-lint pin pydantic, so they run from a venv of their own (``make
sam-tools``: .venv-infra), by subprocess (tests/sam_tools.py), never in the tests' environment.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import init_project

ROOT = Path(__file__).resolve().parents[1]
#: The venv that holds SAM's translator and cfn-lint (``make sam-tools``).
SAM_TOOLS = Path(os.environ.get("CONTINUUM_SAM_TOOLS_VENV", ROOT / ".venv-infra"))
TEMPLATE = ROOT / "infra" / "template.yaml"


def sam_tool(name: str) -> Path:
    """A program of the SAM tools' venv; a clear failure when the venv is not there."""
    path = SAM_TOOLS / "bin" / name
    if not path.exists():
        pytest.fail(
            f"{path} is missing: `make sam-tools` installs SAM's translator and cfn-lint in "
            f"{SAM_TOOLS}, a venv of their own, since they pin pydantic",
            pytrace=False,
        )
    return path


#: The parameter that turns SnapStart on, as `sam deploy --parameter-overrides` gives it.
SNAPSTART_ON = "SnapStart=true"


@functools.cache
def sam_read(*paths: Path) -> dict[Path, dict[str, Any]]:
    """Each template -> {"sam": as SAM reads it, "translated": its CloudFormation, offline,
    "translated_with": {SNAPSTART_ON: its CloudFormation with SnapStart on}}."""
    script = str(ROOT / "tests" / "sam_tools.py")
    command = [str(sam_tool("python")), script, "--with", SNAPSTART_ON, *map(str, paths)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return {Path(path): read for path, read in json.loads(result.stdout).items()}


REFERENCE = sam_read(TEMPLATE)[TEMPLATE]["sam"]  # for what the tests are parametrized over
FLAVORS = ["reference", "project"]
PROJECT = "tides"  # the project `init_project` writes for these checks
SERVERLESS_FUNCTION = "AWS::Serverless::Function"
FUNCTIONS = sorted(k for k, r in REFERENCE["Resources"].items() if r["Type"] == SERVERLESS_FUNCTION)
NO_VALUE = {"Ref": "AWS::NoValue"}
RECORDS = "<StateBucket.Arn>/<TaskPrefix>/*"
# The only resources a policy may name with a wildcard: the task records and parts of them.
RECORD_PATTERNS = {RECORDS, f"{RECORDS}/inbox/*", f"{RECORDS}/record.json", f"{RECORDS}/blobs/*"}
# The callback link function creates callback answers there, and nothing else.
CALLBACK_ANSWERS = f"{RECORDS}/inbox/callbacks/*"
RECORD_PATTERNS.add(CALLBACK_ANSWERS)
# The Bedrock model (or inference profile) BedrockModelId names, and the foundation models a
# profile routes to, which the worker may invoke only through that profile.
BEDROCK_MODEL = "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/<BedrockModelId>"
BEDROCK_PROFILE = (
    "arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/<BedrockModelId>"
)
BEDROCK_ROUTED = "arn:<AWS::Partition>:bedrock:*::foundation-model/*"
SIGNING_KEY_PARAMETER = (
    "arn:<AWS::Partition>:ssm:<AWS::Region>:<AWS::AccountId>:parameter<SigningKeyParameter>"
)
# Stand-ins for the stack's resources, to give a handler the environment Lambda would.
#: The worker's schedules: those of the stack's group only (long waits).
SCHEDULES = (
    "arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/<ScheduleGroup>/*"
)
SCHEDULE_ACTIONS = ["CreateSchedule", "GetSchedule", "DeleteSchedule"]
FAKE_REFS = {
    "StateBucket": "continuum-state",
    "ContinuationQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/continuation",
    "DeadLetterQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/dead-letter",
}
# Modules only the local runtime, the CLI or the tests need: never imported on a cold start.
NOT_ON_LAMBDA = {"moto", "rich", "freezegun", "pytest", "hypothesis"}
# Read by the code but not set by the template: variables only the local CLI reads, and
# CONTINUUM_SIGNING_KEY, the key itself (the stack names a parameter or a secret instead).
NOT_SET_ON_LAMBDA = {"CONTINUUM_SIGNING_KEY"}
# A project's handlers import their app: CONTINUUM_APP is for its CLI (the CliEnvironment).
NOT_SET_ON_PROJECT_LAMBDA = NOT_SET_ON_LAMBDA | {"CONTINUUM_APP"}


@dataclass(frozen=True)
class Stack:
    """One flavor's template: the file, and its SAM text parsed."""

    flavor: str
    path: Path
    sam: dict[str, Any]

    @property
    def globals(self) -> dict[str, Any]:
        return dict(self.sam["Globals"]["Function"])

    @property
    def code_root(self) -> Path:
        """Where CodeUri points: what `sam build` packages."""
        return (self.path.parent / self.globals["CodeUri"]).resolve()

    def function(self, name: str) -> dict[str, Any]:
        """A function's properties, Globals merged in (one level, as SAM does for these)."""
        return {**self.globals, **self.sam["Resources"][name]["Properties"]}

    def environment(self, function: str) -> dict[str, Any]:
        """A function's environment variables, Globals merged in as SAM does."""
        own = self.sam["Resources"][function]["Properties"].get("Environment", {})
        shared = self.globals.get("Environment", {}).get("Variables", {})
        return {**shared, **own.get("Variables", {})}

    def lambda_code(self) -> list[Path]:
        """The Python files of the package that read the environment on Lambda."""
        own = ROOT / "handlers" if self.flavor == "reference" else self.code_root
        return sorted((ROOT / "continuum").rglob("*.py")) + sorted(own.rglob("*.py"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project as `continuum init` writes it."""
    path = tmp_path_factory.mktemp("project") / PROJECT
    init_project(path, PROJECT)
    return path


@pytest.fixture(scope="module")
def sam_reads(project: Path) -> dict[str, dict[str, Any]]:
    """Each flavor -> its template as SAM reads it and as SAM's translator makes it."""
    paths = {"reference": TEMPLATE, "project": project / "template.yaml"}
    reads = sam_read(*paths.values())
    return {flavor: {"path": path, **reads[path]} for flavor, path in paths.items()}


@pytest.fixture(scope="module")
def stacks(sam_reads: dict[str, dict[str, Any]]) -> dict[str, Stack]:
    return {f: Stack(f, read["path"], read["sam"]) for f, read in sam_reads.items()}


@pytest.fixture(scope="module")
def translated(sam_reads: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {flavor: read["translated"] for flavor, read in sam_reads.items()}


@pytest.fixture(scope="module")
def translated_snapstart(sam_reads: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each flavor's CloudFormation as translated with SnapStart on."""
    return {flavor: read["translated_with"][SNAPSTART_ON] for flavor, read in sam_reads.items()}


@pytest.fixture(scope="module", params=FLAVORS)
def stack(request: pytest.FixtureRequest, stacks: dict[str, Stack]) -> Stack:
    return stacks[request.param]


@pytest.fixture(scope="module")
def cfn(stack: Stack, translated: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The stack's template translated to CloudFormation, offline."""
    return translated[stack.flavor]


@pytest.fixture(scope="module")
def lint_reports(
    stacks: dict[str, Stack],
    translated: dict[str, dict[str, Any]],
    translated_snapstart: dict[str, dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], list[str]]:
    """(flavor, "sam" | "translated" | "translated-snapstart") -> cfn-lint's findings, from one
    cfn-lint run for all (cfn-lint checks both branches of each Fn::If: SnapStart on and off)."""
    out = tmp_path_factory.mktemp("lint")
    files = {}
    for flavor, found in stacks.items():
        files[flavor, "sam"] = found.path
        for which, cloudformation in [
            ("translated", translated[flavor]),
            ("translated-snapstart", translated_snapstart[flavor]),
        ]:
            files[flavor, which] = out / f"{flavor}-{which}.json"
            files[flavor, which].write_text(json.dumps(cloudformation, indent=1))
    result = subprocess.run(
        [str(sam_tool("cfn-lint")), "--format", "json", *map(str, files.values())],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.stdout.strip(), result.stderr
    reports: dict[str, list[str]] = defaultdict(list)
    for match in json.loads(result.stdout):
        if match["Level"] != "Informational":
            where = "/".join(map(str, match["Location"]["Path"]))
            reports[match["Filename"]].append(f"{match['Rule']['Id']} {where}: {match['Message']}")
    return {key: reports[str(path)] for key, path in files.items()}


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


def statements(template: dict[str, Any]) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    """(resource id, condition, statement) for each statement of each policy in the template.

    The condition is the one an ``Fn::If`` around the statement names (None: unconditional).
    """
    for name, res in template["Resources"].items():
        props = res.get("Properties", {})
        documents = [policy["PolicyDocument"] for policy in props.get("Policies", [])]
        documents += [props["PolicyDocument"]] if "PolicyDocument" in props else []
        for document in documents:
            for node in as_list(document["Statement"]):
                condition = node["Fn::If"][0] if "Fn::If" in node else None
                yield from ((name, condition, s) for s in branches(node))


def allow_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(resource id, statement) for each Allow statement of each policy in the template."""
    for name, _condition, statement in statements(template):
        if statement["Effect"] == "Allow":
            yield name, statement


def grants(template: dict[str, Any], owner: str) -> dict[str, set[str]]:
    """Action -> the resources (rendered) that a role or managed policy may act on."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, statement in allow_statements(template):
        for action in as_list(statement["Action"]) if name == owner else []:
            for resource in as_list(statement["Resource"]):
                out[action].update(map(render, branches(resource)))
    return out


def event_sources(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function id -> the properties of its event source mapping (which may invoke the
    function or, with SnapStart on, its alias)."""
    functions = {k: k for k in resources(template, "AWS::Lambda::Function")}
    for name, alias in resources(template, "AWS::Lambda::Alias").items():
        functions[name] = alias["Properties"]["FunctionName"]["Ref"]
    out = {}
    for mapping in resources(template, "AWS::Lambda::EventSourceMapping").values():
        (function,) = {functions[b["Ref"]] for b in branches(mapping["Properties"]["FunctionName"])}
        out[function] = mapping["Properties"]
    return out


def evaluate(node: Any, template: dict[str, Any], params: dict[str, Any]) -> Any:
    """``node`` as CloudFormation would deploy it with ``params`` (else the defaults): its
    Fn::If decided by the template's conditions, parameter Refs resolved; NoValue as None."""
    if isinstance(node, list):
        return [evaluate(item, template, params) for item in node]
    if not isinstance(node, dict):
        return node
    if "Fn::If" in node:
        name, then, otherwise = node["Fn::If"]
        chosen = condition(template["Conditions"][name], template, params)
        return evaluate(then if chosen else otherwise, template, params)
    if node == NO_VALUE:
        return None
    if "Fn::Split" in node:
        separator, text = node["Fn::Split"]
        return str(evaluate(text, template, params)).split(separator)
    if "Fn::Select" in node:
        index, items = node["Fn::Select"]
        return evaluate(items, template, params)[int(index)]
    if node.get("Ref") in template["Parameters"]:
        return value(node, template, params)
    return {k: evaluate(v, template, params) for k, v in node.items()}


def condition(node: dict[str, Any], template: dict[str, Any], params: dict[str, Any]) -> bool:
    """A condition of the template, decided with ``params`` (else the defaults)."""
    ((fn, args),) = node.items()
    if fn == "Condition":
        return condition(template["Conditions"][args], template, params)
    if fn == "Fn::Equals":
        left, right = (str(evaluate(a, template, params)) for a in args)
        return left == right
    decided = [condition(a, template, params) for a in args]
    if fn == "Fn::Not":
        return not decided[0]
    if fn == "Fn::And":
        return all(decided)
    if fn == "Fn::Or":
        return any(decided)
    raise AssertionError(f"cannot decide {node}")


def test_infra_template_is_generated_from_the_one_source() -> None:
    script = [sys.executable, str(ROOT / "infra" / "gen_template.py"), "--check"]
    result = subprocess.run(script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_the_flavors_differ_only_in_packaging_and_the_app(stacks: dict[str, Stack]) -> None:
    reference, project = stacks["reference"].sam, stacks["project"].sam
    assert set(reference) == set(project)
    for section in ("Rules", "Mappings", "Conditions", "Outputs"):
        assert set(reference[section]) == set(project[section]), section
    assert set(reference["Parameters"]) - set(project["Parameters"]) == {"AppSpec"}
    for name, parameter in project["Parameters"].items():
        assert reference["Parameters"][name] == parameter, name
    assert set(project["Resources"]) == set(reference["Resources"])
    shared = [copy.deepcopy(t["Globals"]["Function"]) for t in (reference, project)]
    assert [g.pop("CodeUri") for g in shared] == ["..", "src/"]
    assert shared[0]["Environment"]["Variables"].pop("CONTINUUM_APP") == {"Ref": "AppSpec"}
    assert shared[0] == shared[1]
    for name, resource in reference["Resources"].items():
        other = project["Resources"][name]
        if resource["Type"] == SERVERLESS_FUNCTION:  # Handler and Metadata differ
            resource, other = copy.deepcopy(resource["Properties"]), other["Properties"]
            resource, other = {**resource, "Handler": None}, {**other, "Handler": None}
            if "VersionDescription" in resource:  # the reference's names the app too
                reference_text = resource["VersionDescription"]["Fn::If"][1]
                text = reference_text["Fn::Sub"][0]
                reference_text["Fn::Sub"][0] = text.replace("${AppSpec} ", "", 1)
        assert resource == other, name


@pytest.mark.parametrize("which", ["sam", "translated", "translated-snapstart"])
def test_cfn_lint_reports_nothing(
    stack: Stack, which: str, lint_reports: dict[tuple[str, str], list[str]]
) -> None:
    assert lint_reports[stack.flavor, which] == []  # informational findings are left out


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


@pytest.mark.parametrize("timeout", REFERENCE["Parameters"]["FunctionTimeout"]["AllowedValues"])
def test_visibility_timeout_is_six_function_timeouts(cfn: dict[str, Any], timeout: int) -> None:
    params = {"FunctionTimeout": timeout}  # every allowed value, the default among them
    assert timeout in cfn["Parameters"]["FunctionTimeout"]["AllowedValues"]
    for function, source in event_sources(cfn).items():
        queue = cfn["Resources"][source["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function_timeout = value(cfn["Resources"][function]["Properties"]["Timeout"], cfn, params)
        visibility = value(queue["VisibilityTimeout"], cfn, params)
        assert int(visibility) >= 6 * int(function_timeout), function


#: The parameters `sam deploy --parameter-overrides` gives for each SnapStart setting.
SNAPSTART = {"on": {"SnapStart": "true"}, "off": {}}
# Long but plausible values of the parameters the worker's version description names.
LONG_VALUES = {
    "AppSpec": "my_company.agents.research_agent:app",
    "TaskPrefix": "research-tasks",
    "FunctionMemory": 10240,
    "LogLevel": "CRITICAL",
    "MetricsNamespace": "Continuum/Production",
    "SigningKeySecretArn": (
        "arn:aws:secretsmanager:ap-southeast-2:123456789012:secret:continuum/production/"
        "signing-key-AbCdEf"
    ),
    "SigningKeyRevision": "2026-12-03",
    "BedrockModelId": "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
    "TracingLayerArn": (
        "arn:aws:lambda:ap-southeast-2:901920570463:layer:aws-otel-python-arm64-ver-1-32-0:2"
    ),
}


def test_snapstart_is_a_parameter_off_unless_asked_on_a_runtime_that_has_it(stack: Stack) -> None:
    parameter = stack.sam["Parameters"]["SnapStart"]
    assert (parameter["Default"], parameter["AllowedValues"]) == ("false", ["true", "false"])
    assert stack.sam["Conditions"]["UseSnapStart"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]}
    runtime = stack.globals["Runtime"]  # SnapStart for Python starts at python3.12
    assert tuple(map(int, runtime.removeprefix("python").split("."))) >= (3, 12), runtime


@pytest.mark.parametrize("setting", SNAPSTART)
def test_with_snapstart_the_queue_invokes_the_workers_published_version_without_it_latest(
    cfn: dict[str, Any], setting: str
) -> None:
    params = SNAPSTART[setting]
    worker = cfn["Resources"]["WorkerFunction"]["Properties"]
    ((alias_id, alias),) = resources(cfn, "AWS::Lambda::Alias").items()
    ((version_id, version),) = resources(cfn, "AWS::Lambda::Version").items()
    assert alias["Properties"] == {
        "Name": "live",
        "FunctionName": {"Ref": "WorkerFunction"},
        "FunctionVersion": {"Fn::GetAtt": [version_id, "Version"]},
    }
    assert version["Properties"]["FunctionName"] == {"Ref": "WorkerFunction"}
    assert version["DeletionPolicy"] == "Retain"  # a version the alias left may still run
    source = event_sources(cfn)["WorkerFunction"]
    invoked = evaluate(source["FunctionName"], cfn, params)
    snapstart = evaluate(worker["SnapStart"], cfn, params)
    if setting == "on":
        assert (snapstart, invoked) == ({"ApplyOn": "PublishedVersions"}, {"Ref": alias_id})
    else:
        assert (snapstart, invoked) == ({"ApplyOn": "None"}, {"Ref": "WorkerFunction"})
    # The dead-letter function runs seldom, off any task's path: no snapshot to pay for.
    assert "SnapStart" not in cfn["Resources"]["DeadLetterFunction"]["Properties"]
    dead_letters = event_sources(cfn)["DeadLetterFunction"]["FunctionName"]
    assert dead_letters == {"Ref": "DeadLetterFunction"}


def test_the_snapstart_setting_is_decided_at_deploy_not_by_the_translation(
    stack: Stack,
    translated: dict[str, dict[str, Any]],
    translated_snapstart: dict[str, dict[str, Any]],
) -> None:
    """CloudFormation translates the template with the stack's parameters: the same text."""
    assert translated[stack.flavor] == translated_snapstart[stack.flavor]


def parameter_refs(node: Any, template: dict[str, Any]) -> set[str]:
    """The parameters a node names (Ref, Fn::Sub's ${...}, and through the conditions of its
    Fn::If), at any depth."""
    parameters, conditions = template["Parameters"], template["Conditions"]
    if isinstance(node, list):
        return set().union(set(), *(parameter_refs(n, template) for n in node))
    if not isinstance(node, dict):
        return set()
    found = {node["Ref"]} if node.get("Ref") in parameters else set()
    if isinstance(sub := node.get("Fn::Sub"), (str, list)):
        text = sub if isinstance(sub, str) else sub[0]
        found |= set(re.findall(r"\$\{([^}.!]+)\}", text)) & set(parameters)
    for name in [node["Fn::If"][0]] if "Fn::If" in node else [node.get("Condition")]:
        if name in conditions:
            found |= parameter_refs(conditions[name], template)
    return found.union(*(parameter_refs(v, template) for v in node.values()))


def test_with_snapstart_a_change_of_any_parameter_the_worker_reads_publishes_a_version(
    stack: Stack, cfn: dict[str, Any]
) -> None:
    """SAM publishes a version when the code changes; the version's description, made of
    every parameter the worker's configuration reads, is replaced when any of them changes."""
    worker = {
        name: node
        for name, node in stack.function("WorkerFunction").items()
        if name not in {"VersionDescription", "SnapStart", "Events", "Environment"}
    }
    read = parameter_refs([worker, stack.environment("WorkerFunction")], stack.sam)
    assert {"FunctionTimeout", "FunctionMemory", "TaskPrefix", "SigningKeyRevision"} <= read
    props = cfn["Resources"]["WorkerFunction"]["Properties"]
    (version,) = resources(cfn, "AWS::Lambda::Version").values()
    description = version["Properties"]["Description"]
    assert evaluate(description, cfn, SNAPSTART["off"]) is None
    assert parameter_refs(description["Fn::If"][1], stack.sam) == read
    text, names = evaluate(description, cfn, {**SNAPSTART["on"], **LONG_VALUES})["Fn::Sub"]
    text = re.sub(
        r"\$\{([^}]+)\}",
        lambda m: str(names[m[1]] if m[1] in names else value({"Ref": m[1]}, cfn, LONG_VALUES)),
        text,
    )
    assert len(text) <= 256, text  # Lambda's longest version description
    assert props["Description"] == "continuum worker (continuations from the queue)"


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
    from tests.support import FINISHED_TAG  # the tag the library puts on a finished record

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
    found = list(allow_statements(cfn))
    assert found
    for owner, statement in found:
        assert not {"NotAction", "NotResource", "NotPrincipal"} & set(statement), owner
        for action in as_list(statement["Action"]):
            assert "*" not in action, (owner, action)
        for resource in as_list(statement.get("Resource", [])):
            for text in map(render, branches(resource)):
                if text == BEDROCK_ROUTED:  # only through the one inference profile
                    profile = statement["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"]
                    assert render(profile) == BEDROCK_PROFILE, owner
                    continue
                # this stack's resource or parameter, the signing key's parameter, the model
                assert text.startswith("<") or text in {
                    SIGNING_KEY_PARAMETER,
                    BEDROCK_MODEL,
                    BEDROCK_PROFILE,
                    SCHEDULES,
                }, (owner, text)
                assert "*" not in text or text in {*RECORD_PATTERNS, SCHEDULES}, (owner, text)
    roles = resources(cfn, "AWS::IAM::Role")
    # the template's own: SAM made none
    assert set(roles) == {"WorkerRole", "DeadLetterRole", "SchedulerRole", "CallbackLinkRole"}
    assert not [name for name, role in roles.items() if "ManagedPolicyArns" in role["Properties"]]


QUEUE_ACTIONS = ["ReceiveMessage", "DeleteMessage", "GetQueueAttributes"]
# Every role and policy may use the bucket's key, and read the signing key, when they are given.
KEYS = {
    "kms:Decrypt": {"<KmsKeyArn>", "<SigningKeyKmsKeyArn>"},
    "kms:GenerateDataKey": {"<KmsKeyArn>"},
    "ssm:GetParameter": {SIGNING_KEY_PARAMETER},
    "secretsmanager:GetSecretValue": {"<SigningKeySecretArn>"},
}
BUCKET_LIST = {"s3:ListBucket": {"<StateBucket.Arn>"}}  # a missing record reads as 404, not 403


@pytest.mark.parametrize(
    ("role", "log_group", "queue", "queue_actions", "objects", "bucket"),
    [
        ("WorkerRole", "WorkerLogGroup", "ContinuationQueue",
         [*QUEUE_ACTIONS, "SendMessage", "ChangeMessageVisibility"],
         ["GetObject", "GetObjectVersion", "PutObject", "GetObjectTagging", "PutObjectTagging",
          "DeleteObject"],
         {**BUCKET_LIST, "s3:ListBucketVersions": {"<StateBucket.Arn>"}}),
        ("DeadLetterRole", "DeadLetterLogGroup", "DeadLetterQueue", QUEUE_ACTIONS,
         ["GetObject", "PutObject", "GetObjectTagging", "PutObjectTagging", "DeleteObject"],
         BUCKET_LIST),
    ],
)  # fmt: skip
def test_each_role_reaches_only_its_log_group_task_records_and_queue(
    cfn: dict[str, Any],
    role: str,
    log_group: str,
    queue: str,
    queue_actions: list[str],
    objects: list[str],
    bucket: dict[str, set[str]],
) -> None:
    model = {"bedrock:InvokeModel": {BEDROCK_MODEL, BEDROCK_PROFILE, BEDROCK_ROUTED}}
    schedules = {
        **{f"scheduler:{a}": {SCHEDULES} for a in SCHEDULE_ACTIONS},
        "iam:PassRole": {"<SchedulerRole.Arn>"},
    }
    assert grants(cfn, role) == {
        **{f"logs:{a}": {f"<{log_group}.Arn>"} for a in ("CreateLogStream", "PutLogEvents")},
        **{f"s3:{a}": {RECORDS} for a in objects},
        **bucket,
        **{f"sqs:{a}": {f"<{queue}.Arn>"} for a in queue_actions},
        **KEYS,
        **(model if role == "WorkerRole" else {}),
        **(schedules if role == "WorkerRole" else {}),
    }


def test_the_schedule_group_is_the_stacks_and_its_role_may_only_send_continuations(
    cfn: dict[str, Any],
) -> None:
    (group,) = resources(cfn, "AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"] == {"Ref": "AWS::StackName"}
    role = resources(cfn, "AWS::IAM::Role")["SchedulerRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    # only this account's schedules may assume it (the confused deputy)
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert grants(cfn, "SchedulerRole") == {"sqs:SendMessage": {"<ContinuationQueue.Arn>"}}


def test_the_worker_passes_only_the_schedulers_role_and_only_to_the_scheduler(
    cfn: dict[str, Any],
) -> None:
    passing = [s for name, s in allow_statements(cfn) if "iam:PassRole" in as_list(s["Action"])]
    assert len(passing) == 1
    (statement,) = passing
    assert render(statement["Resource"]) == "<SchedulerRole.Arn>"
    condition = {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
    assert statement["Condition"] == condition
    owners = {name for name, s in allow_statements(cfn) if s is statement}
    assert owners == {"WorkerRole"}
    scheduling = {
        name
        for name, s in allow_statements(cfn)
        for action in as_list(s["Action"])
        if action.startswith("scheduler:")
    }
    assert scheduling == {"WorkerRole"}  # no policy of people or programs creates schedules


def test_the_worker_learns_the_schedule_group_role_and_queue_arn(stack: Stack) -> None:
    env = stack.environment("WorkerFunction")
    assert env["CONTINUUM_SCHEDULE_GROUP"] == {"Ref": "ScheduleGroup"}
    assert env["CONTINUUM_SCHEDULER_ROLE_ARN"] == {"Fn::GetAtt": ["SchedulerRole", "Arn"]}
    assert env["CONTINUUM_QUEUE_ARN"] == {"Fn::GetAtt": ["ContinuationQueue", "Arn"]}
    outputs = stack.sam["Outputs"]
    assert outputs["ScheduleGroupName"]["Value"] == {"Ref": "ScheduleGroup"}
    assert outputs["SchedulerRoleArn"]["Value"] == {"Fn::GetAtt": ["SchedulerRole", "Arn"]}


def test_the_callback_link_role_may_only_read_records_answer_callbacks_and_wake(
    cfn: dict[str, Any],
) -> None:
    assert grants(cfn, "CallbackLinkRole") == {
        **{
            f"logs:{a}": {"<CallbackLinkLogGroup.Arn>"} for a in ("CreateLogStream", "PutLogEvents")
        },
        "s3:GetObject": {RECORDS},  # the record (is the callback open, its request) and inbox
        "s3:PutObject": {CALLBACK_ANSWERS},  # created with If-None-Match: the first answer wins
        **BUCKET_LIST,
        "sqs:SendMessage": {"<ContinuationQueue.Arn>"},  # the wake
        **KEYS,
    }


def test_callback_links_are_a_parameter_off_by_default_that_needs_a_signing_key(
    stack: Stack, cfn: dict[str, Any]
) -> None:
    assert value({"Ref": "CallbackLinks"}, cfn) == "false"
    assert cfn["Parameters"]["CallbackLinks"]["AllowedValues"] == ["true", "false"]
    assert cfn["Conditions"]["UseCallbackLinks"] == {
        "Fn::Equals": [{"Ref": "CallbackLinks"}, "true"]
    }
    for name in ("CallbackLinkFunction", "CallbackLinkRole", "CallbackLinkLogGroup"):
        assert cfn["Resources"][name]["Condition"] == "UseCallbackLinks", name
    (url,) = resources(cfn, "AWS::Lambda::Url").values()
    assert url["Condition"] == "UseCallbackLinks"
    assert url["Properties"]["AuthType"] == "NONE"  # the link's signed token is its credential
    assert url["Properties"]["TargetFunctionArn"] == {"Ref": "CallbackLinkFunction"}
    # Public URLs answer anyone: Lambda needs this grant, and SAM makes it for AuthType NONE.
    permissions = resources(cfn, "AWS::Lambda::Permission").values()
    public = [p for p in permissions if p["Properties"].get("FunctionUrlAuthType") == "NONE"]
    assert [p["Properties"]["Action"] for p in public] == ["lambda:InvokeFunctionUrl"]
    rule = cfn["Rules"]["CallbackLinksNeedASigningKey"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "CallbackLinks"}, "true"]}
    assert rule["Assertions"][0]["Assert"] == {
        "Fn::Or": [
            {"Fn::Not": [{"Fn::Equals": [{"Ref": "SigningKeyParameter"}, ""]}]},
            {"Fn::Not": [{"Fn::Equals": [{"Ref": "SigningKeySecretArn"}, ""]}]},
        ]
    }
    # The worker makes each callback's link from the URL, given only when links are on.
    assert stack.environment("WorkerFunction")["CONTINUUM_CALLBACK_URL"] == {
        "Fn::If": [
            "UseCallbackLinks",
            {"Fn::GetAtt": ["CallbackLinkFunctionUrl", "FunctionUrl"]},
            NO_VALUE,
        ]
    }
    for function in ("DeadLetterFunction", "CallbackLinkFunction"):
        assert "CONTINUUM_CALLBACK_URL" not in stack.environment(function)


def test_the_worker_may_invoke_a_bedrock_model_only_when_one_is_given(
    stack: Stack, cfn: dict[str, Any]
) -> None:
    bedrock = [
        (owner, condition)
        for owner, condition, statement in statements(cfn)
        if "bedrock:InvokeModel" in as_list(statement["Action"])
    ]
    assert bedrock == [("WorkerRole", "UseBedrock")] * 2
    assert value({"Ref": "BedrockModelId"}, cfn) == ""  # no model unless asked
    assert stack.sam["Conditions"]["UseBedrock"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "BedrockModelId"}, ""]}]
    }
    assert stack.environment("WorkerFunction")["CONTINUUM_BEDROCK_MODEL_ID"] == {
        "Fn::If": ["UseBedrock", {"Ref": "BedrockModelId"}, NO_VALUE]
    }
    assert "CONTINUUM_BEDROCK_MODEL_ID" not in stack.environment("DeadLetterFunction")


def test_people_and_programs_get_managed_policies_of_least_privilege(cfn: dict[str, Any]) -> None:
    policies = resources(cfn, "AWS::IAM::ManagedPolicy")
    assert set(policies) == {"OperatorPolicy", "StartTasksPolicy"}
    for policy in policies.values():  # attached by whoever deploys, to whom they choose
        assert not {"Roles", "Users", "Groups"} & set(policy["Properties"])
    send = {"sqs:SendMessage": {"<ContinuationQueue.Arn>"}}
    created = {f"{RECORDS}/record.json", f"{RECORDS}/blobs/*"}
    # Inbox objects (callback results, signals, cancels); records by compare-and-swap (retry)
    # or create (fork), as tests/security/test_policies.py checks with their conditions.
    assert grants(cfn, "OperatorPolicy") == {
        "s3:GetObject": {RECORDS},
        "s3:GetObjectVersion": {RECORDS},  # inspect's earlier versions, a fork from one
        **BUCKET_LIST,
        "s3:ListBucketVersions": {"<StateBucket.Arn>"},
        "s3:PutObject": {f"{RECORDS}/inbox/*", *created},
        "s3:PutObjectTagging": created,  # retry takes the finished tag off
        **send,
        **KEYS,
    }
    assert grants(cfn, "StartTasksPolicy") == {
        "s3:PutObject": created,  # creates only: If-None-Match
        **send,
        **KEYS,
    }
    outputs = cfn["Outputs"]
    assert outputs["OperatorPolicyArn"]["Value"] == {"Ref": "OperatorPolicy"}
    assert outputs["StartTasksPolicyArn"]["Value"] == {"Ref": "StartTasksPolicy"}


def test_listing_is_limited_to_the_task_prefix(cfn: dict[str, Any]) -> None:
    listing = [
        (owner, s)
        for owner, s in allow_statements(cfn)
        if {"s3:ListBucket"} & {*as_list(s["Action"])}
    ]
    assert {owner for owner, _ in listing} == {
        "WorkerRole",
        "DeadLetterRole",
        "CallbackLinkRole",
        "OperatorPolicy",
    }
    for owner, statement in listing:
        ((operator, keys),) = statement["Condition"].items()
        # IfExists: S3 asks for ListBucket, without a prefix, to answer 404 for a missing key.
        assert operator == "StringLikeIfExists", owner
        assert {k: render(v) for k, v in keys.items()} == {"s3:prefix": "<TaskPrefix>/*"}, owner


def test_signing_key_grants_exist_only_when_a_key_is_given(cfn: dict[str, Any]) -> None:
    wanted = {
        "ssm:GetParameter": "UseSigningKeyParameter",
        "secretsmanager:GetSecretValue": "UseSigningKeySecret",
    }
    seen = 0
    for owner, condition, statement in statements(cfn):
        actions = set(as_list(statement["Action"]))
        for action, needed in wanted.items():
            if action in actions:
                assert condition == needed, owner
                seen += 1
        if statement.get("Sid") == "SigningKeyDecrypt":
            assert condition == "UseSigningKeyKmsKey", owner
            services = statement["Condition"]["StringEquals"]["kms:ViaService"]
            assert {render(s) for s in services} == {
                "ssm.<AWS::Region>.amazonaws.com",
                "secretsmanager.<AWS::Region>.amazonaws.com",
            }
    assert seen == 2 * 5  # the three roles and both managed policies
    for parameter in ("SigningKeyParameter", "SigningKeySecretArn", "SigningKeyKmsKeyArn"):
        assert value({"Ref": parameter}, cfn) == ""  # no signing unless asked
    rule = cfn["Rules"]["OneSigningKeySource"]  # a parameter or a secret, never both
    assert rule["Assertions"][0]["Assert"] == {
        "Fn::Or": [
            {"Fn::Equals": [{"Ref": "SigningKeyParameter"}, ""]},
            {"Fn::Equals": [{"Ref": "SigningKeySecretArn"}, ""]},
        ]
    }


def test_functions_learn_where_the_signing_key_is_only_when_one_is_given(stack: Stack) -> None:
    for function in FUNCTIONS:
        env = stack.environment(function)
        assert "CONTINUUM_SIGNING_KEY" not in env  # never the key itself
        assert env["CONTINUUM_SIGNING_KEY_PARAMETER"] == {
            "Fn::If": ["UseSigningKeyParameter", {"Ref": "SigningKeyParameter"}, NO_VALUE]
        }
        assert env["CONTINUUM_SIGNING_KEY_SECRET"] == {
            "Fn::If": ["UseSigningKeySecret", {"Ref": "SigningKeySecretArn"}, NO_VALUE]
        }
        # A new revision is a new configuration: new execution environments read the key again.
        assert env["CONTINUUM_SIGNING_KEY_REVISION"] == {
            "Fn::If": ["UseSigningKey", {"Ref": "SigningKeyRevision"}, NO_VALUE]
        }
    assert stack.sam["Conditions"]["UseSigningKey"] == {
        "Fn::Or": [{"Condition": "UseSigningKeyParameter"}, {"Condition": "UseSigningKeySecret"}]
    }


def test_alarms_watch_dead_letters_and_failed_tasks_unless_turned_off(
    stack: Stack, cfn: dict[str, Any]
) -> None:
    alarms = resources(cfn, "AWS::CloudWatch::Alarm")
    assert set(alarms) == {"DeadLetterAlarm", "TaskFailedAlarm"}
    assert cfn["Conditions"]["Monitoring"] == {"Fn::Equals": [{"Ref": "EnableMonitoring"}, "true"]}
    assert cfn["Parameters"]["EnableMonitoring"]["AllowedValues"] == ["true", "false"]
    notify = {"Fn::If": ["NotifyAlarmTopic", [{"Ref": "AlarmTopicArn"}], NO_VALUE]}
    for alarm in alarms.values():
        props = alarm["Properties"]
        assert alarm["Condition"] == "Monitoring"
        assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0)
        assert props["TreatMissingData"] == "notBreaching"
        assert props["AlarmActions"] == props["OKActions"] == notify
    dead = alarms["DeadLetterAlarm"]["Properties"]
    assert (dead["Namespace"], dead["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert dead["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}
    ]
    failed = alarms["TaskFailedAlarm"]["Properties"]
    assert (failed["Namespace"], failed["MetricName"]) == (
        {"Ref": "MetricsNamespace"},
        "TaskFailed",
    )
    # The metric's service dimension is the one Powertools Metrics writes: the service name.
    service = stack.globals["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    assert failed["Dimensions"] == [{"Name": "service", "Value": service}]


def test_the_same_parameter_turns_the_workers_metrics_off(stack: Stack) -> None:
    """Without POWERTOOLS_METRICS_NAMESPACE the worker's OutcomeMetrics emit nothing."""
    for function in FUNCTIONS:
        assert stack.environment(function)["POWERTOOLS_METRICS_NAMESPACE"] == {
            "Fn::If": ["Monitoring", {"Ref": "MetricsNamespace"}, NO_VALUE]
        }


def test_the_adot_layer_and_its_wrapper_are_on_only_when_a_layer_is_given(stack: Stack) -> None:
    when = "UseTracingLayer"
    for function in FUNCTIONS:
        props = stack.function(function)
        assert props["Layers"] == {"Fn::If": [when, [{"Ref": "TracingLayerArn"}], NO_VALUE]}
        assert stack.environment(function)["AWS_LAMBDA_EXEC_WRAPPER"] == {
            "Fn::If": [when, "/opt/otel-instrument", NO_VALUE]
        }
    assert stack.sam["Parameters"]["TracingLayerArn"]["Default"] == ""
    assert stack.sam["Conditions"][when] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "TracingLayerArn"}, ""]}]
    }


def test_outputs_name_what_the_cli_and_an_operator_need(cfn: dict[str, Any]) -> None:
    wanted = {"StateBucketName", "ContinuationQueueUrl", "DeadLetterQueueUrl", "TaskPrefix"}
    assert wanted | {"WorkerFunctionName", "DeadLetterFunctionName"} <= set(cfn["Outputs"])


def test_cli_environment_sets_everything_the_cli_needs(stack: Stack) -> None:
    text, variables = stack.sam["Outputs"]["CliEnvironment"]["Value"]["Fn::Sub"]
    assert text.startswith("export ")
    names = dict(re.findall(r"(\w+)=(\$\{[^}]+\})", text))
    assert names == {
        "CONTINUUM_BUCKET": "${StateBucket}",
        "CONTINUUM_QUEUE_URL": "${ContinuationQueue}",
        "CONTINUUM_PREFIX": "${TaskPrefix}",
        "CONTINUUM_APP": "${App}",
        "AWS_DEFAULT_REGION": "${AWS::Region}",
    }
    app = {"reference": {"Ref": "AppSpec"}, "project": f"{PROJECT}:app"}[stack.flavor]
    assert variables["App"] == app
    signing = {render(b).split("=")[0].strip() for b in branches(variables["SigningKey"]) if b}
    assert signing == {"CONTINUUM_SIGNING_KEY_PARAMETER", "CONTINUUM_SIGNING_KEY_SECRET"}
    # The CLI sees the stack the functions see (a CLI process reads the key afresh anyway;
    # the Bedrock model is the worker's own business; so is the scheduler of long waits, whose
    # group and role the stack's outputs name).
    worker_only = {"CONTINUUM_SIGNING_KEY_REVISION", "CONTINUUM_BEDROCK_MODEL_ID"}
    worker_only |= {"CONTINUUM_SCHEDULE_GROUP", "CONTINUUM_SCHEDULER_ROLE_ARN"}
    worker_only |= {"CONTINUUM_QUEUE_ARN"}
    worker_only |= {"CONTINUUM_CALLBACK_URL"}  # the worker makes the links; status shows them
    for function in FUNCTIONS:
        continuum_vars = {n for n in stack.environment(function) if n.startswith("CONTINUUM_")}
        assert continuum_vars - worker_only <= set(names) | signing


PROBE = """\
import importlib, json, sys
handler = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
print(json.dumps({"callable": callable(handler), "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("function", FUNCTIONS)
def test_handler_imports_as_lambda_would(stack: Stack, function: str) -> None:
    """A fresh interpreter in the code root, with the function's environment (defaults)."""
    props = stack.function(function)
    module, _, attribute = props["Handler"].rpartition(".")
    env = {"PATH": os.environ["PATH"], "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the code root as `sam build` would find it
    if stack.flavor == "project":  # `sam build` installs continuum beside the project's code
        env["PYTHONPATH"] = str(ROOT)
    for name, node in stack.environment(function).items():
        if isinstance(node, str):
            env[name] = node
        elif "Ref" in node:  # an Fn::If value is optional: absent with the default parameters
            env[name] = FAKE_REFS.get(node["Ref"]) or str(value(node, stack.sam))
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module.replace("/", "."), attribute],
        cwd=stack.code_root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["callable"], props["Handler"]
    assert not NOT_ON_LAMBDA & {m.partition(".")[0] for m in report["modules"]}


GETENV = re.compile(r"(os\.)?(getenv|environ\.get)")


def env_reads(path: Path) -> set[str]:
    """X of os.environ.get(X), os.environ[X] and os.getenv(X).

    X is a string literal, or the name of a module-level string constant of the same file
    (``BUCKET_ENV = "CONTINUUM_BUCKET"``).
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }
    found = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args and GETENV.fullmatch(ast.unparse(node.func)):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
        elif isinstance(key, ast.Name) and key.id in constants:
            found.add(constants[key.id])
    return found


def test_template_sets_exactly_the_environment_the_code_reads(stack: Stack) -> None:
    reads = set().union(*map(env_reads, stack.lambda_code()))
    sets = set().union(*map(stack.environment, FUNCTIONS))
    by_lambda = ("AWS_", "LAMBDA_", "_")  # Lambda itself sets these: AWS_REGION, _HANDLER, ...
    optional = NOT_SET_ON_LAMBDA if stack.flavor == "reference" else NOT_SET_ON_PROJECT_LAMBDA
    unset = {n for n in reads - sets - optional if not n.startswith(by_lambda)}
    assert not unset, f"read by the code, not set by {stack.path.name}: {sorted(unset)}"
    # Powertools reads its variables inside its own package; Lambda reads its exec wrapper.
    unread = {
        n
        for n in sets - reads
        if not n.startswith("POWERTOOLS_") and n != "AWS_LAMBDA_EXEC_WRAPPER"
    }
    assert not unread, f"set by {stack.path.name}, read by no code: {sorted(unread)}"


def test_requirements_file_is_generated_from_pyproject() -> None:
    script = [sys.executable, str(ROOT / "infra" / "gen_requirements.py"), "--check"]
    result = subprocess.run(script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("function", FUNCTIONS)
def test_build_packages_only_the_lambda_code(function: str, tmp_path: Path) -> None:
    assert REFERENCE["Resources"][function]["Metadata"] == {"BuildMethod": "makefile"}
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
    runtime = REFERENCE["Globals"]["Function"]
    assert f"--python-version {runtime['Runtime'].removeprefix('python')}" in pip
    machine = {"arm64": "aarch64", "x86_64": "x86_64"}[runtime["Architectures"][0]]
    platforms = re.findall(r"--platform (\S+)", pip)
    assert platforms
    assert all(p.endswith(f"_{machine}") for p in platforms), platforms


def test_project_build_packages_only_src_with_the_standard_python_builder(
    stacks: dict[str, Stack], project: Path
) -> None:
    stack = stacks["project"]
    assert stack.globals["CodeUri"] == "src/"
    assert (stack.globals["Runtime"], stack.globals["Architectures"]) == ("python3.12", ["arm64"])
    for function in FUNCTIONS:  # no BuildMethod: SAM's python_pip workflow, requirements.txt
        assert "Metadata" not in stack.sam["Resources"][function]
    src = stack.code_root
    assert src == (project / "src").resolve()
    assert sorted(p.name for p in src.iterdir()) == [
        "handlers.py",
        "requirements.txt",
        f"{PROJECT}.py",
        f"{PROJECT}_state.py",  # the task's state model, all that `continuum start` imports
        "wheels",  # continuum's wheel, which requirements.txt finds (--find-links)
    ]
    requirements = [
        line for line in (src / "requirements.txt").read_text().splitlines() if line.strip()
    ]
    named = [r for r in requirements if not r.startswith(("#", "--"))]
    assert named[0].startswith("continuum-lambda==")
    defined = {
        target.id
        for node in ast.parse((src / "handlers.py").read_text()).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for function in FUNCTIONS:  # each Handler is handlers.<name>, a name handlers.py defines
        module, _, attribute = stack.function(function)["Handler"].rpartition(".")
        assert (module, attribute in defined) == ("handlers", True)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "tests" / "events").glob("sqs_*.json")), ids=lambda p: p.name
)
def test_sqs_event_files_have_the_shape_lambda_sends(path: Path) -> None:
    from aws_lambda_powertools.utilities.parser.models import SqsModel

    event = SqsModel.model_validate_json(path.read_text())
    assert event.Records
    assert all(r.eventSource == "aws:sqs" for r in event.Records)
