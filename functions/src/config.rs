//! The functions' configuration: every variable read once, at start, into a
//! [`FunctionConfig`]. A bad or missing value fails start-up with an error naming the variable.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use gannet_aws::{JobsConfig, QueueUrls};
use gannet_controller::{
    check_settings, FirstSight, IntervalName, Intervals, PreviewSettings, ReceiverFormat,
    ReceiverUrl, RepoSettings, Secret, SettingsError, SettingsField, Supersede,
};
use gannet_domain::ports::QueueName;
use gannet_domain::{GoDuration, RepoId};
use gannet_sdk::jobs::JobRoles;
use gannet_sdk::plugin::Plugins;
use gannet_sdk::previews::Previews;
use gannet_sdk::registry::{Installation, Registry, RuntimeInfo};
use serde::de::DeserializeOwned;
use serde::Deserialize;

pub const TABLE: &str = "GANNET_TABLE";
pub const QUEUES: &str = "GANNET_QUEUES";
pub const REPOS: &str = "GANNET_REPOS";
pub const WEBHOOK_SECRET_ARN: &str = "GANNET_WEBHOOK_SECRET_ARN";
pub const WEBHOOK_SECRET: &str = "GANNET_WEBHOOK_SECRET";
pub const GITHUB_SECRET_ARN: &str = "GANNET_GITHUB_SECRET_ARN";
pub const GITHUB_API_URL: &str = "GANNET_GITHUB_API_URL";
/// The console's root as people reach it (an https URL); plan previews' check runs link
/// there. Unset: the runs link nowhere. Read by the drift function, which writes them.
pub const CONSOLE_URL: &str = "GANNET_CONSOLE_URL";
/// The SSM `SecureString` parameter or Secrets Manager secret holding gannet's private key for
/// sealed secrets (PEM); unset: apps cannot seal secrets. Read by the stage, drift and api
/// functions only.
pub const SEALING_KEY_ARN: &str = "GANNET_SEALING_KEY_ARN";
pub const PLUGINS: &str = "GANNET_PLUGINS";
pub const POLL_INTERVAL: &str = "GANNET_POLL_INTERVAL";
pub const RESUME_INTERVAL: &str = "GANNET_RESUME_INTERVAL";
pub const DRIFT_INTERVAL: &str = "GANNET_DRIFT_INTERVAL";
pub const RECEIVERS: &str = "GANNET_RECEIVERS";
/// The EventBridge bus (name or ARN) the notify function puts every event on; unset: none.
pub const EVENT_BUS: &str = "GANNET_EVENT_BUS";
pub const CALLER_NAMES: &str = "GANNET_CALLER_NAMES";
/// The HTTP API (its id) and the account whose events the api function answers (both, or
/// neither; the api function needs both).
pub const API_ID: &str = "GANNET_API_ID";
pub const ACCOUNT_ID: &str = "GANNET_ACCOUNT_ID";
/// The function (name or ARN) the api function asks for `apps diff` (the drift function).
pub const DIFF_FUNCTION: &str = "GANNET_DIFF_FUNCTION";
/// The job runner's CodeBuild project, S3 bucket and log group (all three, or none).
pub const JOBS_PROJECT: &str = "GANNET_JOBS_PROJECT";
pub const JOBS_BUCKET: &str = "GANNET_JOBS_BUCKET";
pub const JOBS_LOG_GROUP: &str = "GANNET_JOBS_LOG_GROUP";
pub const REGION: &str = "AWS_REGION";
pub const ENDPOINT: &str = "AWS_ENDPOINT_URL";

/// Where local git keeps clones and checked-out trees (Lambda can write only under `/tmp`).
pub const DEFAULT_GIT_CACHE: &str = "/tmp/gannet-git";

/// Where a step's private copy of the checkout, with its sealed secrets opened, lives
/// (wiped when the function starts).
pub const DEFAULT_SEALED_DIR: &str = "/tmp/gannet-sealed";

/// A variable is missing or holds a value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{name} is not set")]
    Missing { name: &'static str },
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    /// Refused by the check both runtimes run; it names the variable.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// Where a secret is kept, told apart by its ARN's service. Either store holds the value as
/// a plain string (the webhook secret) or as JSON (the GitHub credentials).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretArn {
    /// A Secrets Manager secret: `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>`,
    /// read with `GetSecretValue`.
    SecretsManager(String),
    /// An SSM parameter (a `SecureString`, or a `String`):
    /// `arn:<partition>:ssm:<region>:<account>:parameter/<name>`, read with `GetParameter`
    /// and decryption.
    SsmParameter(String),
}

