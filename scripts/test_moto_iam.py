"""The IAM-enforcing moto_server (scripts/moto.sh start-iam, scripts/moto_iam.py) decides as AWS does.

Run: .venv/bin/python -m unittest -v scripts/test_moto_iam.py  (needs scripts/moto.sh ensure and
scripts/iam-sim.sh ensure). Starts its own server in a temporary directory and stops it by pid.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import uuid
import zipfile
from pathlib import Path
from urllib.parse import urlsplit
from xml.etree import ElementTree

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "123456789012"
REGION = "us-east-1"
ADMIN = f"arn:aws:iam::{ACCOUNT}:user/admin"
# No retries: a 500 must reach the test as it was answered.
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})
# Presigned URLs as gannet's are (SigV4 in the query string); boto3 presigns SigV2 by default.
SIGV4 = Config(signature_version="s3v4")


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def arn(service: str, rest: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{rest}"


def policy(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: str | list[str], resource: str | list[str], **extra: dict) -> dict:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def fetch(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    """`url` sent as a build's curl sends a presigned URL: plain HTTP, no Authorization header."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        connection.request(method, f"{parts.path}?{parts.query}", body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def presign(s3, operation: str, bucket: str, key: str, life: int = 3600) -> str:
    """A presigned URL of `operation` on bucket/key, valid for `life` seconds."""
    return s3.generate_presigned_url(operation, Params={"Bucket": bucket, "Key": key}, ExpiresIn=life)


def s3_error(body: bytes) -> tuple[str, str]:
    """The Code and Message of S3's error document."""
    error = ElementTree.fromstring(body)
    return error.findtext("Code") or "", error.findtext("Message") or ""


class Server:
    """One `scripts/moto.sh start-iam` server and its admin's clients."""

    def __init__(self) -> None:
        self.state = tempfile.mkdtemp(prefix="gannet-moto-iam-test.")
        out = subprocess.run(
            [str(ROOT / "scripts/moto.sh"), "start-iam", self.state],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        self.env = {}
        for line in out.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            self.env[key] = shlex.split(value)[0]
        self.endpoint = self.env["GANNET_MOTO_IAM_ENDPOINT"]
        self.admin = (
            self.env["GANNET_MOTO_IAM_ADMIN_KEY_ID"],
            self.env["GANNET_MOTO_IAM_ADMIN_SECRET"],
            None,
        )

    def stop(self) -> None:
        subprocess.run([str(ROOT / "scripts/moto.sh"), "stop", self.state], check=True)
        shutil.rmtree(self.state)

    def client(self, service: str, keys: tuple | None = None, config: Config | None = None):
        key, secret, token = keys or self.admin
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            aws_session_token=token,
            config=config,
        )

    def role(self, statements: list[dict], trust: dict | None = None) -> tuple[str, tuple]:
        """A role with `statements` as its inline policy, trusted by the admin, and its session's keys."""
        role = name("role")
        iam = self.client("iam")
        trust = trust or {"Effect": "Allow", "Principal": {"AWS": ADMIN}, "Action": "sts:AssumeRole"}
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=policy(trust))
        iam.put_role_policy(RoleName=role, PolicyName="test", PolicyDocument=policy(*statements))
        return role, self.assume(self.client("sts"), role)

    @staticmethod
    def assume(sts, role: str) -> tuple:
        c = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName="test")
        c = c["Credentials"]
        return c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]

    def decisions(self) -> list[dict]:
        text = Path(self.env["GANNET_IAM_DECISIONS"]).read_text()
        return [json.loads(line) for line in text.splitlines()]

    def simulator_pid(self) -> int:
        server = int(Path(self.state, "pid").read_text())
        for proc in Path("/proc").iterdir():
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == server and b"simulate.mjs" in cmdline:
                return int(proc.name)
        raise AssertionError("the server runs no simulator")


