import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { FUNCTION_NAMES, FunctionCode, Gannet, GannetProps, PluginSettings } from '../src';
import { placeholderZips } from './fixtures';

const code = FunctionCode.fromZipDirectory(placeholderZips());
const REQUIRED = {
  webhookSecretArn: 'arn:aws:secretsmanager:us-east-1:111122223333:secret:gannet/webhook-AbCdEf',
  githubSecretArn: 'arn:aws:ssm:eu-west-1:444455556666:parameter/gannet/github',
  repositories: [{ id: 'shop', github: 'acme/shop' }],
};

function stackWith(props: Partial<GannetProps>): Stack {
  const stack = new Stack(new App(), 'gannet');
  new Gannet(stack, 'Gannet', { ...REQUIRED, code, ...props });
  return stack;
}

function synth(props: Partial<GannetProps> = {}): Template {
  return Template.fromStack(stackWith(props));
}

/** The one resource of `type` whose construct id (SAM logical id) is `samId`. */
function resource(template: Template, type: string, samId: string): { Properties: Record<string, any> } {
  const found = Object.entries(template.findResources(type)).filter(([logicalId]) =>
    new RegExp(`^Gannet${samId}[0-9A-F]{8}$`).test(logicalId),
  );
  assert.equal(found.length, 1, `one ${type} ${samId}`);
  return found[0][1] as { Properties: Record<string, any> };
}

function statements(template: Template, role: string): Record<string, unknown>[] {
  return resource(template, 'AWS::IAM::Role', role).Properties.Policies[0].PolicyDocument.Statement;
}

