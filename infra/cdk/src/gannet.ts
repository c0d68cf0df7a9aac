import { Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as codebuild from 'aws-cdk-lib/aws-codebuild';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { GannetProps } from './props';
import { SecretArn, Settings, resolveSettings } from './settings';

/**
 * The consumers' queues and their functions' timeouts (seconds). A queue's visibility timeout
 * is 6 x its function's timeout, the multiple AWS recommends for SQS event sources.
 */
const QUEUES = { trigger: 60, plan: 60, stage: 300, notify: 30, drift: 120 } as const;
type QueueName = keyof typeof QUEUES;

/** The nine binaries of the gannet-functions package, one function each. */
export const FUNCTION_NAMES = [
  'webhook',
  'trigger',
  'plan',
  'stage',
  'notify',
  'poll',
  'resume',
  'api',
  'drift',
] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

type Statement = Record<string, unknown>;

/**
 * gannet's AWS runtime, the same resources as the SAM template infra/template.yaml: nine
 * functions, the table, five queues with dead-letter queues and alarms, the schedules, the
 * IAM-authorised HTTP API, the jobs' CodeBuild project, and one role per function.
 *
 * Construct ids are the SAM template's logical ids, so that the parity test
 * (infra/cdk/parity) can line the two templates up. Resource names carry the stack's name
 * (`<stack>-trigger`, ...), so a stack holds one Gannet.
 */
export class Gannet extends Construct {
  /** The GitHub webhook's payload URL. */
  readonly webhookUrl: string;
  /** The JSON API's base URL (SigV4-signed requests only). */
  readonly apiUrl: string;
  readonly table: dynamodb.CfnTable;
  readonly functions: Record<FunctionName, lambda.Function>;
  /** Deploy-target roles trust this one and the drift role. */
  readonly stageRole: iam.CfnRole;
  readonly driftRole: iam.CfnRole;
  /** The role jobs run with; deploy-target roles for jobs trust it. */
  readonly jobRole: iam.CfnRole;

  private readonly settings: Settings;

  constructor(scope: Construct, id: string, props: GannetProps) {
    super(scope, id);
    const s = resolveSettings(props);
    this.settings = s;
    const stack = Stack.of(this);

    this.table = this.createTable();
    const queues = this.createQueues();
    this.createAlarms(queues);
    const logGroups = Object.fromEntries(
      FUNCTION_NAMES.map((name) => [
        name,
        this.createLogGroup(`${capital(name)}LogGroup`, Fn.sub(`/aws/lambda/\${AWS::StackName}-${name}`)),
      ]),
    ) as Record<FunctionName, logs.CfnLogGroup>;

    // Shared pieces as managed policies; each role adds its own log group and queues inline.
    const tableRead = this.managedPolicy('TableReadPolicy', 'gannet - read the table and its indexes.', [
      {
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'],
        Resource: [this.table.attrArn, `${this.table.attrArn}/index/*`],
      },
    ]);
    const tableWrite = this.managedPolicy(
      'TableWritePolicy',
      'gannet - write items (alone or in TransactWriteItems).',
      [{ Effect: 'Allow', Action: ['dynamodb:PutItem', 'dynamodb:UpdateItem'], Resource: this.table.attrArn }],
    );
    const githubSecret = this.managedPolicy(
      'GithubSecretPolicy',
      'gannet - read the GitHub credentials.',
      secretStatements('Github', s.githubSecret),
    );
    const deployTargets = this.deployTargetsPolicy();
    // The private key for sealed secrets: the stage, drift and api functions only.
    const sealingKey =
      s.sealingKey === undefined
        ? undefined
        : this.managedPolicy(
            'SealingKeyPolicy',
            'gannet - read the private key for sealed secrets.',
            secretStatements('SealingKey', s.sealingKey),
          );
    const withSealingKey = sealingKey ? [sealingKey.ref] : [];

    const jobs = this.createJobs();
    const jobStatements: Statement[] = [
      {
        Sid: 'Jobs',
        Effect: 'Allow',
        Action: [
          'codebuild:StartBuild',
          'codebuild:BatchGetBuilds',
          'codebuild:StopBuild',
          'codebuild:ListBuildsForProject',
        ],
        Resource: jobs.project.attrArn,
      },
      // A Terraform deploy target's jobs run as its jobRoleArn: StartBuild's
      // serviceRoleOverride, which needs the role passed to CodeBuild.
      ...(s.jobTargetRoleArns.length > 0
        ? [
            {
              Sid: 'PassJobTargetRoles',
              Effect: 'Allow',
              Action: 'iam:PassRole',
              Resource: s.jobTargetRoleArns,
              Condition: { StringEquals: { 'iam:PassedToService': 'codebuild.amazonaws.com' } },
            },
          ]
        : []),
      {
        Sid: 'JobFiles',
        Effect: 'Allow',
        Action: ['s3:GetObject', 's3:PutObject'],
        Resource: `${jobs.bucket.attrArn}/jobs/*`,
      },
      {
        Sid: 'JobLogs',
        Effect: 'Allow',
        Action: 'logs:GetLogEvents',
        // The group's Arn ends in `:*`, so a stream's ARN is spelt out from its name.
        Resource: `arn:${Aws.PARTITION}:logs:${Aws.REGION}:${Aws.ACCOUNT_ID}:log-group:${jobs.logGroup.ref}:log-stream:*`,
      },
    ];
    const logsStatement = (name: FunctionName): Statement => ({
      Sid: 'Logs',
      Effect: 'Allow',
      Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
      Resource: logGroups[name].attrArn,
    });
    const consume = (name: QueueName): Statement[] => [
      // Its own queue: the event source's calls, retries (visibility) and requeues (send).
      {
        Sid: 'Consume',
        Effect: 'Allow',
        Action: [
          'sqs:ReceiveMessage',
          'sqs:DeleteMessage',
          'sqs:ChangeMessageVisibility',
          'sqs:GetQueueAttributes',
          'sqs:SendMessage',
        ],
        Resource: queues[name].queue.attrArn,
      },
      { Sid: 'DeadLetter', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queues[name].deadLetter.attrArn },
    ];
    const send = (...names: QueueName[]): Statement => ({
      Sid: 'Send',
      Effect: 'Allow',
      Action: 'sqs:SendMessage',
      Resource: names.length === 1 ? queues[names[0]].queue.attrArn : names.map((n) => queues[n].queue.attrArn),
    });
    const withDeployTargets = deployTargets ? [deployTargets.ref] : [];

    const roles: Record<FunctionName, iam.CfnRole> = {
      webhook: this.functionRole(
        'webhook',
        [],
        [
          // Records the delivery id (dedupe) and a pull request's plan preview, and may write no
          // other item: it faces the internet.
          {
            Sid: 'DeliveriesOnly',
            Effect: 'Allow',
            Action: 'dynamodb:PutItem',
            Resource: this.table.attrArn,
            Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['DELIVERY#*', 'PREVIEW#*'] } },
          },
          logsStatement('webhook'),
          ...secretStatements('Webhook', s.webhookSecret),
          // A push queues a trigger; a pull request queues its plan preview, which the drift
          // function reads.
          send('trigger', 'drift'),
        ],
      ),
      trigger: this.functionRole(
        'trigger',
        [tableRead.ref, tableWrite.ref, githubSecret.ref],
        [logsStatement('trigger'), ...consume('trigger'), send('plan', 'notify')],
      ),
      plan: this.functionRole(
        'plan',
        [tableRead.ref, tableWrite.ref, githubSecret.ref],
        [logsStatement('plan'), ...consume('plan'), send('stage', 'notify')],
      ),
      stage: this.functionRole(
        'stage',
        [tableRead.ref, tableWrite.ref, githubSecret.ref, ...withDeployTargets, ...withSealingKey],
        [
          logsStatement('stage'),
          ...(s.cloudWatchAnalysis
            ? [
                { Sid: 'AnalysisMetrics', Effect: 'Allow', Action: 'cloudwatch:GetMetricData', Resource: '*' },
                {
                  Sid: 'AnalysisLogs',
                  Effect: 'Allow',
                  Action: ['logs:StartQuery', 'logs:GetQueryResults', 'logs:StopQuery'],
                  Resource: '*',
                },
              ]
            : []),
          ...consume('stage'),
          send('plan', 'notify'),
          ...jobStatements,
        ],
      ),
      notify: this.functionRole(
        'notify',
        [tableRead.ref, githubSecret.ref],
        [
          logsStatement('notify'),
          ...consume('notify'),
          ...(s.slackUrlSecretArns.length > 0
            ? [
                {
                  Sid: 'ReadSlackUrls',
                  Effect: 'Allow',
                  Action: ['secretsmanager:GetSecretValue', 'ssm:GetParameter'],
                  Resource: s.slackUrlSecretArns,
                },
              ]
            : []),
          ...(s.eventBusName !== undefined
            ? [
                {
                  Sid: 'PublishEvents',
                  Effect: 'Allow',
                  Action: 'events:PutEvents',
                  Resource: `arn:${stack.partition}:events:${stack.region}:${stack.account}:event-bus/${s.eventBusName}`,
                },
              ]
            : []),
        ],
      ),
      poll: this.functionRole('poll', [], [logsStatement('poll'), send('trigger')]),
      resume: this.functionRole('resume', [tableRead.ref], [logsStatement('resume'), send('plan', 'stage')]),
      api: this.functionRole(
        'api',
        [tableRead.ref, tableWrite.ref, githubSecret.ref, ...withSealingKey],
        // The drift queue: a plan preview asked for through the API.
        [logsStatement('api'), send('plan', 'stage', 'notify', 'drift')],
      ),
      drift: this.functionRole(
        'drift',
        [tableRead.ref, tableWrite.ref, githubSecret.ref, ...withDeployTargets, ...withSealingKey],
        [
          logsStatement('drift'),
          ...consume('drift'),
          send('plan', 'notify'),
          ...jobStatements,
          // Plan previews read live state with the targets' planPreview credentials, which only
          // this function holds: their roles, and their Terraform jobs' roles.
          ...(s.previewRoleArns.length > 0
            ? [{ Sid: 'AssumePreviewRoles', Effect: 'Allow', Action: 'sts:AssumeRole', Resource: s.previewRoleArns }]
            : []),
          ...(s.previewJobRoleArns.length > 0
            ? [
                {
                  Sid: 'PassPreviewJobRoles',
                  Effect: 'Allow',
                  Action: 'iam:PassRole',
                  Resource: s.previewJobRoleArns,
                  Condition: { StringEquals: { 'iam:PassedToService': 'codebuild.amazonaws.com' } },
                },
              ]
            : []),
        ],
      ),
    };
    this.stageRole = roles.stage;
    this.driftRole = roles.drift;
    this.jobRole = jobs.role;

    // The contract of functions/src/config.rs, read once at start.
    const queueUrls = (Object.keys(QUEUES) as QueueName[])
      .map((name) => `"${name}":{"queue":"${queues[name].queue.ref}","dead_letter":"${queues[name].deadLetter.ref}"}`)
      // ", " as the SAM template's folded string writes it: both deploy the same value.
      .join(', ');
    const environment: Record<string, string> = {
      GANNET_TABLE: this.table.ref,
      GANNET_QUEUES: `{${queueUrls}}`,
      GANNET_REPOS: s.reposJson,
      GANNET_WEBHOOK_SECRET_ARN: s.webhookSecret.arn,
      GANNET_GITHUB_SECRET_ARN: s.githubSecret.arn,
      GANNET_GITHUB_API_URL: s.githubApiUrl,
      GANNET_PLUGINS: s.pluginsJson,
      GANNET_POLL_INTERVAL: `${s.pollIntervalMinutes}m`,
      GANNET_RESUME_INTERVAL: `${s.resumeIntervalMinutes}m`,
      // Unset when drift is off: nothing sweeps.
      ...(s.driftIntervalMinutes > 0 ? { GANNET_DRIFT_INTERVAL: `${s.driftIntervalMinutes}m` } : {}),
      GANNET_RECEIVERS: s.receiversJson,
      ...(s.eventBusName !== undefined ? { GANNET_EVENT_BUS: s.eventBusName } : {}),
      RUST_LOG: s.logLevel,
    };
    const jobsEnvironment = {
      GANNET_JOBS_PROJECT: jobs.project.ref,
      GANNET_JOBS_BUCKET: jobs.bucket.ref,
      GANNET_JOBS_LOG_GROUP: jobs.logGroup.ref,
    };
    // Only the functions that read the private key for sealed secrets are told where it is.
    const sealingEnvironment: Record<string, string> =
      s.sealingKey === undefined ? {} : { GANNET_SEALING_KEY_ARN: s.sealingKey.arn };

    const fn = (
      name: FunctionName,
      description: string,
      timeoutSeconds: number,
      extra: Partial<lambda.FunctionOptions> = {},
    ) =>
      props.code._createFunction(this, `${capital(name)}Function`, name, {
        functionName: Fn.sub(`\${AWS::StackName}-${name}`),
        description,
        role: iam.Role.fromRoleArn(this, `${capital(name)}RoleHandle`, roles[name].attrArn, { mutable: false }),
        architecture: lambda.Architecture.ARM_64,
        memorySize: 256,
        timeout: Duration.seconds(timeoutSeconds),
        // An imported handle on the CfnLogGroup: LoggingConfig names that group.
        logGroup: logs.LogGroup.fromLogGroupName(this, `${capital(name)}LogGroupHandle`, logGroups[name].ref),
        loggingFormat: lambda.LoggingFormat.JSON,
        ...extra,
        environment: { ...environment, ...extra.environment },
      });
    // SQS consumers allow recursive loops on purpose: a deployment is a chain of messages
    // through the same queues, bounded by its steps, that loop detection would stop.
    const loop = { recursiveLoop: lambda.RecursiveLoop.ALLOW };
    this.functions = {
      webhook: fn('webhook', 'GitHub webhook - verify the signature, dedupe, queue a trigger or a plan preview.', 10, {
        // A flood on the public URL cannot take the concurrency the other functions need.
        reservedConcurrentExecutions: s.webhookReservedConcurrency > 0 ? s.webhookReservedConcurrency : undefined,
      }),
      trigger: fn(
        'trigger',
        'Changed files since the last checked commit, then PENDING deployments.',
        QUEUES.trigger,
        loop,
      ),
      plan: fn('plan', "Take the app's deployment lock and plan the stages.", QUEUES.plan, loop),
      stage: fn('stage', "Run one step of a deployment's current stage.", QUEUES.stage, {
        ...loop,
        memorySize: 512, // checks out the tree at the commit (tarball into /tmp)
        environment: { ...jobsEnvironment, ...sealingEnvironment },
      }),
      notify: fn('notify', 'Deployment events to receivers and GitHub commit statuses.', QUEUES.notify, loop),
      poll: fn('poll', 'Timer - queue a trigger per repository (the backstop for lost webhooks).', 30),
      resume: fn('resume', 'Timer - re-drive deployments with no progress past their lease.', 60),
      api: fn('api', 'The JSON API of gannet up (apps, deployments, sync, cancel, approve, diff).', 29, {
        environment: { GANNET_CALLER_NAMES: s.callerNamesJson, ...sealingEnvironment },
      }),
      drift: fn(
        'drift',
        "Timer - queue one drift check per app; queue - check one app's live state, or preview a pull request.",
        QUEUES.drift,
        {
          ...loop,
          environment: {
            ...jobsEnvironment,
            ...sealingEnvironment,
            ...(s.consoleUrl !== undefined ? { GANNET_CONSOLE_URL: s.consoleUrl } : {}),
          },
        },
      ),
    };

    // apps diff: the api function asks the drift function, which reads the live state (the api
    // function links no platform SDK and has no role to read one). SAM: ApiRole's Diff.
    this.functions.api.addEnvironment('GANNET_DIFF_FUNCTION', this.functions.drift.functionName);
    roles.api.addPropertyOverride('Policies.0.PolicyDocument.Statement.2', {
      Sid: 'Diff',
      Effect: 'Allow',
      Action: 'lambda:InvokeFunction',
      Resource: this.functions.drift.functionArn,
    });

    // Event sources: consumers report partial batch failures, so one bad message never fails
    // its batch-mates. One stage step per invocation, so a slow step holds up no other.
    this.queueSource('TriggerFunctionQueue', queues.trigger.queue, this.functions.trigger, 5);
    this.queueSource('PlanFunctionQueue', queues.plan.queue, this.functions.plan, 10);
    this.queueSource('StageFunctionQueue', queues.stage.queue, this.functions.stage, 1, {
      maximumConcurrency: s.stageMaxConcurrency,
    });
    this.queueSource('NotifyFunctionQueue', queues.notify.queue, this.functions.notify, 10);
    // With drift off nothing long-polls the empty drift queue.
    if (s.driftIntervalMinutes > 0) {
      this.queueSource('DriftQueueEventSource', queues.drift.queue, this.functions.drift, 10);
    }
    // Timers: the next tick does the same work, so a failed run is not retried.
    for (const name of ['poll', 'resume', 'drift'] as const) {
      new lambda.CfnEventInvokeConfig(this, `${capital(name)}FunctionEventInvokeConfig`, {
        functionName: this.functions[name].functionName,
        qualifier: '$LATEST',
        maximumRetryAttempts: 0,
        maximumEventAgeInSeconds: 60,
        destinationConfig: {},
      });
    }

    this.webhookUrl = this.createWebhookUrl(this.functions.webhook);
    const api = this.createApi(this.functions.api);
    this.apiUrl = `https://${api.ref}.execute-api.${stack.region}.${stack.urlSuffix}`;
    const apiPolicies = this.createApiPolicies(api);
    this.createSchedules();

    this.output('WebhookUrl', this.webhookUrl, "The GitHub webhook's payload URL (content type application/json).");
    this.output(
      'ApiReadPolicyArn',
      apiPolicies.read.ref,
      'Attach to a user or role to read through the API (role viewer).',
    );
    this.output(
      'ApiDeployPolicyArn',
      apiPolicies.deploy.ref,
      'Attach to a user or role to sync and cancel through the API (role deployer).',
    );
    this.output(
      'ApiApprovePolicyArn',
      apiPolicies.approve.ref,
      'Attach to a user or role to approve stages through the API (role approver).',
    );
    this.output('ApiUrl', this.apiUrl, "The JSON API's base URL (requests must be SigV4-signed for execute-api).");
    this.output(
      'ApiArn',
      apiArn(api),
      'For IAM policies allowing execute-api:Invoke (append /$default/GET/api/v1/... to narrow).',
    );
    this.output('TableName', this.table.ref, 'The DynamoDB table.');
    this.output(
      'JobsBucketName',
      jobs.bucket.ref,
      'The jobs bucket (kept on teardown; docs/deploy-aws.md says how to delete it).',
    );
    this.output(
      'JobRoleArn',
      jobs.role.attrArn,
      'The role jobs run with; deploy-target roles for jobs trust this one.',
    );
    for (const name of Object.keys(QUEUES) as QueueName[]) {
      this.output(`${capital(name)}QueueUrl`, queues[name].queue.ref);
      this.output(`${capital(name)}DeadLetterQueueUrl`, queues[name].deadLetter.ref);
    }
    this.output(
      'StageRoleArn',
      roles.stage.attrArn,
      "Put in each deploy-target role's trust policy (the stage function assumes it).",
    );
    this.output(
      'DriftRoleArn',
      roles.drift.attrArn,
      "Put in each deploy-target role's trust policy (the drift function reads live state).",
    );
  }

  /** Keys and indexes as in shared/aws. Deployment history outlives the stack (Retain). */
  private createTable(): dynamodb.CfnTable {
    const attribute = (name: string) => ({ attributeName: name, attributeType: 'S' });
    const keys = (hash: string, range: string) => [
      { attributeName: hash, keyType: 'HASH' },
      { attributeName: range, keyType: 'RANGE' },
    ];
    const table = new dynamodb.CfnTable(this, 'Table', {
      billingMode: 'PAY_PER_REQUEST',
      attributeDefinitions: ['pk', 'sk', 'app_key', 'status_key', 'created_key'].map(attribute),
      keySchema: keys('pk', 'sk'),
      globalSecondaryIndexes: [
        {
          indexName: 'by-app',
          keySchema: keys('app_key', 'created_key'),
          projection: { projectionType: 'INCLUDE', nonKeyAttributes: ['deployment_status'] },
        },
        {
          indexName: 'by-status',
          keySchema: keys('status_key', 'created_key'),
          projection: { projectionType: 'KEYS_ONLY' },
        },
      ],
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveSpecification: { attributeName: 'expires_at', enabled: true },
      sseSpecification: { sseEnabled: true },
    });
    table.applyRemovalPolicy(RemovalPolicy.RETAIN);
    return table;
  }

  /**
   * One queue per consumer, each with a DLQ (maxReceiveCount 5, 14 days) that accepts redrives
   * only from its own queue. Queues hold transient data, so they go with the stack.
   */
  private createQueues(): Record<QueueName, { queue: sqs.CfnQueue; deadLetter: sqs.CfnQueue }> {
    const stack = Stack.of(this);
    const entries = (Object.keys(QUEUES) as QueueName[]).map((name) => {
      const deadLetter = new sqs.CfnQueue(this, `${capital(name)}DeadLetterQueue`, {
        queueName: Fn.sub(`\${AWS::StackName}-${name}-dlq`),
        messageRetentionPeriod: 1209600, // 14 days
        sqsManagedSseEnabled: true,
        redriveAllowPolicy: {
          redrivePermission: 'byQueue',
          sourceQueueArns: [`arn:${stack.partition}:sqs:${stack.region}:${stack.account}:${Aws.STACK_NAME}-${name}`],
        },
      });
      const queue = new sqs.CfnQueue(this, `${capital(name)}Queue`, {
        queueName: Fn.sub(`\${AWS::StackName}-${name}`),
        visibilityTimeout: 6 * QUEUES[name],
        messageRetentionPeriod: 345600, // 4 days, shorter than the DLQ's 14
        sqsManagedSseEnabled: true,
        redrivePolicy: { deadLetterTargetArn: deadLetter.attrArn, maxReceiveCount: 5 },
      });
      deadLetter.applyRemovalPolicy(RemovalPolicy.DESTROY);
      queue.applyRemovalPolicy(RemovalPolicy.DESTROY);
      return [name, { queue, deadLetter }] as const;
    });
    return Object.fromEntries(entries) as Record<QueueName, { queue: sqs.CfnQueue; deadLetter: sqs.CfnQueue }>;
  }

  /** One alarm per DLQ: anything in it needs a look. With drift off, nothing feeds the drift DLQ. */
  private createAlarms(queues: Record<QueueName, { deadLetter: sqs.CfnQueue }>): void {
    const topic = this.settings.alarmTopicArn;
    for (const name of Object.keys(QUEUES) as QueueName[]) {
      if (name === 'drift' && this.settings.driftIntervalMinutes === 0) {
        continue;
      }
      new cloudwatch.CfnAlarm(this, `${capital(name)}DeadLetterAlarm`, {
        alarmName: Fn.sub(`\${AWS::StackName}-${name}-dlq-not-empty`),
        alarmDescription: `gannet's ${name} dead-letter queue holds messages.`,
        namespace: 'AWS/SQS',
        metricName: 'ApproximateNumberOfMessagesVisible',
        dimensions: [{ name: 'QueueName', value: queues[name].deadLetter.attrQueueName }],
        statistic: 'Maximum',
        period: 300,
        evaluationPeriods: 1,
        threshold: 0,
        comparisonOperator: 'GreaterThanThreshold',
        treatMissingData: 'notBreaching',
        alarmActions: topic === undefined ? undefined : [topic],
        okActions: topic === undefined ? undefined : [topic],
      });
    }
  }

  private createLogGroup(id: string, name: string): logs.CfnLogGroup {
    const group = new logs.CfnLogGroup(this, id, {
      logGroupName: name,
      retentionInDays: this.settings.logRetentionDays,
    });
    group.applyRemovalPolicy(RemovalPolicy.DESTROY);
    return group;
  }

  private managedPolicy(id: string, description: string, statements: Statement[]): iam.CfnManagedPolicy {
    return new iam.CfnManagedPolicy(this, id, {
      description,
      policyDocument: { Version: '2012-10-17', Statement: statements },
    });
  }

  /** sts:AssumeRole on exactly the deploy targets' roles; none when there are no targets. */
  private deployTargetsPolicy(): iam.CfnManagedPolicy | undefined {
    const s = this.settings;
    const statements = [
      { sid: 'AssumeLambdaDeployTargetRoles', arns: s.lambdaTargetRoleArns },
      { sid: 'AssumeEcsDeployTargetRoles', arns: s.ecsTargetRoleArns },
      { sid: 'AssumeEksDeployTargetRoles', arns: s.eksTargetRoleArns },
    ]
      .filter(({ arns }) => arns.length > 0)
      .map(({ sid, arns }) => ({ Sid: sid, Effect: 'Allow', Action: 'sts:AssumeRole', Resource: arns }));
    if (statements.length === 0) {
      return undefined;
    }
    return this.managedPolicy('DeployTargetsPolicy', "gannet - assume the deploy targets' roles.", statements);
  }

  private functionRole(name: FunctionName, managedPolicyArns: string[], statements: Statement[]): iam.CfnRole {
    return new iam.CfnRole(this, `${capital(name)}Role`, {
      description: `gannet ${name} function`,
      assumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
      },
      managedPolicyArns: managedPolicyArns.length > 0 ? managedPolicyArns : undefined,
      policies: [{ policyName: name, policyDocument: { Version: '2012-10-17', Statement: statements } }],
    });
  }

  /**
   * The jobs' CodeBuild project, whose builds run one job each with a role of their own (no
   * access to gannet's table, queues or secrets), the bucket they fetch jobs from, their logs.
   */
  private createJobs() {
    const s = this.settings;
    const stack = Stack.of(this);
    // Emptied by its lifecycle rule; kept on teardown (the deploy guide says how to delete it).
    const bucket = new s3.CfnBucket(this, 'JobsBucket', {
      bucketEncryption: {
        serverSideEncryptionConfiguration: [{ serverSideEncryptionByDefault: { sseAlgorithm: 'AES256' } }],
      },
      publicAccessBlockConfiguration: {
        blockPublicAcls: true,
        blockPublicPolicy: true,
        ignorePublicAcls: true,
        restrictPublicBuckets: true,
      },
      ownershipControls: { rules: [{ objectOwnership: 'BucketOwnerEnforced' }] },
      lifecycleConfiguration: {
        rules: [
          {
            id: 'expire-jobs',
            status: 'Enabled',
            prefix: 'jobs/',
            expirationInDays: s.jobFilesRetentionDays,
            abortIncompleteMultipartUpload: { daysAfterInitiation: 1 },
          },
        ],
      },
    });
    bucket.applyRemovalPolicy(RemovalPolicy.RETAIN);
    new s3.CfnBucketPolicy(this, 'JobsBucketPolicy', {
      bucket: bucket.ref,
      policyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Sid: 'TlsOnly',
            Effect: 'Deny',
            Principal: '*',
            Action: 's3:*',
            Resource: [bucket.attrArn, `${bucket.attrArn}/*`],
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          },
        ],
      },
    });
    const logGroup = this.createLogGroup('JobsLogGroup', Fn.sub('/gannet/${AWS::StackName}/jobs'));
    const role = new iam.CfnRole(this, 'JobRole', {
      description: "gannet jobs (CodeBuild) - no access to gannet's table, queues or secrets",
      assumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Service: 'codebuild.amazonaws.com' },
            Action: 'sts:AssumeRole',
            Condition: { StringEquals: { 'aws:SourceAccount': stack.account } },
          },
        ],
      },
      policies: [
        {
          policyName: 'job',
          policyDocument: {
            Version: '2012-10-17',
            // No S3 right: a build fetches its job and keeps its files and exit code only
            // through the URLs the stage function presigned for that one job.
            Statement: [
              {
                Sid: 'Logs',
                Effect: 'Allow',
                Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
                Resource: logGroup.attrArn,
              },
              ...(s.jobDeployTargetRoleArns.length > 0
                ? [
                    {
                      Sid: 'AssumeJobDeployTargetRoles',
                      Effect: 'Allow',
                      Action: 'sts:AssumeRole',
                      Resource: s.jobDeployTargetRoleArns,
                    },
                  ]
                : []),
            ],
          },
        },
      ],
    });
    const project = new codebuild.CfnProject(this, 'JobsProject', {
      name: Fn.sub('${AWS::StackName}-jobs'),
      description: 'gannet jobs; each build runs one (its buildspec comes with StartBuild)',
      serviceRole: role.attrArn,
      source: {
        type: 'NO_SOURCE',
        buildSpec: [
          'version: 0.2',
          'phases:',
          '  build:',
          '    commands:',
          '      - echo "gannet starts every job with its own buildspec; this one never runs a job" && exit 1',
          '',
        ].join('\n'),
      },
      artifacts: { type: 'NO_ARTIFACTS' },
      environment: { type: 'ARM_CONTAINER', image: s.jobImage, computeType: s.jobComputeType },
      timeoutInMinutes: 360,
      logsConfig: { cloudWatchLogs: { status: 'ENABLED', groupName: logGroup.ref } },
    });
    return { bucket, logGroup, role, project };
  }

  private queueSource(
    id: string,
    queue: sqs.CfnQueue,
    fn: lambda.Function,
    batchSize: number,
    scalingConfig?: lambda.CfnEventSourceMapping.ScalingConfigProperty,
  ): void {
    new lambda.CfnEventSourceMapping(this, id, {
      eventSourceArn: queue.attrArn,
      functionName: fn.functionName,
      batchSize,
      functionResponseTypes: ['ReportBatchItemFailures'],
      scalingConfig,
    });
  }

  /**
   * No IAM auth: GitHub cannot sign AWS requests. X-Hub-Signature-256 (HMAC with the webhook
   * secret) is the authentication; unsigned requests get 401 and store nothing.
   */
  private createWebhookUrl(webhook: lambda.Function): string {
    const url = new lambda.CfnUrl(this, 'WebhookFunctionUrl', {
      targetFunctionArn: webhook.functionName,
      authType: 'NONE',
    });
    new lambda.CfnPermission(this, 'WebhookFunctionUrlPublicPermissions', {
      action: 'lambda:InvokeFunctionUrl',
      functionName: webhook.functionName,
      principal: '*',
      functionUrlAuthType: 'NONE',
    });
    new lambda.CfnPermission(this, 'WebhookFunctionURLInvokeAllowPublicAccess', {
      action: 'lambda:InvokeFunction',
      functionName: webhook.functionName,
      principal: '*',
      invokedViaFunctionUrl: true,
    });
    return url.attrFunctionUrl;
  }

  /** The JSON API, for SigV4-signed requests only (callers need execute-api:Invoke). */
  private createApi(fn: lambda.Function): apigw.CfnApi {
    const api = new apigw.CfnApi(this, 'Api', {
      failOnWarnings: true,
      body: {
        openapi: '3.0.1',
        info: { version: '1.0', title: Aws.STACK_NAME, description: 'gannet JSON API (IAM-authorised)' },
        paths: {
          '/{proxy+}': {
            'x-amazon-apigateway-any-method': {
              'x-amazon-apigateway-integration': {
                httpMethod: 'POST',
                type: 'aws_proxy',
                // The function by its name: its environment refers to this API, so the API
                // cannot refer to it (SAM: the same).
                uri: Fn.sub(
                  'arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-api/invocations',
                ),
                payloadFormatVersion: '2.0',
              },
              security: [{ AWS_IAM: [] }],
              parameters: [{ required: true, name: 'proxy+', in: 'path' }],
              responses: {},
            },
          },
        },
        components: {
          securitySchemes: {
            AWS_IAM: {
              type: 'apiKey',
              name: 'Authorization',
              in: 'header',
              'x-amazon-apigateway-authtype': 'awsSigv4',
            },
          },
        },
      },
    });
    new apigw.CfnStage(this, 'ApiApiGatewayDefaultStage', { apiId: api.ref, stageName: '$default', autoDeploy: true });
    // The function answers only this API's events in this account: whoever may invoke it
    // directly can write any event, and this permission cannot deny them (SECURITY.md).
    fn.addEnvironment('GANNET_API_ID', api.ref);
    fn.addEnvironment('GANNET_ACCOUNT_ID', Aws.ACCOUNT_ID);
    // API Gateway may invoke it for this API's routes only.
    new lambda.CfnPermission(this, 'ApiFunctionApiPermission', {
      action: 'lambda:InvokeFunction',
      functionName: fn.functionName,
      principal: 'apigateway.amazonaws.com',
      sourceArn: `${apiArn(api)}/*/*/*`,
    });
    return api;
  }

  /** Who may call which part of the API: attach one of these to a user or role (SECURITY.md). */
  private createApiPolicies(api: apigw.CfnApi) {
    const invoke = (route: string) => `${apiArn(api)}/*/${route}`;
    const policy = (id: string, description: string, routes: string[]) =>
      this.managedPolicy(id, description, [
        {
          Effect: 'Allow',
          Action: 'execute-api:Invoke',
          Resource: routes.length === 1 ? invoke(routes[0]) : routes.map(invoke),
        },
      ]);
    // The API's reads and the web console's pages and files (which hold no data).
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
    return {
      read: policy('ApiReadPolicy', 'gannet API role viewer - read apps, deployments and stage logs.', reads),
      deploy: policy(
        'ApiDeployPolicy',
        'gannet API role deployer - read, sync, roll back, pause and resume apps, cancel deployments and chains, ask for plan previews.',
        [
          ...reads,
          'POST/api/v1/apps/*/sync',
          'POST/api/v1/apps/*/rollback',
          'POST/api/v1/apps/*/pause',
          'POST/api/v1/apps/*/resume',
          'POST/api/v1/deployments/*/cancel',
          'POST/api/v1/chains/*/cancel',
          'POST/api/v1/plan-previews',
        ],
      ),
      approve: policy('ApiApprovePolicy', 'gannet API role approver - read and approve stages.', [
        ...reads,
        'POST/api/v1/deployments/*/approve',
      ]),
    };
  }

  /**
   * EventBridge Scheduler timers, named after the stack so two stacks in one account and region
   * do not collide. `rate(1 minutes)` is refused: a value of 1 takes the singular unit.
   */
  private createSchedules(): void {
    const s = this.settings;
    const role = new iam.CfnRole(this, 'SchedulerRole', {
      description: 'gannet timers (EventBridge Scheduler) - invoke poll, resume and drift',
      assumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Service: 'scheduler.amazonaws.com' },
            Action: 'sts:AssumeRole',
            Condition: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
          },
        ],
      },
      policies: [
        {
          policyName: 'invoke-timers',
          policyDocument: {
            Version: '2012-10-17',
            Statement: [
              {
                Effect: 'Allow',
                Action: 'lambda:InvokeFunction',
                Resource: [
                  this.functions.poll.functionArn,
                  this.functions.resume.functionArn,
                  this.functions.drift.functionArn,
                ],
              },
            ],
          },
        },
      ],
    });
    const schedule = (name: 'poll' | 'resume' | 'drift', description: string, minutes: number) =>
      new scheduler.CfnSchedule(this, `${capital(name)}Schedule`, {
        name: Fn.sub(`\${AWS::StackName}-${name}`),
        description,
        scheduleExpression: minutes === 1 ? 'rate(1 minute)' : `rate(${minutes} minutes)`,
        flexibleTimeWindow: { mode: 'OFF' },
        state: 'ENABLED',
        target: {
          arn: this.functions[name].functionArn,
          roleArn: role.attrArn,
          input: JSON.stringify({ job: name }),
          retryPolicy: { maximumRetryAttempts: 0, maximumEventAgeInSeconds: 60 },
        },
      });
    schedule('poll', 'gannet poll (backstop for lost push webhooks)', s.pollIntervalMinutes);
    schedule('resume', 'gannet resume (re-drive stranded deployments)', s.resumeIntervalMinutes);
    if (s.driftIntervalMinutes > 0) {
      schedule('drift', 'gannet drift sweep (one check per app)', s.driftIntervalMinutes);
    }
  }

  /**
   * An output under the SAM template's key (no CDK prefix or hash), so that the deploy guide's
   * `describe-stacks` queries read either stack.
   */
  private output(id: string, value: string, description?: string): void {
    new CfnOutput(this, id, { value, description }).overrideLogicalId(id);
  }
}

