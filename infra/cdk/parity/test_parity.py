"""The parity cases, and proof that the parity tool catches drift: a change to one template
only (an IAM statement, a queue setting, an environment variable, a resource, an output)
fails with the resource and the property named.

Run by scripts/cdk.sh test with the .venv-infra Python, after parity/synth.ts has written
the construct's templates into $GANNET_CDK_PARITY_DIR.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_templates as parity  # noqa: E402

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parents[1] / "template.yaml"
CASES = json.loads((HERE / "cases.json").read_text())["cases"]
CDK_DIR = Path(os.environ["GANNET_CDK_PARITY_DIR"])


def cdk_template(case: str) -> dict:
    return json.loads((CDK_DIR / f"{case}.json").read_text())


def cdk_resource(template: dict, sam_id: str) -> dict:
    """The CDK resource that stands for SAM's `sam_id`."""
    for resource in template["Resources"].values():
        path = resource.get("Metadata", {}).get("aws:cdk:path", "")
        if path.removesuffix("/Resource").split("/")[2:] == [sam_id]:
            return resource
    raise KeyError(sam_id)


class Cases(unittest.TestCase):
    sam = parity.load_sam(TEMPLATE)

    def test_every_case_deploys_the_same(self):
        for name, case in CASES.items():
            with self.subTest(case=name):
                self.assertEqual(parity.compare(self.sam, case["sam"], cdk_template(name)), [])

    def test_the_full_case_sets_every_sam_parameter(self):
        # A parameter added to the SAM template fails here until the props and a case cover it.
        self.assertEqual(sorted(set(self.sam["Parameters"]) - set(CASES["full"]["sam"])), [])

    def test_a_parameter_the_template_lacks_is_refused(self):
        with self.assertRaisesRegex(parity.ParityError, "DriftMinutes"):
            parity.compare(self.sam, {**CASES["minimal"]["sam"], "DriftMinutes": 3}, cdk_template("minimal"))

    def test_a_parameter_outside_its_constraints_is_refused(self):
        with self.assertRaisesRegex(parity.ParityError, "StageMaxConcurrency"):
            parity.compare(self.sam, {**CASES["minimal"]["sam"], "StageMaxConcurrency": 1}, cdk_template("minimal"))


