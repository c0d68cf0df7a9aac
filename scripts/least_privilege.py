"""The least-privilege report: per role of gannet's stack, the actions the template grants
and the actions the tests used, from the IAM-enforcing moto's decision log.

    python scripts/least_privilege.py --template infra/template.yaml --decisions FILE [--markdown]

Run by scripts/stack.sh report with .venv-infra's Python (the SAM translator lives there), after
the tests, on the log of that run (`GANNET_IAM_DECISIONS`). An action granted and never used is
printed as a candidate to remove: a candidate is not always wrong (a path the tests do not take,
such as CloudWatch analysis or a deploy target's role), so the report informs and never fails.
An action used and refused is printed too; the tests that made it fail on their own.

Roles are matched to the template's by their names: `<stack>-<LogicalId>-<suffix>` (SAM) or
`<stack>-Gannet<LogicalId><hash>-<suffix>` (the CDK construct).
"""

import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stack  # noqa: E402  (scripts/stack.py: the SAM transform)

# Granted by an AWS managed policy the template attaches (by ARN).
AWS_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ],
}


# Used by the AWS service that runs as the role, not by gannet's code: the tests, which play
# Lambda, CodeBuild and the Scheduler, never make these calls.
BY_THE_SERVICE = {
    "logs:CreateLogStream": "Lambda or CodeBuild, for the log",
    "logs:PutLogEvents": "Lambda or CodeBuild, for the log",
    "logs:CreateLogGroup": "Lambda, for the log",
    "sqs:GetQueueAttributes": "Lambda's event source mapping, which requires it",
}
SCHEDULER = {"lambda:InvokeFunction": "EventBridge Scheduler, invoking the functions"}


def as_list(value):
    return value if isinstance(value, list) else [value]


def statements(document):
    """The statements of a policy document, each Fn::If taken as its first branch (the
    grant when the condition holds), with the condition's name kept."""
    out = []
    for item in as_list(document.get("Statement", [])):
        condition = None
        if isinstance(item, dict) and list(item) == ["Fn::If"]:
            condition, item = item["Fn::If"][0], item["Fn::If"][1]
        if isinstance(item, dict) and item.get("Effect") == "Allow":
            out.append((condition, item))
    return out


def granted(template):
    """{role logical id: {action: [conditions]}} for every IAM role in the template."""
    resources = template["Resources"]
    roles = {}
    for logical, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        props = resource["Properties"]
        actions = collections.defaultdict(set)
        documents = [(None, p["PolicyDocument"]) for p in props.get("Policies", [])]
        for arn in props.get("ManagedPolicyArns", []):
            condition = None
            if isinstance(arn, dict) and list(arn) == ["Fn::If"]:
                condition, arn = arn["Fn::If"][0], arn["Fn::If"][1]
            if isinstance(arn, dict) and "Ref" in arn and arn["Ref"] in resources:
                documents.append((condition, resources[arn["Ref"]]["Properties"]["PolicyDocument"]))
            elif isinstance(arn, str) and arn in AWS_MANAGED:
                for action in AWS_MANAGED[arn]:
                    actions[action].add(condition)
            else:
                actions[f"(managed policy {json.dumps(arn)})"].add(condition)
        for outer, document in documents:
            for condition, statement in statements(document):
                for action in as_list(statement["Action"]):
                    actions[action].add(condition or outer)
        roles[logical] = actions
    return roles


def logical_role(name, roles):
    """The template's role a role of some stack is, by its name."""
    for logical in sorted(roles, key=len, reverse=True):
        if re.search(rf"-(Gannet)?{re.escape(logical)}([0-9A-F]{{8}})?-", name):
            return logical
    return None


def covered(action, used):
    """Whether a granted action (maybe with a wildcard) is among the used ones."""
    pattern = re.compile("^" + re.escape(action).replace(r"\*", ".*") + "$")
    return any(pattern.match(u) for u in used)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", required=True)
    parser.add_argument("--decisions", required=True)
    parser.add_argument("--markdown", action="store_true", help="the README's table")
    args = parser.parse_args()

    template = stack.sam_to_cloudformation(args.template, {"S3Bucket": "code", "S3Key": "code.zip"})
    roles = granted(template)
    used = collections.defaultdict(set)
    refused = collections.defaultdict(set)
    unknown = set()
    with open(args.decisions) as f:
        for line in f:
            d = json.loads(line)
            role = d.get("role")
            if not role:
                continue
            logical = logical_role(role, roles)
            if logical is None:
                unknown.add(role)
                continue
            (used if d["decision"] == "Allowed" else refused)[logical].add(d["action"])

    if args.markdown:
        print("| Role | Granted | Used by the tests | Granted, never used (candidates) |")
        print("|---|---:|---:|---|")
    for logical in sorted(roles):
        actions = roles[logical]
        by_service = {**BY_THE_SERVICE, **(SCHEDULER if logical == "SchedulerRole" else {})}
        never = sorted(a for a in actions if not covered(a, used[logical]) and a not in by_service)
        def show(a):
            conditions = sorted(c for c in actions[a] if c)
            return a + (f" (if {', '.join(conditions)})" if conditions else "")
        if args.markdown:
            print(f"| {logical} | {len(actions)} | {len(used[logical])} | "
                  f"{', '.join(f'`{show(a)}`' for a in never) or 'none'} |")
            continue
        print(f"{logical}: grants {len(actions)} actions, the tests used {len(used[logical])}")
        for a in sorted(used[logical]):
            print(f"  used     {a}")
        for a in sorted(a for a in actions if a in by_service):
            print(f"  service  {a} ({by_service[a]})")
        for a in never:
            print(f"  unused   {show(a)}   <- a candidate to remove")
        for a in sorted(refused[logical]):
            print(f"  REFUSED  {a}")
    if unknown and not args.markdown:
        print(f"roles not in the template (made by other tests): {len(unknown)}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(0)