class MotoIamTest(unittest.TestCase):
    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def denied(self, call, *args, **kwargs) -> str:
        """The message of the AccessDenied that `call` must raise."""
        with self.assertRaises(ClientError) as raised:
            call(*args, **kwargs)
        error = raised.exception.response
        self.assertIn(error["Error"]["Code"], ("AccessDenied", "AccessDeniedException"), error)
        self.assertEqual(error["ResponseMetadata"]["HTTPStatusCode"], 403, error)
        return error["Error"]["Message"]

    def session(self, role: str) -> str:
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/test"

    def tables(self, *names: str) -> None:
        ddb = self.server.client("dynamodb")
        for table in names:
            ddb.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                AttributeDefinitions=[
                    {"AttributeName": "k", "AttributeType": "S"},
                    {"AttributeName": "g", "AttributeType": "S"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": "byg",
                        "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
                BillingMode="PAY_PER_REQUEST",
            )

    def test_dynamodb_put_item_is_scoped_to_its_table(self) -> None:
        mine, other = name("mine"), name("other")
        self.tables(mine, other)
        role, keys = self.server.role([allow("dynamodb:PutItem", arn("dynamodb", f"table/{mine}"))])
        ddb = self.server.client("dynamodb", keys)
        item = {"k": {"S": "1"}}

        ddb.put_item(TableName=mine, Item=item)
        message = self.denied(ddb.put_item, TableName=other, Item=item)
        self.assertEqual(
            message,
            f"User: {self.session(role)} is not authorized to perform: dynamodb:PutItem on resource: "
            f"{arn('dynamodb', f'table/{other}')} because no identity-based policy allows the "
            "dynamodb:PutItem action",
        )
        # A transaction is authorized item by item, each on its own table.
        message = self.denied(
            ddb.transact_write_items,
            TransactItems=[
                {"Put": {"TableName": mine, "Item": item}},
                {"Put": {"TableName": other, "Item": item}},
            ],
        )
        self.assertIn(f"dynamodb:PutItem on resource: {arn('dynamodb', f'table/{other}')}", message)

    def test_sqs_send_message_is_scoped_by_queue_arn(self) -> None:
        sqs = self.server.client("sqs")
        mine = sqs.create_queue(QueueName=name("mine"))["QueueUrl"]
        other = sqs.create_queue(QueueName=name("other"))["QueueUrl"]
        mine_arn = arn("sqs", mine.rsplit("/", 1)[1])
        _, keys = self.server.role([allow("sqs:SendMessage", mine_arn)])
        sender = self.server.client("sqs", keys)

        sender.send_message(QueueUrl=mine, MessageBody="hello")
        sender.send_message_batch(QueueUrl=mine, Entries=[{"Id": "1", "MessageBody": "hello"}])
        message = self.denied(sender.send_message, QueueUrl=other, MessageBody="hello")
        self.assertIn(f"sqs:SendMessage on resource: {arn('sqs', other.rsplit('/', 1)[1])}", message)

    def test_secrets_manager_get_secret_value_is_scoped_by_arn(self) -> None:
        secrets = self.server.client("secretsmanager")
        mine, other = name("mine"), name("other")
        for secret in (mine, other):
            secrets.create_secret(Name=secret, SecretString="s3cret")
        other_arn = secrets.describe_secret(SecretId=other)["ARN"]
        # The ARN ends in a random suffix: policies name the secret with `-*`.
        _, keys = self.server.role(
            [allow("secretsmanager:GetSecretValue", arn("secretsmanager", f"secret:{mine}-*"))]
        )
        reader = self.server.client("secretsmanager", keys)

        self.assertEqual(reader.get_secret_value(SecretId=mine)["SecretString"], "s3cret")
        message = self.denied(reader.get_secret_value, SecretId=other)
        self.assertIn(f"secretsmanager:GetSecretValue on resource: {other_arn} because", message)

    def test_a_resource_policy_grants_within_the_account(self) -> None:
        secrets = self.server.client("secretsmanager")
        secret = name("shared")
        secrets.create_secret(Name=secret, SecretString="shared")
        role, keys = self.server.role([allow("sqs:ListQueues", "*")])
        secrets.put_resource_policy(
            SecretId=secret,
            ResourcePolicy=policy(
                allow(
                    "secretsmanager:GetSecretValue",
                    "*",
                    Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:role/{role}"},
                )
            ),
        )
        reader = self.server.client("secretsmanager", keys)
        self.assertEqual(reader.get_secret_value(SecretId=secret)["SecretString"], "shared")

    def test_logs_put_log_events_is_scoped_to_the_group_streams(self) -> None:
        logs = self.server.client("logs")
        mine, other = f"/gannet/{name('mine')}", f"/gannet/{name('other')}"
        for group in (mine, other):
            logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=other, logStreamName="s")
        # As infra/template.yaml grants it: the group's ARN with `:*`, its streams.
        _, keys = self.server.role(
            [allow(["logs:CreateLogStream", "logs:PutLogEvents"], arn("logs", f"log-group:{mine}:*"))]
        )
        writer = self.server.client("logs", keys)
        event = [{"timestamp": int(time.time() * 1000), "message": "hello"}]

        writer.create_log_stream(logGroupName=mine, logStreamName="s")
        writer.put_log_events(logGroupName=mine, logStreamName="s", logEvents=event)
        message = self.denied(writer.put_log_events, logGroupName=other, logStreamName="s", logEvents=event)
        self.assertIn(
            f"logs:PutLogEvents on resource: {arn('logs', f'log-group:{other}:log-stream:s')}", message
        )

    def test_an_explicit_deny_wins(self) -> None:
        mine, other = name("mine"), name("other")
        self.tables(mine, other)
        _, keys = self.server.role(
            [
                allow("dynamodb:*", "*"),
                {
                    "Effect": "Deny",
                    "Action": "dynamodb:PutItem",
                    "Resource": arn("dynamodb", f"table/{other}"),
                },
            ]
        )
        ddb = self.server.client("dynamodb", keys)
        ddb.put_item(TableName=mine, Item={"k": {"S": "1"}})
        message = self.denied(ddb.put_item, TableName=other, Item={"k": {"S": "1"}})
        self.assertTrue(message.endswith("with an explicit deny in an identity-based policy"), message)

        # A bucket policy's Deny beats the role's Allow.
        bucket = name("denied")
        s3 = self.server.client("s3")
        s3.create_bucket(Bucket=bucket)
        role, keys = self.server.role([allow("s3:*", "*")])
        s3.put_bucket_policy(
            Bucket=bucket,
            Policy=policy(
                {
                    "Effect": "Deny",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/{role}"},
                    "Action": "s3:PutObject",
                    "Resource": f"arn:aws:s3:::{bucket}/*",
                }
            ),
        )
        message = self.denied(self.server.client("s3", keys).put_object, Bucket=bucket, Key="k", Body=b"x")
        self.assertEqual(
            message,
            f"User: {self.session(role)} is not authorized to perform: s3:PutObject on resource: "
            f"arn:aws:s3:::{bucket}/k with an explicit deny in a resource-based policy",
        )

    def test_a_condition_on_a_key_the_request_lacks_follows_aws(self) -> None:
        table = name("cond")
        self.tables(table)
        resource = arn("dynamodb", f"table/{table}")
        only_from_vpc = {"StringEquals": {"aws:SourceVpc": "vpc-1"}}
        item = {"k": {"S": "1"}}

        # That statement does not apply; the other still allows (moto alone denied this).
        _, keys = self.server.role(
            [
                allow("dynamodb:PutItem", resource, Condition=only_from_vpc),
                allow("dynamodb:PutItem", resource),
            ]
        )
        self.server.client("dynamodb", keys).put_item(TableName=table, Item=item)
        # ...IfExists holds when the key is absent.
        _, keys = self.server.role(
            [
                allow(
                    "dynamodb:PutItem",
                    resource,
                    Condition={"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}},
                )
            ]
        )
        self.server.client("dynamodb", keys).put_item(TableName=table, Item=item)
        # Alone, it allows nothing: an implicit deny, not an explicit one.
        _, keys = self.server.role([allow("dynamodb:PutItem", resource, Condition=only_from_vpc)])
        message = self.denied(self.server.client("dynamodb", keys).put_item, TableName=table, Item=item)
        self.assertIn("because no identity-based policy allows", message)
        # A key the request has: s3:prefix of a listing.
        bucket = name("listed")
        self.server.client("s3").create_bucket(Bucket=bucket)
        _, keys = self.server.role(
            [
                allow(
                    "s3:ListBucket",
                    f"arn:aws:s3:::{bucket}",
                    Condition={"StringLike": {"s3:prefix": "jobs/*"}},
                )
            ]
        )
        lister = self.server.client("s3", keys)
        lister.list_objects_v2(Bucket=bucket, Prefix="jobs/1/")
        message = self.denied(lister.list_objects_v2, Bucket=bucket, Prefix="other/")
        self.assertIn(f"s3:ListBucket on resource: arn:aws:s3:::{bucket} because", message)
        # infra/template.yaml's TLS-only bucket policy refuses nothing sent over TLS, which the
        # loopback server stands in for (moto alone refused everyone).
        self.server.client("s3").put_bucket_policy(
            Bucket=bucket,
            Policy=policy(
                {
                    "Sid": "TlsOnly",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ),
        )
        _, keys = self.server.role([allow("s3:PutObject", f"arn:aws:s3:::{bucket}/jobs/*")])
        self.server.client("s3", keys).put_object(Bucket=bucket, Key="jobs/1", Body=b"x")

    def test_the_admin_stands_in_for_a_service_principal(self) -> None:
        lambda_trust = {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
        iam = self.server.client("iam")
        role = name("fn")
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=policy(lambda_trust))
        iam.attach_role_policy(
            RoleName=role, PolicyArn="arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        )
        keys = self.server.assume(self.server.client("sts"), role)
        # The session has the AWS managed policy's rights.
        group = f"/aws/lambda/{role}"
        self.server.client("logs", keys).create_log_group(logGroupName=group)
        [line] = [
            d
            for d in self.server.decisions()
            if d["action"] == "sts:AssumeRole" and d["resource"].endswith(role)
        ]
        self.assertEqual((line["decision"], line["as"]), ("Allowed", "lambda.amazonaws.com"))

        # Anyone else is refused, even with every right of their own.
        user = name("someone")
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=policy(allow("*", "*")))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        sts = self.server.client("sts", (key["AccessKeyId"], key["SecretAccessKey"], None))
        message = self.denied(self.server.assume, sts, role)
        self.assertIn(
            f"User: arn:aws:iam::{ACCOUNT}:user/{user} is not authorized to perform: sts:AssumeRole on "
            f"resource: arn:aws:iam::{ACCOUNT}:role/{role}",
            message,
        )

        # The trust policy's conditions hold for the stand-in too (the template's JobRole).
        other_account = dict(lambda_trust, Condition={"StringEquals": {"aws:SourceAccount": "210987654321"}})
        role = name("elsewhere")
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=policy(other_account))
        self.denied(self.server.assume, self.server.client("sts"), role)

    def test_every_decision_is_a_line_of_the_log(self) -> None:
        table = name("logged")
        self.tables(table)
        role, keys = self.server.role([allow("dynamodb:GetItem", arn("dynamodb", f"table/{table}"))])
        self.denied(self.server.client("dynamodb", keys).put_item, TableName=table, Item={"k": {"S": "1"}})

        lines = self.server.decisions()
        for line in lines:
            self.assertLessEqual({"time", "principal", "role", "action", "resource", "decision"}, line.keys())
        [denial] = [d for d in lines if d["role"] == role]
        self.assertEqual(
            {k: denial[k] for k in ("principal", "role", "action", "resource", "decision")},
            {
                "principal": self.session(role),
                "role": role,
                "action": "dynamodb:PutItem",
                "resource": arn("dynamodb", f"table/{table}"),
                "decision": "ImplicitlyDenied",
            },
        )
        created = [
            d for d in lines if d["action"] == "dynamodb:CreateTable" and d["resource"].endswith(table)
        ]
        self.assertEqual(
            [(d["principal"], d["role"], d["decision"]) for d in created], [(ADMIN, None, "Allowed")]
        )

    def test_each_request_is_authorized_as_aws_names_its_action_and_resource(self) -> None:
        c = self.server.client
        role, fn, project, cluster, bus, table = (name(p) for p in ("role", "fn", "proj", "cl", "bus", "tab"))
        role_arn = f"arn:aws:iam::{ACCOUNT}:role/{role}"
        bucket, group, secret = name("bucket"), f"/gannet/{name('g')}", name("sec")
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as z:
            z.writestr("bootstrap", "")
        build: dict = {}
        cases = [
            (
                lambda: c("iam").create_role(
                    RoleName=role, AssumeRolePolicyDocument=policy(allow("sts:AssumeRole", "*"))
                ),
                [("iam:CreateRole", role_arn)],
            ),
            (
                lambda: c("lambda").create_function(
                    FunctionName=fn,
                    Runtime="provided.al2023",
                    Role=role_arn,
                    Handler="x",
                    Code={"ZipFile": zipped.getvalue()},
                    Publish=True,
                ),
                [("lambda:CreateFunction", arn("lambda", f"function:{fn}"))],
            ),
            # A GET of a REST API: moto's signature check needed mending for these.
            (
                lambda: c("lambda").get_function(FunctionName=fn, Qualifier="1"),
                [("lambda:GetFunction", arn("lambda", f"function:{fn}:1"))],
            ),
            (lambda: c("lambda").list_functions(), [("lambda:ListFunctions", "*")]),
            (
                lambda: c("codebuild").create_project(
                    name=project,
                    source={"type": "S3", "location": "b/k"},
                    artifacts={"type": "NO_ARTIFACTS"},
                    environment={
                        "type": "LINUX_CONTAINER",
                        "image": "x",
                        "computeType": "BUILD_GENERAL1_SMALL",
                    },
                    serviceRole=role_arn,
                ),
                [("codebuild:CreateProject", arn("codebuild", f"project/{project}"))],
            ),
            (
                lambda: build.update(c("codebuild").start_build(projectName=project)["build"]),
                [("codebuild:StartBuild", arn("codebuild", f"project/{project}"))],
            ),
            (
                lambda: c("codebuild").batch_get_builds(ids=[build["id"]]),
                [("codebuild:BatchGetBuilds", arn("codebuild", f"project/{project}"))],
            ),
            (
                lambda: c("ecs").create_cluster(clusterName=cluster),
                [("ecs:CreateCluster", arn("ecs", f"cluster/{cluster}"))],
            ),
            (
                lambda: c("ecs").register_task_definition(
                    family=fn, containerDefinitions=[{"name": "c", "image": "x", "memory": 128}]
                ),
                [("ecs:RegisterTaskDefinition", arn("ecs", f"task-definition/{fn}:1"))],
            ),
            (
                lambda: c("ecs").create_service(
                    cluster=cluster, serviceName="web", taskDefinition=fn, desiredCount=1
                ),
                [("ecs:CreateService", arn("ecs", f"service/{cluster}/web"))],
            ),
            (
                lambda: c("events").create_event_bus(Name=bus),
                [("events:CreateEventBus", arn("events", f"event-bus/{bus}"))],
            ),
            (
                lambda: c("events").put_events(
                    Entries=[
                        {"Source": "s", "DetailType": "d", "Detail": "{}", "EventBusName": bus},
                        {"Source": "s", "DetailType": "d", "Detail": "{}"},
                    ]
                ),
                [
                    ("events:PutEvents", arn("events", f"event-bus/{bus}")),
                    ("events:PutEvents", arn("events", "event-bus/default")),
                ],
            ),
            (
                lambda: c("scheduler").create_schedule(
                    Name=fn,
                    ScheduleExpression="rate(1 minute)",
                    FlexibleTimeWindow={"Mode": "OFF"},
                    Target={"Arn": arn("lambda", f"function:{fn}"), "RoleArn": role_arn},
                ),
                [("scheduler:CreateSchedule", arn("scheduler", f"schedule/default/{fn}"))],
            ),
            (
                lambda: c("scheduler").get_schedule(Name=fn),
                [("scheduler:GetSchedule", arn("scheduler", f"schedule/default/{fn}"))],
            ),
            (
                lambda: c("ssm").put_parameter(Name=f"/gannet/{fn}", Value="v", Type="String"),
                [("ssm:PutParameter", arn("ssm", f"parameter/gannet/{fn}"))],
            ),
            (
                lambda: c("ssm").get_parameters(Names=[f"/gannet/{fn}", "plain"]),
                [
                    ("ssm:GetParameters", arn("ssm", f"parameter/gannet/{fn}")),
                    ("ssm:GetParameters", arn("ssm", "parameter/plain")),
                ],
            ),
            (
                lambda: c("cloudwatch").put_metric_data(
                    Namespace="gannet", MetricData=[{"MetricName": "m", "Value": 1}]
                ),
                [("cloudwatch:PutMetricData", "*")],
            ),
            (lambda: c("s3").create_bucket(Bucket=bucket), [("s3:CreateBucket", f"arn:aws:s3:::{bucket}")]),
            (lambda: c("s3").head_bucket(Bucket=bucket), [("s3:ListBucket", f"arn:aws:s3:::{bucket}")]),
            (
                lambda: c("s3").delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": "a/1"}, {"Key": "b"}]}
                ),
                [
                    ("s3:DeleteObject", f"arn:aws:s3:::{bucket}/a/1"),
                    ("s3:DeleteObject", f"arn:aws:s3:::{bucket}/b"),
                ],
            ),
            (lambda: self.tables(table), [("dynamodb:CreateTable", arn("dynamodb", f"table/{table}"))]),
            (
                lambda: c("dynamodb").query(
                    TableName=table,
                    IndexName="byg",
                    KeyConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "1"}},
                ),
                [("dynamodb:Query", arn("dynamodb", f"table/{table}/index/byg"))],
            ),
            (
                lambda: c("dynamodb").transact_get_items(
                    TransactItems=[{"Get": {"TableName": table, "Key": {"k": {"S": "1"}}}}]
                ),
                [("dynamodb:GetItem", arn("dynamodb", f"table/{table}"))],
            ),
            # A log group's actions are authorized on the group's ARN with an empty stream part.
            (
                lambda: c("logs").create_log_group(logGroupName=group),
                [("logs:CreateLogGroup", arn("logs", f"log-group:{group}:log-stream:"))],
            ),
            (lambda: c("logs").describe_log_groups(), [("logs:DescribeLogGroups", "*")]),
            # A new secret's ARN ends in a suffix not chosen yet.
            (
                lambda: c("secretsmanager").create_secret(Name=secret, SecretString="x"),
                [("secretsmanager:CreateSecret", arn("secretsmanager", f"secret:{secret}-??????"))],
            ),
            (
                lambda: c("iam").create_user(UserName=fn),
                [("iam:CreateUser", f"arn:aws:iam::{ACCOUNT}:user/{fn}")],
            ),
        ]
        for call, expected in cases:
            before = len(self.server.decisions())
            with self.subTest(expected[0][0]):
                call()
                made = self.server.decisions()[before:]
                self.assertEqual(
                    [(d["action"], d["resource"], d["decision"]) for d in made],
                    [(action, resource, "Allowed") for action, resource in expected],
                )
                self.assertFalse([d for d in made if "unmapped" in d])

    def test_startbuild_with_a_role_override_needs_that_role_passed_to_codebuild(self) -> None:
        project, target, other = name("proj"), name("tf-prod"), name("tf-other")

        def role_arn(role: str) -> str:
            return f"arn:aws:iam::{ACCOUNT}:role/{role}"

        codebuild_trust = {
            "Effect": "Allow",
            "Principal": {"Service": "codebuild.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
        for role in (target, other):
            self.server.client("iam").create_role(
                RoleName=role, AssumeRolePolicyDocument=policy(codebuild_trust)
            )
        self.server.client("codebuild").create_project(
            name=project,
            source={"type": "S3", "location": "b/k"},
            artifacts={"type": "NO_ARTIFACTS"},
            environment={"type": "ARM_CONTAINER", "image": "x", "computeType": "BUILD_GENERAL1_SMALL"},
            serviceRole=role_arn(other),
        )
        start = allow("codebuild:StartBuild", arn("codebuild", f"project/{project}"))

        def starter(passed_to: str) -> tuple[str, object]:
            role, keys = self.server.role(
                [
                    start,
                    allow(
                        "iam:PassRole",
                        role_arn(target),
                        Condition={"StringEquals": {"iam:PassedToService": passed_to}},
                    ),
                ]
            )
            return role, self.server.client("codebuild", keys)

        # As infra/template.yaml's PassJobTargetRoles grants it.
        role, codebuild = starter("codebuild.amazonaws.com")
        before = len(self.server.decisions())
        codebuild.start_build(projectName=project)
        codebuild.start_build(projectName=project, serviceRoleOverride=role_arn(target))
        codebuild.start_build(projectName=project, serviceRoleOverride=target)
        self.assertEqual(
            [(d["action"], d["resource"], d["decision"]) for d in self.server.decisions()[before:]],
            [
                ("codebuild:StartBuild", arn("codebuild", f"project/{project}"), "Allowed"),
                ("codebuild:StartBuild", arn("codebuild", f"project/{project}"), "Allowed"),
                ("iam:PassRole", role_arn(target), "Allowed"),
                ("codebuild:StartBuild", arn("codebuild", f"project/{project}"), "Allowed"),
                ("iam:PassRole", role_arn(target), "Allowed"),
            ],
        )
        # Another target's role.
        message = self.denied(codebuild.start_build, projectName=project, serviceRoleOverride=role_arn(other))
        self.assertEqual(
            message,
            f"User: {self.session(role)} is not authorized to perform: iam:PassRole on resource: "
            f"{role_arn(other)} because no identity-based policy allows the iam:PassRole action",
        )
        # A role the caller may pass to another service only.
        _, to_lambda = starter("lambda.amazonaws.com")
        message = self.denied(to_lambda.start_build, projectName=project, serviceRoleOverride=role_arn(target))
        self.assertIn(f"iam:PassRole on resource: {role_arn(target)} because", message)

    def test_a_request_the_mapping_does_not_know_is_decided_on_star_and_flagged(self) -> None:
        document = name("doc")
        before = len(self.server.decisions())
        self.server.client("ssm").create_document(
            Name=document,
            Content=json.dumps({"schemaVersion": "2.2", "mainSteps": []}),
            DocumentType="Command",
        )
        [line] = self.server.decisions()[before:]
        self.assertEqual(
            (line["action"], line["resource"], line["decision"], line["unmapped"]),
            ("ssm:CreateDocument", "*", "Allowed", "ssm:CreateDocument: no resource mapping; evaluated on *"),
        )

    def objects(self, *keys: str) -> str:
        """A new bucket holding `keys` (each key its own content), made by the admin."""
        bucket = name("presigned")
        s3 = self.server.client("s3")
        s3.create_bucket(Bucket=bucket)
        for key in keys:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        return bucket

    def test_a_presigned_url_is_authorized_as_its_signer(self) -> None:
        bucket = self.objects("jobs/1/source.tar.gz", "jobs/2/source.tar.gz")
        role, keys = self.server.role(
            [
                allow("s3:GetObject", f"arn:aws:s3:::{bucket}/jobs/1/source.tar.gz"),
                allow("s3:PutObject", f"arn:aws:s3:::{bucket}/jobs/1/out.tar"),
            ]
        )
        presigner = self.server.client("s3", keys, SIGV4)
        get = presign(presigner, "get_object", bucket, "jobs/1/source.tar.gz")
        put = presign(presigner, "put_object", bucket, "jobs/1/out.tar")
        head = presign(presigner, "head_object", bucket, "jobs/1/source.tar.gz")
        self.assertIn("X-Amz-Security-Token=", get)
        before = len(self.server.decisions())

        self.assertEqual(fetch(get), (200, b"jobs/1/source.tar.gz"))
        self.assertEqual(fetch(put, "PUT", b"the output"), (200, b""))
        self.assertEqual(fetch(head, "HEAD")[0], 200)
        stored = self.server.client("s3").get_object(Bucket=bucket, Key="jobs/1/out.tar")
        self.assertEqual(stored["Body"].read(), b"the output")
        made = [d for d in self.server.decisions()[before:] if d["role"] == role]
        self.assertEqual(
            [(d["principal"], d["action"], d["resource"], d["decision"]) for d in made],
            [
                (self.session(role), action, f"arn:aws:s3:::{bucket}/{key}", "Allowed")
                for action, key in (
                    ("s3:GetObject", "jobs/1/source.tar.gz"),
                    ("s3:PutObject", "jobs/1/out.tar"),
                    ("s3:GetObject", "jobs/1/source.tar.gz"),
                )
            ],
        )

        # The path is signed: the URL bent to another object is refused before any decision.
        before = len(self.server.decisions())
        bent = get.replace("/jobs/1/", "/jobs/2/")
        self.assertNotEqual(bent, get)
        status, body = fetch(bent)
        self.assertEqual((status, s3_error(body)[0]), (403, "SignatureDoesNotMatch"), body)
        status, body = fetch(put.replace("/jobs/1/out.tar", "/jobs/1/source.tar.gz"), "PUT", b"x")
        self.assertEqual((status, s3_error(body)[0]), (403, "SignatureDoesNotMatch"), body)
        # So is the query: a longer life is a new signature.
        status, body = fetch(get.replace("X-Amz-Expires=3600", "X-Amz-Expires=7200"))
        self.assertEqual((status, s3_error(body)[0]), (403, "SignatureDoesNotMatch"), body)
        self.assertEqual(self.server.decisions()[before:], [])
        self.assertEqual(
            self.server.client("s3").get_object(Bucket=bucket, Key="jobs/1/source.tar.gz")["Body"].read(),
            b"jobs/1/source.tar.gz",
        )

    def test_a_presigned_url_is_refused_as_s3_refuses_it(self) -> None:
        bucket = self.objects("k")
        key = f"arn:aws:s3:::{bucket}/k"
        role, keys = self.server.role([allow("s3:ListBucket", f"arn:aws:s3:::{bucket}")])
        presigner = self.server.client("s3", keys, SIGV4)

        # Its signer may not read the object.
        before = len(self.server.decisions())
        status, body = fetch(presign(presigner, "get_object", bucket, "k"))
        self.assertEqual(
            (status, s3_error(body)),
            (
                403,
                (
                    "AccessDenied",
                    f"User: {self.session(role)} is not authorized to perform: s3:GetObject on resource: "
                    f"{key} because no identity-based policy allows the s3:GetObject action",
                ),
            ),
        )
        [line] = self.server.decisions()[before:]
        self.assertEqual(
            (line["principal"], line["action"], line["resource"], line["decision"]),
            (self.session(role), "s3:GetObject", key, "ImplicitlyDenied"),
        )

        # Expired, though its signer may read it.
        _, keys = self.server.role([allow("s3:GetObject", key)])
        presigner = self.server.client("s3", keys, SIGV4)
        url = presign(presigner, "get_object", bucket, "k", life=1)
        self.assertEqual(fetch(url), (200, b"k"))
        time.sleep(2.1)
        status, body = fetch(url)
        self.assertEqual((status, s3_error(body)), (403, ("AccessDenied", "Request has expired")))

        # A key moto does not know; a life past S3's seven days.
        stranger = self.server.client("s3", ("AKIAIOSFODNN7EXAMPLE", "not-a-secret", None), SIGV4)
        status, body = fetch(presign(stranger, "get_object", bucket, "k"))
        self.assertEqual((status, s3_error(body)[0]), (403, "InvalidAccessKeyId"))
        status, body = fetch(presign(presigner, "get_object", bucket, "k", life=604801))
        self.assertEqual((status, s3_error(body)[0]), (400, "AuthorizationQueryParametersError"))

    def test_a_policy_can_allow_presigned_urls_only(self) -> None:
        bucket = self.objects("k")
        _, keys = self.server.role(
            [
                allow(
                    "s3:GetObject",
                    f"arn:aws:s3:::{bucket}/k",
                    Condition={"StringEquals": {"s3:authType": "REST-QUERY-STRING"}},
                )
            ]
        )
        s3 = self.server.client("s3", keys, SIGV4)
        self.assertEqual(fetch(presign(s3, "get_object", bucket, "k")), (200, b"k"))
        self.denied(s3.get_object, Bucket=bucket, Key="k")

    def test_a_dead_simulator_fails_the_request_with_a_500_and_the_next_gets_a_new_one(self) -> None:
        sqs = self.server.client("sqs", config=NO_RETRIES)
        sqs.list_queues()
        os.kill(self.server.simulator_pid(), signal.SIGKILL)
        with self.assertRaises(ClientError) as raised:
            sqs.list_queues()
        error = raised.exception.response
        self.assertEqual(error["ResponseMetadata"]["HTTPStatusCode"], 500, error)
        self.assertIn("the IAM simulator", error["Error"]["Message"])
        self.assertIn("died", error["Error"]["Message"])
        sqs.list_queues()


if __name__ == "__main__":
    unittest.main()
