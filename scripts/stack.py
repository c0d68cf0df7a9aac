"""Creates gannet's own AWS stack, from the SAM template or the CDK construct's synthesised
template, on a local AWS API (moto_server), and describes what it made as JSON.

    python scripts/stack.py --endpoint URL --name STACK --sam infra/template.yaml \
        --code-zip ZIP [--param Key=Value ...] [--replace OLD=NEW ...]
    python scripts/stack.py --endpoint URL --name STACK --cdk gannet.template.json ...

Run by scripts/stack.sh with .venv-infra's Python (the SAM translator and boto3 live there).

The SAM template goes through the SAM transform (aws-sam-translator, as `sam deploy` does);
every Lambda function's code becomes ZIP, uploaded to a bucket of its own. The result is
created with CloudFormation, as the credentials in the environment (the test's admin), and
waited for.

moto's CloudFormation cannot create some resource types. Each of those is a stand-in, made by
the same API call CloudFormation would make, with its properties resolved against the stack
(`STAND_INS` says which and how); its IAM (roles, policies, the role it names) is the
template's, untouched. A stand-in that a created resource refers to (the jobs' CodeBuild
project in the stage role's policy, the HTTP API in the API policies) is made or named first
and its references in the template replaced by its identifiers. Nothing else is changed, so
the roles and policies the tests run under are the template's own.

The JSON on stdout: {stack, account, region, parameters, conditions, resources: {logical:
{type, physical, arn?, stand_in?}}, functions: {logical: {name, arn, role, environment}},
outputs, stand_ins: {logical: type}}. Errors go to stderr, naming the resource.
"""

import argparse
import json
import os
import re
import sys
import time
import uuid

import boto3
import botocore.exceptions

REGION = "us-east-1"
PARTITION = "aws"
# How long CloudFormation may take before the script gives up.
CREATE_TIMEOUT_S = 120

# Types moto 5.2.5's CloudFormation cannot create, and the boto3 call that stands in.
STAND_INS = {
    "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Stage",
    "AWS::CloudWatch::Alarm",
    "AWS::CodeBuild::Project",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::Lambda::Url",
    "AWS::S3::BucketPolicy",
    "AWS::Scheduler::Schedule",
    # CDK's version report: nothing to make.
    "AWS::CDK::Metadata",
}


class StackError(Exception):
    pass


class Unresolved(Exception):
    """A reference to something not known yet (a resource before the stack exists)."""


def lower_keys(value):
    """CloudFormation's PascalCase property names as the APIs' camelCase ones."""
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: lower_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [lower_keys(v) for v in value]
    return value


class Resolver:
    """The intrinsic functions a template uses, against what is known so far."""

    def __init__(self, template, stack, account, parameters):
        self.template = template
        self.stack = stack
        self.account = account
        self.parameters = parameters
        self.refs = {}  # logical id -> Ref value
        self.attributes = {}  # (logical id, attribute) -> value
        self.conditions = {}

    def pseudo(self, name):
        return {
            "AWS::AccountId": self.account,
            "AWS::Region": REGION,
            "AWS::Partition": PARTITION,
            "AWS::StackName": self.stack,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{self.account}:stack/{self.stack}/x",
        }.get(name)

    def ref(self, name):
        if name == "AWS::NoValue":
            return None
        value = self.pseudo(name)
        if value is not None:
            return value
        if name in self.parameters:
            return self.parameters[name]
        if name in self.refs:
            return self.refs[name]
        raise Unresolved(name)

    def get_att(self, name, attribute):
        key = (name, attribute)
        if key in self.attributes:
            return self.attributes[key]
        raise Unresolved(f"{name}.{attribute}")

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = bool(self.resolve(self.template["Conditions"][name]))
        return self.conditions[name]

    def sub(self, text, variables):
        def one(match):
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def resolve(self, value):
        """`value` with every intrinsic resolved; `None` for AWS::NoValue."""
        if isinstance(value, list):
            items = (self.resolve(v) for v in value)
            return [v for v in items if v is not None]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                name, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(name, attribute)
            if key == "Fn::Sub":
                if isinstance(arg, list):
                    return self.sub(arg[0], {k: self.resolve(v) for k, v in arg[1].items()})
                return self.sub(arg, {})
            if key == "Fn::Join":
                return arg[0].join(str(v) for v in self.resolve(arg[1]))
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(self.resolve(arg[0]))]
            if key == "Fn::Split":
                return self.resolve(arg[1]).split(arg[0])
            if key == "Fn::If":
                branch = arg[1] if self.condition(arg[0]) else arg[2]
                return self.resolve(branch)
            if key == "Fn::Equals":
                left, right = (self.resolve(v) for v in arg)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(v) for v in arg)
            if key == "Fn::Or":
                return any(self.resolve(v) for v in arg)
            if key == "Condition":
                return self.condition(arg)
            if key.startswith("Fn::"):
                raise StackError(f"the script resolves no {key}")
        out = {}
        for k, v in value.items():
            v = self.resolve(v)
            if v is not None:
                out[k] = v
        return out


