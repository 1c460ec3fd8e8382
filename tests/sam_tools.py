"""SAM's YAML reader and translator, run in the SAM tools' own venv (``make sam-tools``).

aws-sam-translator (and cfn-lint, which needs it) pin pydantic to one minor: installed where
the tests run, they would decide the pydantic the whole suite sees. So they live in a venv of
their own, and the template tests ask them through this script, by subprocess:

    .venv-infra/bin/python tests/sam_tools.py TEMPLATE...

It prints one JSON object: each template's path -> {"sam": the template as SAM's YAML reader
reads it, "translated": the CloudFormation that SAM's translator makes of it, offline}.
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


def translate(sam: dict[str, Any]) -> dict[str, Any]:
    """A SAM template translated to CloudFormation, offline."""
    sam = copy.deepcopy(sam)
    sam["Globals"]["Function"]["CodeUri"] = "s3://artifacts/continuum.zip"  # as `sam package`
    translated: dict[str, Any] = transform(sam, {}, NoManagedPolicies())
    return translated


def main(paths: list[str]) -> None:
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    out = {}
    for path in paths:
        sam = yaml_parse(Path(path).read_text())
        out[path] = {"sam": sam, "translated": translate(sam)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
