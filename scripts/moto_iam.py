"""moto_server with AWS's IAM decision, for the IAM-enforcing server scripts/moto.sh start-iam starts.

Run with .venv's python, as `moto_server` is: moto_iam.py -H 127.0.0.1 -p PORT.

moto authenticates a request (SigV4 signature -> access key -> IAM user or assumed-role session)
well, but decides it poorly: it authorizes every service but S3 against resource "*", treats an
Allow whose Condition names a key it does not know as a Deny, ignores resource policies, and
answers 500 when a role trusted by a `Service` principal is assumed. So this keeps moto's
authentication and replaces its decision, IAMRequestBase.check_action_permitted (called once a
request's signature checked out; the unsigned bootstrap calls never reach it), with:

1. what AWS authorizes: the IAM action and resource ARN(s) of the request, per the AWS Service
   Authorization Reference, for the services gannet uses (`checks`); an action the mapping does
   not know is evaluated on "*" and marked "unmapped" in the decision log;
2. the caller's identity policies and the resource's policy, from moto's backends;
3. the decision of @cloud-copilot/iam-simulate (scripts/iam-sim/simulate.mjs, one long-lived
   node process), appended to $GANNET_IAM_DECISIONS as one JSON line;
4. a denial raised as AWS words it, naming the action and the resource.

sts:AssumeRole of a role trusted by a service principal (lambda.amazonaws.com, ...): the
bootstrap `admin` user stands in for the service (the tests play Lambda and CodeBuild), so the
trust policy is evaluated with that service as the principal. Anyone else is evaluated as
themselves, as AWS would.

Two more mends, each where moto's own check is wrong (see `signed_request` and
`neutral_bucket_policy`): the signature of a bodiless GET or DELETE, and the bucket-policy check
moto makes by itself before S3 object operations. And one thing moto cannot do at all: a
presigned S3 request (SigV4 in the query string, no Authorization header), which moto answered
with a 500; `PresignedS3Request` authenticates it as S3 does, then it is authorized as above.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse, urlsplit
from xml.etree import ElementTree

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto.core.exceptions import AccessDeniedError, JsonRESTError
from moto.iam import access_control
from moto.iam.access_control import (
    AssumedRoleAccessKey,
    CreateAccessKeyFailure,
    IAMRequestBase,
    PermissionResult,
    S3IAMRequest,
)
from moto.iam.models import IAMBackend, ManagedPolicy
from moto.s3.exceptions import BucketAccessDeniedError, S3ClientError
from moto.s3.models import FakeBucket
from moto.utilities.utils import get_partition

SIMULATOR = Path(__file__).resolve().parent / "iam-sim" / "simulate.mjs"
# The user scripts/moto.sh bootstraps (with `*` on `*`); it stands in for AWS services.
STAND_IN_USER = "admin"

# Signing names that are not the IAM service prefix.
IAM_PREFIX = {"monitoring": "cloudwatch"}

# API operations whose IAM action has another name (moto reports the operation).
RENAMED = {
    "lambda": {"Invoke": "InvokeFunction", "InvokeWithResponseStream": "InvokeFunction"},
    "sqs": {
        "SendMessageBatch": "SendMessage",
        "DeleteMessageBatch": "DeleteMessage",
        "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    },
    "s3": {
        "HeadBucket": "ListBucket",
        "HeadObject": "GetObject",
        "ListObjects": "ListBucket",
        "ListObjectsV2": "ListBucket",
        "ListObjectVersions": "ListBucketVersions",
        "SelectObject": "GetObject",
        "GetBucketCors": "GetBucketCORS",
        "GetBucketEncryption": "GetEncryptionConfiguration",
        "GetBucketLifecycleConfiguration": "GetLifecycleConfiguration",
        "GetBucketAccelerateConfiguration": "GetAccelerateConfiguration",
        "GetBucketNotificationConfiguration": "GetBucketNotification",
        "GetBucketReplication": "GetReplicationConfiguration",
        "GetBucketInventoryConfiguration": "GetInventoryConfiguration",
        "ListBucketInventoryConfigurations": "GetInventoryConfiguration",
        "GetObjectLockConfiguration": "GetBucketObjectLockConfiguration",
        "GetPublicAccessBlock": "GetBucketPublicAccessBlock",
        "PutPublicAccessBlock": "PutBucketPublicAccessBlock",
        "DeletePublicAccessBlock": "PutBucketPublicAccessBlock",
    },
}


class Request:
    """One signed request as moto received it, and the ARNs of its account and region."""

    def __init__(self, iam_request: IAMRequestBase) -> None:
        self.account: str = iam_request.account_id
        self.region: str = iam_request._region
        self.partition = get_partition(self.region)
        self.signing_name, _, self.operation = iam_request._action.partition(":")
        self.service = IAM_PREFIX.get(self.signing_name, self.signing_name)
        self.action = RENAMED.get(self.service, {}).get(self.operation, self.operation)
        self.method: str = iam_request._method
        self.headers = iam_request._headers
        url = urlparse(iam_request._path)
        self.path = unquote(url.path)
        self.query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = iam_request._body or b""
        self.body = body if isinstance(body, bytes) else body.encode()
        self.params = self._params(iam_request._data)
        # The signature's query-string parameters, for a presigned S3 request.
        self.query_auth: QueryAuth | None = getattr(iam_request, "_query_auth", None)

    def _params(self, form: dict[str, Any]) -> dict[str, Any]:
        # JSON for the JSON and REST-JSON protocols; the query protocol's form moto has already
        # parsed (werkzeug consumed the body). S3's body is an object or XML, read only where a
        # check needs it.
        if self.service == "s3":
            return {}
        text = self.body.lstrip()
        if text.startswith(b"{"):
            try:
                return json.loads(text)
            except ValueError:
                return {}
        return {k: v[0] if isinstance(v, list) and v else v for k, v in form.items()}

    def arn(self, service: str, rest: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{rest}"

    def member_list(self, name: str) -> list[str]:
        """A list parameter, as JSON sends it or as the query protocol flattens it (Name.member.N)."""
        value = self.params.get(name)
        if isinstance(value, list):
            return value
        members = sorted(
            (int(k.rsplit(".", 1)[1]), v) for k, v in self.params.items() if k.startswith(f"{name}.member.")
        )
        return [v for _, v in members]

    def wants_json_error(self) -> bool:
        return (
            "X-Amz-Target" in self.headers
            or "json" in self.headers.get("Content-Type", "")
            or self.service in ("lambda", "scheduler")
        )


# A check: the IAM action (of the request's service, unless it names another's prefix: the
# iam:PassRole a request implies), the resource ARN, and context keys the request sets.
Check = tuple[str, str, dict[str, Any]]


def checks(request: Request, moto_resource: str, caller: Caller) -> list[Check] | None:
    """What AWS authorizes for `request`; None when the mapping does not know the request."""
    mapper = MAPPERS.get(request.service)
    found = mapper(request, moto_resource, caller) if mapper else None
    if found is None:
        return None
    unique: list[Check] = []
    for check in found:
        check = (check[0], check[1], check[2] if len(check) > 2 else {})
        if check not in unique:
            unique.append(check)
    return unique or None


def dynamodb(r: Request, _: str, __: Caller) -> list | None:
    p = r.params

    def table(name: str) -> str:
        return name if name.startswith("arn:") else r.arn("dynamodb", f"table/{name}")

    if r.action in ("BatchGetItem", "BatchWriteItem"):
        return [(r.action, table(t)) for t in p.get("RequestItems", {})]
    if r.action in ("TransactWriteItems", "TransactGetItems"):
        # Not IAM actions: each item is authorized as its own operation on its own table.
        kinds = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
            "Get": "GetItem",
        }
        return [
            (kinds[kind], table(item["TableName"]))
            for entry in p.get("TransactItems", [])
            for kind, item in entry.items()
            if kind in kinds
        ]
    if "TableName" in p:
        arn = table(p["TableName"])
        return [(r.action, f"{arn}/index/{p['IndexName']}" if p.get("IndexName") else arn)]
    for key in ("StreamArn", "ResourceArn", "TableArn"):
        if key in p:
            return [(r.action, p[key])]
    return None


def sqs(r: Request, _: str, __: Caller) -> list | None:
    p = r.params
    if p.get("QueueUrl"):
        # http://host/<account>/<name>; AWS also takes the bare name.
        parts = urlparse(p["QueueUrl"]).path.strip("/").split("/")
        account = parts[-2] if len(parts) >= 2 and parts[-2].isdigit() else r.account
        return [(r.action, f"arn:{r.partition}:sqs:{r.region}:{account}:{parts[-1]}")]
    if p.get("QueueName"):
        account = p.get("QueueOwnerAWSAccountId") or r.account
        return [(r.action, f"arn:{r.partition}:sqs:{r.region}:{account}:{p['QueueName']}")]
    return None


def s3(r: Request, moto_resource: str, _: Caller) -> list | None:
    bucket, _, key = moto_resource.removeprefix(f"arn:{r.partition}:s3:::").partition("/")
    auth = s3_auth_context(r)
    if r.operation == "DeleteObject" and not key:
        # DeleteObjects (POST ?delete): moto names only the bucket; AWS authorizes
        # s3:DeleteObject on each key the body lists.
        try:
            keys = [e.text or "" for e in ElementTree.fromstring(r.body).iter() if e.tag.endswith("Key")]
        except ElementTree.ParseError:
            return None
        return [("DeleteObject", f"{moto_resource}/{k}", auth) for k in keys] or None
    if bucket == "*" and r.action != "ListAllMyBuckets":
        return None
    context = {"s3:prefix": r.query["prefix"]} if r.action == "ListBucket" and "prefix" in r.query else {}
    return [(r.action, moto_resource, {**auth, **context})]


def s3_auth_context(r: Request) -> dict[str, str]:
    """S3's keys for how a request was signed (a policy may allow presigned URLs only, or only
    young signatures)."""
    signed = r.query_auth.date_text if r.query_auth else r.headers.get("X-Amz-Date", "")
    context = {
        "s3:authType": "REST-QUERY-STRING" if r.query_auth else "REST-HEADER",
        "s3:signatureversion": "AWS4-HMAC-SHA256",
    }
    try:
        age = time.time() - datetime.strptime(signed, AMZ_DATE).replace(tzinfo=UTC).timestamp()
        context["s3:signatureAge"] = str(max(0, int(age * 1000)))
    except ValueError:
        pass
    return context


def secretsmanager(r: Request, _: str, __: Caller) -> list | None:
    p = r.params
    if r.action == "CreateSecret" and p.get("Name"):
        # The new secret's ARN ends in a random suffix AWS has not chosen yet; any six
        # characters stand for it, so `secret:NAME-*` matches and `secret:NAME` does not.
        return [(r.action, r.arn("secretsmanager", f"secret:{p['Name']}-??????"))]
    ids = r.member_list("SecretIdList") or ([p["SecretId"]] if p.get("SecretId") else [])
    if not ids:
        return None
    store = secretsmanager_store(r)
    found = []
    for secret_id in ids:
        secret = store.get(secret_id)
        if secret is not None:
            found.append((r.action, secret.arn))
        elif secret_id.startswith("arn:"):
            found.append((r.action, secret_id))
        else:
            found.append((r.action, r.arn("secretsmanager", f"secret:{secret_id}")))
    return found


def secretsmanager_store(r: Request) -> Any:
    from moto.secretsmanager.models import secretsmanager_backends

    return secretsmanager_backends[r.account][r.region].secrets


def ssm(r: Request, _: str, __: Caller) -> list | None:
    p = r.params

    def parameter(name: str) -> str:
        if name.startswith("arn:"):
            return name
        # "name:3" and "name:label" select a version of the parameter "name".
        return r.arn("ssm", "parameter/" + name.split(":")[0].lstrip("/"))

    if p.get("ResourceType") == "Parameter" and p.get("ResourceId"):
        names = [p["ResourceId"]]
    elif "Parameter" in r.action:
        names = r.member_list("Names") or [p[k] for k in ("Name", "Path") if p.get(k)]
    else:
        return None
    return [(r.action, parameter(n)) for n in names] or None


def logs(r: Request, _: str, __: Caller) -> list | None:
    p = r.params
    group = p.get("logGroupName") or p.get("logGroupIdentifier")
    if group and group.startswith("arn:"):
        group = re.sub(r"^arn:[^:]+:logs:[^:]*:[^:]*:log-group:([^:]+).*$", r"\1", group)
    if group:
        # A log group's actions are authorized on "log-group:G:log-stream:" (the stream part
        # empty), as AWS's own refusals show (terraform-provider-aws#8804); that is why
        # policies grant "log-group:G:*".
        stream = p.get("logStreamName", "")
        return [(r.action, r.arn("logs", f"log-group:{group}:log-stream:{stream}"))]
    for key in ("resourceArn", "resourceIdentifier"):
        if p.get(key):
            return [(r.action, p[key])]
    return None


def codebuild(r: Request, _: str, __: Caller) -> list | None:
    p = r.params

    def project(name: str) -> str:
        return name if name.startswith("arn:") else r.arn("codebuild", f"project/{name}")

    def project_of_build(build_id: str) -> str:
        # "project:uuid", or arn:...:build/project:uuid; a build is authorized on its project.
        return project(build_id.rsplit("/", 1)[-1].rsplit(":", 1)[0])

    if r.action in ("CreateProject", "UpdateProject", "DeleteProject") and p.get("name"):
        return [(r.action, project(p["name"]))]
    if p.get("projectName"):
        found = [(r.action, project(p["projectName"]))]
        if r.action == "StartBuild" and p.get("serviceRoleOverride"):
            # The build's role is passed to CodeBuild: AWS checks iam:PassRole on it too.
            role = p["serviceRoleOverride"]
            if not role.startswith("arn:"):
                role = f"arn:{r.partition}:iam::{r.account}:role/{role}"
            found.append(("iam:PassRole", role, {"iam:PassedToService": "codebuild.amazonaws.com"}))
        return found
    if p.get("names"):
        return [(r.action, project(n)) for n in p["names"]]
    builds = p.get("ids") or ([p["id"]] if p.get("id") else [])
    return [(r.action, project_of_build(b)) for b in builds] or None


LAMBDA_FUNCTION = re.compile(r"^/\d{4}-\d{2}-\d{2}/functions/([^/]+)(/.*)?$")
# Operations on one version or alias of a function, when a qualifier names it.
LAMBDA_QUALIFIED = {
    "InvokeFunction",
    "InvokeAsync",
    "GetFunction",
    "GetFunctionConfiguration",
    "GetPolicy",
    "AddPermission",
    "RemovePermission",
    "DeleteFunction",
}


def awslambda(r: Request, _: str, __: Caller) -> list | None:
    m = LAMBDA_FUNCTION.match(r.path)
    if m:
        name, qualifier = lambda_name(m[1])
        qualifier = r.query.get("Qualifier") or qualifier
        arn = r.arn("lambda", f"function:{name}")
        if qualifier and qualifier != "$LATEST" and r.action in LAMBDA_QUALIFIED:
            arn += f":{qualifier}"
        return [(r.action, arn)]
    if r.action == "CreateFunction" and r.params.get("FunctionName"):
        return [(r.action, r.arn("lambda", f"function:{lambda_name(r.params['FunctionName'])[0]}"))]
    m = re.match(r"^/\d{4}-\d{2}-\d{2}/event-source-mappings/([^/]+)$", r.path)
    if m:
        return [(r.action, r.arn("lambda", f"event-source-mapping:{m[1]}"))]
    m = re.match(r"^/\d{4}-\d{2}-\d{2}/tags/(.+)$", r.path)
    if m:
        return [(r.action, m[1])]
    return None


def lambda_name(ref: str) -> tuple[str, str | None]:
    """(name, qualifier) of "name", "name:qualifier", a function ARN or a partial one."""
    m = re.match(r"^(?:arn:[^:]+:lambda:[^:]*:)?(?:\d{12}:)?(?:function:)?([^:]+)(?::([^:]+))?$", ref)
    return (m[1], m[2]) if m else (ref, None)


def ecs(r: Request, _: str, __: Caller) -> list | None:
    p = r.params

    def cluster(ref: str | None) -> str:
        ref = ref or "default"
        return ref if ref.startswith("arn:") else r.arn("ecs", f"cluster/{ref}")

    def cluster_name(ref: str | None) -> str:
        return (ref or "default").rsplit("/", 1)[-1]

    def under_cluster(kind: str, ref: str) -> str:
        return (
            ref if ref.startswith("arn:") else r.arn("ecs", f"{kind}/{cluster_name(p.get('cluster'))}/{ref}")
        )

    a = r.action
    if a == "CreateCluster":
        return [(a, cluster(p.get("clusterName")))]
    if a == "DescribeClusters":
        return [(a, cluster(c)) for c in p.get("clusters") or ["default"]]
    if a == "CreateService":
        return [(a, under_cluster("service", p["serviceName"]))]
    if a in ("UpdateService", "DeleteService", "DescribeServices"):
        return [(a, under_cluster("service", s)) for s in p.get("services") or [p.get("service")] if s]
    if a in ("DescribeTasks", "StopTask"):
        return [(a, under_cluster("task", t)) for t in p.get("tasks") or [p.get("task")] if t]
    if a in ("RunTask", "StartTask") and p.get("taskDefinition"):
        return [(a, task_definition(r, p["taskDefinition"]), {"ecs:cluster": cluster(p.get("cluster"))})]
    if a == "RegisterTaskDefinition" and p.get("family"):
        # The revision this registration is about to make.
        revisions = ecs_backend(r).task_definitions.get(p["family"], {})
        return [(a, r.arn("ecs", f"task-definition/{p['family']}:{max(revisions, default=0) + 1}"))]
    if a == "ListTasks":
        # Authorized on "*", narrowed by the ecs:cluster condition key.
        return [(a, "*", {"ecs:cluster": cluster(p.get("cluster"))})]
    if a in ("DeleteCluster", "UpdateCluster", "PutClusterCapacityProviders"):
        return [(a, cluster(p.get("cluster")))]
    if p.get("resourceArn"):
        return [(a, p["resourceArn"])]
    return None


def ecs_backend(r: Request) -> Any:
    from moto.ecs.models import ecs_backends

    return ecs_backends[r.account][r.region]


def task_definition(r: Request, ref: str) -> str:
    if ref.startswith("arn:"):
        return ref
    family, _, revision = ref.partition(":")
    if not revision:
        # "family" alone runs its latest active revision.
        revision = str(max(ecs_backend(r).task_definitions.get(family, {}), default=1))
    return r.arn("ecs", f"task-definition/{family}:{revision}")


def sts(r: Request, moto_resource: str, _: Caller) -> list | None:
    if r.action in ("AssumeRole", "TagSession"):
        context = {
            k: r.params[v]
            for k, v in (("sts:RoleSessionName", "RoleSessionName"), ("sts:ExternalId", "ExternalId"))
            if r.params.get(v)
        }
        return [(r.action, r.params.get("RoleArn") or moto_resource, context)]
    return None


EVENTS_RULE_ACTIONS = {
    "PutRule",
    "DeleteRule",
    "DescribeRule",
    "EnableRule",
    "DisableRule",
    "PutTargets",
    "RemoveTargets",
    "ListTargetsByRule",
}


def events(r: Request, _: str, __: Caller) -> list | None:
    p = r.params

    def bus(ref: str | None) -> str:
        ref = ref or "default"
        return ref if ref.startswith("arn:") else r.arn("events", f"event-bus/{ref}")

    if r.action == "PutEvents":
        return [(r.action, bus(e.get("EventBusName"))) for e in p.get("Entries", [])] or None
    if r.action in ("CreateEventBus", "DeleteEventBus", "DescribeEventBus"):
        return [(r.action, bus(p.get("Name")))]
    rule = p.get("Name") or p.get("Rule")
    if rule and r.action in EVENTS_RULE_ACTIONS:
        if rule.startswith("arn:"):
            return [(r.action, rule)]
        on = (p.get("EventBusName") or "default").rsplit("/", 1)[-1]
        return [(r.action, r.arn("events", f"rule/{rule}" if on == "default" else f"rule/{on}/{rule}"))]
    if p.get("ResourceARN"):
        return [(r.action, p["ResourceARN"])]
    return None


def scheduler(r: Request, _: str, __: Caller) -> list | None:
    m = re.match(r"^/schedules/([^/]+)$", r.path)
    if m:
        group = r.query.get("groupName") or r.params.get("GroupName") or "default"
        return [(r.action, r.arn("scheduler", f"schedule/{group}/{m[1]}"))]
    m = re.match(r"^/schedule-groups/([^/]+)$", r.path)
    if m:
        return [(r.action, r.arn("scheduler", f"schedule-group/{m[1]}"))]
    m = re.match(r"^/tags/(.+)$", r.path)
    if m:
        return [(r.action, m[1])]
    return None


def cloudwatch(r: Request, _: str, __: Caller) -> list | None:
    if r.action in ("PutMetricData", "GetMetricData", "GetMetricStatistics", "ListMetrics"):
        return [(r.action, "*")]
    alarms = r.member_list("AlarmNames") or ([r.params["AlarmName"]] if r.params.get("AlarmName") else [])
    return [(r.action, r.arn("cloudwatch", f"alarm:{a}")) for a in alarms] or None


def apigateway(r: Request, _: str, __: Caller) -> list | None:
    # API Gateway's IAM actions are the HTTP methods of its management API, on the path (v2's
    # without its /v2 prefix) in an ARN with no account: apigateway:POST on ...::/apis.
    path = r.path.removeprefix("/v2")
    return [(r.method.upper(), f"arn:{r.partition}:apigateway:{r.region}::{path}")]


def iam(r: Request, _: str, caller: Caller) -> list | None:
    p = r.params
    backend = caller.backend
    path = p.get("Path") or "/"

    def entity(kind: str, name: str, lookup: Callable[[str], Any]) -> str:
        try:
            return lookup(name).arn
        except Exception:  # noqa: BLE001 - not made yet (or gone): the ARN it would have
            return f"arn:{r.partition}:iam::{r.account}:{kind}{path}{name}"

    if p.get("RoleName"):
        return [(r.action, entity("role", p["RoleName"], backend.get_role))]
    if p.get("UserName"):
        return [(r.action, entity("user", p["UserName"], backend.get_user))]
    if p.get("GroupName"):
        return [(r.action, entity("group", p["GroupName"], backend.get_group))]
    if p.get("PolicyArn"):
        return [(r.action, p["PolicyArn"])]
    if r.action == "CreatePolicy" and p.get("PolicyName"):
        return [(r.action, f"arn:{r.partition}:iam::{r.account}:policy{path}{p['PolicyName']}")]
    if p.get("InstanceProfileName"):
        return [
            (r.action, f"arn:{r.partition}:iam::{r.account}:instance-profile{path}{p['InstanceProfileName']}")
        ]
    if (
        r.action in ("CreateAccessKey", "ListAccessKeys", "DeleteAccessKey", "UpdateAccessKey")
        and caller.user
    ):
        # Without UserName these act on the caller's own user.
        return [(r.action, caller.arn)]
    return None


MAPPERS: dict[str, Callable[[Request, str, Caller], list | None]] = {
    "dynamodb": dynamodb,
    "sqs": sqs,
    "s3": s3,
    "secretsmanager": secretsmanager,
    "ssm": ssm,
    "logs": logs,
    "codebuild": codebuild,
    "lambda": awslambda,
    "ecs": ecs,
    "sts": sts,
    "events": events,
    "scheduler": scheduler,
    "cloudwatch": cloudwatch,
    "iam": iam,
    "apigateway": apigateway,
}


def resource_policy(request: Request, resource: str) -> dict | None:
    """The policy moto keeps on `resource`, for the services that have one."""
    try:
        if request.service == "s3":
            from moto.s3.models import s3_backends

            bucket = s3_backends[request.account][request.partition].buckets.get(
                resource.removeprefix(f"arn:{request.partition}:s3:::").split("/")[0]
            )
            policy = bucket.policy if bucket else None
        elif request.service == "sqs":
            from moto.sqs.models import sqs_backends

            queue = sqs_backends[request.account][request.region].queues.get(resource.rsplit(":", 1)[-1])
            policy = queue.policy if queue else None
        elif request.service == "secretsmanager":
            secret = secretsmanager_store(request).get(resource)
            policy = secret.policy if secret else None
        elif request.service == "lambda" and ":function:" in resource:
            from moto.awslambda.models import lambda_backends

            name, qualifier = lambda_name(resource)
            function = lambda_backends[request.account][request.region].get_function(name, qualifier)
            policy = function.policy.get_policy()["Policy"] if function.policy.statements else None
            if policy:
                policy = lambda_policy(document(policy))
        else:
            return None
    except Exception:  # noqa: BLE001 - no such resource: it has no policy; the call will say so
        return None
    if isinstance(policy, bytes):
        policy = policy.decode()
    return document(policy) if policy else None


# The keys of a policy statement (the IAM policy grammar).
STATEMENT_KEYS = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition"}


def lambda_policy(policy: dict) -> dict:
    """A function's policy as Lambda's GetPolicy answers it: moto keeps AddPermission's
    parameters (FunctionName, FunctionUrlAuthType, ...) inside its statements when CloudFormation
    adds them, which no statement has; their meaning is in the statement's Condition."""
    statements = policy.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    return {**policy, "Statement": [{k: v for k, v in st.items() if k in STATEMENT_KEYS} for st in statements]}


