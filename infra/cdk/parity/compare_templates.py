#!/usr/bin/env python3
"""Parity of infra/template.yaml (SAM) and the Gannet CDK construct (infra/cdk/src).

For each case in cases.json (SAM parameter values next to the construct props meaning the
same deployment), this

1. transforms the SAM template with the SAM translator, offline, and evaluates it for the
   case's parameters: Ref to a parameter, Fn::If and the conditions (Fn::Equals, Fn::Not,
   Fn::And, Fn::Or, Condition), a resource's or output's Condition, Fn::Join, Fn::Split,
   Fn::Select, Fn::Sub and AWS::NoValue. Pseudo parameters (AWS::StackName, AWS::Region, ...)
   and references to resources stay symbolic;
2. reads the template the construct synthesised for the case's props (parity/synth.ts),
   maps each resource to its SAM logical id by its construct path (the construct ids are the
   SAM logical ids; CDK's logical ids add the path and a hash) and renames the references
   accordingly. Outputs have SAM's keys as they are;
3. writes Fn::Sub and Fn::Join in one form (a Fn::Join with "" of strings and references)
   and every scalar as a string (CloudFormation reads 5, "5" and true, "true" alike, and a
   Ref to a SAM Number parameter gives a string);
4. compares every resource, with all its properties and its DependsOn, DeletionPolicy and
   UpdateReplacePolicy attributes, and every output. Each difference is a line naming the
   resource or output and the property path, e.g.
   `StageRole: Policies[0].PolicyDocument.Statement[3].Action: SAM "a" != CDK "b"`.

What it does not compare, and why (the whole ignore list):

- Metadata of resources: SAM's BuildMethod/BuildProperties and CDK's aws:cdk:path and asset
  entries are build bookkeeping that changes nothing deployed.
- AWS::Lambda::Function Code: where the zip lives (sam package's bucket, or a CDK asset).
- SAM's own tags: `lambda:createdBy: SAM` on functions, `httpapi:createdBy: SAM` on the HTTP
  API's stage and in its OpenAPI body's tags. They say which tool made the resource.
- The CDK template's BootstrapVersion parameter and CheckBootstrapVersion rule (the default
  synthesizer's check of the bootstrap stack), and AWS::CDK::Metadata resources with their
  CDKMetadataAvailable condition (CDK's version reporting). Any other CDK parameter, rule or
  condition is a difference: the construct resolves the SAM template's parameters at synth
  time from its props.
- The templates' Description and the SAM template's Parameters and Conditions (evaluated away).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator

# The translator's boto session needs a region. Tests run offline, and a region no real
# template mentions lets us check that the translation left AWS::Region symbolic.
PLACEHOLDER_REGION = "xx-gannet-1"
os.environ["AWS_DEFAULT_REGION"] = PLACEHOLDER_REGION

from samcli.yamlhelper import yaml_parse  # noqa: E402
from samtranslator.translator.transform import transform  # noqa: E402

# The translator warns about metrics it never publishes; only errors matter here.
logging.getLogger("samtranslator").setLevel(logging.ERROR)

PLACEHOLDER_CODE_URI = "s3://gannet-parity-placeholder/code.zip"

IGNORED_PROPERTIES = {
    # Where the zip lives: sam package's bucket, or the CDK asset's.
    ("AWS::Lambda::Function", "Code"),
}
CDK_BOOKKEEPING_PARAMETERS = {"BootstrapVersion"}
CDK_BOOKKEEPING_RULES = {"CheckBootstrapVersion"}
CDK_BOOKKEEPING_CONDITIONS = {"CDKMetadataAvailable"}
CDK_BOOKKEEPING_TYPES = {"AWS::CDK::Metadata"}
SAM_TAG_KEYS = {"lambda:createdBy", "httpapi:createdBy"}
COMPARED_ATTRIBUTES = ("Type", "DependsOn", "DeletionPolicy", "UpdateReplacePolicy")
COMPARED_OUTPUT_FIELDS = ("Value", "Description", "Export")

NO_VALUE = object()
SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class ParityError(Exception):
    """A case or template the tool cannot evaluate (not a difference between the two)."""


class Evaluator:
    """Resolves a template's intrinsics for given parameters, renaming resource references."""

    def __init__(self, template: dict, parameters: dict[str, Any], rename: dict[str, str] | None = None):
        self.parameters = parameters
        self.conditions = template.get("Conditions", {})
        self.rename = rename or {}
        self.condition_values: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self.condition_values:
            if name not in self.conditions:
                raise ParityError(f"unknown condition {name}")
            self.condition_values[name] = self.truth(self.conditions[name])
        return self.condition_values[name]

    def truth(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            (key, arg), = node.items()
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Not":
                return not self.truth(arg[0])
            if key == "Fn::And":
                return all(self.truth(a) for a in arg)
            if key == "Fn::Or":
                return any(self.truth(a) for a in arg)
            if key == "Fn::Equals":
                left, right = (self.resolve(a) for a in arg)
                if not all(isinstance(v, str) for v in (left, right)):
                    raise ParityError(f"cannot decide {json.dumps(node)}: {left!r} vs {right!r}")
                return left == right
        raise ParityError(f"not a condition: {json.dumps(node)}")

    def resolve(self, node: Any) -> Any:
        """The node with parameters and conditions applied; NO_VALUE for AWS::NoValue."""
        if isinstance(node, bool):
            return "true" if node else "false"
        if isinstance(node, (int, float)):
            return str(int(node)) if float(node).is_integer() else str(node)
        if isinstance(node, list):
            items = (self.resolve(item) for item in node)
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            handler = INTRINSICS.get(key)
            if handler is not None:
                return handler(self, arg)
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not NO_VALUE}

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.parameters:
            return self.parameters[name]
        if name.startswith("AWS::"):
            return {"Ref": name}
        return {"Ref": self.rename.get(name, name)}

    def get_att(self, arg: Any) -> Any:
        resource, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
        return {"Fn::GetAtt": [self.rename.get(resource, resource), self.resolve(attribute)]}

    def if_(self, arg: list) -> Any:
        name, if_true, if_false = arg
        return self.resolve(if_true if self.condition(name) else if_false)

    def join(self, arg: list) -> Any:
        delimiter, values = self.resolve(arg[0]), self.resolve(arg[1])
        if not isinstance(values, list):
            return {"Fn::Join": [delimiter, values]}
        parts: list[Any] = []
        for i, value in enumerate(values):
            if i:
                parts.append(delimiter)
            parts.append(value)
        return concat(parts)

    def split(self, arg: list) -> Any:
        delimiter, value = self.resolve(arg[0]), self.resolve(arg[1])
        return value.split(delimiter) if isinstance(value, str) else {"Fn::Split": [delimiter, value]}

    def select(self, arg: list) -> Any:
        index, values = self.resolve(arg[0]), self.resolve(arg[1])
        if isinstance(values, list) and isinstance(index, str):
            return values[int(index)]
        return {"Fn::Select": [index, values]}

    def sub(self, arg: Any) -> Any:
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        parts: list[Any] = []
        position = 0
        for match in SUB_VARIABLE.finditer(text):
            parts.append(text[position:match.start()])
            position = match.end()
            name = match.group(1)
            if name.startswith("!"):
                parts.append("${" + name[1:] + "}")
            elif name in variables:
                parts.append(self.resolve(variables[name]))
            elif "." in name and not name.startswith("AWS::"):
                parts.append(self.get_att(name))
            else:
                value = self.ref(name)
                if isinstance(value, list):
                    raise ParityError(f"Fn::Sub of the list parameter {name}")
                parts.append(value)
        parts.append(text[position:])
        return concat(parts)


