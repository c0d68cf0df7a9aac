//! What a function builds once per cold start: the AWS clients, the DynamoDB store, the SQS
//! queues, each repository's git source, the plugins and the [`Controller`] over them.

use std::sync::Arc;

use aws_config::SdkConfig;
use gannet_aws::{
    sdk_config, ClientOptions, CodeBuildJobs, DynamoStore, JobsConfig, SqsOptions, SqsQueue,
    StoreOptions, SystemClock,
};
use gannet_controller::{
    Console, Controller, EventBus, Receiver, ReceiverFormat, RemoteDiff, Sealing, Secret, Settings,
};
use gannet_domain::ports::{BoxError, Clock};
use gannet_domain::RepoId;
use gannet_git::github::{
    GithubAuth, GithubChecks, GithubClient, GithubStatuses, DEFAULT_BASE_URI,
};
use gannet_sdk::jobs::JobRunner;
use gannet_sdk::registry::Registry;
use gannet_sdk::sealed::{SealError, SealingKey};

use crate::config::{
    FunctionConfig, HttpApiSource, ReceiverTarget, SecretArn, WebhookSecret, GITHUB_SECRET_ARN,
    RECEIVERS, SEALING_KEY_ARN, WEBHOOK_SECRET_ARN,
};
use crate::sources::RepoSources;
use crate::Function;

/// The function could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the {function} function consumes the {queue} queue, but GANNET_QUEUES has no {queue} entry")]
    NoQueue {
        function: &'static str,
        queue: &'static str,
    },
    #[error("the api function answers only its own HTTP API's events: set GANNET_API_ID and GANNET_ACCOUNT_ID (the template sets both)")]
    NoHttpApi,
    #[error("the api function serves the web console, but its main gave none (Extras::console)")]
    NoConsole,
    #[error("the webhook function needs the webhook secret: set GANNET_WEBHOOK_SECRET_ARN (or GANNET_WEBHOOK_SECRET for local runs)")]
    NoWebhookSecret,
    #[error("{variable}: reading {secret}")]
    ReadSecret {
        variable: &'static str,
        secret: SecretArn,
        #[source]
        source: BoxError,
    },
    #[error("{variable}: {secret} holds no value")]
    EmptySecret {
        variable: &'static str,
        secret: SecretArn,
    },
    #[error("GANNET_REPOS lists GitHub repositories, so the {function} function needs GANNET_GITHUB_SECRET_ARN")]
    NoGithubSecret { function: &'static str },
    #[error("GANNET_GITHUB_SECRET_ARN: {secret} is not GitHub credentials")]
    GithubSecret {
        secret: SecretArn,
        #[source]
        source: gannet_git::github::AuthError,
    },
    /// The value is not shown: the error says only what is wrong with it.
    #[error("GANNET_SEALING_KEY_ARN: {secret} {problem}")]
    SealingKey {
        secret: SecretArn,
        problem: SealError,
    },
    #[error("setting up GitHub")]
    Github(#[source] gannet_git::github::SetupError),
    #[error("repository {repo} has neither github nor url")]
    NoRepoSource { repo: RepoId },
    #[error("GANNET_REPOS")]
    Repos(#[from] gannet_git::SetupError),
}

/// The AWS clients a function uses (tests point them at moto, or at a proxy in front of it).
#[derive(Clone, Debug)]
pub struct Clients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub secrets: aws_sdk_secretsmanager::Client,
    pub ssm: aws_sdk_ssm::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
        }
    }
}

/// The job runner's clients: CodeBuild, S3 (path-style, which every endpoint serves) and
/// CloudWatch Logs. Apart from [`Clients`] so that only the stage and drift functions, whose
/// `main` names [`codebuild_jobs`], link their SDKs: the other functions' zips stay small.
#[derive(Clone, Debug)]
pub struct JobClients {
    pub codebuild: aws_sdk_codebuild::Client,
    pub s3: aws_sdk_s3::Client,
    pub logs: aws_sdk_cloudwatchlogs::Client,
}

impl JobClients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            codebuild: aws_sdk_codebuild::Client::new(sdk),
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(sdk)
                    .force_path_style(true)
                    .build(),
            ),
            logs: aws_sdk_cloudwatchlogs::Client::new(sdk),
        }
    }

    /// The CodeBuild job runner on these clients.
    pub fn runner(&self, jobs: &JobsConfig) -> Arc<dyn JobRunner> {
        Arc::new(CodeBuildJobs::new(
            self.codebuild.clone(),
            self.s3.clone(),
            self.logs.clone(),
            jobs.clone(),
        ))
    }
}

/// Builds a function's job runner from the SDK configuration and the stack's jobs settings.
pub type JobsFactory = fn(&SdkConfig, &JobsConfig) -> Arc<dyn JobRunner>;

/// Builds the notify function's event bus from the SDK configuration and the bus's name.
pub type BusFactory = fn(&SdkConfig, String) -> Arc<dyn EventBus>;

