"""SAM's YAML reader and translator, run in the SAM tools' own venv (``make sam-tools``).

aws-sam-translator (and cfn-lint, which needs it) pin pydantic to one minor: installed where
the tests run, they would decide the pydantic the whole suite sees. So they live in a venv of
their own, and the template tests ask them through this script, by subprocess:

    .venv-infra/bin/python tests/sam_tools.py [--with NAME=VALUE]... TEMPLATE...

It prints one JSON object: each template's path -> {"sam": the template as SAM's YAML reader
reads it, "translated": the CloudFormation that SAM's translator makes of it, offline, with the
parameters' defaults, "translated_with": {"NAME=VALUE": its translation with that parameter
given, as `sam deploy --parameter-overrides NAME=VALUE` has CloudFormation translate it}}.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """SAM's ManagedPolicyLoader lists IAM's managed policies; this template names none."""

    def load(self) -> dict[str, str]:
        raise AssertionError("the template refers to a managed policy by name")


def translate(sam: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """A SAM template translated to CloudFormation, offline (with ``parameters`` given)."""
    sam = copy.deepcopy(sam)
    sam["Globals"]["Function"]["CodeUri"] = "s3://artifacts/continuum.zip"  # as `sam package`
    translated: dict[str, Any] = transform(sam, dict(parameters or {}), NoManagedPolicies())
    return translated


def main(argv: list[str]) -> None:
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    given: list[str] = []
    while argv[:1] == ["--with"]:
        given.append(argv[1])
        argv = argv[2:]
    out = {}
    for path in argv:
        sam = yaml_parse(Path(path).read_text())
        with_ = {g: translate(sam, dict([g.split("=", 1)])) for g in given}
        out[path] = {"sam": sam, "translated": translate(sam), "translated_with": with_}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
