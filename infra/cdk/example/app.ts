#!/usr/bin/env node
/**
 * gannet on AWS with the CDK, an app to copy: fill in your ARNs and repositories, then
 * `npm install`, `npm run build` and `npx cdk deploy` (docs/deploy-aws.md, "Deploy with CDK").
 */
import { App, Stack } from 'aws-cdk-lib';
import { FunctionCode, Gannet } from '@gannet/cdk';

const app = new App();

// The functions' code. With `-c gannet:lambdaDir=DIR`: prebuilt zips, DIR/<function>/bootstrap.zip
// as `make console && cargo lambda build --release --arm64 --output-format zip -p gannet-functions
// --lambda-dir DIR` leaves them (no Rust toolchain needed where you deploy; `make console`
// bundles the web console the api function embeds). Otherwise cargo-lambda builds them from
// the gannet checkout whose root Cargo.toml is at `-c gannet:workspace=PATH` (by default, where
// this directory sits in the checkout).
const lambdaDir: string | undefined = app.node.tryGetContext('gannet:lambdaDir');
const code = lambdaDir
  ? FunctionCode.fromZipDirectory(lambdaDir)
  : FunctionCode.fromCargoWorkspace(app.node.tryGetContext('gannet:workspace') ?? '../../..');

// One Gannet per stack: its resources' names carry the stack's name (56 characters at most).
const stack = new Stack(app, 'gannet', {
  description: 'gannet, a GitOps CD controller with no always-on server (docs/deploy-aws.md)',
});

new Gannet(stack, 'Gannet', {
  code,
  webhookSecretArn: 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/webhook-secret',
  githubSecretArn: 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/github',
  repositories: [{ id: 'shop', github: 'acme/shop', branch: 'main' }],
  // Every other prop has the SAM template's default. Deploy targets, for instance (deploy once
  // without them, then create their roles trusting the StageRoleArn and DriftRoleArn outputs):
  //
  // plugins: {
  //   lambda: { deployTargets: [
  //     { name: 'prod', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/gannet-deployer' },
  //   ] },
  // },
  // receivers: [{ name: 'team', slack: { urlSecretArn: 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/slack' } }],
  // alarmTopicArn: 'arn:aws:sns:us-east-1:111122223333:gannet-alarms',
});