/// Builds the api function's remote diff from the SDK configuration and the drift function's
/// name.
pub type DiffFactory = fn(&SdkConfig, String) -> Arc<dyn RemoteDiff>;

/// What only some functions build, each named by the `main` of the functions that need it so
/// that the others do not link its code and SDKs: the plugins (whole in stage and drift, their
/// planning faces in trigger, plan and api, none elsewhere), the job runner (stage, drift),
/// the event bus (notify), and the remote diff and the web console (api).
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras {
    pub plugins: Option<fn() -> Registry>,
    pub jobs: Option<JobsFactory>,
    pub bus: Option<BusFactory>,
    pub diff: Option<DiffFactory>,
    pub console: Option<Console>,
}

/// The stage and drift functions' job runner: CodeBuild builds of the stack's jobs project.
pub fn codebuild_jobs(sdk: &SdkConfig, jobs: &JobsConfig) -> Arc<dyn JobRunner> {
    JobClients::new(sdk).runner(jobs)
}

/// One function's runtime: its controller and the queue adapter it settles messages with.
/// Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    function: Function,
    controller: Controller,
    queue: SqsQueue,
    caller_names: std::collections::BTreeMap<String, gannet_aws::CallerEntry>,
    http_api: Option<HttpApiSource>,
    console: Option<Console>,
}

impl Runtime {
    /// Builds everything from `config`, with clients on the standard AWS chain, and the
    /// `extras` the function's `main` gives: its job runner, its event bus, its console.
    pub async fn start(
        function: Function,
        config: &FunctionConfig,
        extras: Extras,
    ) -> Result<Self, StartError> {
        if function == Function::Api && extras.console.is_none() {
            return Err(StartError::NoConsole);
        }
        let sdk = sdk_config(&ClientOptions {
            region: config.region.clone(),
            endpoint: config.endpoint.clone(),
            credentials: None,
        })
        .await;
        let mut runtime = Self::with_clients(function, config, &Clients::new(&sdk)).await?;
        runtime.console = extras.console;
        if let (Some(make), Some(bus)) = (extras.bus, &config.event_bus) {
            runtime.controller = runtime.controller.with_event_bus(make(&sdk, bus.clone()));
        }
        if let (Some(make), Some(function)) = (extras.diff, &config.diff_function) {
            runtime.controller = runtime
                .controller
                .with_remote_diff(make(&sdk, function.clone()));
        }
        Ok(match (extras.jobs, &config.jobs) {
            (Some(make), Some(settings)) => runtime.with_jobs(make(&sdk, settings)),
            _ => runtime,
        })
    }

    /// The same runtime, running its stages' jobs on `jobs`.
    pub fn with_jobs(mut self, jobs: Arc<dyn JobRunner>) -> Self {
        self.controller = self.controller.with_jobs(jobs);
        self
    }

