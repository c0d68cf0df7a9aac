import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { it } from 'node:test';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { FunctionCode, Gannet } from '../src';

it('builds with cargo-lambda-cdk RustFunction, arm64, one binary per function (bundling skipped: no Rust built)', () => {
  // cargo-lambda-cdk asks `cargo lambda --version` whether it can build locally; with no cargo
  // on PATH it answers no without running anything, and skipped bundling builds nothing.
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'gannet-cdk-workspace-'));
  fs.writeFileSync(path.join(workspace, 'Cargo.toml'), '[workspace]\nmembers = ["functions"]\n');
  const savedPath = process.env.PATH;
  process.env.PATH = '/nonexistent';
  try {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'gannet');
    const gannet = new Gannet(stack, 'Gannet', {
      code: FunctionCode.fromCargoWorkspace(workspace),
      webhookSecretArn: 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/webhook-secret',
      githubSecretArn: 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/github',
      repositories: [{ id: 'shop', github: 'acme/shop' }],
    });
    assert.equal(gannet.functions.stage.constructor.name, 'RustFunction');
    const functions = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::Function'));
    assert.equal(functions.length, 9);
    for (const fn of functions) {
      assert.deepEqual(fn.Properties.Architectures, ['arm64']);
      assert.equal(fn.Properties.Runtime, 'provided.al2023');
      assert.equal(fn.Properties.Handler, 'bootstrap');
    }
  } finally {
    process.env.PATH = savedPath;
  }
});