def document(policy: Any) -> dict:
    if isinstance(policy, dict):
        return policy
    try:
        return json.loads(policy)
    except ValueError:
        return json.loads(unquote(policy))


class Caller:
    """The signer of a request: its ARN, its identity policies and its context keys."""

    def __init__(self, iam_request: IAMRequestBase) -> None:
        key = iam_request._access_key
        self.backend: IAMBackend = iam_request.backend
        self.arn: str = key.arn
        self.account: str = iam_request.account_id
        self.role: str | None = None
        self.user: str | None = None
        if isinstance(key, AssumedRoleAccessKey):
            self.role = key._owner_role_name
            role = self.backend.get_role(self.role)
            owner = role
            self.context = {
                "aws:PrincipalArn": role.arn,
                "aws:PrincipalType": "AssumedRole",
                "aws:userid": f"{role.id}:{key._session_name}",
            }
        else:
            self.user = key._owner_user_name
            owner = self.backend.get_user(self.user)
            self.context = {
                "aws:PrincipalArn": owner.arn,
                "aws:PrincipalType": "User",
                "aws:userid": owner.id,
                "aws:username": owner.name,
            }
        self.context["aws:PrincipalAccount"] = self.account
        self.policies = self._policies(owner)

    def _policies(self, owner: Any) -> list[dict]:
        """Inline and attached policies of the role, or of the user and its groups."""
        holders = [owner] + (self.backend.get_groups_for_user(owner.name) if self.user else [])
        found = []
        for holder in holders:
            for name, policy in holder.policies.items():
                found.append({"name": f"{holder.name}/{name}", "policy": document(policy)})
            for managed in holder.managed_policies.values():
                found.append({"name": managed.arn, "policy": default_version(managed)})
        return found