/**
 * A secret's read statements: an SSM parameter also needs kms:Decrypt, which SSM calls on the
 * caller's behalf with the parameter's key, allowed only through SSM and only for this
 * parameter (SSM names it in the encryption context).
 */
function secretStatements(prefix: 'Github' | 'Webhook' | 'SealingKey', secret: SecretArn): Statement[] {
  if (!secret.inSsm) {
    return [{ Sid: `${prefix}Secret`, Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: secret.arn }];
  }
  return [
    { Sid: `${prefix}Parameter`, Effect: 'Allow', Action: 'ssm:GetParameter', Resource: secret.arn },
    {
      Sid: `${prefix}ParameterKey`,
      Effect: 'Allow',
      Action: 'kms:Decrypt',
      Resource: Fn.sub(`arn:\${AWS::Partition}:kms:${secret.region}:${secret.account}:key/*`),
      Condition: {
        StringEquals: {
          'kms:ViaService': `ssm.${secret.region}.amazonaws.com`,
          'kms:EncryptionContext:PARAMETER_ARN': secret.arn,
        },
      },
    },
  ];
}

function apiArn(api: apigw.CfnApi): string {
  const stack = Stack.of(api);
  return `arn:${stack.partition}:execute-api:${stack.region}:${stack.account}:${api.ref}`;
}

function capital(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}