INTRINSICS = {
    "Ref": Evaluator.ref,
    "Fn::GetAtt": Evaluator.get_att,
    "Fn::If": Evaluator.if_,
    "Fn::Join": Evaluator.join,
    "Fn::Split": Evaluator.split,
    "Fn::Select": Evaluator.select,
    "Fn::Sub": Evaluator.sub,
}


def concat(parts: list[Any]) -> Any:
    """One canonical form for a string built of parts: a string, one reference, or a Fn::Join
    with "" of merged strings and references."""
    flat: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and list(part) == ["Fn::Join"] and part["Fn::Join"][0] == "":
            inner = part["Fn::Join"][1]
        else:
            inner = [part]
        for item in inner:
            if isinstance(item, str) and flat and isinstance(flat[-1], str):
                flat[-1] += item
            elif item != "":
                flat.append(item)
    if not flat:
        return ""
    if len(flat) == 1:
        return flat[0]
    return {"Fn::Join": ["", flat]}


def sam_parameter_values(template: dict, given: dict[str, Any]) -> dict[str, str]:
    """The case's SAM parameters as CloudFormation would get them, checked against the
    template's constraints: lists comma-joined, JSON written compactly, numbers as text."""
    declared = template.get("Parameters", {})
    values: dict[str, str] = {}
    for name, value in given.items():
        if name not in declared:
            raise ParityError(f"the case sets {name}, which the SAM template does not declare")
        if isinstance(value, list) and declared[name]["Type"] == "CommaDelimitedList":
            values[name] = ",".join(value)
        elif isinstance(value, (list, dict)):
            values[name] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        else:
            values[name] = Evaluator({}, {}).resolve(value)
    for name, spec in declared.items():
        if name not in values:
            if "Default" not in spec:
                raise ParityError(f"the case does not set {name}, which has no default")
            values[name] = Evaluator({}, {}).resolve(spec["Default"])
        check_constraints(name, spec, values[name])
    return values