def replace_references(value, values):
    """`value` with Ref and GetAtt of the logical ids in `values` ({(id, attr or None): v})
    replaced by their values, also inside Fn::Sub strings."""
    if isinstance(value, list):
        return [replace_references(v, values) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref" and (arg, None) in values:
            return values[(arg, None)]
        if key == "Fn::GetAtt":
            name, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            if (name, attribute) in values:
                return values[(name, attribute)]
        if key == "Fn::Sub":
            text, variables = (arg, None) if isinstance(arg, str) else arg
            for (name, attribute), v in values.items():
                text = text.replace("${" + (f"{name}.{attribute}" if attribute else name) + "}", str(v))
            return {key: text if variables is None else [text, replace_references(variables, values)]}
    return {k: replace_references(v, values) for k, v in value.items()}


NO_VALUE = {"Ref": "AWS::NoValue"}


def choose_branches(value, resolver):
    """`value` with every Fn::If replaced by its branch, and AWS::NoValue dropped: moto keeps
    a NoValue in a list as a null (a policy's Statement then fails to parse)."""
    if isinstance(value, list):
        items = (choose_branches(v, resolver) for v in value)
        return [v for v in items if v != NO_VALUE]
    if not isinstance(value, dict):
        return value
    if list(value) == ["Fn::If"]:
        condition, then, otherwise = value["Fn::If"]
        return choose_branches(then if resolver.condition(condition) else otherwise, resolver)
    items = ((k, choose_branches(v, resolver)) for k, v in value.items())
    return {k: v for k, v in items if v != NO_VALUE}


def mentions(value, names):
    """The logical ids among `names` that `value` refers to."""
    text = json.dumps(value)
    return {n for n in names if f'"{n}"' in text or "${" + n + "}" in text or "${" + n + "." in text}


def sam_to_cloudformation(path, code):
    """The SAM template at `path` through the SAM transform, as `sam deploy` sends it, with
    every function's code the S3 object `code` ({S3Bucket, S3Key})."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    with open(path) as f:
        sam = yaml_parse(f.read())
    sam.setdefault("Globals", {}).setdefault("Function", {})["CodeUri"] = {
        "Bucket": code["S3Bucket"],
        "Key": code["S3Key"],
    }
    for resource in sam["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"].pop("CodeUri", None)

    class NoManagedPolicies:
        # The template names AWS managed policies by ARN, never by SAM's short name.
        def load(self):
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    return transform(sam, {}, NoManagedPolicies())


class Maker:
    def __init__(self, args):
        self.args = args
        session = boto3.session.Session(region_name=REGION)
        self.client = lambda service: session.client(service, endpoint_url=args.endpoint)
        self.account = self.client("sts").get_caller_identity()["Account"]

    # -- the template ---------------------------------------------------------------------

    def template(self, code):
        if self.args.sam:
            template = sam_to_cloudformation(self.args.sam, code)
        else:
            with open(self.args.cdk) as f:
                text = f.read()
            for pair in self.args.replace:
                old, new = pair.split("=", 1)
                text = text.replace(old, new)
            template = json.loads(text)
            # The CDK bootstrap's version check and asset parameters have no place here.
            template.pop("Rules", None)
            template.get("Parameters", {}).pop("BootstrapVersion", None)
            for resource in template["Resources"].values():
                if resource["Type"] == "AWS::Lambda::Function":
                    resource["Properties"]["Code"] = dict(code)
        return template

    def upload_code(self):
        s3 = self.client("s3")
        bucket = f"{self.args.name}-code".lower()[:63]
        s3.create_bucket(Bucket=bucket)
        with open(self.args.code_zip, "rb") as f:
            s3.put_object(Bucket=bucket, Key="bootstrap.zip", Body=f.read())
        return {"S3Bucket": bucket, "S3Key": "bootstrap.zip"}

    # -- stand-ins ------------------------------------------------------------------------

    def name_before(self, logical, resource, resolver):
        """A stand-in that the stack refers to, made or named before it: its Ref and GetAtt."""
        kind = resource["Type"]
        # Only what names it: the rest may refer to the stack.
        props = resource.get("Properties", {})
        if kind == "AWS::CodeBuild::Project":
            name = resolver.resolve(props["Name"])
            arn = f"arn:aws:codebuild:{REGION}:{self.account}:project/{name}"
            return {(logical, None): name, (logical, "Arn"): arn}
        if kind == "AWS::ApiGatewayV2::Api":
            api = self.client("apigatewayv2")
            body = resolver.resolve(props.get("Body"))
            name = resolver.resolve(props.get("Name")) or body["info"]["title"]
            made = api.create_api(Name=name, ProtocolType=props.get("ProtocolType", "HTTP"))
            if body:
                # moto has no ImportApi; a reimport into the new API reads the same body.
                api.reimport_api(ApiId=made["ApiId"], Body=json.dumps(body))
            endpoint = f"https://{made['ApiId']}.execute-api.{REGION}.amazonaws.com"
            return {(logical, None): made["ApiId"], (logical, "ApiEndpoint"): endpoint}
        raise StackError(
            f"Resources.{logical}: the stack refers to this {kind}, which moto cannot create and "
            "the script cannot name before the stack exists"
        )

    def make_after(self, logical, resource, resolver):
        """A stand-in made after the stack, by the call CloudFormation would make."""
        kind = resource["Type"]
        props = resolver.resolve(resource.get("Properties", {}))
        if kind == "AWS::CDK::Metadata":
            return None
        if kind == "AWS::CodeBuild::Project":
            p = lower_keys(props)
            # CloudFormation's Source.BuildSpec is the API's source.buildspec.
            if "buildSpec" in p["source"]:
                p["source"]["buildspec"] = p["source"].pop("buildSpec")
            # moto insists on a location even for NO_SOURCE (CodeBuild refuses one there): a
            # name no build reads, as shared/aws's provision_jobs gives it.
            if p["source"]["type"] == "NO_SOURCE":
                p["source"]["type"], p["source"]["location"] = "S3", f"{p['name']}/no-source"
            self.client("codebuild").create_project(
                name=p["name"],
                description=p.get("description", ""),
                source=p["source"],
                artifacts=p["artifacts"],
                environment=p["environment"],
                serviceRole=p["serviceRole"],
                timeoutInMinutes=p.get("timeoutInMinutes", 60),
                logsConfig=p.get("logsConfig", {}),
            )
            return resolver.refs[logical]
        if kind == "AWS::ApiGatewayV2::Api":
            return resolver.refs[logical]
        if kind == "AWS::ApiGatewayV2::Stage":
            self.client("apigatewayv2").create_stage(
                ApiId=props["ApiId"], StageName=props["StageName"], AutoDeploy=props.get("AutoDeploy", False)
            )
            return props["StageName"]
        if kind == "AWS::S3::BucketPolicy":
            self.client("s3").put_bucket_policy(Bucket=props["Bucket"], Policy=json.dumps(props["PolicyDocument"]))
            return props["Bucket"]
        if kind == "AWS::Lambda::Url":
            made = self.client("lambda").create_function_url_config(
                FunctionName=props["TargetFunctionArn"], AuthType=props["AuthType"]
            )
            resolver.attributes[(logical, "FunctionUrl")] = made["FunctionUrl"]
            return made["FunctionArn"]
        if kind == "AWS::Lambda::EventInvokeConfig":
            fields = {k: props[k] for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds") if k in props}
            self.client("lambda").put_function_event_invoke_config(
                FunctionName=props["FunctionName"], Qualifier=props.get("Qualifier", "$LATEST"), **fields
            )
            return f"{props['FunctionName']}:{props.get('Qualifier', '$LATEST')}"
        if kind == "AWS::Scheduler::Schedule":
            target = {k: props["Target"][k] for k in ("Arn", "RoleArn", "Input", "RetryPolicy") if k in props["Target"]}
            self.client("scheduler").create_schedule(
                Name=props["Name"],
                ScheduleExpression=props["ScheduleExpression"],
                FlexibleTimeWindow=props["FlexibleTimeWindow"],
                Target=target,
                State=props.get("State", "ENABLED"),
            )
            return props["Name"]
        if kind == "AWS::CloudWatch::Alarm":
            fields = {k: v for k, v in props.items() if k != "AlarmDescription" or v}
            self.client("cloudwatch").put_metric_alarm(**fields)
            return props["AlarmName"]
        raise StackError(f"Resources.{logical}: no stand-in for {kind}")

    # -- the stack ------------------------------------------------------------------------

    def attach_managed_policies(self, resources, resolver):
        """moto's CloudFormation ignores a role's ManagedPolicyArns: attached here, by the call
        CloudFormation makes."""
        iam = self.client("iam")
        for logical, resource in resources.items():
            if resource["Type"] != "AWS::IAM::Role":
                continue
            if resource.get("Condition") and not resolver.condition(resource["Condition"]):
                continue
            for arn in resolver.resolve(resource["Properties"].get("ManagedPolicyArns", [])):
                iam.attach_role_policy(RoleName=resolver.refs[logical], PolicyArn=arn)

    def learn(self, resolver, template):
        """Each created resource's Ref and the attributes the template reads."""
        cfn = self.client("cloudformation")
        described = cfn.describe_stack_resources(StackName=self.args.name)["StackResources"]
        made = {}
        # moto lists a resource whose condition is false as an entry with no ids.
        for r in (r for r in described if "LogicalResourceId" in r):
            # moto names no Lambda::Permission (AWS's physical id is the statement's id).
            logical, physical, kind = r["LogicalResourceId"], r.get("PhysicalResourceId", ""), r["ResourceType"]
            resolver.refs[logical] = physical
            arn = None
            if kind == "AWS::IAM::Role":
                arn = self.client("iam").get_role(RoleName=physical)["Role"]["Arn"]
                resolver.attributes[(logical, "RoleId")] = physical
            elif kind == "AWS::SQS::Queue":
                name = physical.rsplit("/", 1)[1]
                arn = f"arn:aws:sqs:{REGION}:{self.account}:{name}"
                resolver.attributes[(logical, "QueueName")] = name
                resolver.attributes[(logical, "QueueUrl")] = physical
            elif kind == "AWS::S3::Bucket":
                arn = f"arn:aws:s3:::{physical}"
            elif kind == "AWS::Lambda::Function":
                arn = f"arn:aws:lambda:{REGION}:{self.account}:function:{physical}"
            elif kind == "AWS::Logs::LogGroup":
                arn = f"arn:aws:logs:{REGION}:{self.account}:log-group:{physical}:*"
            elif kind == "AWS::DynamoDB::Table":
                arn = f"arn:aws:dynamodb:{REGION}:{self.account}:table/{physical}"
            elif kind == "AWS::IAM::ManagedPolicy":
                arn = physical
            if arn:
                resolver.attributes[(logical, "Arn")] = arn
            made[logical] = {"type": kind, "physical": physical, **({"arn": arn} if arn else {})}
        wanted = {k for k, r in template["Resources"].items()
                  if not r.get("Condition") or resolver.condition(r["Condition"])}
        missing = wanted - set(made)
        if missing:
            raise StackError(f"the stack was created without {sorted(missing)}")
        return made

    def create(self):
        code = self.upload_code()
        template = self.template(code)
        parameters = {k: str(v["Default"]) for k, v in template.get("Parameters", {}).items() if "Default" in v}
        for pair in self.args.param:
            key, value = pair.split("=", 1)
            if key not in template.get("Parameters", {}):
                raise StackError(f"--param {key}: the template has no such parameter")
            parameters[key] = value
        lists = {k for k, v in template.get("Parameters", {}).items() if v["Type"].startswith("CommaDelimitedList") or v["Type"].startswith("List<")}
        resolver = Resolver(template, self.args.name, self.account, {
            k: ([] if v == "" else v.split(",")) if k in lists else v for k, v in parameters.items()
        })

        stand_ins = {k: r for k, r in template["Resources"].items() if r["Type"] in STAND_INS}
        kept = {k: r for k, r in template["Resources"].items() if k not in stand_ins}
        # The stand-ins the stack refers to, named (or made) first.
        needed = set().union(*(mentions(r, set(stand_ins)) for r in kept.values())) if kept else set()
        known = {}
        for logical in sorted(needed):
            known.update(self.name_before(logical, stand_ins[logical], resolver))
        for (logical, attribute), value in known.items():
            if attribute is None:
                resolver.refs[logical] = value
            else:
                resolver.attributes[(logical, attribute)] = value
        for logical, resource in kept.items():
            if "DependsOn" in resource:
                depends = resource["DependsOn"]
                depends = [depends] if isinstance(depends, str) else depends
                resource["DependsOn"] = [d for d in depends if d not in stand_ins]
            kept[logical] = choose_branches(replace_references(resource, known), resolver)
        cfn_template = dict(template)
        cfn_template["Resources"] = kept
        outputs = cfn_template.pop("Outputs", {})

        cfn = self.client("cloudformation")
        cfn.create_stack(
            StackName=self.args.name,
            TemplateBody=json.dumps(cfn_template),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()
                        if k in template.get("Parameters", {})],
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
        deadline = time.monotonic() + CREATE_TIMEOUT_S
        while True:
            stack = cfn.describe_stacks(StackName=self.args.name)["Stacks"][0]
            if stack["StackStatus"] == "CREATE_COMPLETE":
                break
            if not stack["StackStatus"].endswith("IN_PROGRESS"):
                events = cfn.describe_stack_events(StackName=self.args.name)["StackEvents"]
                failed = [f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}" for e in events
                          if e["ResourceStatus"].endswith("FAILED")]
                raise StackError(f"stack {self.args.name} is {stack['StackStatus']}: {failed}")
            if time.monotonic() > deadline:
                raise StackError(f"stack {self.args.name} not created within {CREATE_TIMEOUT_S}s")
            time.sleep(0.2)

        resources = self.learn(resolver, cfn_template)
        self.attach_managed_policies(kept, resolver)
        for logical, resource in stand_ins.items():
            if resource.get("Condition") and not resolver.condition(resource["Condition"]):
                continue
            try:
                physical = self.make_after(logical, resource, resolver)
            except (botocore.exceptions.ClientError, botocore.exceptions.ParamValidationError) as e:
                raise StackError(f"Resources.{logical} ({resource['Type']}, a stand-in): {e}") from e
            if physical is not None:
                resolver.refs.setdefault(logical, physical)
                resources[logical] = {"type": resource["Type"], "physical": physical, "stand_in": True}

        functions = {}
        lam = self.client("lambda")
        for logical, r in resources.items():
            if r["type"] == "AWS::Lambda::Function":
                config = lam.get_function_configuration(FunctionName=r["physical"])
                functions[logical] = {
                    "name": config["FunctionName"],
                    "arn": config["FunctionArn"],
                    "role": config["Role"],
                    "environment": config.get("Environment", {}).get("Variables", {}),
                }
        resolved_outputs = {}
        for key, output in outputs.items():
            if output.get("Condition") and not resolver.condition(output["Condition"]):
                continue
            resolved_outputs[key] = resolver.resolve(output["Value"])
        return {
            "stack": self.args.name,
            "account": self.account,
            "region": REGION,
            "parameters": parameters,
            "conditions": {k: resolver.condition(k) for k in template.get("Conditions", {})},
            "resources": resources,
            "functions": functions,
            "outputs": resolved_outputs,
            "stand_ins": {k: r["Type"] for k, r in stand_ins.items()},
        }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--name", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sam", help="the SAM template (infra/template.yaml)")
    source.add_argument("--cdk", help="a template `cdk synth` made of the construct")
    parser.add_argument("--code-zip", required=True, help="the zip every function runs")
    parser.add_argument("--param", action="append", default=[], help="Key=Value")
    parser.add_argument("--replace", action="append", default=[],
                        help="OLD=NEW, replaced in the CDK template's text (its literal ARNs)")
    args = parser.parse_args()
    if not re.fullmatch(r"http://(127\.0\.0\.1|localhost):\d+/?", args.endpoint):
        parser.error(f"--endpoint must be a loopback URL, got {args.endpoint}")
    try:
        json.dump(Maker(args).create(), sys.stdout, indent=1, sort_keys=True)
    except (StackError, Unresolved) as e:
        print(f"stack.py: {args.sam or args.cdk}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
