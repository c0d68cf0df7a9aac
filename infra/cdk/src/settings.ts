import { Token } from 'aws-cdk-lib';
import { GannetProps, JobComputeType } from './props';

/**
 * The props with their defaults filled in and checked: the same checks as the SAM template's
 * parameter constraints (AllowedPattern, AllowedValues, MinValue/MaxValue), made at synth time
 * with errors that name the prop. Values that are tokens pass unchecked, except the secret
 * ARNs, whose service decides the IAM statements.
 */
export interface Settings {
  readonly webhookSecret: SecretArn;
  readonly githubSecret: SecretArn;
  /** The private key for sealed secrets; none when not given. */
  readonly sealingKey?: SecretArn;
  readonly githubApiUrl: string;
  /** Where check runs link; none when not given. */
  readonly consoleUrl?: string;
  readonly reposJson: string;
  readonly pluginsJson: string;
  readonly receiversJson: string;
  readonly callerNamesJson: string;
  readonly lambdaTargetRoleArns: string[];
  readonly ecsTargetRoleArns: string[];
  readonly eksTargetRoleArns: string[];
  /** Roles every job may assume (JobDeployTargetRoleArns). */
  readonly jobDeployTargetRoleArns: string[];
  /** The Terraform targets' jobRoleArns, which the stage and drift functions may pass (JobTargetRoleArns). */
  readonly jobTargetRoleArns: string[];
  /** The targets' planPreview roles, which the drift function alone may assume (PreviewRoleArns). */
  readonly previewRoleArns: string[];
  /** The Terraform targets' planPreview.jobRoleArns, which the drift function alone may pass (PreviewJobRoleArns). */
  readonly previewJobRoleArns: string[];
  readonly slackUrlSecretArns: string[];
  readonly eventBusName?: string;
  readonly cloudWatchAnalysis: boolean;
  readonly jobImage: string;
  readonly jobComputeType: JobComputeType;
  readonly jobFilesRetentionDays: number;
  readonly webhookReservedConcurrency: number;
  readonly pollIntervalMinutes: number;
  readonly resumeIntervalMinutes: number;
  /** 0: drift is off. */
  readonly driftIntervalMinutes: number;
  readonly logLevel: string;
  readonly logRetentionDays: number;
  readonly stageMaxConcurrency: number;
  readonly alarmTopicArn?: string;
}

/** A secret's ARN split into the fields its IAM statements need. */
export interface SecretArn {
  readonly arn: string;
  /** An SSM parameter (a SecureString SSM decrypts with KMS) or a Secrets Manager secret. */
  readonly inSsm: boolean;
  readonly region: string;
  readonly account: string;
}

const SECRET_ARN =
  /^arn:aws[a-z-]*:(ssm:[a-z0-9-]+:[0-9]{12}:parameter\/.+|secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+)$/;
const ROLE_ARN = /^arn:aws[a-z-]*:iam::[0-9]{12}:role\/.+$/;
const SNS_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:.+$/;
const EVENT_BUS_NAME = /^[A-Za-z0-9._-]{0,256}$/;
const HTTP_URL = /^https?:\/\/.+$/;
const CONSOLE_URL = /^https:\/\/[^?#\s]+$/;
const COMPUTE_TYPES: JobComputeType[] = ['BUILD_GENERAL1_SMALL', 'BUILD_GENERAL1_MEDIUM', 'BUILD_GENERAL1_LARGE'];
/** CloudWatch Logs' retention values (the template's LogRetentionDays AllowedValues). */
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
];

/** A prop the construct refuses; the message starts with the prop's path. */
export class GannetPropError extends Error {
  constructor(prop: string, problem: string) {
    super(`Gannet: props.${prop}: ${problem}`);
    this.name = 'GannetPropError';
  }
}