def check_constraints(name: str, spec: dict, value: str) -> None:
    problems = []
    if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
        problems.append(f"does not match {spec['AllowedPattern']}")
    if "AllowedValues" in spec and value not in [Evaluator({}, {}).resolve(v) for v in spec["AllowedValues"]]:
        problems.append(f"is not one of {spec['AllowedValues']}")
    if "MinLength" in spec and len(value) < spec["MinLength"]:
        problems.append(f"is shorter than {spec['MinLength']}")
    if "MinValue" in spec and float(value) < spec["MinValue"]:
        problems.append(f"is below {spec['MinValue']}")
    if "MaxValue" in spec and float(value) > spec["MaxValue"]:
        problems.append(f"is above {spec['MaxValue']}")
    if problems:
        raise ParityError(f"SAM parameter {name}={value!r} " + "; ".join(problems))


class RaisingPolicyLoader:
    """The SAM translator asks for AWS managed policies' ARNs only for SAM policy templates or
    managed policy names in a function's Policies; the template gives every function an explicit
    Role, so the map is never needed, and asking AWS for it would break the offline run."""

    def load(self) -> dict[str, str]:
        raise ParityError("the SAM translator asked for the managed policy map (a function without Role?)")


def load_sam(path: Path) -> dict:
    return yaml_parse(path.read_text())


def translate_sam(template: dict, values: dict[str, str]) -> dict:
    """The SAM template as plain CloudFormation, translated offline."""
    template = copy.deepcopy(template)
    # `sam package` would put S3 URIs here; the code itself is not compared.
    for function in [template.get("Globals", {}).get("Function", {})] + [
        r.get("Properties", {}) for r in template["Resources"].values() if r.get("Type") == "AWS::Serverless::Function"
    ]:
        if "CodeUri" in function:
            function["CodeUri"] = PLACEHOLDER_CODE_URI
    translated = transform(template, dict(values), RaisingPolicyLoader())
    if PLACEHOLDER_REGION in json.dumps(translated):
        raise ParityError("the SAM translator wrote the region into the template; it must stay AWS::Region")
    return translated


