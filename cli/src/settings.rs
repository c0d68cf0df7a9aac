//! The controller config, `gannet.yaml`: parsed once at start, relative paths resolved
//! against the file's directory, the webhook secret read from the environment variable it
//! names (never from the file).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use gannet_controller::{Intervals, Receiver, RepoSettings, Secret, Settings, Supersede};
use gannet_core::{GoDuration, RepoId};
use gannet_git::{Location, RepoSpec};
use gannet_plugin_ecs::DeployTarget as EcsTarget;
use gannet_plugin_lambda::DeployTarget;
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
    /// Deploy targets per plugin; read by the platform plugins.
    #[serde(default)]
    plugins: serde_yaml::Mapping,
    #[serde(default)]
    notifications: RawNotifications,
    #[serde(default = "default_workers")]
    workers: usize,
    #[serde(default)]
    queue: RawQueue,
    #[serde(default)]
    testing: RawTesting,
}

fn default_listen() -> String {
    "127.0.0.1:7070".into()
}
fn default_state() -> PathBuf {
    ".gannet/state.db".into()
}
fn default_workers() -> usize {
    8
}

/// `plugins.lambda` or `plugins.ecs`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPlugin {
    #[serde(default)]
    deploy_targets: Vec<serde_yaml::Value>,
}

/// The platform plugins whose deploy targets `plugins:` may list.
const KNOWN_PLUGINS: [&str; 5] = ["lambda", "ecs", "cloudrun", "terraform", "kubernetes"];

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
    webhook: RawReceiverWebhook,
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
    /// `plugins.lambda.deployTargets`.
    pub lambda_targets: Vec<DeployTarget>,
    /// `plugins.ecs.deployTargets`.
    pub ecs_targets: Vec<EcsTarget>,
    /// Environment variables holding secrets (the webhook secret's): scripts never see them.
    pub secret_env: Vec<String>,
    pub workers: usize,
    pub visibility: GoDuration,
    pub max_attempts: u32,
    pub delivery: Delivery,
}

impl UpConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        // Every path in the config resolves against the file's directory, made absolute here:
        // git later runs in other directories, where a relative path would mean something else.
        let path = &std::path::absolute(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("/"));
        Self::parse(&text, base, &|name| std::env::var(name).ok()).map_err(|message| {
            ConfigError::Invalid {
                path: path.to_owned(),
                message,
            }
        })
    }

    /// Parses the config text; `base` resolves relative paths, `env` reads variables.
    pub fn parse(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let listen = raw.listen.parse().map_err(|e| {
            format!(
                "listen: {:?} is not an address such as 127.0.0.1:7070: {e}",
                raw.listen
            )
        })?;
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
            if repos.iter().any(|s: &RepoSpec| s.id == id) {
                return Err(format!("repos[{i}].id: {id} is listed twice"));
            }
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
            });
        }
        let defaults = Intervals::default();
        let intervals = Intervals {
            poll: raw.intervals.poll.unwrap_or(defaults.poll),
            resume: raw.intervals.resume.unwrap_or(defaults.resume),
            drift: raw.intervals.drift.unwrap_or(defaults.drift),
        };
        for (name, value) in [("poll", intervals.poll), ("resume", intervals.resume)] {
            if value.as_millis() < 100 {
                return Err(format!(
                    "intervals.{name}: {value} is too short (at least 100ms)"
                ));
            }
        }
        for name in raw.plugins.keys() {
            let name = name.as_str().unwrap_or_default();
            if !KNOWN_PLUGINS.contains(&name) {
                return Err(format!(
                    "plugins.{name}: unknown plugin (known: {})",
                    KNOWN_PLUGINS.join(", ")
                ));
            }
        }
        let lambda_targets = lambda_targets(raw.plugins.get("lambda"))?;
        let ecs_targets = ecs_targets(raw.plugins.get("ecs"))?;
        let receivers = raw
            .notifications
            .receivers
            .into_iter()
            .map(|r| Receiver {
                name: r.name,
                url: r.webhook.url,
            })
            .collect();
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
            lambda_targets,
            ecs_targets,
            secret_env: raw.webhook.iter().map(|w| w.secret_env.clone()).collect(),
            workers: raw.workers,
            visibility: raw.queue.visibility.unwrap_or(GoDuration::from_secs(30)),
            max_attempts: raw.queue.max_attempts.unwrap_or(5),
            delivery: if raw.testing.deliver_twice {
                Delivery::Twice
            } else {
                Delivery::Once
            },
        })
    }
}