describe('props are checked at synth time, and errors name the prop', () => {
  const cases: [Partial<GannetProps>, RegExp][] = [
    [
      { driftIntervalMinutes: 0.5 },
      /^Gannet: props\.driftIntervalMinutes: 0\.5 is not a whole number of minutes \(0 turns drift off\)$/,
    ],
    [
      { driftIntervalMinutes: 1441 },
      /^Gannet: props\.driftIntervalMinutes: 1441 is out of range: 0 to 1440 minutes \(0 turns drift off\)$/,
    ],
    [{ pollIntervalMinutes: 0 }, /^Gannet: props\.pollIntervalMinutes: 0 is out of range: 1 to 1440 minutes$/],
    [{ resumeIntervalMinutes: 2.5 }, /^Gannet: props\.resumeIntervalMinutes: /],
    [
      { webhookSecretArn: 'arn:aws:s3:::bucket/secret' },
      /^Gannet: props\.webhookSecretArn: "arn:aws:s3:::bucket\/secret" is not an SSM parameter ARN or a Secrets Manager secret ARN$/,
    ],
    [{ githubSecretArn: '' }, /^Gannet: props\.githubSecretArn: missing/],
    [
      { sealingKeyArn: 'arn:aws:kms:us-east-1:111122223333:key/1234' },
      /^Gannet: props\.sealingKeyArn: "arn:aws:kms:us-east-1:111122223333:key\/1234" is not an SSM parameter ARN or a Secrets Manager secret ARN$/,
    ],
    [
      { githubApiUrl: 'github.example.com' },
      /^Gannet: props\.githubApiUrl: "github\.example\.com" is not an http\(s\) URL$/,
    ],
    [{ eventBusName: 'my bus' }, /^Gannet: props\.eventBusName: /],
    [
      { jobs: { computeType: 'BUILD_GENERAL1_2XLARGE' as never } },
      /^Gannet: props\.jobs\.computeType: "BUILD_GENERAL1_2XLARGE" is not one of /,
    ],
    [
      { jobs: { filesRetentionDays: 0 } },
      /^Gannet: props\.jobs\.filesRetentionDays: 0 is out of range: 1 to 3650 days$/,
    ],
    [{ jobs: { image: '' } }, /^Gannet: props\.jobs\.image: /],
    [
      { jobs: { deployTargetRoleArns: ['gannet-terraform'] } },
      /^Gannet: props\.jobs\.deployTargetRoleArns\[0\]: "gannet-terraform" is not an IAM role ARN$/,
    ],
    [
      { plugins: { terraform: { deployTargets: [{ name: 'a' }, { name: 'b', jobRoleArn: 'role/b' }] } } },
      /^Gannet: props\.plugins\.terraform\.deployTargets\[1\]\.jobRoleArn: "role\/b" is not an IAM role ARN$/,
    ],
    [
      { plugins: { terraform: { deployTargets: {} as never } } },
      /^Gannet: props\.plugins\.terraform\.deployTargets: not a list of deploy targets$/,
    ],
    [{ logRetentionDays: 31 }, /^Gannet: props\.logRetentionDays: 31 is not one of 1, 3, 5, 7, 14, 30,/],
    [{ logLevel: '' }, /^Gannet: props\.logLevel: /],
    [{ stageMaxConcurrency: 1 }, /^Gannet: props\.stageMaxConcurrency: 1 is out of range: 2 to 1000 functions$/],
    [
      { webhookReservedConcurrency: -1 },
      /^Gannet: props\.webhookReservedConcurrency: -1 is out of range: at least 0 executions$/,
    ],
    [{ alarmTopicArn: 'gannet-alarms' }, /^Gannet: props\.alarmTopicArn: "gannet-alarms" is not an SNS topic ARN$/],
    [{ repositories: {} as never }, /^Gannet: props\.repositories: is not a list of repositories$/],
    [
      {
        plugins: {
          lambda: {
            deployTargets: [
              { name: 'a', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/a' },
              { name: 'b', region: 'us-east-1' } as never,
            ],
          },
        },
      },
      /^Gannet: props\.plugins\.lambda\.deployTargets\[1\]\.roleArn: missing/,
    ],
    [
      {
        plugins: {
          kubernetes: {
            deployTargets: [{ name: 'k', eks: { clusterName: 'c', region: 'us-east-1', roleArn: 'role/k' } }],
          },
        },
      },
      /^Gannet: props\.plugins\.kubernetes\.deployTargets\[0\]\.eks\.roleArn: "role\/k" is not an IAM role ARN$/,
    ],
    [
      {
        receivers: [
          { name: 'ops', url: 'https://x' },
          { name: 'team', slack: { urlSecretArn: 'https://hooks.slack.com/x' } },
        ],
      },
      /^Gannet: props\.receivers\[1\]\.slack\.urlSecretArn: "https:\/\/hooks\.slack\.com\/x" is not an SSM parameter ARN/,
    ],
    [
      { callerNames: { 'arn:aws:iam::1:user/vic': { name: 'vic', role: 'owner' } } } as never,
      /^Gannet: props\.callerNames: is not a map of principal to a name or to \{name, role\}/,
    ],
  ];
  for (const [props, message] of cases) {
    it(`refuses ${JSON.stringify(props)}`, () => {
      assert.throws(() => stackWith(props), { message });
    });
  }

  it('refuses a secret ARN that is a token: its service decides the IAM statements', () => {
    const stack = new Stack(new App(), 'gannet');
    assert.throws(() => new Gannet(stack, 'Gannet', { ...REQUIRED, code, webhookSecretArn: stack.account }), {
      message: /^Gannet: props\.webhookSecretArn: is a token/,
    });
  });

  it('names props.code when a zip is missing', () => {
    assert.throws(() => stackWith({ code: FunctionCode.fromZipDirectory('/nonexistent/gannet-lambda') }), {
      message: /^Gannet: props\.code: no \/nonexistent\/gannet-lambda\/webhook\/bootstrap\.zip/,
    });
  });
});

describe('deploy targets of each plugin', () => {
  const plugins: PluginSettings = {
    lambda: {
      deployTargets: [
        { name: 'prod', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/lambda-a', alias: 'Service' },
        { name: 'staging', region: 'eu-west-1', roleArn: 'arn:aws:iam::777788889999:role/lambda-b' },
      ],
    },
    ecs: { deployTargets: [{ name: 'prod-ecs', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/ecs' }] },
    kubernetes: {
      deployTargets: [
        {
          name: 'prod-eks',
          masterURL: 'https://ABC.gr7.us-east-1.eks.amazonaws.com',
          eks: { clusterName: 'prod', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/eks' },
        },
        { name: 'lab', kubeConfigPath: '/etc/kube/lab.yaml' },
      ],
    },
    cloudrun: {
      deployTargets: [
        {
          name: 'run',
          project: 'p',
          region: 'europe-west1',
          workloadIdentity: { audience: '//iam.googleapis.com/x', serviceAccount: 'sa@p.iam.gserviceaccount.com' },
        },
      ],
    },
  };
  const template = synth({ plugins });

  it('reach every function as GANNET_PLUGINS, the JSON gannet.yaml would hold', () => {
    const functions = template.findResources('AWS::Lambda::Function');
    assert.equal(Object.keys(functions).length, FUNCTION_NAMES.length);
    for (const fn of Object.values(functions)) {
      assert.deepEqual(JSON.parse(fn.Properties.Environment.Variables.GANNET_PLUGINS), plugins);
    }
  });

  it("let the stage and drift functions assume exactly the AWS targets' roles, one statement per plugin", () => {
    const policy = resource(template, 'AWS::IAM::ManagedPolicy', 'DeployTargetsPolicy');
    assert.deepEqual(policy.Properties.PolicyDocument, {
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'AssumeLambdaDeployTargetRoles',
          Effect: 'Allow',
          Action: 'sts:AssumeRole',
          Resource: ['arn:aws:iam::111122223333:role/lambda-a', 'arn:aws:iam::777788889999:role/lambda-b'],
        },
        {
          Sid: 'AssumeEcsDeployTargetRoles',
          Effect: 'Allow',
          Action: 'sts:AssumeRole',
          Resource: ['arn:aws:iam::111122223333:role/ecs'],
        },
        {
          Sid: 'AssumeEksDeployTargetRoles',
          Effect: 'Allow',
          Action: 'sts:AssumeRole',
          Resource: ['arn:aws:iam::111122223333:role/eks'],
        },
      ],
    });
    const policyRef = {
      Ref: Object.keys(template.findResources('AWS::IAM::ManagedPolicy')).find((id) =>
        id.startsWith('GannetDeployTargetsPolicy'),
      ),
    };
    for (const role of ['StageRole', 'DriftRole']) {
      assert.deepEqual(resource(template, 'AWS::IAM::Role', role).Properties.ManagedPolicyArns.at(-1), policyRef, role);
    }
    for (const role of [
      'WebhookRole',
      'TriggerRole',
      'PlanRole',
      'NotifyRole',
      'PollRole',
      'ResumeRole',
      'ApiRole',
      'JobRole',
      'SchedulerRole',
    ]) {
      const arns = resource(template, 'AWS::IAM::Role', role).Properties.ManagedPolicyArns ?? [];
      assert.ok(!arns.some((arn: unknown) => JSON.stringify(arn) === JSON.stringify(policyRef)), role);
    }
  });

  it("take only their own plugin's statement", () => {
    const ecsOnly = synth({ plugins: { ecs: plugins.ecs } });
    assert.deepEqual(
      resource(ecsOnly, 'AWS::IAM::ManagedPolicy', 'DeployTargetsPolicy').Properties.PolicyDocument.Statement,
      [
        {
          Sid: 'AssumeEcsDeployTargetRoles',
          Effect: 'Allow',
          Action: 'sts:AssumeRole',
          Resource: ['arn:aws:iam::111122223333:role/ecs'],
        },
      ],
    );
  });

  it("need no policy when there are none, or only Cloud Run ones (federated from the functions' roles)", () => {
    const cloudRunOnly = synth({ plugins: { cloudrun: plugins.cloudrun } });
    assert.deepEqual(
      Object.keys(cloudRunOnly.findResources('AWS::IAM::ManagedPolicy')).filter((id) => id.includes('DeployTargets')),
      [],
    );
    assert.equal(resource(cloudRunOnly, 'AWS::IAM::Role', 'StageRole').Properties.ManagedPolicyArns.length, 3);
  });
});

describe("Terraform deploy targets' job roles", () => {
  const prod = 'arn:aws:iam::111122223333:role/gannet-job-tf-prod';
  const staging = 'arn:aws:iam::777788889999:role/gannet-job-tf-staging';
  const shared = 'arn:aws:iam::111122223333:role/gannet-terraform';
  const template = synth({
    plugins: {
      terraform: {
        deployTargets: [
          { name: 'tf-prod', jobRoleArn: prod },
          { name: 'tf-staging', jobRoleArn: staging },
          { name: 'tf-staging-2', jobRoleArn: staging },
          { name: 'tf-lab' },
        ],
      },
    },
    jobs: { deployTargetRoleArns: [shared] },
  });

  it('may be passed to CodeBuild by the stage and drift functions, each once, and by nothing else', () => {
    const pass = {
      Sid: 'PassJobTargetRoles',
      Effect: 'Allow',
      Action: 'iam:PassRole',
      Resource: [prod, staging],
      Condition: { StringEquals: { 'iam:PassedToService': 'codebuild.amazonaws.com' } },
    };
    for (const role of ['StageRole', 'DriftRole']) {
      const sids = statements(template, role).map((s) => s.Sid);
      const jobs = sids.indexOf('Jobs');
      assert.deepEqual(sids.slice(jobs, jobs + 3), ['Jobs', 'PassJobTargetRoles', 'JobFiles'], role);
      assert.deepEqual(statements(template, role)[jobs + 1], pass, role);
    }
    const others = ['WebhookRole', 'TriggerRole', 'PlanRole', 'NotifyRole', 'PollRole', 'ResumeRole', 'ApiRole', 'JobRole'];
    for (const role of others) {
      assert.ok(!JSON.stringify(statements(template, role)).includes('iam:PassRole'), role);
    }
  });

  it('are not what every job may assume: JobRole assumes only jobs.deployTargetRoleArns', () => {
    assert.deepEqual(statements(template, 'JobRole').at(-1), {
      Sid: 'AssumeJobDeployTargetRoles',
      Effect: 'Allow',
      Action: 'sts:AssumeRole',
      Resource: [shared],
    });
  });

  it('need no statement when no target names one', () => {
    const none = synth({ plugins: { terraform: { deployTargets: [{ name: 'tf-lab' }] } } });
    for (const role of ['StageRole', 'DriftRole']) {
      assert.ok(!statements(none, role).some((s) => s.Sid === 'PassJobTargetRoles'), role);
    }
  });
});

describe("plan previews: the webhook queues them, and only the drift function holds the targets' planPreview roles", () => {
  const reader = 'arn:aws:iam::111122223333:role/gannet-preview-reader';
  const ecsReader = 'arn:aws:iam::111122223333:role/gannet-ecs-preview-reader';
  const eksReader = 'arn:aws:iam::111122223333:role/gannet-eks-preview-reader';
  const planJob = 'arn:aws:iam::111122223333:role/gannet-job-tf-preview';
  const template = synth({
    consoleUrl: 'https://gannet.example.com',
    plugins: {
      lambda: {
        deployTargets: [
          { name: 'prod', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/d', planPreview: { roleArn: reader } },
          { name: 'dev', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/d', planPreview: { roleArn: reader } },
        ],
      },
      ecs: {
        deployTargets: [
          { name: 'ecs', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/e', planPreview: { roleArn: ecsReader } },
        ],
      },
      kubernetes: {
        deployTargets: [
          {
            name: 'eks',
            eks: { clusterName: 'prod', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/k' },
            planPreview: { eks: { clusterName: 'prod', region: 'us-east-1', roleArn: eksReader } },
          },
        ],
      },
      terraform: { deployTargets: [{ name: 'tf', jobRoleArn: 'arn:aws:iam::111122223333:role/j', planPreview: { jobRoleArn: planJob } }] },
    },
  });

  it('lets the webhook function send to the trigger and drift queues', () => {
    const send = statements(template, 'WebhookRole').find((s) => s.Sid === 'Send');
    assert.equal((send?.Resource as unknown[]).length, 2, JSON.stringify(send));
    assert.match(JSON.stringify(send), /TriggerQueue.*DriftQueue/);
  });

  it('lets the drift function alone assume the preview roles and pass the preview job roles', () => {
    const drift = statements(template, 'DriftRole');
    assert.deepEqual(drift.at(-2), {
      Sid: 'AssumePreviewRoles',
      Effect: 'Allow',
      Action: 'sts:AssumeRole',
      Resource: [reader, ecsReader, eksReader],
    });
    assert.deepEqual(drift.at(-1), {
      Sid: 'PassPreviewJobRoles',
      Effect: 'Allow',
      Action: 'iam:PassRole',
      Resource: [planJob],
      Condition: { StringEquals: { 'iam:PassedToService': 'codebuild.amazonaws.com' } },
    });
    for (const role of ['WebhookRole', 'TriggerRole', 'PlanRole', 'StageRole', 'NotifyRole', 'PollRole', 'ResumeRole', 'ApiRole', 'JobRole']) {
      const text = JSON.stringify(statements(template, role));
      for (const arn of [reader, ecsReader, eksReader, planJob]) {
        assert.ok(!text.includes(arn), `${role} names ${arn}`);
      }
    }
  });

  it('tells the drift function alone where the console is', () => {
    const fns = template.findResources('AWS::Lambda::Function');
    const withUrl = Object.entries(fns)
      .filter(([, f]) => (f as any).Properties.Environment?.Variables?.GANNET_CONSOLE_URL !== undefined)
      .map(([id]) => id);
    assert.equal(withUrl.length, 1, withUrl.join(', '));
    assert.match(withUrl[0], /^GannetDriftFunction/);
  });

  it('needs no statement when no target has planPreview roles, and refuses a bad one or a console URL with a query', () => {
    const none = synth({});
    assert.ok(!statements(none, 'DriftRole').some((s) => String(s.Sid).includes('Preview')));
    assert.throws(
      () => synth({ plugins: { lambda: { deployTargets: [{ name: 'a', region: 'us-east-1', roleArn: 'arn:aws:iam::111122223333:role/d', planPreview: { roleArn: 'reader' } }] } } }),
      /props\.plugins\.lambda\.deployTargets\[0\]\.planPreview\.roleArn: "reader" is not an IAM role ARN/,
    );
    assert.throws(() => synth({ consoleUrl: 'https://gannet.example.com/?a=1' }), /props\.consoleUrl: /);
    assert.throws(() => synth({ consoleUrl: 'http://gannet.example.com' }), /props\.consoleUrl: /);
  });
});

describe('the rest of the SAM template', () => {
  const template = synth();

  it("runs nine arm64 functions with SAM's memory and timeouts, each with its log group", () => {
    const expected: Record<string, [number, number]> = {
      webhook: [256, 10],
      trigger: [256, 60],
      plan: [256, 60],
      stage: [512, 300],
      notify: [256, 30],
      poll: [256, 30],
      resume: [256, 60],
      api: [256, 29],
      drift: [256, 120],
    };
    for (const [name, [memory, timeout]] of Object.entries(expected)) {
      const fn = resource(template, 'AWS::Lambda::Function', `${name[0].toUpperCase()}${name.slice(1)}Function`);
      assert.equal(fn.Properties.MemorySize, memory, name);
      assert.equal(fn.Properties.Timeout, timeout, name);
      assert.deepEqual(fn.Properties.Architectures, ['arm64']);
      assert.equal(fn.Properties.Runtime, 'provided.al2023');
      assert.equal(fn.Properties.Handler, 'bootstrap');
      assert.equal(fn.Properties.LoggingConfig.LogFormat, 'JSON');
    }
  });

  it("gives each consumer's queue 6 x its function's timeout and a DLQ after 5 receives", () => {
    for (const [name, visibility] of [
      ['Trigger', 360],
      ['Plan', 360],
      ['Stage', 1800],
      ['Notify', 180],
      ['Drift', 720],
    ] as const) {
      const queue = resource(template, 'AWS::SQS::Queue', `${name}Queue`).Properties;
      assert.equal(queue.VisibilityTimeout, visibility, name);
      assert.equal(queue.RedrivePolicy.maxReceiveCount, 5);
    }
  });

  it('reads an SSM parameter with kms:Decrypt through SSM only, and a Secrets Manager secret without', () => {
    template.hasResourceProperties('AWS::IAM::ManagedPolicy', {
      Description: 'gannet - read the GitHub credentials.',
      PolicyDocument: {
        Statement: [
          { Sid: 'GithubParameter', Effect: 'Allow', Action: 'ssm:GetParameter', Resource: REQUIRED.githubSecretArn },
          Match.objectLike({
            Sid: 'GithubParameterKey',
            Condition: {
              StringEquals: {
                'kms:ViaService': 'ssm.eu-west-1.amazonaws.com',
                'kms:EncryptionContext:PARAMETER_ARN': REQUIRED.githubSecretArn,
              },
            },
          }),
        ],
      },
    });
    assert.deepEqual(
      statements(template, 'WebhookRole').map((s) => s.Sid),
      ['DeliveriesOnly', 'Logs', 'WebhookSecret', 'Send'],
    );
  });

  it('gives the key for sealed secrets to the stage, drift and api functions only, and none by default', () => {
    const arn = 'arn:aws:ssm:eu-west-1:444455556666:parameter/gannet/sealing-key';
    const sealed = synth({ sealingKeyArn: arn });
    const policy = resource(sealed, 'AWS::IAM::ManagedPolicy', 'SealingKeyPolicy').Properties;
    assert.equal(policy.Description, 'gannet - read the private key for sealed secrets.');
    const statement = policy.PolicyDocument.Statement;
    assert.deepEqual(statement[0], {
      Sid: 'SealingKeyParameter',
      Effect: 'Allow',
      Action: 'ssm:GetParameter',
      Resource: arn,
    });
    assert.deepEqual(statement[1].Condition, {
      StringEquals: {
        'kms:ViaService': 'ssm.eu-west-1.amazonaws.com',
        'kms:EncryptionContext:PARAMETER_ARN': arn,
      },
    });
    const readers = ['Stage', 'Drift', 'Api'];
    for (const name of FUNCTION_NAMES) {
      const id = `${name[0].toUpperCase()}${name.slice(1)}`;
      const variables = resource(sealed, 'AWS::Lambda::Function', `${id}Function`).Properties.Environment.Variables;
      const managed = JSON.stringify(resource(sealed, 'AWS::IAM::Role', `${id}Role`).Properties.ManagedPolicyArns ?? []);
      const reads = readers.includes(id);
      assert.equal(variables.GANNET_SEALING_KEY_ARN, reads ? arn : undefined, name);
      assert.equal(managed.includes('SealingKeyPolicy'), reads, `${name}: ${managed}`);
    }
    const secret = 'arn:aws:secretsmanager:us-east-1:111122223333:secret:gannet/sealing-key-AbCdEf';
    assert.deepEqual(
      resource(synth({ sealingKeyArn: secret }), 'AWS::IAM::ManagedPolicy', 'SealingKeyPolicy').Properties
        .PolicyDocument.Statement,
      [{ Sid: 'SealingKeySecret', Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: secret }],
    );
    for (const none of [template, synth({ sealingKeyArn: '' })]) {
      assert.equal(JSON.stringify(none.toJSON()).includes('SealingKey'), false);
      assert.equal(JSON.stringify(none.toJSON()).includes('GANNET_SEALING_KEY_ARN'), false);
    }
  });

  it('turns drift off at 0: no schedule, no poller, no alarm, no interval', () => {
    const off = synth({ driftIntervalMinutes: 0 });
    off.resourceCountIs('AWS::Scheduler::Schedule', 2);
    off.resourceCountIs('AWS::Lambda::EventSourceMapping', 4);
    off.resourceCountIs('AWS::CloudWatch::Alarm', 4);
    for (const fn of Object.values(off.findResources('AWS::Lambda::Function'))) {
      assert.equal(fn.Properties.Environment.Variables.GANNET_DRIFT_INTERVAL, undefined);
    }
    template.resourceCountIs('AWS::Scheduler::Schedule', 3);
    template.hasResourceProperties('AWS::Scheduler::Schedule', { ScheduleExpression: 'rate(5 minutes)' });
  });

  it('admits API Gateway to the api function for its own API only, and tells the function which API that is', () => {
    const api = Object.keys(template.findResources('AWS::ApiGatewayV2::Api'));
    assert.equal(api.length, 1);
    const permission = resource(template, 'AWS::Lambda::Permission', 'ApiFunctionApiPermission').Properties;
    assert.equal(permission.Principal, 'apigateway.amazonaws.com');
    assert.equal(permission.Action, 'lambda:InvokeFunction');
    assert.match(JSON.stringify(permission.FunctionName), /GannetApiFunction[0-9A-F]{8}/);
    // Scoped by SourceArn to this API (any stage, method and path of it), not to every API.
    const sourceArn = JSON.stringify(permission.SourceArn);
    assert.ok(sourceArn.includes(`{"Ref":"${api[0]}"}`), sourceArn);
    assert.ok(sourceArn.includes(':execute-api:') && sourceArn.endsWith('/*/*/*"]]}'), sourceArn);
    const variables = resource(template, 'AWS::Lambda::Function', 'ApiFunction').Properties.Environment.Variables;
    assert.deepEqual(variables.GANNET_API_ID, { Ref: api[0] });
    assert.deepEqual(variables.GANNET_ACCOUNT_ID, { Ref: 'AWS::AccountId' });
    // The API names the function by its name, so the function may refer to the API.
    const body = JSON.stringify(template.findResources('AWS::ApiGatewayV2::Api')[api[0]].Properties.Body);
    assert.ok(!body.includes('GannetApiFunction'), body);
    assert.ok(body.includes(':function:${AWS::StackName}-api/invocations'), body);
  });

  it("lets every API role load the web console's pages and files, and only the deployer and approver change anything", () => {
    const routes = (id: string) =>
      (resource(template, 'AWS::IAM::ManagedPolicy', id).Properties.PolicyDocument.Statement[0].Resource as unknown[]).map(
        (arn) => JSON.stringify(arn).match(/\/\*\/((?:GET|POST)\/[^"]*)/)?.[1],
      );
    const reads = [
      'GET/api/v1/*',
      'GET/apps',
      'GET/apps/*',
      'GET/deployments',
      'GET/deployments/*',
      'GET/chains',
      'GET/chains/*',
      'GET/previews',
      'GET/previews/*',
      'GET/assets/*',
    ];
    assert.deepEqual(routes('ApiReadPolicy'), reads);
    assert.deepEqual(routes('ApiApprovePolicy'), [...reads, 'POST/api/v1/deployments/*/approve']);
    assert.deepEqual(routes('ApiDeployPolicy').slice(0, reads.length), reads);
    assert.ok(routes('ApiDeployPolicy').includes('POST/api/v1/chains/*/cancel'));
    assert.ok(!routes('ApiApprovePolicy').includes('POST/api/v1/chains/*/cancel'));
    assert.ok(routes('ApiDeployPolicy').includes('POST/api/v1/plan-previews'));
    assert.ok(!routes('ApiReadPolicy').includes('POST/api/v1/plan-previews'));
  });

  it('derives the Slack secrets the notify function may read from the receivers', () => {
    const slack = 'arn:aws:ssm:us-east-1:111122223333:parameter/gannet/slack';
    const withSlack = synth({
      receivers: [
        { name: 'a', slack: { urlSecretArn: slack } },
        { name: 'b', slack: { urlSecretArn: slack } },
      ],
    });
    assert.deepEqual(statements(withSlack, 'NotifyRole').at(-1), {
      Sid: 'ReadSlackUrls',
      Effect: 'Allow',
      Action: ['secretsmanager:GetSecretValue', 'ssm:GetParameter'],
      Resource: [slack],
    });
  });
});
