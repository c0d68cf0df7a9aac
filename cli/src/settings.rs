//! The controller config, `gannet.yaml`: parsed once at start, relative paths resolved
//! against the file's directory, the webhook secret read from the environment variable it
//! names (never from the file).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use gannet_controller::http::Hosts;
use gannet_controller::{
    check_settings, FirstSight, IntervalName, Intervals, PreviewSettings, Receiver, ReceiverFormat,
    ReceiverUrl, RepoSettings, Secret, Settings, SettingsField, Supersede,
};
use gannet_domain::{GoDuration, RepoId};
use gannet_embedded::ApiTokens;
use gannet_git::{Location, RepoSpec};
use gannet_sdk::jobs::JobRoles;
use gannet_sdk::plugin::Plugins;
use gannet_sdk::registry::{Installation, Registry, RuntimeInfo};

use crate::up::{Limits, ServerTls};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_listen")]
    listen: String,
    #[serde(default = "default_state")]
    state: PathBuf,
    #[serde(default)]
    webhook: Option<RawWebhook>,
    #[serde(default)]
    repos: Vec<RawRepo>,
    #[serde(default)]
    intervals: RawIntervals,
    /// Each plugin's settings (`plugins.<name>`), handed to the plugin that owns the name.
    #[serde(default)]
    plugins: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    notifications: RawNotifications,
    #[serde(default = "default_workers")]
    workers: usize,
    #[serde(default)]
    queue: RawQueue,
    #[serde(default)]
    testing: RawTesting,
    #[serde(default)]
    api: RawApi,
    /// How jobs are confined (`jobs.runAs`, `jobs.sandbox`).
    #[serde(default)]
    jobs: crate::jobs::RawJobs,
    /// gannet's key for PipeCD's sealed secrets (`spec.encryption`).
    #[serde(default)]
    secret_management: Option<RawSecretManagement>,
    /// GitHub's API, where plan previews are shown as check runs.
    #[serde(default)]
    github: Option<RawGithub>,
    /// The console's address as people reach it, which check runs link to.
    #[serde(default)]
    console_url: Option<String>,
}

/// `github`: the API and the credentials (a GitHub App's, or a token) that plan previews'
/// check runs are written with, for the repositories with `repos[].github`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawGithub {
    #[serde(default)]
    api_url: Option<String>,
    /// The variable holding the credentials: the JSON the AWS runtime's GitHub secret holds
    /// (`{"appId", "installationId", "privateKey"}` or `{"token"}`).
    secret_env: String,
}

/// Where check runs are written: GitHub's API at `api_url`, as `auth`.
#[derive(Debug)]
pub struct GithubChecksConfig {
    pub api_url: String,
    pub auth: gannet_git::github::GithubAuth,
}

/// `secretManagement`: where gannet's private key for sealed secrets is (never this file).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSecretManagement {
    private_key_file: Option<PathBuf>,
    private_key_env: Option<String>,
}

/// `api`: who may call the JSON API, and the names the server is reached by.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawApi {
    #[serde(default)]
    tokens: Option<RawTokens>,
    #[serde(default)]
    hosts: Vec<String>,
    max_connections: Option<usize>,
    /// Connections one client address may hold at once.
    max_connections_per_peer: Option<usize>,
    /// How long a connection may take to send a request head (new or idle between requests).
    header_timeout: Option<GoDuration>,
    /// HTTPS: the server's certificate and key (PEM).
    tls: Option<RawTls>,
}

/// `api.tls`: the files `gannet up` serves HTTPS with.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTls {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// Where the API tokens are: a file, or an environment variable (never this file).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTokens {
    file: Option<PathBuf>,
    env: Option<String>,
}

/// The largest tokens file read.
const MAX_TOKENS_FILE: u64 = 1024 * 1024;

/// The largest gannet.yaml read.
const MAX_CONFIG_FILE: u64 = 1024 * 1024;