def evaluate(template: dict, parameters: dict[str, Any], rename: dict[str, str] | None = None) -> tuple[dict, dict]:
    """Resources and outputs, keyed by (SAM) logical id, with intrinsics resolved."""
    evaluator = Evaluator(template, parameters, rename)
    rename = rename or {}
    resources = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if "Condition" in resource and not evaluator.condition(resource["Condition"]):
            continue
        resolved = evaluator.resolve({k: v for k, v in resource.items() if k not in ("Condition", "Metadata")})
        if "DependsOn" in resolved:
            depends = resolved["DependsOn"]
            resolved["DependsOn"] = sorted(rename.get(d, d) for d in ([depends] if isinstance(depends, str) else depends))
        resources[rename.get(logical_id, logical_id)] = resolved
    outputs = {}
    for logical_id, output in template.get("Outputs", {}).items():
        if "Condition" in output and not evaluator.condition(output["Condition"]):
            continue
        outputs[logical_id] = evaluator.resolve({k: v for k, v in output.items() if k != "Condition"})
    return resources, outputs


def sam_side(template: dict, given: dict[str, Any]) -> tuple[dict, dict]:
    values = sam_parameter_values(template, given)
    translated = translate_sam(template, values)
    declared = template.get("Parameters", {})
    parameters: dict[str, Any] = {
        name: value.split(",") if declared[name]["Type"] == "CommaDelimitedList" else value
        for name, value in values.items()
    }
    resources, outputs = evaluate(translated, parameters)
    for resource in resources.values():
        drop_sam_tags(resource)
    return resources, outputs


def drop_sam_tags(resource: dict) -> None:
    properties = resource.get("Properties", {})
    tags = properties.get("Tags")
    if isinstance(tags, list):
        tags = [t for t in tags if t.get("Key") not in SAM_TAG_KEYS]
    elif isinstance(tags, dict):
        tags = {k: v for k, v in tags.items() if k not in SAM_TAG_KEYS}
    if tags is not None:
        if tags:
            properties["Tags"] = tags
        else:
            del properties["Tags"]
    body = properties.get("Body")
    if isinstance(body, dict) and "tags" in body:
        body["tags"] = [t for t in body["tags"] if t.get("name") not in SAM_TAG_KEYS]
        if not body["tags"]:
            del body["tags"]


def cdk_side(template: dict) -> tuple[dict, dict, list[str]]:
    """Resources and outputs under SAM's logical ids, and what in the template cannot be
    mapped (differences in their own right)."""
    problems = []
    for name in set(template.get("Parameters", {})) - CDK_BOOKKEEPING_PARAMETERS:
        problems.append(f"Parameters.{name}: only in CDK (the construct takes props, not parameters)")
    for name in set(template.get("Rules", {})) - CDK_BOOKKEEPING_RULES:
        problems.append(f"Rules.{name}: only in CDK")
    for name in set(template.get("Conditions", {})) - CDK_BOOKKEEPING_CONDITIONS:
        problems.append(f"Conditions.{name}: only in CDK (the construct decides at synth time)")
    rename: dict[str, str] = {}
    construct_ids = set()
    resources = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") in CDK_BOOKKEEPING_TYPES:
            continue
        path = resource.get("Metadata", {}).get("aws:cdk:path")
        segments = path.split("/") if path else []
        if segments[-1:] == ["Resource"]:
            segments = segments[:-1]
        if len(segments) < 3:
            problems.append(f"{logical_id}: not inside the Gannet construct (path {path!r})")
            continue
        construct_ids.add(segments[1])
        sam_id = "".join(segments[2:])
        if sam_id in rename.values():
            problems.append(f"{sam_id}: two CDK resources map to it")
        rename[logical_id] = sam_id
        resources[logical_id] = resource
    if len(construct_ids) > 1:
        problems.append(f"resources of several constructs: {sorted(construct_ids)}")
    parameters = {name: spec.get("Default") for name, spec in template.get("Parameters", {}).items()}
    evaluated, outputs = evaluate({**template, "Resources": resources}, parameters, rename)
    return evaluated, outputs, problems