    /// Builds everything from `config` on the given clients.
    pub async fn with_clients(
        function: Function,
        config: &FunctionConfig,
        clients: &Clients,
    ) -> Result<Self, StartError> {
        if function == Function::Api && config.http_api.is_none() {
            return Err(StartError::NoHttpApi);
        }
        if let Some(queue) = function.queue() {
            if !config.queues.contains_key(&queue) {
                return Err(StartError::NoQueue {
                    function: function.name(),
                    queue: queue.as_str(),
                });
            }
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let queue = SqsQueue::new(
            clients.sqs.clone(),
            config.queues.clone(),
            clock.clone(),
            SqsOptions::default(),
        );
        let store = DynamoStore::new(
            clients.dynamodb.clone(),
            config.table.clone(),
            Arc::new(queue.clone()),
            StoreOptions::default(),
        );
        let github = if function.reads_github() {
            github_client(function, config, clients).await?
        } else {
            None
        };
        let git = RepoSources::new(&config.repos, &config.git_cache, github.clone())?;
        let webhook_secret = match (function, &config.webhook_secret) {
            (Function::Webhook, Some(WebhookSecret::Value(secret))) => Some(secret.clone()),
            (Function::Webhook, Some(WebhookSecret::Arn(secret))) => Some(Secret::new(
                secret_string(clients, WEBHOOK_SECRET_ARN, secret).await?,
            )),
            (Function::Webhook, None) => return Err(StartError::NoWebhookSecret),
            _ => None,
        };
        // Only the notify function sends notifications (and may read a Slack URL's secret).
        let mut receivers = Vec::new();
        if function == Function::Notify {
            for r in &config.receivers {
                let (url, format) = match &r.target {
                    ReceiverTarget::CloudEvents(url) => (url.clone(), ReceiverFormat::CloudEvents),
                    ReceiverTarget::Slack(secret) => (
                        Secret::new(secret_string(clients, RECEIVERS, secret).await?),
                        ReceiverFormat::Slack,
                    ),
                };
                receivers.push(Receiver {
                    name: r.name.clone(),
                    url,
                    format,
                });
            }
        }
        let settings = Settings {
            repos: config.repos.clone(),
            webhook_secret,
            intervals: config.intervals.clone(),
            receivers,
        };
        let mut controller = Controller::new(
            Arc::new(store),
            Arc::new(git),
            clock,
            config.plugins.clone(),
            settings,
        );
        // Steps (stage), drift checks (drift) and the public key's answer (api): the key is
        // read once, here, and only by these.
        if function.reads_sealing_key() {
            let key = match &config.sealing_key {
                Some(secret) => Some(sealing_key(clients, secret).await?),
                None => None,
            };
            controller =
                controller.with_sealing(Sealing::new(key, config.sealed_dir.join(function.name())));
        }
        // Least privilege: only notify reports commit statuses, and only drift reads plan
        // previews (with the targets' planPreview credentials) and writes their check runs.
        match (function, github) {
            (Function::Notify, Some(client)) => {
                let statuses = GithubStatuses::new(client, github_repos(config))
                    .map_err(StartError::Github)?;
                controller = controller.with_commit_statuses(Arc::new(statuses));
            }
            (Function::Drift, github) => {
                controller = controller.with_previews(config.previews.clone());
                if let Some(url) = &config.console_url {
                    controller = controller.with_console_url(url.clone());
                }
                if let Some(client) = github {
                    let checks = GithubChecks::new(client, github_repos(config))
                        .map_err(StartError::Github)?;
                    controller = controller.with_check_runs(Arc::new(checks));
                }
            }
            _ => {}
        }
        Ok(Self {
            function,
            controller,
            queue,
            caller_names: config.caller_names.clone(),
            http_api: config.http_api.clone(),
            console: None,
        })
    }

    pub fn function(&self) -> Function {
        self.function
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// People's names for IAM principals, for the API.
    pub fn caller_names(&self) -> &std::collections::BTreeMap<String, gannet_aws::CallerEntry> {
        &self.caller_names
    }

    /// The HTTP API whose events the api function answers (always set in the api function).
    pub fn http_api(&self) -> Option<&HttpApiSource> {
        self.http_api.as_ref()
    }

    /// The web console the api function serves (always set in the api function's binary;
    /// a runtime built from clients alone, as tests do, serves none).
    pub fn console(&self) -> Option<Console> {
        self.console
    }

    /// The queue adapter, for settling received messages.
    pub fn queue(&self) -> &SqsQueue {
        &self.queue
    }
}

/// `(id, owner/name)` of the GitHub repositories.
fn github_repos(config: &FunctionConfig) -> Vec<(RepoId, String)> {
    config
        .repos
        .iter()
        .filter(|r| r.url.is_none())
        .filter_map(|r| Some((r.id.clone(), r.github.clone()?)))
        .collect()
}

/// The GitHub API client, with the credentials from Secrets Manager or SSM; `None` when no
/// repository is on GitHub.
async fn github_client(
    function: Function,
    config: &FunctionConfig,
    clients: &Clients,
) -> Result<Option<GithubClient>, StartError> {
    if github_repos(config).is_empty() {
        return Ok(None);
    }
    let secret = config
        .github
        .secret_arn
        .as_ref()
        .ok_or(StartError::NoGithubSecret {
            function: function.name(),
        })?;
    let json = secret_string(clients, GITHUB_SECRET_ARN, secret).await?;
    let auth = GithubAuth::from_secret_json(&json).map_err(|source| StartError::GithubSecret {
        secret: secret.clone(),
        source,
    })?;
    let base = config.github.api_url.as_deref().unwrap_or(DEFAULT_BASE_URI);
    GithubClient::new(&auth, base)
        .map(Some)
        .map_err(StartError::Github)
}

/// gannet's private key for sealed secrets, from `secret` (`GANNET_SEALING_KEY_ARN`).
async fn sealing_key(clients: &Clients, secret: &SecretArn) -> Result<SealingKey, StartError> {
    let pem = secret_string(clients, SEALING_KEY_ARN, secret).await?;
    SealingKey::from_pem(&pem).map_err(|problem| StartError::SealingKey {
        secret: secret.clone(),
        problem,
    })
}

/// The value of `secret`, named by the variable `variable`: a Secrets Manager secret's string,
/// or an SSM parameter's value, decrypted.
async fn secret_string(
    clients: &Clients,
    variable: &'static str,
    secret: &SecretArn,
) -> Result<String, StartError> {
    let read_error = |source: BoxError| StartError::ReadSecret {
        variable,
        secret: secret.clone(),
        source,
    };
    let value = match secret {
        SecretArn::SecretsManager(arn) => clients
            .secrets
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| read_error(Box::new(e)))?
            .secret_string
            .filter(|s| !s.is_empty()),
        // GetParameter takes the parameter's ARN as its name.
        SecretArn::SsmParameter(arn) => clients
            .ssm
            .get_parameter()
            .name(arn)
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| read_error(Box::new(e)))?
            .parameter
            .and_then(|p| p.value)
            .filter(|s| !s.is_empty()),
    };
    value.ok_or_else(|| StartError::EmptySecret {
        variable,
        secret: secret.clone(),
    })
}
