import { FunctionCode } from './code';

/**
 * A repository gannet deploys from, as `GANNET_REPOS` (functions/src/config.rs) reads it:
 * exactly one of `github` or `url`.
 */
export interface Repository {
  /** gannet's name for the repository. */
  readonly id: string;
  /** `owner/name`, the `repository.full_name` GitHub's webhooks carry. */
  readonly github?: string;
  /** A git URL, for a repository that is not on GitHub. */
  readonly url?: string;
  /** @default "main" */
  readonly branch?: string;
  /** `olderPending`: a newer commit cancels the app's older PENDING deployments. @default "never" */
  readonly supersede?: 'never' | 'olderPending';
  /**
   * What the first scan of the repository does with the apps it finds: `adopt` takes each as it
   * runs and deploys nothing; `deploy` deploys every app at the branch head. @default "adopt"
   */
  readonly onFirstSight?: 'adopt' | 'deploy';
}

/** A Lambda deploy target. On AWS it needs `roleArn`: the functions' roles have no Lambda rights. */
export interface LambdaDeployTarget {
  readonly name: string;
  readonly region: string;
  readonly roleArn: string;
  /** The alias gannet routes traffic on. @default "Service" */
  readonly alias?: string;
  readonly endpoint?: string;
  /** The role plan previews read with instead of `roleArn`: the drift function alone may assume it. */
  readonly planPreview?: { readonly roleArn: string };
}

/** An ECS deploy target. On AWS it needs `roleArn`: the functions' roles have no ECS rights. */
export interface EcsDeployTarget {
  readonly name: string;
  readonly region: string;
  readonly roleArn: string;
  readonly endpoint?: string;
  /** The role plan previews read with instead of `roleArn`: the drift function alone may assume it. */
  readonly planPreview?: { readonly roleArn: string };
}

/** How gannet reaches an EKS cluster: a token made with `roleArn` (mapped by an access entry). */
export interface EksSettings {
  readonly clusterName: string;
  readonly region: string;
  readonly roleArn: string;
  readonly [field: string]: unknown;
}

/** A Kubernetes deploy target; the fields are gannet.yaml's (the functions check them). */
export interface KubernetesDeployTarget {
  readonly name: string;
  readonly masterURL?: string;
  readonly certificateAuthorityData?: string;
  readonly eks?: EksSettings;
  readonly [field: string]: unknown;
}

/** A Cloud Run deploy target, reached by workload identity federation from the functions' roles. */
export interface CloudRunDeployTarget {
  readonly name: string;
  readonly project: string;
  readonly region: string;
  readonly workloadIdentity?: {
    readonly audience: string;
    readonly serviceAccount: string;
    readonly awsRegion?: string;
  };
  readonly [field: string]: unknown;
}

/**
 * A Terraform deploy target; the fields are gannet.yaml's (the functions check them).
 * `jobRoleArn` is the IAM role its jobs run as instead of the stack's JobRole: the stage and
 * drift functions may pass exactly these roles to CodeBuild.
 */
export interface TerraformDeployTarget {
  readonly name: string;
  readonly jobRoleArn?: string;
  /**
   * A plan preview's credentials: its plan jobs run as `planPreview.jobRoleArn`, which the drift
   * function alone may pass to CodeBuild.
   */
  readonly planPreview?: { readonly jobRoleArn?: string; readonly allowEnv?: string[] };
  readonly [field: string]: unknown;
}

/**
 * Each plugin's settings, gannet.yaml's `plugins:` map (`GANNET_PLUGINS`). The deploy targets
 * of the AWS plugins also decide which roles the stage and drift functions may assume, and
 * the Terraform targets' `jobRoleArn`s which roles they may pass to CodeBuild.
 */
export interface PluginSettings {
  readonly lambda?: { readonly deployTargets: LambdaDeployTarget[]; readonly [field: string]: unknown };
  readonly ecs?: { readonly deployTargets: EcsDeployTarget[]; readonly [field: string]: unknown };
  readonly kubernetes?: { readonly deployTargets: KubernetesDeployTarget[]; readonly [field: string]: unknown };
  readonly cloudrun?: { readonly deployTargets: CloudRunDeployTarget[]; readonly [field: string]: unknown };
  readonly terraform?: { readonly deployTargets: TerraformDeployTarget[]; readonly [field: string]: unknown };
  /** Any other plugin's settings (`analysis`, `terraform`, ...), as gannet.yaml writes them. */
  readonly [plugin: string]: unknown;
}

/**
 * A notification receiver (`GANNET_RECEIVERS`): CloudEvents to a URL, or Slack messages to the
 * incoming webhook whose URL the secret holds (the notify function may read exactly these).
 */