def default_version(policy: ManagedPolicy) -> dict:
    return document(next(v for v in policy.versions if v.is_default).document)


class Simulator:
    """scripts/iam-sim/simulate.mjs in a node child, one line in and one line out per request.

    Started on the first decision. If it dies, the request at hand fails with a 500 naming
    why (a decision is never guessed), and the next request starts a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def ask(self, question: dict) -> dict:
        with self._lock:
            if self._process is None:
                # Its stderr is moto's log.
                self._process = subprocess.Popen(
                    ["node", str(SIMULATOR)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    bufsize=1,
                )
            process = self._process
            answer, why = "", "it closed its output"
            if process.poll() is None:
                try:
                    process.stdin.write(json.dumps(question) + "\n")
                    process.stdin.flush()
                    answer = process.stdout.readline()
                except OSError as error:
                    why = str(error)
            if not answer:
                process.kill()
                code = process.wait()
                self._process = None
                raise SimulatorFailed(f"the IAM simulator ({SIMULATOR}) died ({why}; exit code {code})")
            return json.loads(answer)


class SimulatorFailed(AccessDeniedError):
    """A 500 naming why the decision could not be made (never an allow, never a plain denial).

    An AccessDeniedError only for its form: moto's XML error, which clients parse and show.
    """

    code = 500

    def __init__(self, message: str) -> None:
        super(AccessDeniedError, self).__init__("InternalFailure", message)


SIMULATOR_PROCESS = Simulator()
DECISIONS_LOCK = threading.Lock()


def record(decision: dict) -> None:
    """Appends one decision to $GANNET_IAM_DECISIONS, if set."""
    path = os.environ.get("GANNET_IAM_DECISIONS")
    if not path:
        return
    line = json.dumps(decision, sort_keys=False) + "\n"
    with DECISIONS_LOCK, open(path, "a", encoding="utf-8") as out:
        out.write(line)


def decide(
    request: Request, caller: Caller, action: str, resource: str, context: dict, unmapped: str | None
) -> dict:
    """The simulator's answer for one check, recorded in the decision log.

    `unmapped` says why the check is on "*" rather than on the request's resource.
    """
    # An implicit check of another service names its prefix (iam:PassRole).
    iam_action = action if ":" in action else f"{request.service}:{action}"
    assume_role = iam_action == "sts:AssumeRole"
    if assume_role:
        # The role's trust policy is the resource policy of sts:AssumeRole.
        policy = trust_policy(caller, resource)
    else:
        policy = resource_policy(request, resource) if resource != "*" else None
    question = {
        "identityPolicies": caller.policies,
        "action": iam_action,
        "resource": resource,
        "principal": caller.arn,
        "account": request.account,
        "context": {**base_context(request), **caller.context, **context},
        **({"resourcePolicy": policy} if policy else {}),
    }
    if assume_role and policy is None:
        answer = {"result": "ImplicitlyDenied", "resource": resource, "detail": {"message": "no such role"}}
    else:
        answer = SIMULATOR_PROCESS.ask(question)
    mismatch = (answer.get("detail") or {}).get("message") in ("no.resource.types", "multiple.resource.types")
    if answer["result"] == "Error" and mismatch and resource != "*":
        # The mapping named an ARN that is none of the action's resource types: a gap in the
        # mapping, handled as one.
        why = f"{resource} is not a resource of {iam_action} ({answer['detail']['message']})"
        return decide(request, caller, action, "*", context, why)
    stand_in = None
    if assume_role and policy and answer["result"] == "ImplicitlyDenied" and caller.user == STAND_IN_USER:
        stand_in, answer = as_service(request, resource, policy) or (None, answer)
    entry = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "principal": caller.arn,
        "role": caller.role,
        "action": iam_action,
        "resource": answer.get("resource", resource),
        "decision": answer["result"],
    }
    if stand_in:
        entry["as"] = stand_in
    if unmapped and not (answer.get("detail") or {}).get("wildcardOnly"):
        entry["unmapped"] = f"{request.signing_name}:{request.operation}: {unmapped}; evaluated on *"
        print(f"moto_iam: UNMAPPED {entry['unmapped']}", file=sys.stderr, flush=True)
    entry["detail"] = answer.get("detail")
    record(entry)
    return {**answer, "action": iam_action}


def base_context(request: Request) -> dict:
    now = time.time()
    return {
        "aws:CurrentTime": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "aws:EpochTime": str(int(now)),
        "aws:RequestedRegion": request.region,
        # Plain HTTP on loopback stands in for AWS's TLS endpoints, which is all gannet uses.
        "aws:SecureTransport": "true",
    }


def trust_policy(caller: Caller, role_arn: str) -> dict | None:
    try:
        return document(caller.backend.get_role_by_arn(role_arn).assume_role_policy_document)
    except Exception:  # noqa: BLE001 - no such role
        return None


def as_service(request: Request, role_arn: str, trust: dict) -> tuple[str, dict] | None:
    """The trust policy's answer for each service it names, played by the stand-in user."""
    statements = trust.get("Statement", [])
    services = {
        service
        for s in (statements if isinstance(statements, list) else [statements])
        if s.get("Effect") == "Allow" and isinstance(s.get("Principal"), dict)
        for service in _listed(s["Principal"].get("Service"))
    }
    for service in sorted(services):
        answer = SIMULATOR_PROCESS.ask(
            {
                "identityPolicies": [],
                "resourcePolicy": trust,
                "action": "sts:AssumeRole",
                "resource": role_arn,
                "principal": service,
                "account": request.account,
                # A service assumes a role on the account's behalf.
                "context": {**base_context(request), "aws:SourceAccount": request.account},
            }
        )
        if answer["result"] == "Allowed":
            return service, answer
    return None