/// `plugins.<plugin>.deployTargets` as JSON values, for the plugin to parse and check.
fn raw_targets(
    raw: Option<&serde_yaml::Value>,
    plugin: &str,
) -> Result<Vec<serde_json::Value>, String> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let parsed: RawPlugin =
        serde_yaml::from_value(raw.clone()).map_err(|e| format!("plugins.{plugin}: {e}"))?;
    parsed
        .deploy_targets
        .iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::to_value(v).map_err(|e| format!("plugins.{plugin}.deployTargets[{i}]: {e}"))
        })
        .collect()
}

/// `plugins.lambda.deployTargets`, checked; every error names its field.
fn lambda_targets(raw: Option<&serde_yaml::Value>) -> Result<Vec<DeployTarget>, String> {
    DeployTarget::parse_list(&raw_targets(raw, "lambda")?, "plugins.lambda.deployTargets")
}

/// `plugins.ecs.deployTargets`, checked like Lambda's; every error names its field.
fn ecs_targets(raw: Option<&serde_yaml::Value>) -> Result<Vec<EcsTarget>, String> {
    EcsTarget::parse_list(&raw_targets(raw, "ecs")?, "plugins.ecs.deployTargets")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UpConfig, String> {
        UpConfig::parse(text, Path::new("/etc/gannet"), &|name| {
            (name == "SECRET").then(|| "s3cret".to_owned())
        })
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
            c.lambda_targets,
            [DeployTarget {
                endpoint: Some("http://127.0.0.1:5055".into()),
                ..DeployTarget::new("local", "us-east-1")
            }]
        );
        assert_eq!(
            c.ecs_targets,
            [EcsTarget {
                role_arn: Some("arn:aws:iam::123456789012:role/deployer".into()),
                ..EcsTarget::new("prod", "eu-west-1")
            }]
        );
        assert!(
            !format!("{:?}", c.settings).contains("s3cret"),
            "secrets never print"
        );
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let cases = [
            ("webhook: {secretEnv: MISSING}", "MISSING is not set"),
            ("repos: [{id: a}]", "exactly one of path or url"),
            (
                "repos: [{id: a, path: x}, {id: a, path: y}]",
                "listed twice",
            ),
            ("listen: nowhere", "listen"),
            ("intervals: {poll: 10}", "10 has no unit"),
            ("intervals: {poll: 50ms}", "too short"),
            ("unknown: 1", "unknown field `unknown`"),
            ("workers: 0", "out of range"),
            ("plugins: {lamda: {}}", "plugins.lamda: unknown plugin"),
            (
                "plugins: {lambda: {targets: []}}",
                "plugins.lambda: unknown field `targets`",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a}]}}",
                "plugins.lambda.deployTargets[0]: missing field `region`",
            ),
            (
                "plugins: {lambda: {deployTargets: [{name: a, regoin: us-east-1}]}}",
                "plugins.lambda.deployTargets[0]: unknown field `regoin`",
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
                "plugins: {ecs: {targets: []}}",
                "plugins.ecs: unknown field `targets`",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a}]}}",
                "plugins.ecs.deployTargets[0]: missing field `region`",
            ),
            (
                "plugins: {ecs: {deployTargets: [{name: a, region: us-east-1, alias: Service}]}}",
                "plugins.ecs.deployTargets[0]: unknown field `alias`",
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
        }
    }
}