impl SecretArn {
    /// Reads `arn`; the error says what was expected.
    pub fn parse(arn: &str) -> Result<Self, String> {
        let parts: Vec<&str> = arn.trim().splitn(6, ':').collect();
        let stored = match parts[..] {
            ["arn", partition, service, region, account, resource]
                if partition.starts_with("aws") && !region.is_empty() && !account.is_empty() =>
            {
                let named = |prefix: &str| {
                    resource
                        .strip_prefix(prefix)
                        .is_some_and(|name| !name.is_empty())
                };
                match service {
                    "secretsmanager" if named("secret:") => {
                        Some(Self::SecretsManager(arn.trim().to_owned()))
                    }
                    "ssm" if named("parameter/") => Some(Self::SsmParameter(arn.trim().to_owned())),
                    _ => None,
                }
            }
            _ => None,
        };
        stored.ok_or_else(|| {
            // A value that is no ARN at all may be the secret itself, pasted in the wrong
            // place: it is not repeated.
            let shown = arn.trim();
            let given = if shown.starts_with("arn:")
                && shown.len() <= 2048
                && !shown.chars().any(char::is_whitespace)
            {
                format!("{shown:?}")
            } else {
                format!(
                    "the value ({} characters, not shown: it is not an ARN and may be the secret itself)",
                    shown.chars().count()
                )
            };
            format!(
                "{given} is neither a Secrets Manager secret ARN \
                 (arn:aws:secretsmanager:<region>:<account>:secret:<name>) nor an SSM parameter ARN \
                 (arn:aws:ssm:<region>:<account>:parameter/<name>)"
            )
        })
    }
}

impl fmt::Display for SecretArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SecretsManager(arn) => write!(f, "Secrets Manager secret {arn}"),
            Self::SsmParameter(arn) => write!(f, "SSM parameter {arn}"),
        }
    }
}

/// A notification receiver as `GANNET_RECEIVERS` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    pub name: String,
    pub target: ReceiverTarget,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverTarget {
    /// CloudEvents to this URL.
    CloudEvents(Secret),
    /// A Slack incoming webhook whose URL is kept in this secret (read by the notify function
    /// when it starts).
    Slack(SecretArn),
}

/// Where the webhook secret comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookSecret {
    /// A Secrets Manager secret or SSM parameter holding the secret as a plain string.
    Arn(SecretArn),
    /// The value itself (local runs).
    Value(Secret),
}

/// The GitHub API settings, for repositories given by `"github"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GithubConfig {
    /// A Secrets Manager secret or SSM parameter holding `{"token":...}` or
    /// `{"appId":...,"installationId":...,"privateKey":...}`.
    pub secret_arn: Option<SecretArn>,
    /// The API's base URI (GitHub Enterprise); `None` for `https://api.github.com`.
    pub api_url: Option<String>,
}

/// The stack's HTTP API: the only sender whose events the api function answers. The event's
/// `requestContext.apiId` and `accountId` must be these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpApiSource {
    /// API Gateway's id for the API (lower-case letters and digits).
    pub api_id: String,
    /// The 12-digit AWS account the API is in.
    pub account_id: String,
}

impl HttpApiSource {
    /// Reads the two values; the error names the variable and says what was expected.
    pub fn parse(api_id: &str, account_id: &str) -> Result<Self, ConfigError> {
        let api_id = api_id.trim();
        if api_id.len() > 64
            || !api_id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(invalid(
                API_ID,
                format!(
                    "{:?} is not an API Gateway API id (lower-case letters and digits, such as a1b2c3d4e5)",
                    gannet_domain::report::cut(api_id, 80)
                ),
            ));
        }
        let account_id = account_id.trim();
        if account_id.len() != 12 || !account_id.chars().all(|c| c.is_ascii_digit()) {
            return Err(invalid(
                ACCOUNT_ID,
                format!(
                    "{:?} is not an AWS account id (12 digits)",
                    gannet_domain::report::cut(account_id, 80)
                ),
            ));
        }
        Ok(Self {
            api_id: api_id.to_owned(),
            account_id: account_id.to_owned(),
        })
    }
}

/// Everything a function needs to know, read from the environment once.
#[derive(Clone, Debug)]
pub struct FunctionConfig {
    pub region: String,
    /// Another endpoint for every AWS API (`AWS_ENDPOINT_URL`; moto in tests).
    pub endpoint: Option<String>,
    pub table: String,
    pub queues: BTreeMap<QueueName, QueueUrls>,
    /// Each entry has `github` (read through the GitHub API) or `url` (read with local git).
    pub repos: Vec<RepoSettings>,
    pub webhook_secret: Option<WebhookSecret>,
    pub github: GithubConfig,
    /// Where gannet's private key for sealed secrets is kept (read by the stage, drift and
    /// api functions when they start); `None`: apps cannot seal secrets.
    pub sealing_key: Option<SecretArn>,
    /// The function's plugins, built from their settings in `GANNET_PLUGINS` (the same map as
    /// gannet.yaml's `plugins:`); none in a function that builds none (the variable is not read).
    pub plugins: Plugins,
    /// The plugins plan previews read with, built from the deploy targets' `planPreview`
    /// credentials in the same settings (only the drift function's controller gets them).
    pub previews: Previews,
    /// Where plan previews' check runs link (`GANNET_CONSOLE_URL`, without a trailing `/`).
    pub console_url: Option<String>,
    pub intervals: Intervals,
    pub receivers: Vec<ReceiverConfig>,
    /// The EventBridge bus that gets every event.
    pub event_bus: Option<String>,
    /// The function that reads live state for `apps diff` (the api function's).
    pub diff_function: Option<String>,
    /// People's names (and roles) for IAM principal ARNs (or ARN prefixes ending in `*`), for
    /// the API.
    pub caller_names: BTreeMap<String, gannet_aws::CallerEntry>,
    /// The HTTP API whose events the api function answers; `None` where it is not set (the
    /// api function then refuses to start).
    pub http_api: Option<HttpApiSource>,
    /// Where stages run long commands (CodeBuild); `None` when the stack has no job runner.
    pub jobs: Option<JobsConfig>,
    /// Local git's cache directory.
    pub git_cache: PathBuf,
    /// Where steps' private copies with sealed secrets opened live.
    pub sealed_dir: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    queue: String,
    dead_letter: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepo {
    id: String,
    github: Option<String>,
    url: Option<String>,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    supersede: RawSupersede,
    #[serde(default, rename = "onFirstSight")]
    on_first_sight: FirstSight,
    #[serde(default, rename = "planPreview")]
    plan_preview: PreviewSettings,
}

fn default_branch() -> String {
    "main".to_owned()
}

#[derive(Deserialize, Default)]
enum RawSupersede {
    #[default]
    #[serde(rename = "never")]
    Never,
    #[serde(rename = "olderPending")]
    OlderPending,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceiver {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    slack: Option<RawSlack>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSlack {
    /// The Secrets Manager secret or SSM parameter holding the incoming webhook's URL.
    url_secret_arn: String,
}

/// Parses `text` as JSON into `T`; errors give the path inside the value.
fn json<T: DeserializeOwned>(name: &'static str, text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path == "?" {
            invalid(name, inner.to_string())
        } else {
            invalid(name, format!("{path}: {inner}"))
        }
    })
}