def _listed(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value] if value else []


def denial_message(caller: Caller, answer: dict, resource: str) -> str:
    action = answer["action"]
    head = f"User: {caller.arn} is not authorized to perform: {action} on resource: {resource}"
    detail = answer.get("detail") or {}
    if answer["result"] == "ExplicitlyDenied":
        where = "an identity-based" if detail.get("identityDenies") else "a resource-based"
        return f"{head} with an explicit deny in {where} policy"
    if detail.get("identityAllows"):
        return f"{head} because no resource-based policy allows the {action} action"
    return f"{head} because no identity-based policy allows the {action} action"


def check_action_permitted(self: IAMRequestBase, resource: str) -> None:
    """Replaces moto's IAMRequestBase.check_action_permitted (see the module's doc)."""
    if self._action == "sts:GetCallerIdentity":
        return  # AWS answers it whatever the policies say.
    request = Request(self)
    caller = Caller(self)
    found = checks(request, resource, caller)
    unmapped = None if found else "no resource mapping"
    for action, arn, context in found or [(request.action, "*", {})]:
        answer = decide(request, caller, action, arn, context, unmapped)
        if answer["result"] == "Allowed":
            continue
        if answer["result"] not in ("ImplicitlyDenied", "ExplicitlyDenied"):
            raise SimulatorFailed(
                f"the IAM simulator could not evaluate {answer['action']} on {arn}: "
                f"{json.dumps(answer.get('detail'))}"
            )
        message = denial_message(caller, answer, answer.get("resource", arn))
        if isinstance(self, S3IAMRequest):
            raise S3Denied(self._data.get("BucketName", ""), message)
        if request.wants_json_error():
            raise JsonDenied(message)
        raise Denied(message)