class SamChanged(unittest.TestCase):
    """The SAM template changed, the construct not."""

    def run_tool(self, template_text: str) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory() as tmp:
            changed = Path(tmp) / "template.yaml"
            changed.write_text(template_text)
            return subprocess.run(
                [sys.executable, str(HERE / "compare_templates.py"), "--template", str(changed),
                 "--cases", str(HERE / "cases.json"), "--cdk-dir", str(CDK_DIR)],
                capture_output=True, text=True, check=False,
            )

    def test_one_iam_statement_changed_in_a_copy_of_template_yaml(self):
        text = TEMPLATE.read_text()
        # The first JobLogs statement is StageRole's (DriftRole has the second).
        original = "- Sid: JobLogs\n                Effect: Allow\n                Action: logs:GetLogEvents\n"
        self.assertEqual(text.count(original), 2)
        result = self.run_tool(text.replace(original, original.replace("logs:GetLogEvents", "logs:FilterLogEvents"), 1))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        # The statement's index differs where CloudWatchAnalysis adds AnalysisMetrics and
        # AnalysisLogs and job target roles add PassJobTargetRoles before it.
        indexes = {"example": 6, "minimal": 6, "full": 9, "drift-off": 6}
        self.assertEqual(sorted(indexes), sorted(CASES))
        for case, index in indexes.items():
            self.assertIn(
                f'  StageRole: Policies[0].PolicyDocument.Statement[{index}].Action: '
                f'SAM "logs:FilterLogEvents" != CDK "logs:GetLogEvents"\n',
                result.stdout,
            )
        self.assertEqual(result.stdout.count("\n  "), len(CASES), result.stdout)

    def test_a_queue_setting(self):
        sam = copy.deepcopy(Cases.sam)
        sam["Resources"]["TriggerQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] = 3
        self.assertEqual(
            parity.compare(sam, CASES["minimal"]["sam"], cdk_template("minimal")),
            ['TriggerQueue: RedrivePolicy.maxReceiveCount: SAM "3" != CDK "5"'],
        )

    def test_a_conditional_resource(self):
        sam = copy.deepcopy(Cases.sam)
        del sam["Resources"]["DriftSchedule"]["Condition"]
        self.assertEqual(
            parity.compare(sam, CASES["drift-off"]["sam"], cdk_template("drift-off")),
            ["DriftSchedule: only in SAM (AWS::Scheduler::Schedule)"],
        )

    def test_a_global_environment_variable(self):
        sam = copy.deepcopy(Cases.sam)
        sam["Globals"]["Function"]["Environment"]["Variables"]["GANNET_EXTRA"] = "1"
        found = parity.compare(sam, CASES["minimal"]["sam"], cdk_template("minimal"))
        self.assertEqual(len(found), 9, found)
        self.assertIn('ApiFunction: Environment.Variables.GANNET_EXTRA: only in SAM: "1"', found)


class CdkChanged(unittest.TestCase):
    """The construct's output changed, the SAM template not."""

    def compare(self, template: dict, case: str = "minimal") -> list[str]:
        return parity.compare(Cases.sam, CASES[case]["sam"], template)

    def test_one_iam_statement(self):
        template = cdk_template("minimal")
        statements = cdk_resource(template, "StageRole")["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        self.assertEqual(statements[3]["Sid"], "Send")
        statements[3]["Action"] = "sqs:SendMessageBatch"
        self.assertEqual(
            self.compare(template),
            ['StageRole: Policies[0].PolicyDocument.Statement[3].Action: SAM "sqs:SendMessage" != CDK "sqs:SendMessageBatch"'],
        )

    def test_a_statement_left_out(self):
        template = cdk_template("full")
        statements = cdk_resource(template, "NotifyRole")["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        self.assertEqual(statements.pop()["Sid"], "PublishEvents")
        found = self.compare(template, "full")
        self.assertEqual(len(found), 1, found)
        self.assertTrue(found[0].startswith("NotifyRole: Policies[0].PolicyDocument.Statement[4]: only in SAM: "), found)

    def test_an_environment_variable(self):
        template = cdk_template("minimal")
        cdk_resource(template, "PollFunction")["Properties"]["Environment"]["Variables"]["GANNET_POLL_INTERVAL"] = "2m"
        self.assertEqual(
            self.compare(template),
            ['PollFunction: Environment.Variables.GANNET_POLL_INTERVAL: SAM "1m" != CDK "2m"'],
        )

    def test_a_table_index(self):
        template = cdk_template("minimal")
        cdk_resource(template, "Table")["Properties"]["GlobalSecondaryIndexes"][1]["Projection"]["ProjectionType"] = "ALL"
        self.assertEqual(
            self.compare(template),
            ['Table: GlobalSecondaryIndexes[1].Projection.ProjectionType: SAM "KEYS_ONLY" != CDK "ALL"'],
        )

    def test_a_deletion_policy(self):
        template = cdk_template("minimal")
        del cdk_resource(template, "Table")["DeletionPolicy"]
        self.assertEqual(self.compare(template), ['Table: DeletionPolicy: SAM "Retain" != CDK null'])

    def test_an_output(self):
        template = cdk_template("minimal")
        template["Outputs"]["TableName"]["Description"] = "The table."
        self.assertEqual(
            self.compare(template),
            ['Outputs.TableName: Description: SAM "The DynamoDB table." != CDK "The table."'],
        )

    def test_a_parameter(self):
        template = cdk_template("minimal")
        template.setdefault("Parameters", {})["LogLevel"] = {"Type": "String", "Default": "info"}
        self.assertEqual(
            self.compare(template),
            ["Parameters.LogLevel: only in CDK (the construct takes props, not parameters)"],
        )


if __name__ == "__main__":
    unittest.main()