impl FunctionConfig {
    /// Reads the process environment; `plugins` builds the function's plugins (`None`: it has
    /// none).
    pub fn from_env(plugins: Option<&Registry>) -> Result<Self, ConfigError> {
        Self::from_lookup(&|name| std::env::var(name).ok(), plugins)
    }

    /// Reads the variables through `env` (tests give a map).
    pub fn from_lookup(
        env: &dyn Fn(&str) -> Option<String>,
        plugins: Option<&Registry>,
    ) -> Result<Self, ConfigError> {
        let get = |name: &'static str| env(name).filter(|v| !v.trim().is_empty());
        let required = |name: &'static str| get(name).ok_or(ConfigError::Missing { name });

        let region = get(REGION)
            .or_else(|| get("AWS_DEFAULT_REGION"))
            .ok_or(ConfigError::Missing { name: REGION })?;
        let table = required(TABLE)?;
        let queues = queues(&required(QUEUES)?)?;
        let repos = repos(&required(REPOS)?)?;
        let secret_arn = |name: &'static str| {
            get(name)
                .map(|arn| SecretArn::parse(&arn).map_err(|message| invalid(name, message)))
                .transpose()
        };
        let webhook_secret = match (secret_arn(WEBHOOK_SECRET_ARN)?, env(WEBHOOK_SECRET)) {
            (Some(arn), _) => Some(WebhookSecret::Arn(arn)),
            (None, Some(value)) if !value.is_empty() => {
                Some(WebhookSecret::Value(Secret::new(value)))
            }
            _ => None,
        };
        let github = GithubConfig {
            secret_arn: secret_arn(GITHUB_SECRET_ARN)?,
            api_url: get(GITHUB_API_URL),
        };
        let sealing_key = secret_arn(SEALING_KEY_ARN)?;
        // The GitHub token goes there.
        if let Some(url) = &github.api_url {
            if let Err(why) = gannet_sdk::targets::credentialed_url(url) {
                return Err(invalid(
                    GITHUB_API_URL,
                    format!(
                        "{:?} {why}; for example https://github.example.com/api/v3",
                        gannet_domain::report::redact_urls(url)
                    ),
                ));
            }
        }
        let defaults = Intervals::default();
        let intervals = Intervals {
            poll: interval(&get, POLL_INTERVAL, defaults.poll)?,
            resume: interval(&get, RESUME_INTERVAL, defaults.resume)?,
            drift: interval(&get, DRIFT_INTERVAL, defaults.drift)?,
        };
        let receivers = match get(RECEIVERS) {
            Some(text) => json::<Vec<RawReceiver>>(RECEIVERS, &text)?
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    let invalid = |message: String| invalid(RECEIVERS, format!("[{i}]: {message}"));
                    let target = match (r.url, r.slack) {
                        (Some(url), None) => {
                            ReceiverTarget::CloudEvents(Secret::new(url.trim().to_owned()))
                        }
                        (None, Some(slack)) => ReceiverTarget::Slack(
                            SecretArn::parse(&slack.url_secret_arn)
                                .map_err(|m| invalid(format!("slack.urlSecretArn: {m}")))?,
                        ),
                        _ => return Err(invalid("give url or slack, one of them".into())),
                    };
                    Ok(ReceiverConfig {
                        name: r.name,
                        target,
                    })
                })
                .collect::<Result<_, ConfigError>>()?,
            None => Vec::new(),
        };
        // A Slack receiver's URL is in its secret, read when the notify function starts.
        let receiver_urls: Vec<ReceiverUrl> = receivers
            .iter()
            .enumerate()
            .filter_map(|(index, r)| match &r.target {
                ReceiverTarget::CloudEvents(url) => Some(ReceiverUrl {
                    index,
                    format: ReceiverFormat::CloudEvents,
                    url: url.expose(),
                }),
                ReceiverTarget::Slack(_) => None,
            })
            .collect();
        check_settings(&repos, &intervals, &receiver_urls, &env_place)?;
        let (plugins, previews) = match plugins {
            Some(registry) => build_plugins(registry, get(PLUGINS).as_deref().unwrap_or("{}"))?,
            None => (Plugins::default(), Previews::default()),
        };
        let console_url = get(CONSOLE_URL).map(|url| console_url(&url)).transpose()?;
        let caller_names = match get(CALLER_NAMES) {
            Some(text) => json::<BTreeMap<String, gannet_aws::CallerEntry>>(CALLER_NAMES, &text)?,
            None => BTreeMap::new(),
        };
        let http_api = match (get(API_ID), get(ACCOUNT_ID)) {
            (Some(api_id), Some(account_id)) => Some(HttpApiSource::parse(&api_id, &account_id)?),
            (None, None) => None,
            (api_id, _) => {
                let (missing, other) = if api_id.is_none() {
                    (API_ID, ACCOUNT_ID)
                } else {
                    (ACCOUNT_ID, API_ID)
                };
                return Err(invalid(
                    missing,
                    format!("is not set, but {other} is: set both, or neither"),
                ));
            }
        };
        let jobs = match (get(JOBS_PROJECT), get(JOBS_BUCKET), get(JOBS_LOG_GROUP)) {
            (Some(project), Some(bucket), Some(log_group)) => Some(JobsConfig {
                project,
                bucket,
                log_group,
            }),
            (None, None, None) => None,
            (project, bucket, _) => {
                let missing = if project.is_none() {
                    JOBS_PROJECT
                } else if bucket.is_none() {
                    JOBS_BUCKET
                } else {
                    JOBS_LOG_GROUP
                };
                return Err(invalid(
                    missing,
                    format!(
                        "is not set, but the other job runner settings are: set all of \
                         {JOBS_PROJECT}, {JOBS_BUCKET} and {JOBS_LOG_GROUP}, or none"
                    ),
                ));
            }
        };
        Ok(Self {
            region,
            endpoint: get(ENDPOINT),
            table,
            queues,
            repos,
            webhook_secret,
            github,
            sealing_key,
            plugins,
            previews,
            console_url,
            intervals,
            receivers,
            event_bus: get(EVENT_BUS),
            diff_function: get(DIFF_FUNCTION),
            caller_names,
            http_api,
            jobs,
            git_cache: PathBuf::from(DEFAULT_GIT_CACHE),
            sealed_dir: PathBuf::from(DEFAULT_SEALED_DIR),
        })
    }
}