export function resolveSettings(props: GannetProps): Settings {
  if (props.code === undefined) {
    throw new GannetPropError('code', 'missing (FunctionCode.fromZipDirectory or FunctionCode.fromCargoWorkspace)');
  }
  const plugins = props.plugins ?? {};
  const receivers = props.receivers ?? [];
  const jobs = props.jobs ?? {};
  const roleArns = (prop: string, arns: (string | undefined)[]) =>
    arns.map((arn, i) => {
      if (arn === undefined) {
        throw new GannetPropError(prop.replace('#', `${i}`), 'missing (the functions assume this role on AWS)');
      }
      return matching(prop.replace('#', `${i}`), arn, ROLE_ARN, 'an IAM role ARN');
    });
  const targets = <T>(plugin: string, settings: { readonly deployTargets: T[] } | undefined): T[] => {
    if (settings !== undefined && !Array.isArray(settings.deployTargets)) {
      throw new GannetPropError(`plugins.${plugin}.deployTargets`, 'not a list of deploy targets');
    }
    return settings?.deployTargets ?? [];
  };
  const lambdaTargets = targets('lambda', plugins.lambda);
  const ecsTargets = targets('ecs', plugins.ecs);
  const eksTargets = targets('kubernetes', plugins.kubernetes)
    .map((target, i) => ({ target, i }))
    .filter(({ target }) => target.eks !== undefined);
  const terraformJobRoles = targets('terraform', plugins.terraform)
    .map((target, i) => ({ target, i }))
    .filter(({ target }) => target.jobRoleArn !== undefined);
  // A target's planPreview credentials, where it has them: the path to the role, and the role.
  const previewRoles = (
    plugin: string,
    list: readonly object[],
    field: (preview: Record<string, unknown>) => unknown,
    path: string,
  ) =>
    list.flatMap((target, i) => {
      const preview = (target as { readonly planPreview?: unknown }).planPreview;
      if (!isPlainObject(preview)) return [];
      const arn = field(preview as Record<string, unknown>);
      return arn === undefined ? [] : [{ prop: `plugins.${plugin}.deployTargets[${i}].planPreview.${path}`, arn }];
    });
  const previewRoleArns = [
    ...previewRoles('lambda', lambdaTargets, (p) => p.roleArn, 'roleArn'),
    ...previewRoles('ecs', ecsTargets, (p) => p.roleArn, 'roleArn'),
    ...previewRoles(
      'kubernetes',
      targets('kubernetes', plugins.kubernetes),
      (p) => (isPlainObject(p.eks) ? (p.eks as Record<string, unknown>).roleArn : undefined),
      'eks.roleArn',
    ),
  ];
  const previewJobRoleArns = previewRoles(
    'terraform',
    targets('terraform', plugins.terraform),
    (p) => p.jobRoleArn,
    'jobRoleArn',
  );
  const slackReceivers = receivers.flatMap((receiver, i) => ('slack' in receiver ? [{ receiver, i }] : []));
  const eventBusName = props.eventBusName === '' ? undefined : props.eventBusName;
  const alarmTopicArn = props.alarmTopicArn === '' ? undefined : props.alarmTopicArn;

  return {
    webhookSecret: secretArn('webhookSecretArn', props.webhookSecretArn),
    githubSecret: secretArn('githubSecretArn', props.githubSecretArn),
    sealingKey:
      props.sealingKeyArn === undefined || props.sealingKeyArn === ''
        ? undefined
        : secretArn('sealingKeyArn', props.sealingKeyArn),
    githubApiUrl: matching('githubApiUrl', props.githubApiUrl ?? 'https://api.github.com', HTTP_URL, 'an http(s) URL'),
    consoleUrl:
      props.consoleUrl === undefined || props.consoleUrl === ''
        ? undefined
        : matching('consoleUrl', props.consoleUrl, CONSOLE_URL, 'an https URL without a query'),
    reposJson: json('repositories', props.repositories, Array.isArray, 'a list of repositories'),
    pluginsJson: json('plugins', plugins, isPlainObject, 'a map of plugin settings'),
    receiversJson: json('receivers', receivers, Array.isArray, 'a list of receivers'),
    callerNamesJson: json(
      'callerNames',
      props.callerNames ?? {},
      isCallerNames,
      'a map of principal to a name or to {name, role} (role: viewer, deployer, approver or admin)',
    ),
    lambdaTargetRoleArns: roleArns(
      'plugins.lambda.deployTargets[#].roleArn',
      lambdaTargets.map((t) => t.roleArn),
    ),
    ecsTargetRoleArns: roleArns(
      'plugins.ecs.deployTargets[#].roleArn',
      ecsTargets.map((t) => t.roleArn),
    ),
    eksTargetRoleArns: eksTargets.map(
      ({ target, i }) => roleArns(`plugins.kubernetes.deployTargets[${i}].eks.roleArn`, [target.eks?.roleArn])[0],
    ),
    jobDeployTargetRoleArns: roleArns('jobs.deployTargetRoleArns[#]', jobs.deployTargetRoleArns ?? []),
    jobTargetRoleArns: unique(
      terraformJobRoles.map(
        ({ target, i }) => roleArns(`plugins.terraform.deployTargets[${i}].jobRoleArn`, [target.jobRoleArn])[0],
      ),
    ),
    previewRoleArns: unique(previewRoleArns.map(({ prop, arn }) => roleArns(prop, [arn as string])[0])),
    previewJobRoleArns: unique(previewJobRoleArns.map(({ prop, arn }) => roleArns(prop, [arn as string])[0])),
    slackUrlSecretArns: unique(
      slackReceivers.map(({ receiver, i }) =>
        matching(
          `receivers[${i}].slack.urlSecretArn`,
          (receiver as { slack: { urlSecretArn: string } }).slack.urlSecretArn,
          SECRET_ARN,
          'an SSM parameter ARN or a Secrets Manager secret ARN',
        ),
      ),
    ),
    eventBusName:
      eventBusName === undefined
        ? undefined
        : matching('eventBusName', eventBusName, EVENT_BUS_NAME, 'an event bus name (up to 256 of A-Z a-z 0-9 . _ -)'),
    cloudWatchAnalysis: props.cloudWatchAnalysis ?? false,
    jobImage: nonEmpty('jobs.image', jobs.image ?? 'aws/codebuild/amazonlinux-aarch64-standard:3.0'),
    jobComputeType: oneOf('jobs.computeType', jobs.computeType ?? 'BUILD_GENERAL1_SMALL', COMPUTE_TYPES),
    jobFilesRetentionDays: wholeNumber('jobs.filesRetentionDays', jobs.filesRetentionDays ?? 7, 1, 3650, 'days'),
    webhookReservedConcurrency: wholeNumber(
      'webhookReservedConcurrency',
      props.webhookReservedConcurrency ?? 10,
      0,
      Infinity,
      'executions',
    ),
    pollIntervalMinutes: wholeNumber('pollIntervalMinutes', props.pollIntervalMinutes ?? 1, 1, 1440, 'minutes'),
    resumeIntervalMinutes: wholeNumber('resumeIntervalMinutes', props.resumeIntervalMinutes ?? 1, 1, 1440, 'minutes'),
    driftIntervalMinutes: wholeNumber(
      'driftIntervalMinutes',
      props.driftIntervalMinutes ?? 5,
      0,
      1440,
      'minutes',
      ' (0 turns drift off)',
    ),
    logLevel: nonEmpty('logLevel', props.logLevel ?? 'info'),
    logRetentionDays: oneOf('logRetentionDays', props.logRetentionDays ?? 30, LOG_RETENTION_DAYS),
    stageMaxConcurrency: wholeNumber('stageMaxConcurrency', props.stageMaxConcurrency ?? 10, 2, 1000, 'functions'),
    alarmTopicArn:
      alarmTopicArn === undefined ? undefined : matching('alarmTopicArn', alarmTopicArn, SNS_ARN, 'an SNS topic ARN'),
  };
}