fn default_listen() -> String {
    "127.0.0.1:7070".into()
}
fn default_state() -> PathBuf {
    ".gannet/state.db".into()
}
fn default_workers() -> usize {
    8
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawWebhook {
    secret_env: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRepo {
    id: String,
    path: Option<PathBuf>,
    url: Option<String>,
    #[serde(default = "default_branch")]
    branch: String,
    github: Option<String>,
    #[serde(default)]
    supersede: bool,
    #[serde(default)]
    on_first_sight: FirstSight,
    #[serde(default)]
    plan_preview: PreviewSettings,
}

fn default_branch() -> String {
    "main".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIntervals {
    poll: Option<GoDuration>,
    resume: Option<GoDuration>,
    drift: Option<GoDuration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotifications {
    #[serde(default)]
    receivers: Vec<RawReceiver>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceiver {
    name: String,
    /// CloudEvents to an HTTP endpoint.
    #[serde(default)]
    webhook: Option<RawReceiverWebhook>,
    /// Messages to a Slack incoming webhook, whose URL is a secret.
    #[serde(default)]
    slack: Option<RawReceiverSlack>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawReceiverSlack {
    /// The environment variable holding the incoming webhook's URL.
    url_env: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReceiverWebhook {
    url: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawQueue {
    visibility: Option<GoDuration>,
    max_attempts: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTesting {
    /// Every received message is handled twice, to prove the handlers idempotent.
    #[serde(default)]
    deliver_twice: bool,
}

/// How each message is delivered to its handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Once,
    /// Test mode: every message is handled twice in a row before it is acknowledged.
    Twice,
}

/// Everything `gannet up` needs, validated.
#[derive(Debug)]
pub struct UpConfig {
    pub listen: SocketAddr,
    pub state: PathBuf,
    pub settings: Settings,
    pub repos: Vec<RepoSpec>,
    /// Every compiled-in plugin, built from its `plugins.<name>` settings.
    pub plugins: Plugins,
    /// The API's callers (`api.tokens`); empty when none are configured.
    pub tokens: ApiTokens,
    /// The `Host` names the API answers to.
    pub hosts: Hosts,
    /// Connection limits of the HTTP server.
    pub limits: Limits,
    /// The certificate and key of `api.tls`: the server speaks HTTPS only.
    pub tls: Option<ServerTls>,
    pub workers: usize,
    pub visibility: GoDuration,
    pub max_attempts: u32,
    pub delivery: Delivery,
    /// How jobs are kept from gannet's config, tokens and state.
    pub jobs: crate::jobs::JobsConfig,
    /// The key apps' sealed secrets open with (`secretManagement`).
    pub sealing_key: Option<gannet_sdk::sealed::SealingKey>,
    /// The plugins plan previews read with (the deploy targets' `planPreview`).
    pub previews: gannet_sdk::previews::Previews,
    /// Where plan previews are shown (`github`); `None`: in the console and API only.
    pub github: Option<GithubChecksConfig>,
    /// The console's root as people reach it (`consoleUrl`, by default the listen address).
    pub console_url: String,
}

impl UpConfig {
    /// Reads the config file at `path`; its plugins are built from `registry`.
    pub fn load(path: &Path, registry: &Registry) -> Result<Self, ConfigError> {
        // Every path in the config resolves against the file's directory, made absolute here:
        // git later runs in other directories, where a relative path would mean something else.
        let path = &std::path::absolute(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let size = std::fs::metadata(path)
            .map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?
            .len();
        if size > MAX_CONFIG_FILE {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                message: format!("{size} bytes is too large for a config file (at most 1 MB)"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("/"));
        let invalid = |message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        };
        let cfg = Self::parse(&text, base, &|name| std::env::var(name).ok(), registry)
            .map_err(invalid)?;
        // A repository read in place must be there now, not at the first poll.
        for (i, repo) in cfg.repos.iter().enumerate() {
            if let Location::Path(dir) = &repo.location {
                if !dir.is_dir() {
                    return Err(invalid(format!(
                        "repos[{i}].path: {} does not exist or is not a directory",
                        dir.display()
                    )));
                }
            }
        }
        Ok(cfg)
    }

    /// Parses the config text; `base` resolves relative paths, `env` reads variables, and the
    /// plugins come from `registry`.
    pub fn parse(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        registry: &Registry,
    ) -> Result<Self, String> {
        let raw: RawConfig = gannet_config::yaml::from_str(text).map_err(|e| e.located())?;
        // The same text as a tree: the fields naming secrets, wherever they are (jobs never
        // get them).
        let doc: serde_json::Value =
            gannet_config::yaml::from_str(text).map_err(|e| e.located())?;
        let listen: SocketAddr = raw.listen.parse().map_err(|e| {
            format!(
                "listen: {:?} is not an address such as 127.0.0.1:7070: {e}",
                raw.listen
            )
        })?;
        let tokens = match &raw.api.tokens {
            None => ApiTokens::default(),
            Some(t) => api_tokens(t, base, env)?,
        };
        if !listen.ip().is_loopback() && tokens.is_empty() {
            return Err(format!(
                "listen: {listen} is reachable from other machines, but api.tokens configures no API token, so anyone who reaches the port could deploy, cancel and approve; add tokens (see SECURITY.md) or listen on 127.0.0.1"
            ));
        }
        let hosts = hosts(listen, &raw.api.hosts)?;
        let limits = Limits {
            max_connections: match raw.api.max_connections {
                None => Limits::default().max_connections,
                Some(n) if (1..=65_536).contains(&n) => n,
                Some(n) => {
                    return Err(format!(
                        "api.maxConnections: {n} is out of range (1 to 65536)"
                    ))
                }
            },
            max_connections_per_peer: match raw.api.max_connections_per_peer {
                None => Limits::default().max_connections_per_peer,
                Some(n) if (1..=65_536).contains(&n) => n,
                Some(n) => {
                    return Err(format!(
                        "api.maxConnectionsPerPeer: {n} is out of range (1 to 65536)"
                    ))
                }
            },
            header_timeout: match raw.api.header_timeout {
                None => Limits::default().header_timeout,
                Some(t) if t.as_millis() >= 100 => t.get(),
                Some(t) => {
                    return Err(format!(
                        "api.headerTimeout: {t} is too short (at least 100ms)"
                    ))
                }
            },
        };
        let tls = match &raw.api.tls {
            Some(t) => Some(ServerTls::load(
                &base.join(&t.cert_file),
                &base.join(&t.key_file),
            )?),
            None => None,
        };
        let webhook_secret = match &raw.webhook {
            Some(w) => match env(&w.secret_env) {
                Some(v) if !v.is_empty() => Some(Secret::new(v)),
                _ => {
                    return Err(format!(
                        "webhook.secretEnv: environment variable {} is not set; export the webhook secret there",
                        w.secret_env
                    ))
                }
            },
            None => None,
        };
        let mut repos = Vec::new();
        let mut repo_settings = Vec::new();
        for (i, r) in raw.repos.iter().enumerate() {
            let id = RepoId::parse(&r.id).map_err(|e| format!("repos[{i}].id: {e}"))?;
            let location = match (&r.path, &r.url) {
                (Some(p), None) => Location::Path(base.join(p)),
                (None, Some(u)) => Location::Url(u.clone()),
                _ => return Err(format!("repos[{i}]: give exactly one of path or url")),
            };
            repos.push(RepoSpec {
                id: id.clone(),
                location,
                branch: r.branch.clone(),
            });
            repo_settings.push(RepoSettings {
                id,
                branch: r.branch.clone(),
                github: r.github.clone(),
                url: r.url.clone(),
                supersede: if r.supersede {
                    Supersede::OlderPending
                } else {
                    Supersede::Never
                },
                on_first_sight: r.on_first_sight,
                plan_preview: r.plan_preview.clone(),
            });
        }
        let defaults = Intervals::default();
        let intervals = Intervals {
            poll: raw.intervals.poll.unwrap_or(defaults.poll),
            resume: raw.intervals.resume.unwrap_or(defaults.resume),
            drift: raw.intervals.drift.unwrap_or(defaults.drift),
        };
        let mut receivers = Vec::with_capacity(raw.notifications.receivers.len());
        for (i, r) in raw.notifications.receivers.iter().enumerate() {
            let at = format!("notifications.receivers[{i}]");
            let (url, format) = match (&r.webhook, &r.slack) {
                (Some(w), None) => (w.url.trim().to_owned(), ReceiverFormat::CloudEvents),
                (None, Some(s)) => match env(&s.url_env) {
                    Some(v) if !v.trim().is_empty() => (v.trim().to_owned(), ReceiverFormat::Slack),
                    _ => {
                        return Err(format!(
                            "{at}.slack.urlEnv: environment variable {} is not set; export the Slack incoming webhook's URL there",
                            s.url_env
                        ))
                    }
                },
                _ => return Err(format!("{at}: give webhook or slack, one of them")),
            };
            receivers.push(Receiver {
                name: r.name.clone(),
                url: Secret::new(url),
                format,
            });
        }
        let receiver_urls: Vec<ReceiverUrl> = receivers
            .iter()
            .enumerate()
            .map(|(index, r)| ReceiverUrl {
                index,
                format: r.format,
                url: r.url.expose(),
            })
            .collect();
        check_settings(&repo_settings, &intervals, &receiver_urls, &yaml_place)
            .map_err(|e| e.to_string())?;
        let runtime = RuntimeInfo {
            // Every variable gannet.yaml names for a secret (`webhook.secretEnv`,
            // `api.tokens.env`, a Slack `urlEnv`, `apiKeyEnv`, ...): no script gets them.
            secret_env: crate::jobs::named_in(&doc, "Env").into_iter().collect(),
            // Jobs are local processes: a deploy target's jobRoleArn is refused here, naming it.
            job_roles: JobRoles::Refused,
            installation: Installation::OneProcess,
        };
        let jobs =
            crate::jobs::JobsConfig::parse(&raw.jobs, base, &base.join(&raw.state), &doc, &|| {
                std::fs::read_to_string("/etc/passwd").ok()
            })?;
        let (plugins, previews) = registry
            .build_with_previews(&raw.plugins, "plugins", &runtime)
            .map_err(|e| e.to_string())?;
        let github = match &raw.github {
            Some(g) => Some(github_checks(g, env)?),
            None => None,
        };
        let console_url = match &raw.console_url {
            Some(url) => console_url(url)?,
            None => format!(
                "{}://{listen}",
                if raw.api.tls.is_some() {
                    "https"
                } else {
                    "http"
                }
            ),
        };
        if raw.workers == 0 || raw.workers > 256 {
            return Err(format!(
                "workers: {} is out of range (1 to 256)",
                raw.workers
            ));
        }
        Ok(Self {
            listen,
            state: base.join(raw.state),
            settings: Settings {
                repos: repo_settings,
                webhook_secret,
                intervals,
                receivers,
            },
            repos,
            plugins,
            tokens,
            hosts,
            limits,
            tls,
            workers: raw.workers,
            visibility: raw.queue.visibility.unwrap_or(GoDuration::from_secs(30)),
            max_attempts: raw.queue.max_attempts.unwrap_or(5),
            delivery: if raw.testing.deliver_twice {
                Delivery::Twice
            } else {
                Delivery::Once
            },
            jobs,
            sealing_key: match &raw.secret_management {
                Some(sm) => Some(sealing_key(sm, base, env)?),
                None => None,
            },
            previews,
            github,
            console_url,
        })
    }
}

/// `github`: the API's address and the credentials in `secretEnv`.
fn github_checks(
    g: &RawGithub,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<GithubChecksConfig, String> {
    let api_url = g
        .api_url
        .clone()
        .unwrap_or_else(|| gannet_git::github::DEFAULT_BASE_URI.to_owned());
    // The credential goes there: https, or http to this machine only.
    gannet_sdk::targets::credentialed_url(&api_url)
        .map_err(|why| format!("github.apiUrl: {api_url:?} {why}"))?;
    let Some(json) = env(&g.secret_env).filter(|v| !v.is_empty()) else {
        return Err(format!(
            "github.secretEnv: environment variable {} is not set; export GitHub's credentials there as JSON ({{\"token\": ...}}, or a GitHub App's {{\"appId\", \"installationId\", \"privateKey\"}}: check runs need an App, a token shows previews as commit statuses)",
            g.secret_env
        ));
    };
    let auth = gannet_git::github::GithubAuth::from_secret_json(&json)
        .map_err(|e| format!("github.secretEnv: {}: {e}", g.secret_env))?;
    Ok(GithubChecksConfig { api_url, auth })
}

/// `consoleUrl`: where people open the console; check runs link there. https, or plain
/// http to this machine, as every URL gannet sends to people or services.
fn console_url(url: &str) -> Result<String, String> {
    let parsed = gannet_sdk::targets::credentialed_url(url)
        .map_err(|why| format!("consoleUrl: {url:?} {why}"))?;
    if parsed.query().is_some() {
        return Err(format!("consoleUrl: {url:?} has a ?query; leave it out"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The private key `secretManagement` names: a file only its owner can read, or a variable.
fn sealing_key(
    sm: &RawSecretManagement,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<gannet_sdk::sealed::SealingKey, String> {
    let (at, pem) = match (&sm.private_key_file, &sm.private_key_env) {
        (Some(file), None) => {
            let path = base.join(file);
            let at = format!("secretManagement.privateKeyFile: {}", path.display());
            (at, read_private_file("secretManagement.privateKeyFile", &path)?)
        }
        (None, Some(var)) => (
            format!("secretManagement.privateKeyEnv: {var}"),
            env(var).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                format!("secretManagement.privateKeyEnv: environment variable {var} is not set; export the private key (PEM) there")
            })?,
        ),
        _ => {
            return Err(
                "secretManagement: give privateKeyFile or privateKeyEnv, one of them".to_owned(),
            )
        }
    };
    gannet_sdk::sealed::SealingKey::from_pem(&pem).map_err(|e| format!("{at} {e}"))
}

/// Where gannet.yaml holds a setting both runtimes take (the shared check's errors begin
/// with it).
fn yaml_place(field: SettingsField) -> String {
    match field {
        SettingsField::Repo(i) => format!("repos[{i}]"),
        SettingsField::RepoId(i) => format!("repos[{i}].id"),
        SettingsField::RepoGithub(i) => format!("repos[{i}].github"),
        SettingsField::RepoForkAuthors(i) => format!("repos[{i}].planPreview.forks.authors"),
        SettingsField::Interval(IntervalName::Poll) => "intervals.poll".into(),
        SettingsField::Interval(IntervalName::Resume) => "intervals.resume".into(),
        SettingsField::Interval(IntervalName::Drift) => "intervals.drift".into(),
        SettingsField::ReceiverUrl(i, ReceiverFormat::CloudEvents) => {
            format!("notifications.receivers[{i}].webhook.url")
        }
        SettingsField::ReceiverUrl(i, ReceiverFormat::Slack) => {
            format!("notifications.receivers[{i}].slack.urlEnv")
        }
    }
}

/// The API tokens from the file or the variable `tokens` names.
fn api_tokens(
    tokens: &RawTokens,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ApiTokens, String> {
    let (text, at) = match (&tokens.file, &tokens.env) {
        (Some(file), None) => {
            let path = base.join(file);
            (
                read_private_file("api.tokens.file", &path)?,
                format!("api.tokens.file {}", path.display()),
            )
        }
        (None, Some(var)) => match env(var) {
            Some(text) if !text.trim().is_empty() => (text, format!("api.tokens.env {var}")),
            _ => {
                return Err(format!(
                    "api.tokens.env: environment variable {var} is not set; export the tokens there"
                ))
            }
        },
        _ => return Err("api.tokens: give exactly one of file or env".into()),
    };
    let tokens = ApiTokens::parse(&text).map_err(|e| format!("{at}: {e}"))?;
    if tokens.is_empty() {
        return Err(format!("{at}: lists no token"));
    }
    let plaintext = tokens.plaintext_names();
    if !plaintext.is_empty() {
        tracing::warn!(
            source = %at,
            names = %plaintext.join(", "),
            "API tokens written in plaintext (`token:`): anyone who reads them can use them; write each as `sha256: <hex SHA-256 of the token>` instead (printf %s \"$TOKEN\" | sha256sum)"
        );
    }
    Ok(tokens)
}

/// A file holding a secret (the tokens file, a private key), named by `field`: private to its
/// owner, and not too large.
fn read_private_file(field: &str, path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let at = |message: String| format!("{field}: {}: {message}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| at(e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(at(format!(
            "its group or other users have access to it (mode {mode:03o}); run `chmod 600 {}`",
            path.display()
        )));
    }
    if meta.len() > MAX_TOKENS_FILE {
        return Err(at(format!(
            "{} bytes is too large (at most 1 MB)",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| at(e.to_string()))
}

/// The names the server answers to: its listen address (and `localhost` for a loopback or
/// every-interface address), any IP literal on its port when it listens on every interface,
/// and `extra` (`api.hosts`).
fn hosts(listen: SocketAddr, extra: &[String]) -> Result<Hosts, String> {
    let port = listen.port();
    let mut names = vec![listen.to_string()];
    if listen.ip().is_loopback() || listen.ip().is_unspecified() {
        for name in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ] {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    for (i, host) in extra.iter().enumerate() {
        let host = host.trim().to_ascii_lowercase();
        if host.is_empty() || host.contains(['/', ' ', '@']) {
            return Err(format!(
                "api.hosts[{i}]: {host:?} is not a host name such as gannet.example.com or gannet.example.com:8443"
            ));
        }
        names.push(host);
    }
    Ok(Hosts::Only {
        names,
        ip_port: listen.ip().is_unspecified().then_some(port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UpConfig, String> {
        UpConfig::parse(
            text,
            Path::new("/etc/gannet"),
            &|name| match name {
                "SECRET" => Some("s3cret".to_owned()),
                "PLAIN_SLACK" => Some("http://hooks.slack.example/services/T0/B0/key".to_owned()),
                _ => None,
            },
            &gannet_plugins::registry(),
        )
    }

    #[test]
    fn the_documented_example_parses() {
        let c = parse(
            r#"
listen: 127.0.0.1:7070
state: .gannet/state.db
webhook:
  secretEnv: SECRET
repos:
  - id: demo
    path: ./demo-repo
    branch: main
    github: org/repo
intervals: {poll: 1m, resume: 30s, drift: 1m}
plugins:
  lambda:
    deployTargets:
      - {name: local, region: us-east-1, endpoint: "http://127.0.0.1:5055"}
  ecs:
    deployTargets:
      - {name: prod, region: eu-west-1, roleArn: "arn:aws:iam::123456789012:role/deployer"}
"#,
        )
        .unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:7070");
        assert_eq!(c.state, Path::new("/etc/gannet/.gannet/state.db"));
        assert_eq!(
            c.settings.webhook_secret.as_ref().unwrap().expose(),
            "s3cret"
        );
        assert_eq!(
            c.repos[0].location,
            Location::Path("/etc/gannet/./demo-repo".into())
        );
        assert_eq!(c.settings.intervals.resume, GoDuration::from_secs(30));
        assert_eq!(
            format!("{:?}", c.plugins),
            format!("{:?}", gannet_plugins::registry().names()),
            "every compiled-in plugin is built"
        );
        assert!(
            !format!("{:?}", c.settings).contains("s3cret"),
            "secrets never print"
        );
    }

    #[test]
    fn a_config_file_over_1_mb_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("gannet.yaml");
        std::fs::write(&config, format!("# {}\n", "x".repeat(1024 * 1024))).expect("write");
        let err = UpConfig::load(&config, &gannet_plugins::registry())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is too large for a config file"), "{err}");
    }

    #[test]
    fn a_repository_path_that_does_not_exist_stops_start_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("gannet.yaml");
        std::fs::write(&config, "repos: [{id: a, path: ./no-such-repo}]").expect("write");
        let err = UpConfig::load(&config, &gannet_plugins::registry())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("repos[0].path:") && err.contains("no-such-repo does not exist"),
            "{err}"
        );
        std::fs::create_dir(dir.path().join("no-such-repo")).expect("mkdir");
        assert!(UpConfig::load(&config, &gannet_plugins::registry()).is_ok());
    }

    /// `gannet.yaml` naming a tokens file written with `mode`, parsed from a tempdir.
    fn with_tokens_file(mode: u32) -> (tempfile::TempDir, Result<UpConfig, String>) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tokens.yaml");
        std::fs::write(
            &file,
            format!(
                "- {{name: alice, role: admin, sha256: {}}}\n",
                "ab".repeat(32)
            ),
        )
        .expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let parsed = UpConfig::parse(
            "api: {tokens: {file: tokens.yaml}}",
            dir.path(),
            &|_| None,
            &gannet_plugins::registry(),
        );
        (dir, parsed)
    }

    #[test]
    fn a_tokens_file_its_group_or_others_may_reach_is_refused_with_the_fix() {
        for mode in [0o640, 0o604, 0o660, 0o644, 0o620, 0o610, 0o601, 0o666] {
            let (dir, parsed) = with_tokens_file(mode);
            let err = parsed.err().unwrap_or_default();
            let file = dir.path().join("tokens.yaml").display().to_string();
            assert!(
                err.starts_with(&format!("api.tokens.file: {file}: "))
                    && err.contains(&format!("(mode {mode:03o})"))
                    && err.contains(&format!("chmod 600 {file}")),
                "mode {mode:03o}: {err}"
            );
        }
        for mode in [0o600, 0o400] {
            let (_dir, parsed) = with_tokens_file(mode);
            assert_eq!(parsed.map(|c| c.tokens.len()), Ok(1), "mode {mode:03o}");
        }
    }

    /// What `gannet up` logs while parsing `text` with `vars` set, and the outcome.
    fn logged_while_parsing(
        text: &str,
        vars: &[(&str, &str)],
    ) -> (String, Result<UpConfig, String>) {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("log buffer").extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        };
        let parsed = tracing::subscriber::with_default(subscriber, || {
            UpConfig::parse(
                text,
                Path::new("/etc/gannet"),
                &env,
                &gannet_plugins::registry(),
            )
        });
        let log = String::from_utf8_lossy(&buffer.0.lock().expect("log buffer")).into_owned();
        (log, parsed)
    }

    #[test]
    fn plaintext_tokens_are_warned_about_by_name_never_by_value() {
        const ALICE: &str = "alice-plaintext-token-0123456789";
        const CI: &str = "ci-plaintext-token-0123456789ab";
        let digest = "cd".repeat(32);
        let config = "api: {tokens: {env: GANNET_TOKENS}}";
        let tokens = format!(
            "- {{name: alice, role: admin, token: {ALICE}}}\n- {{name: ci, role: deployer, token: {CI}}}\n- {{name: bob, role: viewer, sha256: {digest}}}\n"
        );
        let (log, parsed) = logged_while_parsing(config, &[("GANNET_TOKENS", &tokens)]);
        assert_eq!(parsed.map(|c| c.tokens.len()), Ok(3));
        assert!(
            log.contains("WARN")
                && log.contains("api.tokens.env GANNET_TOKENS")
                && log.contains("alice, ci")
                && log.contains("sha256:"),
            "{log}"
        );
        assert!(!log.contains("bob"), "bob's entry is a digest: {log}");
        for secret in [ALICE, CI, digest.as_str()] {
            assert!(!log.contains(secret), "a token reached the log: {log}");
        }

        let digests_only = format!("- {{name: bob, role: viewer, sha256: {digest}}}\n");
        let (log, parsed) = logged_while_parsing(config, &[("GANNET_TOKENS", &digests_only)]);
        assert!(parsed.is_ok());
        assert!(!log.contains("plaintext"), "nothing to warn about: {log}");
    }

    #[test]
    fn the_servers_connection_limits_and_tls_files_are_checked_at_start() {
        let c = parse("api: {maxConnectionsPerPeer: 8}").expect("parses");
        assert_eq!(c.limits.max_connections_per_peer, 8);
        assert!(c.tls.is_none());
        assert_eq!(
            parse("{}").expect("parses").limits.max_connections_per_peer,
            64
        );
        let cases = [
            (
                "api: {maxConnectionsPerPeer: 0}",
                "api.maxConnectionsPerPeer: 0 is out of range (1 to 65536)",
            ),
            (
                "api: {tls: {certFile: cert.pem, keyFile: key.pem}}",
                "api.tls.keyFile: /etc/gannet/key.pem: No such file",
            ),
            (
                "api: {tls: {certFile: cert.pem}}",
                "api.tls: missing field `keyFile`",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn github_credentials_and_the_console_url_are_read_for_plan_previews() {
        let c = UpConfig::parse(
            "listen: 127.0.0.1:7171\ngithub: {secretEnv: GH, apiUrl: 'http://127.0.0.1:9/api/v3'}\n",
            Path::new("/etc/gannet"),
            &|name| (name == "GH").then(|| r#"{"token": "ghp_x"}"#.to_owned()),
            &gannet_plugins::registry(),
        )
        .expect("parses");
        let github = c.github.expect("github");
        assert_eq!(github.api_url, "http://127.0.0.1:9/api/v3");
        assert!(matches!(
            github.auth,
            gannet_git::github::GithubAuth::Token(_)
        ));
        assert_eq!(c.console_url, "http://127.0.0.1:7171");
        let c = parse("consoleUrl: https://gannet.example.com/\n").expect("parses");
        assert_eq!(c.console_url, "https://gannet.example.com");
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let cases = [
            ("webhook: {secretEnv: MISSING}", "MISSING is not set"),
            ("github: {secretEnv: MISSING}", "github.secretEnv: environment variable MISSING is not set"),
            ("github: {secretEnv: SECRET}", "github.secretEnv: SECRET: GitHub secret is not valid JSON"),
            (
                "github: {secretEnv: SECRET, apiUrl: 'http://github.example/api'}",
                "github.apiUrl: \"http://github.example/api\" must be an https:// URL",
            ),
            ("consoleUrl: 'https://x.example/?a=1'", "consoleUrl: \"https://x.example/?a=1\" has a ?query"),
            (
                "repos: [{id: a, path: x, planPreview: {forks: {credentials: true}}}]",
                "repos[0].planPreview.forks.authors: forks.credentials is on but no author is listed",
            ),
            ("repos: [{id: a, path: x, planPreview: {minInterval: 5}}]", "5 has no unit"),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: us-east-1, planPreview: {region: eu-west-1}}]}}",
                "plugins.lambda.deployTargets[0].planPreview.region: not a credential field of the lambda plugin",
            ),
            ("repos: [{id: a}]", "exactly one of path or url"),
            (
                "repos: [{id: a, path: x}, {id: a, path: y}]",
                "listed twice",
            ),
            ("listen: nowhere", "listen"),
            ("intervals: {poll: 10}", "10 has no unit"),
            ("intervals: {poll: 50ms}", "too short"),
            (
                "intervals: {drift: 50ms}",
                "intervals.drift: 50ms is too short (at least 100ms)",
            ),
            (
                "repos: [{id: a, path: x, github: acme}]",
                "repos[0].github: \"acme\" is not owner/name",
            ),
            ("unknown: 1", "unknown field `unknown`"),
            ("workers: 0", "out of range"),
            (
                "repos: [{id: a, path: x, github: Org/Repo}, {id: b, path: y, github: org/repo}]",
                "repos[1].github: org/repo is listed twice (also repos[0])",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'hooks.example.com/x'}}]}",
                "notifications.receivers[0].webhook.url: \"hooks.example.com/x\" is not a URL",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'https://'}}]}",
                "notifications.receivers[0].webhook.url:",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'ftp://u:pw@h/x'}}]}",
                "\"ftp://***@h/x\" has a user name or password in it",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'http://localhost:x@evil.example/'}}]}",
                "notifications.receivers[0].webhook.url: \"http://***@evil.example/\" has a user name or password in it",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'http://localhost.evil.example/'}}]}",
                "notifications.receivers[0].webhook.url: \"http://localhost.evil.example/\" must be an https:// URL",
            ),
            (
                "notifications: {receivers: [{name: ops, webhook: {url: 'http://evil.example#@localhost/'}}]}",
                "notifications.receivers[0].webhook.url: \"http://evil.example#@localhost/\" has a #fragment",
            ),
            (
                "notifications: {receivers: [{name: ops, slack: {urlEnv: PLAIN_SLACK}}]}",
                "notifications.receivers[0].slack.urlEnv: must be an https:// URL",
            ),
            (
                "listen: 0.0.0.0:7070",
                "listen: 0.0.0.0:7070 is reachable from other machines, but api.tokens configures no API token",
            ),
            ("api: {tokens: {env: NOPE}}", "api.tokens.env: environment variable NOPE is not set"),
            ("api: {tokens: {}}", "api.tokens: give exactly one of file or env"),
            ("api: {hosts: ['a b']}", "api.hosts[0]:"),
            ("api: {maxConnections: 0}", "api.maxConnections: 0 is out of range"),
            ("api: {headerTimeout: 10ms}", "api.headerTimeout: 10ms is too short"),
            (
                "plugins: {lamda: {}}",
                "plugins.lamda: no compiled-in plugin is named \"lamda\"; did you mean `lambda`? (compiled in: wait, wait-approval, script-run, lambda, ecs, terraform, kubernetes, kubernetes_multicluster, cloudrun, analysis, lifecycle)",
            ),
            (
                "plugins: {appengine: {deployTargets: []}}",
                "plugins.appengine: no compiled-in plugin is named \"appengine\" (compiled in:",
            ),
            (
                "plugins: {wait: {deployTargets: []}}",
                "plugins.wait.deployTargets: unknown field `deployTargets`",
            ),
            (
                "plugins: {lambda: {targets: []}}",
                "plugins.lambda.targets: unknown field `targets`; did you mean `deployTargets`?",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a}]}}",
                "plugins.lambda.deployTargets[0]: missing field `region`",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, regoin: us-east-1}]}}",
                "plugins.lambda.deployTargets[0].regoin: unknown field `regoin`; did you mean `region`?",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: Mars}]}}",
                "plugins.lambda.deployTargets[0].region: \"Mars\" is not an AWS region",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: us-east-1, roleArn: deployer}]}}",
                "plugins.lambda.deployTargets[0].roleArn:",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: us-east-1, endpoint: 'localhost:5000'}]}}",
                "plugins.lambda.deployTargets[0].endpoint:",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: us-east-1, alias: '123'}]}}",
                "plugins.lambda.deployTargets[0].alias:",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, region: us-east-1}, {name: a, region: eu-west-1}]}}",
                "plugins.lambda.deployTargets[1].name: a is listed twice",
            ),
            (
                "plugins: {terraform: {deployTargets: [{name: a, jobRoleArn: 'arn:aws:iam::123456789012:role/tf'}]}}",
                "plugins.terraform.deployTargets[0].jobRoleArn: a job role is for the AWS runtime",
            ),
            (
                "plugins: {ecs: {targets: []}}",
                "plugins.ecs.targets: unknown field `targets`; did you mean `deployTargets`?",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a}]}}",
                "plugins.ecs.deployTargets[0]: missing field `region`",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: us-east-1, alias: Service}]}}",
                "plugins.ecs.deployTargets[0].alias: unknown field `alias`",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: '', region: us-east-1}]}}",
                "plugins.ecs.deployTargets[0].name: must not be empty",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: Mars}]}}",
                "plugins.ecs.deployTargets[0].region: \"Mars\" is not an AWS region",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: us-east-1, roleArn: deployer}]}}",
                "plugins.ecs.deployTargets[0].roleArn:",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: us-east-1, endpoint: 'localhost:5000'}]}}",
                "plugins.ecs.deployTargets[0].endpoint:",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: us-east-1}, {name: a, region: eu-west-1}]}}",
                "plugins.ecs.deployTargets[1].name: a is listed twice",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
            assert!(
                !err.contains("slack.example"),
                "a Slack URL is its key: {err}"
            );
        }
    }
}