fn queues(text: &str) -> Result<BTreeMap<QueueName, QueueUrls>, ConfigError> {
    let raw: BTreeMap<String, RawQueue> = json(QUEUES, text)?;
    let mut queues = BTreeMap::new();
    for (name, urls) in raw {
        match QueueName::ALL.into_iter().find(|q| q.as_str() == name) {
            Some(queue) => {
                queues.insert(
                    queue,
                    QueueUrls {
                        queue: urls.queue,
                        dead_letter: urls.dead_letter,
                    },
                );
            }
            None => {
                let known: Vec<&str> = QueueName::ALL.iter().map(|q| q.as_str()).collect();
                return Err(invalid(
                    QUEUES,
                    format!("unknown queue {name:?} (known: {})", known.join(", ")),
                ));
            }
        }
    }
    Ok(queues)
}

fn repos(text: &str) -> Result<Vec<RepoSettings>, ConfigError> {
    let raw: Vec<RawRepo> = json(REPOS, text)?;
    let mut repos: Vec<RepoSettings> = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let at = |field: &str, message: String| invalid(REPOS, format!("[{i}].{field}: {message}"));
        let id = RepoId::parse(&r.id).map_err(|e| at("id", e.to_string()))?;
        // Listed twice and `owner/name`: the shared check, once every entry is read.
        match (&r.github, &r.url) {
            (Some(_), None) => {}
            (None, Some(url)) if url.trim().is_empty() => {
                return Err(at("url", "must not be empty".into()));
            }
            (None, Some(_)) => {}
            _ => {
                return Err(invalid(
                    REPOS,
                    format!("[{i}]: give exactly one of github or url"),
                ))
            }
        }
        repos.push(RepoSettings {
            id,
            branch: r.branch,
            github: r.github,
            url: r.url,
            supersede: match r.supersede {
                RawSupersede::Never => Supersede::Never,
                RawSupersede::OlderPending => Supersede::OlderPending,
            },
            on_first_sight: r.on_first_sight,
            plan_preview: r.plan_preview,
        });
    }
    Ok(repos)
}

/// The registry's plugins, each built from its entry in `text` (`{"<plugin>": {settings}}`),
/// and the plugins plan previews read with (from the targets' `planPreview`).
fn build_plugins(registry: &Registry, text: &str) -> Result<(Plugins, Previews), ConfigError> {
    let settings: serde_json::Map<String, serde_json::Value> = json(PLUGINS, text)?;
    let runtime = RuntimeInfo {
        // Scripts never see the variable that may hold the webhook secret.
        secret_env: vec![WEBHOOK_SECRET.to_owned()],
        // Jobs are CodeBuild builds, each of which may run as its deploy target's role.
        job_roles: JobRoles::PerJob,
        installation: Installation::Functions,
    };
    registry
        .build_with_previews(&settings, "", &runtime)
        .map_err(|e| invalid(PLUGINS, e.to_string()))
}