export type Receiver =
  | { readonly name: string; readonly url: string }
  | { readonly name: string; readonly slack: { readonly urlSecretArn: string } };

/** CodeBuild's arm64 compute types that jobs may run on. */
export type JobComputeType = 'BUILD_GENERAL1_SMALL' | 'BUILD_GENERAL1_MEDIUM' | 'BUILD_GENERAL1_LARGE';

/** Where jobs (SCRIPT_RUN scripts, Terraform) run: the CodeBuild project. */
export interface JobSettings {
  /** An ARM image with bash, tar, gzip and curl. @default "aws/codebuild/amazonlinux-aarch64-standard:3.0" */
  readonly image?: string;
  /** @default "BUILD_GENERAL1_SMALL" */
  readonly computeType?: JobComputeType;
  /** Days the jobs bucket keeps a job's files, 1 to 3650. @default 7 */
  readonly filesRetentionDays?: number;
  /**
   * Roles every job may assume: the job of any app can act on each of them. A Terraform deploy
   * target's `jobRoleArn` (plugins.terraform) is the scoped way: that target's jobs alone run
   * as it. @default none
   */
  readonly deployTargetRoleArns?: string[];
}

/**
 * Everything `infra/template.yaml`'s parameters set, typed. The deploy targets' role lists and
 * the Slack secrets are derived from `plugins` and `receivers`, which the SAM template takes
 * twice (once in the JSON, once as ARN lists).
 */
export interface GannetProps {
  /** The functions' code: prebuilt zips or a cargo-lambda build. */
  readonly code: FunctionCode;
  /** The webhook secret: an SSM parameter ARN or a Secrets Manager secret ARN (a literal). */
  readonly webhookSecretArn: string;
  /** The GitHub credentials: an SSM parameter ARN or a Secrets Manager secret ARN (a literal). */
  readonly githubSecretArn: string;
  /**
   * gannet's private key for sealed secrets (PipeCD's `spec.encryption`): an SSM SecureString
   * parameter ARN or a Secrets Manager secret ARN (a literal) holding an RSA key in PEM. Only the
   * stage, drift and api functions get it and may read it. @default none: apps cannot seal secrets
   */
  readonly sealingKeyArn?: string;
  /** GitHub's API (for GitHub Enterprise Server, https://HOST/api/v3). @default "https://api.github.com" */
  readonly githubApiUrl?: string;
  /**
   * Where people open gannet's web console (its root, an https URL): plan previews' check runs
   * link to their page there (the drift function's GANNET_CONSOLE_URL). @default none
   */
  readonly consoleUrl?: string;
  readonly repositories: Repository[];
  /** @default {} */
  readonly plugins?: PluginSettings;
  /** @default [] */
  readonly receivers?: Receiver[];
  /** An EventBridge bus in this account and region that gets every event. @default none */
  readonly eventBusName?: string;
  /**
   * Lets the stage function call cloudwatch:GetMetricData and logs:StartQuery, logs:GetQueryResults,
   * logs:StopQuery (ANALYSIS with CloudWatch metrics or CloudWatch Logs). @default false
   */
  readonly cloudWatchAnalysis?: boolean;
  /** The jobs' CodeBuild settings. */
  readonly jobs?: JobSettings;
  /** Concurrency reserved for (and capping) the public webhook function; 0 reserves none. @default 10 */
  readonly webhookReservedConcurrency?: number;
  /**
   * People's names and gannet roles for the IAM principals that call the API (ARN, or a prefix
   * ending in *). A role is enforced by the API and tells the web console which controls to
   * show; a principal without one (a name only, or no entry) is a viewer: map at least one admin.
   * @default {}
   */
  readonly callerNames?: Record<string, string | CallerName>;
  /** Minutes between polls, 1 to 1440. @default 1 */
  readonly pollIntervalMinutes?: number;
  /** Minutes between resume sweeps, 1 to 1440. @default 1 */
  readonly resumeIntervalMinutes?: number;
  /** Minutes between drift sweeps, 0 (off) to 1440. @default 5 */
  readonly driftIntervalMinutes?: number;
  /** The functions' RUST_LOG. @default "info" */
  readonly logLevel?: string;
  /** Days the log groups keep logs (one of CloudWatch Logs' retention values). @default 30 */
  readonly logRetentionDays?: number;
  /** Most stage functions running at once, 2 to 1000. @default 10 */
  readonly stageMaxConcurrency?: number;
  /** An SNS topic the dead-letter-queue alarms notify. @default none: alarms only change state */
  readonly alarmTopicArn?: string;
}

/** A principal's name and its gannet role. */
export interface CallerName {
  readonly name: string;
  readonly role: 'viewer' | 'deployer' | 'approver' | 'admin';
}