class Denied(AccessDeniedError):
    """The query protocol's AccessDenied, with AWS's message."""

    def __init__(self, message: str) -> None:
        super(AccessDeniedError, self).__init__("AccessDenied", message)


class JsonDenied(JsonRESTError):
    code = 403

    def __init__(self, message: str) -> None:
        super().__init__("AccessDeniedException", message)


class S3Denied(BucketAccessDeniedError):
    """S3's AccessDenied; a BucketAccessDeniedError so DeleteObjects reports each key refused."""

    def __init__(self, bucket: str, message: str) -> None:
        super(BucketAccessDeniedError, self).__init__()
        self.code, self.message = "AccessDenied", message
        self.args = (message,)
        self.bucket_name = bucket


ORIGINAL_AWS_REQUEST = IAMRequestBase._create_aws_request


def signed_request(self: IAMRequestBase) -> Any:
    """The request whose signature moto recomputes, with the body the client signed.

    moto signs `raw body or parsed parameters`: right for a form POST (werkzeug consumed its
    body), wrong for a bodiless GET or DELETE, whose query string (or, without one, headers)
    it then signs as a body, so every such request of a REST API (Lambda's GetFunction,
    Scheduler's GetSchedule, ...) failed with SignatureDoesNotMatch.
    """
    request = ORIGINAL_AWS_REQUEST(self)
    if not self._body and "x-www-form-urlencoded" not in self._headers.get("Content-Type", ""):
        request.data = b""
    return request