/// `GANNET_CONSOLE_URL`: an https URL (or http to this machine) with no credentials and no
/// query, as every URL gannet gives people; its trailing `/` dropped.
fn console_url(url: &str) -> Result<String, ConfigError> {
    let url = url.trim();
    let parsed = gannet_sdk::targets::credentialed_url(url).map_err(|why| {
        invalid(
            CONSOLE_URL,
            format!(
                "{:?} {why}; for example https://gannet.example.com",
                gannet_domain::report::redact_urls(url)
            ),
        )
    })?;
    if parsed.query().is_some() {
        return Err(invalid(
            CONSOLE_URL,
            format!("{url:?} has a ?query; give the console's root"),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

fn interval(
    get: &dyn Fn(&'static str) -> Option<String>,
    name: &'static str,
    default: GoDuration,
) -> Result<GoDuration, ConfigError> {
    let Some(text) = get(name) else {
        return Ok(default);
    };
    // How short it may be: the shared check.
    GoDuration::parse(text.trim()).map_err(|e| invalid(name, e.to_string()))
}

/// Where the environment holds a setting both runtimes take (the shared check's errors begin
/// with it).
fn env_place(field: SettingsField) -> String {
    match field {
        SettingsField::Repo(i) => format!("{REPOS}[{i}]"),
        SettingsField::RepoId(i) => format!("{REPOS}: [{i}].id"),
        SettingsField::RepoGithub(i) => format!("{REPOS}: [{i}].github"),
        SettingsField::RepoForkAuthors(i) => format!("{REPOS}: [{i}].planPreview.forks.authors"),
        SettingsField::Interval(IntervalName::Poll) => POLL_INTERVAL.into(),
        SettingsField::Interval(IntervalName::Resume) => RESUME_INTERVAL.into(),
        SettingsField::Interval(IntervalName::Drift) => DRIFT_INTERVAL.into(),
        SettingsField::ReceiverUrl(i, ReceiverFormat::CloudEvents) => {
            format!("{RECEIVERS}: [{i}].url")
        }
        SettingsField::ReceiverUrl(i, ReceiverFormat::Slack) => {
            format!("{RECEIVERS}: [{i}].slack.urlSecretArn")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUES_JSON: &str = r#"{"trigger":{"queue":"https://q/t","dead_letter":"https://q/t-dlq"},"stage":{"queue":"https://q/s","dead_letter":"https://q/s-dlq"},"drift":{"queue":"https://q/d","dead_letter":"https://q/d-dlq"}}"#;

    /// The config from the base variables with `changes` applied (`None` unsets).
    fn check(changes: &[(&str, Option<&str>)]) -> Result<FunctionConfig, String> {
        check_with(changes, Some(&gannet_plugins::registry()))
    }

    /// [`check`] for a function that builds `plugins` (`None`: none).
    fn check_with(
        changes: &[(&str, Option<&str>)],
        plugins: Option<&Registry>,
    ) -> Result<FunctionConfig, String> {
        let mut env: BTreeMap<String, String> = [
            (REGION, "us-east-1"),
            (TABLE, "gannet"),
            (QUEUES, QUEUES_JSON),
            (REPOS, r#"[{"id":"shop","github":"acme/shop"}]"#),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (name, value) in changes {
            match value {
                Some(v) => env.insert((*name).to_owned(), (*v).to_owned()),
                None => env.remove(*name),
            };
        }
        FunctionConfig::from_lookup(&|name| env.get(name).cloned(), plugins)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_function_builds_its_own_plugins_from_the_same_settings() {
        let settings = r#"{"lambda":{"deployTargets":[{"name":"prod","region":"us-east-1","roleArn":"arn:aws:iam::1:role/deployer"}]}}"#;
        let whole = check(&[(PLUGINS, Some(settings))]).unwrap();
        let planning = check_with(
            &[(PLUGINS, Some(settings))],
            Some(&gannet_plugins::planning()),
        );
        assert_eq!(
            format!("{:?}", planning.unwrap().plugins),
            format!("{:?}", whole.plugins)
        );
        let none = check_with(&[(PLUGINS, Some(settings))], None).unwrap();
        assert_eq!(none.plugins.iter().count(), 0);

        // The planning faces check the settings as the whole plugins do; a function without
        // plugins does not read them.
        let bad = r#"{"lambda":{"deployTargets":[{"name":"prod","region":"Mars"}]}}"#;
        let whole = check(&[(PLUGINS, Some(bad))]).unwrap_err();
        assert!(
            whole.starts_with("GANNET_PLUGINS: lambda.deployTargets[0]"),
            "{whole}"
        );
        let planning = check_with(&[(PLUGINS, Some(bad))], Some(&gannet_plugins::planning()));
        assert_eq!(planning.err(), Some(whole));
        assert!(check_with(&[(PLUGINS, Some("{"))], None).is_ok());
    }

    #[test]
    fn preview_plugins_are_built_from_the_targets_plan_preview_and_the_console_url_read() {
        let settings = r#"{"lambda":{"deployTargets":[{"name":"prod","region":"us-east-1","roleArn":"arn:aws:iam::1:role/deployer","planPreview":{"roleArn":"arn:aws:iam::1:role/reader"}},{"name":"dev","region":"us-east-1"}]}}"#;
        let c = check(&[
            (PLUGINS, Some(settings)),
            (CONSOLE_URL, Some("https://gannet.example.com/")),
        ])
        .unwrap();
        let debug = format!("{:?}", c.previews);
        assert!(
            debug.contains(r#"credentialed: ["prod"]"#) && debug.contains(r#""dev""#),
            "{debug}"
        );
        assert_eq!(c.console_url.as_deref(), Some("https://gannet.example.com"));
        assert_eq!(check(&[]).unwrap().console_url, None);

        let cases: &[(&str, &str)] = &[
            (
                "http://gannet.example.com",
                "GANNET_CONSOLE_URL: \"http://gannet.example.com\" must be an https:// URL",
            ),
            (
                "https://gannet.example.com/?x=1",
                "GANNET_CONSOLE_URL: \"https://gannet.example.com/?x=1\" has a ?query",
            ),
            (
                "gannet.example.com",
                "GANNET_CONSOLE_URL: \"gannet.example.com\" is not a URL",
            ),
        ];
        for (url, want) in cases {
            let err = check(&[(CONSOLE_URL, Some(url))]).err().unwrap_or_default();
            assert!(err.starts_with(want), "{url}: {err}");
        }
        let bad = r#"{"lambda":{"deployTargets":[{"name":"a","region":"us-east-1","planPreview":{"region":"eu-west-1"}}]}}"#;
        let err = check(&[(PLUGINS, Some(bad))]).unwrap_err();
        assert!(
            err.starts_with("GANNET_PLUGINS: lambda.deployTargets[0].planPreview.region"),
            "{err}"
        );
    }

    #[test]
    fn the_contract_example_reads() {
        let c = check(&[
            (REPOS, Some(r#"[{"id":"shop","github":"acme/shop","branch":"main","supersede":"olderPending"},{"id":"local","url":"/srv/repo"}]"#)),
            (WEBHOOK_SECRET_ARN, Some("arn:aws:secretsmanager:us-east-1:1:secret:hook")),
            (PLUGINS, Some(r#"{"lambda":{"deployTargets":[{"name":"prod","region":"us-east-1","roleArn":"arn:aws:iam::1:role/deployer","alias":"Live"}]},"ecs":{"deployTargets":[]}}"#)),
            (RESUME_INTERVAL, Some("10s")),
            (
                RECEIVERS,
                Some(
                    r#"[{"name":"ops","url":"https://hooks.example.com/x"},
                        {"name":"team","slack":{"urlSecretArn":"arn:aws:ssm:us-east-1:1:parameter/gannet/slack"}}]"#,
                ),
            ),
            (ENDPOINT, Some("http://127.0.0.1:5000")),
        ])
        .unwrap();
        assert_eq!(c.table, "gannet");
        assert_eq!(
            c.queues.keys().copied().collect::<Vec<_>>(),
            [QueueName::Trigger, QueueName::Stage, QueueName::Drift]
        );
        assert_eq!(c.queues[&QueueName::Stage].dead_letter, "https://q/s-dlq");
        assert_eq!(c.repos[0].supersede, Supersede::OlderPending);
        assert_eq!(c.repos[1].url.as_deref(), Some("/srv/repo"));
        assert_eq!(c.repos[1].branch, "main");
        assert_eq!(
            c.webhook_secret,
            Some(WebhookSecret::Arn(SecretArn::SecretsManager(
                "arn:aws:secretsmanager:us-east-1:1:secret:hook".into()
            )))
        );
        assert_eq!(
            format!("{:?}", c.plugins),
            format!("{:?}", gannet_plugins::registry().names()),
            "every compiled-in plugin is built"
        );
        assert_eq!(c.intervals.resume, GoDuration::from_secs(10));
        assert_eq!(c.intervals.poll, GoDuration::from_secs(60));
        assert_eq!(c.receivers[0].name, "ops");
        assert_eq!(
            c.receivers[1].target,
            ReceiverTarget::Slack(SecretArn::SsmParameter(
                "arn:aws:ssm:us-east-1:1:parameter/gannet/slack".into()
            ))
        );
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
    }

    #[test]
    fn a_plain_webhook_secret_is_taken_and_never_printed() {
        let c = check(&[(WEBHOOK_SECRET, Some("s3cret"))]).unwrap();
        assert!(
            matches!(&c.webhook_secret, Some(WebhookSecret::Value(s)) if s.expose() == "s3cret")
        );
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn a_secret_is_read_from_secrets_manager_or_ssm_as_its_arn_says() {
        use SecretArn::{SecretsManager, SsmParameter};
        let sm = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gannet/github-AbCdEf";
        let ssm = "arn:aws:ssm:us-east-1:123456789012:parameter/gannet/github";
        let ssm_flat = "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/hook";
        let cases: &[(&str, Option<SecretArn>)] = &[
            (sm, Some(SecretsManager(sm.into()))),
            (ssm, Some(SsmParameter(ssm.into()))),
            (ssm_flat, Some(SsmParameter(ssm_flat.into()))),
            ("arn:aws:ssm:us-east-1:123456789012:parameter/", None),
            ("arn:aws:ssm:us-east-1:123456789012:document/gannet", None),
            (
                "arn:aws:secretsmanager:us-east-1:123456789012:parameter/x",
                None,
            ),
            ("arn:aws:kms:us-east-1:123456789012:key/1234", None),
            ("arn:aws:ssm:::parameter/gannet", None),
            ("gannet/github", None),
        ];
        for (variable, read) in [
            (
                GITHUB_SECRET_ARN,
                (|c: FunctionConfig| c.github.secret_arn) as fn(_) -> _,
            ),
            (WEBHOOK_SECRET_ARN, |c: FunctionConfig| {
                match c.webhook_secret {
                    Some(WebhookSecret::Arn(arn)) => Some(arn),
                    _ => None,
                }
            }),
            (SEALING_KEY_ARN, |c: FunctionConfig| c.sealing_key),
        ] {
            for (arn, want) in cases {
                match (check(&[(variable, Some(arn))]), want) {
                    (Ok(c), Some(want)) => assert_eq!(read(c).as_ref(), Some(want), "{arn}"),
                    (Err(err), None) if arn.starts_with("arn:") => assert!(
                        err.starts_with(&format!(
                            "{variable}: {arn:?} is neither a Secrets Manager secret ARN"
                        )),
                        "{arn}: {err}"
                    ),
                    (Err(err), None) => assert!(
                        err.starts_with(&format!(
                            "{variable}: the value ({} characters, not shown: it is not an ARN",
                            arn.len()
                        )) && err.contains("is neither a Secrets Manager secret ARN")
                            && !err.contains(arn),
                        "{arn}: {err}"
                    ),
                    (got, _) => panic!("{variable}={arn}: {:?}", got.map(read)),
                }
            }
        }
    }

    #[test]
    fn the_sealing_key_is_optional_and_a_bad_arn_names_the_variable() {
        let unset = check(&[]).unwrap();
        assert_eq!(unset.sealing_key, None);
        assert_eq!(unset.sealed_dir, PathBuf::from("/tmp/gannet-sealed"));
        // Blank is unset, as the template's empty default gives it.
        assert_eq!(
            check(&[(SEALING_KEY_ARN, Some("  "))]).unwrap().sealing_key,
            None
        );
        let arn = "arn:aws:ssm:eu-west-1:123456789012:parameter/gannet/sealing-key";
        assert_eq!(
            check(&[(SEALING_KEY_ARN, Some(arn))]).unwrap().sealing_key,
            Some(SecretArn::SsmParameter(arn.into()))
        );
        // A PEM pasted where the ARN goes is refused, and the error does not repeat it.
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----";
        let err = check(&[(SEALING_KEY_ARN, Some(pem))]).unwrap_err();
        assert!(
            err.starts_with("GANNET_SEALING_KEY_ARN: ")
                && err.contains("is neither a Secrets Manager secret ARN"),
            "{err}"
        );
        assert!(!err.contains("MIIEvQ"), "the value is not repeated: {err}");
    }

    #[test]
    fn the_http_api_is_read_as_both_of_its_ids_or_neither() {
        let both = [
            (API_ID, Some("a1b2c3d4e5")),
            (ACCOUNT_ID, Some("123456789012")),
        ];
        assert_eq!(
            check(&both).unwrap().http_api,
            Some(HttpApiSource {
                api_id: "a1b2c3d4e5".into(),
                account_id: "123456789012".into()
            })
        );
        assert_eq!(check(&[]).unwrap().http_api, None);
        type Env<'a> = &'a [(&'a str, Option<&'a str>)];
        let cases: &[(Env, &str)] = &[
            (
                &[(API_ID, Some("a1b2c3d4e5"))],
                "GANNET_ACCOUNT_ID: is not set, but GANNET_API_ID is: set both, or neither",
            ),
            (
                &[(ACCOUNT_ID, Some("123456789012"))],
                "GANNET_API_ID: is not set, but GANNET_ACCOUNT_ID is",
            ),
            (
                &[
                    (API_ID, Some("arn:aws:execute-api:x")),
                    (ACCOUNT_ID, Some("123456789012")),
                ],
                "GANNET_API_ID: \"arn:aws:execute-api:x\" is not an API Gateway API id",
            ),
            (
                &[(API_ID, Some("a1b2c3d4e5")), (ACCOUNT_ID, Some("1234"))],
                "GANNET_ACCOUNT_ID: \"1234\" is not an AWS account id (12 digits)",
            ),
        ];
        for (env, want) in cases {
            let err = check(env).err().unwrap_or_default();
            assert!(err.starts_with(want), "{env:?}: {err}");
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            (TABLE, None, "GANNET_TABLE is not set"),
            (REGION, None, "AWS_REGION is not set"),
            (QUEUES, Some("{"), "GANNET_QUEUES: EOF while parsing"),
            (
                QUEUES,
                Some(r#"{"trigerr":{"queue":"a","dead_letter":"b"}}"#),
                "GANNET_QUEUES: unknown queue \"trigerr\"",
            ),
            (
                QUEUES,
                Some(r#"{"trigger":{"queue":"a"}}"#),
                "GANNET_QUEUES: trigger: missing field `dead_letter`",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a"}]"#),
                "GANNET_REPOS: [0]: give exactly one of github or url",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","github":"x","url":"/r"}]"#),
                "GANNET_REPOS: [0]: give exactly one",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","github":"acme"}]"#),
                "GANNET_REPOS: [0].github: \"acme\" is not owner/name",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","github":"Acme/Shop"},{"id":"b","github":"acme/shop"}]"#),
                "GANNET_REPOS: [1].github: acme/shop is listed twice (also GANNET_REPOS[0])",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a:b","url":"/r"}]"#),
                "GANNET_REPOS: [0].id: invalid repository id",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","url":"/r"},{"id":"a","url":"/s"}]"#),
                "GANNET_REPOS: [1].id: a is listed twice",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","url":"/r","supersede":"always"}]"#),
                "GANNET_REPOS: [0].supersede: unknown variant `always`",
            ),
            (
                REPOS,
                Some(r#"[{"id":"a","url":"/r","branhc":"x"}]"#),
                "GANNET_REPOS: [0].branhc: unknown field `branhc`",
            ),
            (
                PLUGINS,
                Some(r#"{"lambda":{"deployTargets":[{"name":"a"}]}}"#),
                "GANNET_PLUGINS: lambda.deployTargets[0]: missing field `region`",
            ),
            (
                PLUGINS,
                Some(r#"{"lambda":{"deployTargets":[{"name":"a","region":"Mars"}]}}"#),
                "GANNET_PLUGINS: lambda.deployTargets[0].region: \"Mars\" is not an AWS region",
            ),
            (
                PLUGINS,
                Some(
                    r#"{"lambda":{"deployTargets":[{"name":"a","region":"us-east-1","roleArn":"deployer"}]}}"#,
                ),
                "GANNET_PLUGINS: lambda.deployTargets[0].roleArn",
            ),
            (
                PLUGINS,
                Some(
                    r#"{"lambda":{"deployTargets":[{"name":"a","region":"us-east-1","alias":"123"}]}}"#,
                ),
                "GANNET_PLUGINS: lambda.deployTargets[0].alias",
            ),
            (
                PLUGINS,
                Some(
                    r#"{"lambda":{"deployTargets":[{"name":"a","region":"us-east-1"},{"name":"a","region":"us-east-2"}]}}"#,
                ),
                "GANNET_PLUGINS: lambda.deployTargets[1].name: a is listed twice",
            ),
            (
                PLUGINS,
                Some(r#"{"ecs":{"deployTargets":[{"name":"a"}]}}"#),
                "GANNET_PLUGINS: ecs.deployTargets[0]: missing field `region`",
            ),
            (
                PLUGINS,
                Some(r#"{"ecs":[]}"#),
                "GANNET_PLUGINS: ecs: expected a map of settings, got a list",
            ),
            (
                PLUGINS,
                Some(r#"{"k8s":{}}"#),
                "GANNET_PLUGINS: k8s: no compiled-in plugin is named \"k8s\"",
            ),
            (RESUME_INTERVAL, Some("30"), "GANNET_RESUME_INTERVAL: "),
            (
                POLL_INTERVAL,
                Some("10ms"),
                "GANNET_POLL_INTERVAL: 10ms is too short",
            ),
            (
                DRIFT_INTERVAL,
                Some("50ms"),
                "GANNET_DRIFT_INTERVAL: 50ms is too short (at least 100ms)",
            ),
            (
                RECEIVERS,
                Some(r#"[{"name":"ops","url":"http://hooks.example.com/x"}]"#),
                "GANNET_RECEIVERS: [0].url: \"http://hooks.example.com/x\" must be an https:// URL",
            ),
            (
                GITHUB_API_URL,
                Some("github.example.com"),
                "GANNET_GITHUB_API_URL: \"github.example.com\" is not a URL",
            ),
            (
                GITHUB_API_URL,
                Some("http://localhost:x@github.example.com/api/v3"),
                "GANNET_GITHUB_API_URL: \"http://***@github.example.com/api/v3\" has a user name or password",
            ),
            (
                GITHUB_API_URL,
                Some("http://github.example.com/api/v3"),
                "GANNET_GITHUB_API_URL: \"http://github.example.com/api/v3\" must be an https:// URL",
            ),
            (
                RECEIVERS,
                Some(r#"[{"name":"ops"}]"#),
                "GANNET_RECEIVERS: [0]: give url or slack, one of them",
            ),
            (
                RECEIVERS,
                Some(r#"[{"name":"team","slack":{"urlSecretArn":"https://hooks.slack.com/x"}}]"#),
                // The URL is the secret: not repeated.
                "GANNET_RECEIVERS: [0]: slack.urlSecretArn: the value (25 characters, not shown",
            ),
        ];
        for (name, value, want) in cases {
            let err = check(&[(name, *value)]).err().unwrap_or_default();
            assert!(err.starts_with(want), "{name}={value:?}: {err}");
        }
    }
}