def differences(path: str, sam: Any, cdk: Any) -> Iterator[str]:
    if isinstance(sam, dict) and isinstance(cdk, dict):
        for key in sorted(set(sam) | set(cdk)):
            child = f"{path}.{key}" if path else key
            if key not in cdk:
                yield f"{child}: only in SAM: {short(sam[key])}"
            elif key not in sam:
                yield f"{child}: only in CDK: {short(cdk[key])}"
            else:
                yield from differences(child, sam[key], cdk[key])
    elif isinstance(sam, list) and isinstance(cdk, list):
        for i in range(max(len(sam), len(cdk))):
            child = f"{path}[{i}]"
            if i >= len(cdk):
                yield f"{child}: only in SAM: {short(sam[i])}"
            elif i >= len(sam):
                yield f"{child}: only in CDK: {short(cdk[i])}"
            else:
                yield from differences(child, sam[i], cdk[i])
    elif sam != cdk:
        yield f"{path}: SAM {short(sam)} != CDK {short(cdk)}"


def short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compare(sam_template: dict, sam_parameters: dict[str, Any], cdk_template: dict) -> list[str]:
    """Every difference between the SAM template deployed with these parameters and the
    synthesised CDK template, one line each, naming the resource (or output) and property."""
    return compare_counted(sam_template, sam_parameters, cdk_template)[0]


def compare_counted(sam_template: dict, sam_parameters: dict[str, Any], cdk_template: dict) -> tuple[list[str], int, int]:
    """compare's differences, and how many resources and outputs the SAM side has."""
    sam_resources, sam_outputs = sam_side(sam_template, sam_parameters)
    cdk_resources, cdk_outputs, problems = cdk_side(cdk_template)
    found = list(problems)
    for logical_id in sorted(set(sam_resources) | set(cdk_resources)):
        sam, cdk = sam_resources.get(logical_id), cdk_resources.get(logical_id)
        if cdk is None:
            found.append(f"{logical_id}: only in SAM ({sam['Type']})")
            continue
        if sam is None:
            found.append(f"{logical_id}: only in CDK ({cdk['Type']})")
            continue
        for attribute in COMPARED_ATTRIBUTES:
            found += [f"{logical_id}: {d}" for d in differences(attribute, sam.get(attribute), cdk.get(attribute))]
        properties = [sam.get("Properties", {}), cdk.get("Properties", {})]
        for side in properties:
            for resource_type, name in IGNORED_PROPERTIES:
                if sam["Type"] == resource_type:
                    side.pop(name, None)
        found += [f"{logical_id}: {d}" for d in differences("", *properties)]
    for name in sorted(set(sam_outputs) | set(cdk_outputs)):
        if name not in cdk_outputs:
            found.append(f"Outputs.{name}: only in SAM")
        elif name not in sam_outputs:
            found.append(f"Outputs.{name}: only in CDK")
        else:
            for field in COMPARED_OUTPUT_FIELDS:
                sam_field, cdk_field = sam_outputs[name].get(field), cdk_outputs[name].get(field)
                found += [f"Outputs.{name}: {d}" for d in differences(field, sam_field, cdk_field)]
    return found, len(sam_resources), len(sam_outputs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", type=Path, required=True, help="the SAM template")
    parser.add_argument("--cases", type=Path, required=True, help="cases.json")
    parser.add_argument("--cdk-dir", type=Path, required=True, help="where synth.js wrote <case>.json")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    args = parser.parse_args()
    cases = json.loads(args.cases.read_text())["cases"]
    sam_template = load_sam(args.template)
    failed = False
    for name in args.case or list(cases):
        cdk_template = json.loads((args.cdk_dir / f"{name}.json").read_text())
        found, resources, outputs = compare_counted(sam_template, cases[name]["sam"], cdk_template)
        if found:
            failed = True
            print(f"parity: case {name}: {len(found)} difference(s) between {args.template} and the CDK construct:")
            for line in found:
                print(f"  {line}")
        else:
            print(f"parity: case {name}: SAM and CDK deploy the same {resources} resources and {outputs} outputs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