function secretArn(prop: string, arn: string | undefined): SecretArn {
  if (arn === undefined || arn === '') {
    throw new GannetPropError(prop, 'missing (an SSM parameter ARN or a Secrets Manager secret ARN)');
  }
  if (Token.isUnresolved(arn)) {
    throw new GannetPropError(
      prop,
      'is a token; give the ARN as a literal string (its service decides the IAM statements)',
    );
  }
  matching(prop, arn, SECRET_ARN, 'an SSM parameter ARN or a Secrets Manager secret ARN');
  const [, , service, region, account] = arn.split(':');
  return { arn, inSsm: service === 'ssm', region, account };
}

function matching(prop: string, value: string, pattern: RegExp, what: string): string {
  if (typeof value !== 'string') {
    throw new GannetPropError(prop, `${JSON.stringify(value)} is not a string (${what})`);
  }
  if (!Token.isUnresolved(value) && !pattern.test(value)) {
    throw new GannetPropError(prop, `${JSON.stringify(value)} is not ${what}`);
  }
  return value;
}

function nonEmpty(prop: string, value: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new GannetPropError(prop, `${JSON.stringify(value)} is empty or not a string`);
  }
  return value;
}

function oneOf<T>(prop: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) {
    throw new GannetPropError(prop, `${JSON.stringify(value)} is not one of ${allowed.join(', ')}`);
  }
  return value;
}

function wholeNumber(prop: string, value: number, min: number, max: number, unit: string, note = ''): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new GannetPropError(prop, `${JSON.stringify(value)} is not a whole number of ${unit}${note}`);
  }
  if (value < min || value > max) {
    const range = max === Infinity ? `at least ${min}` : `${min} to ${max}`;
    throw new GannetPropError(prop, `${value} is out of range: ${range} ${unit}${note}`);
  }
  return value;
}

/** The value as the JSON the functions read, after checking its shape. */
function json(prop: string, value: unknown, shape: (v: unknown) => boolean, what: string): string {
  if (!shape(value)) {
    throw new GannetPropError(prop, `is not ${what}`);
  }
  return JSON.stringify(value);
}

function isPlainObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const ROLES = ['viewer', 'deployer', 'approver', 'admin'];

function isCallerNames(value: unknown): boolean {
  return (
    isPlainObject(value) &&
    Object.values(value as Record<string, unknown>).every((entry) => {
      if (typeof entry === 'string') return entry.length > 0;
      if (!isPlainObject(entry)) return false;
      const { name, role, ...rest } = entry as Record<string, unknown>;
      return typeof name === 'string' && name.length > 0 && ROLES.includes(role as string) && Object.keys(rest).length === 0;
    })
  );
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