# SigV4's timestamp (X-Amz-Date).
AMZ_DATE = "%Y%m%dT%H%M%SZ"
# S3's bound on a presigned URL's life (SigV4): seven days.
PRESIGNED_MAX_EXPIRES = 604800


class QueryAuthParametersError(S3ClientError):
    """S3's 400 for a presigned URL whose signature parameters are malformed."""

    def __init__(self, message: str) -> None:
        super().__init__("AuthorizationQueryParametersError", message)


class QueryAuth:
    """The SigV4 query-string signature of a presigned request, as S3 reads it.

    Raises QueryAuthParametersError, with S3's words, for a missing or malformed parameter.
    """

    REQUIRED = (
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Signature",
        "X-Amz-Date",
        "X-Amz-SignedHeaders",
        "X-Amz-Expires",
    )

    def __init__(self, path: str) -> None:
        url = urlsplit(path)
        self.path = url.path
        # Decoded, in order; the canonical query string encodes them again.
        self.pairs = [
            (unquote(k), unquote(v)) for k, _, v in (p.partition("=") for p in url.query.split("&") if p)
        ]
        params: dict[str, str] = {}
        for k, v in self.pairs:
            params.setdefault(k, v)
        if any(not params.get(k) for k in self.REQUIRED):
            raise QueryAuthParametersError(
                "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
                "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."
            )
        if params["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256":
            raise QueryAuthParametersError('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
        scope = params["X-Amz-Credential"].split("/")
        if len(scope) != 5 or not all(scope):
            raise QueryAuthParametersError(
                "Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; "
                'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".'
            )
        self.key_id, scope_date, self.region, self.service, terminal = scope
        if self.service != "s3":
            raise QueryAuthParametersError(
                f'Error parsing the X-Amz-Credential parameter; incorrect service "{self.service}". '
                'This endpoint belongs to "s3".'
            )
        if terminal != "aws4_request":
            raise QueryAuthParametersError(
                f'Error parsing the X-Amz-Credential parameter; incorrect terminal "{terminal}". '
                'This endpoint uses "aws4_request".'
            )
        self.date_text = params["X-Amz-Date"]
        try:
            self.date = datetime.strptime(self.date_text, AMZ_DATE).replace(tzinfo=UTC)
        except ValueError:
            raise QueryAuthParametersError(
                "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\""
            ) from None
        if scope_date != self.date_text[:8]:
            raise QueryAuthParametersError("Invalid credential date. Date is not the same as X-Amz-Date.")
        try:
            self.expires = int(params["X-Amz-Expires"])
        except ValueError:
            raise QueryAuthParametersError("X-Amz-Expires should be a number") from None
        if self.expires < 0:
            raise QueryAuthParametersError("X-Amz-Expires must be non-negative")
        if self.expires > PRESIGNED_MAX_EXPIRES:
            raise QueryAuthParametersError(
                "X-Amz-Expires must be less than a week (in seconds) that is, the given X-Amz-Expires "
                f"must be less than {PRESIGNED_MAX_EXPIRES} seconds"
            )
        self.signed_headers = params["X-Amz-SignedHeaders"].split(";")
        self.signature = params["X-Amz-Signature"]
        self.token = params.get("X-Amz-Security-Token")

    def expired(self) -> bool:
        return time.time() > self.date.timestamp() + self.expires

    def expected(self, credentials: Credentials, method: str, headers: Any) -> tuple[str, str]:
        """The signature the signer's secret makes for this request, and its canonical request."""
        auth = S3SigV4QueryAuth(credentials, self.service, self.region, expires=self.expires)
        # What the signer signed: the path (S3 URI-encodes it once, never normalises it), the
        # query but its signature, the headers it names; the payload is UNSIGNED-PAYLOAD.
        signed = {name: headers[name] for name in self.signed_headers if name in headers}
        request = AWSRequest(
            method=method,
            url=f"http://{headers.get('Host', '')}{quote(unquote(self.path), safe='/~')}",
            headers=signed,
            params=[(k, v) for k, v in self.pairs if k != "X-Amz-Signature"],
        )
        request.context["timestamp"] = self.date_text
        canonical = auth.canonical_request(request)
        return auth.signature(auth.string_to_sign(request, canonical), request), canonical


class PresignedS3Request(S3IAMRequest):
    """moto's S3IAMRequest, which also authenticates a presigned request as S3 does.

    Why: moto reads the signer only from the Authorization header, so a presigned request
    (which has none) failed with a 500 (a KeyError), and nowhere does moto check a presigned
    URL's signature or expiry. A request with an Authorization header is left to moto.
    """

    def __init__(
        self,
        account_id: str,
        method: str,
        path: str,
        data: dict[str, str],
        body: bytes,
        headers: Any,
        action: str,
    ) -> None:
        self._query_auth: QueryAuth | None = None
        if "Authorization" in headers or "X-Amz-Credential" not in urlsplit(path).query:
            super().__init__(account_id, method, path, data, body, headers, action)
            return
        # What moto's __init__ sets, read from the query instead of the Authorization header.
        self.account_id = account_id
        self._method, self._path, self._data, self._body, self._headers = method, path, data, body, headers
        self._query_auth = auth = QueryAuth(path)
        self._region, self._service = auth.region, auth.service
        self._action = f"{self._service}:{action[0] if isinstance(action, list) else action}"
        # moto tells a session's key from a user's by the token it is sent with.
        token = auth.token or headers.get("X-Amz-Security-Token")
        try:
            self._access_key = access_control.create_access_key(
                account_id=account_id,
                partition=get_partition(self._region),
                access_key_id=auth.key_id,
                headers={"X-Amz-Security-Token": token} if token else {},
            )
        except CreateAccessKeyFailure as failure:
            self._raise_invalid_access_key(failure.reason)

    def check_signature(self) -> None:
        auth = self._query_auth
        if auth is None:
            super().check_signature()
            return
        if auth.expired():
            raise S3ClientError("AccessDenied", "Request has expired")
        credentials = self._access_key.create_credentials()
        expected, canonical = auth.expected(credentials, self._method, self._headers)
        if not hmac.compare_digest(expected.encode(), auth.signature.encode()):
            # S3 answers with the canonical request it computed; moto's error has no room for
            # it, so it goes to the log.
            print(
                f"moto_iam: presigned SignatureDoesNotMatch; canonical request:\n{canonical}",
                file=sys.stderr,
                flush=True,
            )
            self._raise_signature_does_not_match()


def neutral_bucket_policy(self: FakeBucket, action: str, resource: str) -> PermissionResult:
    return PermissionResult.NEUTRAL


def main() -> None:
    access_control.IAMRequestBase.check_action_permitted = check_action_permitted  # type: ignore[method-assign]
    access_control.IAMRequestBase._create_aws_request = signed_request  # type: ignore[method-assign]
    # Presigned S3 requests, which moto cannot authenticate (see PresignedS3Request). Replacing
    # the class in this module is enough, and touches S3 only: moto looks it up here at each S3
    # request (moto/core/authorization.py).
    access_control.S3IAMRequest = PresignedS3Request  # type: ignore[misc]
    # moto also checks a bucket's policy on its own before object operations, ignoring the
    # statements' Principal and taking a Deny whose condition does not hold as a Deny (so one
    # TLS-only statement refuses everyone); check_action_permitted evaluates the policy instead.
    FakeBucket.get_permission = neutral_bucket_policy  # type: ignore[method-assign]
    from moto.server import main as moto_server

    moto_server(sys.argv[1:])


if __name__ == "__main__":
    main()
