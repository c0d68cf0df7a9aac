//! The analysis providers, configured once in the controller config
//! (`plugins.analysis.providers`, PipeCD's piped `analysisProviders` shape: `name`, `type`,
//! `config`): Prometheus (HTTP API `query_range`), Datadog (HTTP API `v1/query`) and Amazon
//! CloudWatch (`GetMetricData`) for metrics, each answering a query over a time range with its
//! points; CloudWatch Logs (Logs Insights, [`crate::logs`]) for logs, answering with the number
//! of matching lines. PipeCD's `STACKDRIVER` (Google Cloud Logging) is read, so a piped's
//! providers carry over, and fails every query naming it as one gannet cannot query.
//!
//! Credentials are given by reference, never inline: a file (`passwordFile`, `apiKeyFile`, as
//! PipeCD names them) or an environment variable (`passwordEnv`, `apiKeyEnv`), read at each
//! query so a rotated secret is picked up.

use std::collections::BTreeMap;
use std::path::Path;

use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat, ScanBy};
use gannet_config::typed::FieldError;
use gannet_domain::duration::Millis;
use gannet_domain::GoDuration;
use gannet_plugin_aws_common::{check_target, AwsFields, LazyClients};
use gannet_sdk::registry::PluginSettings;
use gannet_sdk::targets::{check_names, Named};
use serde::Deserialize;
use serde_json::Value;

/// The most of a provider's answer read: beyond it, the answer is refused.
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// The most of a secret file read.
const MAX_SECRET_BYTES: u64 = 16 << 10;

/// The time range of one query, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) from: Millis,
    pub(crate) to: Millis,
}

/// Why a query gave no points to judge.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QueryError {
    /// The provider answered, with no data (no series, or NaN): the check's `skipOnNoData`
    /// decides.
    #[error("no data: {0}")]
    NoData(String),
    /// The query could not be run or its answer read.
    #[error("{0}")]
    Failed(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    providers: Vec<WrittenProvider>,
    /// What `https` checks may reach: read by [`crate::egress`].
    #[serde(default, rename = "http")]
    _http: serde::de::IgnoredAny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WrittenProvider {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    config: Value,
}

impl Named for WrittenProvider {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A secret by reference: a file or an environment variable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SecretRef {
    /// The config field, for errors: `passwordFile`.
    field: String,
    file: Option<String>,
    env: Option<String>,
}

impl SecretRef {
    /// The secret `name` (`password`, `apiKey`) as written: `<name>File` or `<name>Env`, the
    /// field named in errors being the one the config used.
    fn new(name: &str, file: Option<String>, env: Option<String>) -> Option<Self> {
        let field = match (&file, &env) {
            (Some(_), _) => format!("{name}File"),
            (None, Some(_)) => format!("{name}Env"),
            (None, None) => return None,
        };
        Some(Self { field, file, env })
    }

    /// The secret's value, trimmed of surrounding whitespace.
    fn read(&self) -> Result<String, QueryError> {
        let fail = |m: String| QueryError::Failed(format!("{}: {m}", self.field));
        let value = match (&self.file, &self.env) {
            (Some(file), _) => read_secret_file(Path::new(file)).map_err(fail)?,
            (None, Some(env)) => std::env::var(env)
                .map_err(|_| fail(format!("environment variable {env} is not set")))?,
            (None, None) => String::new(),
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err(fail("the secret is empty".into()));
        }
        Ok(value)
    }
}

/// A secret file: a regular file (not a symlink), at most 16 KB.
fn read_secret_file(path: &Path) -> Result<String, String> {
    gannet_config::bounded::read_file(path, MAX_SECRET_BYTES)
        .map_err(|e| format!("{} {e}", path.display()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrometheusConfig {
    address: String,
    /// The resolution of range queries: 1m (PipeCD's) unless set; never more than the range.
    #[serde(default)]
    step: Option<GoDuration>,
    #[serde(default)]
    username_file: Option<String>,
    #[serde(default)]
    username_env: Option<String>,
    #[serde(default)]
    password_file: Option<String>,
    #[serde(default)]
    password_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DatadogConfig {
    /// A Datadog site (`datadoghq.com`, `datadoghq.eu`) or an API URL.
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    api_key_file: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    application_key_file: Option<String>,
    #[serde(default)]
    application_key_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CloudWatchLogsConfig {
    region: String,
    /// The log groups every query of the provider reads (names, at most 50).
    log_groups: Vec<String>,
    #[serde(default)]
    role_arn: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
}

/// PipeCD's Stackdriver provider config: read, never used.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StackdriverConfig {
    #[serde(default, rename = "serviceAccountFile")]
    _service_account_file: Option<String>,
}

/// The most log groups one Logs Insights query reads.
const MAX_LOG_GROUPS: usize = 50;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CloudWatchConfig {
    region: String,
    #[serde(default)]
    role_arn: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
}

/// One configured provider.
pub(crate) struct Provider {
    pub(crate) name: String,
    kind: Kind,
}

enum Kind {
    Prometheus {
        base: reqwest::Url,
        step: GoDuration,
        username: Option<SecretRef>,
        password: Option<SecretRef>,
    },
    Datadog {
        base: reqwest::Url,
        api_key: SecretRef,
        application_key: SecretRef,
    },
    CloudWatch {
        region: String,
        role_arn: Option<String>,
        endpoint: Option<String>,
        clients: LazyClients<aws_sdk_cloudwatch::Client>,
    },
    CloudWatchLogs {
        region: String,
        role_arn: Option<String>,
        endpoint: Option<String>,
        log_groups: Vec<String>,
        clients: LazyClients<aws_sdk_cloudwatchlogs::Client>,
    },
    /// A provider type PipeCD has and gannet cannot query.
    Unsupported {
        /// As written: `STACKDRIVER`.
        type_name: &'static str,
        /// What it is: `Google Cloud Logging (Stackdriver)`.
        product: &'static str,
    },
}

/// What a check reads from its provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reads {
    Metrics,
    Logs,
}

impl Provider {
    /// Whether every secret the provider's queries send can be read now; the error names the
    /// field the config wrote (`passwordEnv: environment variable X is not set`), never a value.
    pub(crate) fn secrets_readable(&self) -> Result<(), String> {
        let secrets: Vec<&SecretRef> = match &self.kind {
            Kind::Prometheus {
                username, password, ..
            } => username.iter().chain(password).collect(),
            Kind::Datadog {
                api_key,
                application_key,
                ..
            } => vec![api_key, application_key],
            Kind::CloudWatch { .. } | Kind::CloudWatchLogs { .. } | Kind::Unsupported { .. } => {
                Vec::new()
            }
        };
        for secret in secrets {
            secret.read().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Whether a check that reads `reads` can use this provider; the error says why not,
    /// naming the provider.
    pub(crate) fn serves(&self, reads: Reads) -> Result<(), String> {
        let name = &self.name;
        match (&self.kind, reads) {
            (
                Kind::Unsupported {
                    type_name,
                    product,
                },
                _,
            ) => Err(format!(
                "the analysis provider {name:?} is of type {type_name} ({product}), which gannet cannot query (not supported); gannet reads logs from CLOUDWATCH_LOGS (CloudWatch Logs Insights) and metrics from PROMETHEUS, DATADOG or CLOUDWATCH"
            )),
            (Kind::CloudWatchLogs { .. }, Reads::Metrics) => Err(format!(
                "the analysis provider {name:?} is CLOUDWATCH_LOGS, a log provider: write the check under logs, or name a metrics provider (PROMETHEUS, DATADOG, CLOUDWATCH)"
            )),
            (Kind::CloudWatchLogs { .. }, Reads::Logs) => Ok(()),
            (_, Reads::Logs) => Err(format!(
                "the analysis provider {name:?} is {}, a metrics provider: a logs check needs a log provider (CLOUDWATCH_LOGS)",
                self.type_name()
            )),
            (_, Reads::Metrics) => Ok(()),
        }
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.type_name())
    }
}

/// Reads `plugins.analysis.providers`.
pub(crate) fn from_settings(settings: &PluginSettings<'_>) -> Result<Vec<Provider>, FieldError> {
    let written: Settings = settings.parse()?;
    let at = format!("{}.providers", settings.at());
    check_names(&written.providers, &at)?;
    written
        .providers
        .into_iter()
        .enumerate()
        .map(|(i, p)| Provider::build(&format!("{at}[{i}]"), p))
        .collect()
}

/// A URL a provider is reached at: https, or http to a loopback host only (credentials go
/// there).
fn provider_url(at: &str, text: &str) -> Result<reqwest::Url, FieldError> {
    let error = |message: String| FieldError {
        path: at.to_owned(),
        message,
    };
    gannet_sdk::targets::credentialed_url(text).map_err(|why| {
        error(format!(
            "{:?}: {why}",
            gannet_domain::report::redact_urls(text)
        ))
    })
}

impl Provider {
    fn build(at: &str, p: WrittenProvider) -> Result<Self, FieldError> {
        let config_at = format!("{at}.config");
        let kind = match p.kind.as_str() {
            "PROMETHEUS" => {
                let c: PrometheusConfig = gannet_config::typed::from_value(&p.config, &config_at)?;
                let username = SecretRef::new("username", c.username_file, c.username_env);
                let password = SecretRef::new("password", c.password_file, c.password_env);
                if username.is_some() != password.is_some() {
                    return Err(FieldError {
                        path: config_at,
                        message: "basic auth needs both a username and a password".into(),
                    });
                }
                let step = match c.step {
                    None => GoDuration::from_secs(60),
                    Some(s) if s >= GoDuration::from_secs(1) => s,
                    Some(s) => {
                        return Err(FieldError {
                            path: format!("{config_at}.step"),
                            message: format!("{s} is too fine: at least 1s"),
                        })
                    }
                };
                Kind::Prometheus {
                    base: provider_url(&format!("{config_at}.address"), &c.address)?,
                    step,
                    username,
                    password,
                }
            }
            "DATADOG" => {
                let c: DatadogConfig = gannet_config::typed::from_value(&p.config, &config_at)?;
                let address = c.address.unwrap_or_else(|| "datadoghq.com".into());
                let url = if address.contains("://") {
                    address
                } else {
                    format!("https://api.{address}")
                };
                let missing = |field: &str| {
                    FieldError {
                    path: format!("{config_at}.{field}File"),
                    message: format!("is required: a file (or {field}Env, a variable) holding the Datadog {field}"),
                }
                };
                Kind::Datadog {
                    base: provider_url(&format!("{config_at}.address"), &url)?,
                    api_key: SecretRef::new("apiKey", c.api_key_file, c.api_key_env)
                        .ok_or_else(|| missing("apiKey"))?,
                    application_key: SecretRef::new(
                        "applicationKey",
                        c.application_key_file,
                        c.application_key_env,
                    )
                    .ok_or_else(|| missing("applicationKey"))?,
                }
            }
            "CLOUDWATCH" => {
                let c: CloudWatchConfig = gannet_config::typed::from_value(&p.config, &config_at)?;
                let fields = AwsFields {
                    name: &p.name,
                    region: &c.region,
                    role_arn: c.role_arn.as_deref(),
                    endpoint: c.endpoint.as_deref(),
                };
                check_target(&config_at, fields)?;
                Kind::CloudWatch {
                    region: c.region,
                    role_arn: c.role_arn,
                    endpoint: c.endpoint,
                    clients: LazyClients::new(None),
                }
            }
            "CLOUDWATCH_LOGS" => {
                let c: CloudWatchLogsConfig =
                    gannet_config::typed::from_value(&p.config, &config_at)?;
                let fields = AwsFields {
                    name: &p.name,
                    region: &c.region,
                    role_arn: c.role_arn.as_deref(),
                    endpoint: c.endpoint.as_deref(),
                };
                check_target(&config_at, fields)?;
                check_log_groups(&format!("{config_at}.logGroups"), &c.log_groups)?;
                Kind::CloudWatchLogs {
                    region: c.region,
                    role_arn: c.role_arn,
                    endpoint: c.endpoint,
                    log_groups: c.log_groups,
                    clients: LazyClients::new(None),
                }
            }
            "STACKDRIVER" => {
                let _: StackdriverConfig = gannet_config::typed::from_value(&p.config, &config_at)?;
                Kind::Unsupported {
                    type_name: "STACKDRIVER",
                    product: "Google Cloud Logging",
                }
            }
            other => {
                return Err(FieldError {
                    path: format!("{at}.type"),
                    message: format!(
                    "{other:?} is not a provider type gannet has (PROMETHEUS, DATADOG, CLOUDWATCH, CLOUDWATCH_LOGS)"
                ),
                })
            }
        };
        Ok(Self { name: p.name, kind })
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Prometheus { .. } => "Prometheus",
            Kind::Datadog { .. } => "Datadog",
            Kind::CloudWatch { .. } => "CloudWatch",
            Kind::CloudWatchLogs { .. } => "CloudWatch Logs",
            Kind::Unsupported { type_name, .. } => type_name,
        }
    }

    /// The number of log lines `query` matches over `range`, from a log provider.
    pub(crate) async fn count_lines(
        &self,
        query: &str,
        range: Range,
        timeout: GoDuration,
    ) -> Result<u64, QueryError> {
        self.serves(Reads::Logs).map_err(QueryError::Failed)?;
        let Kind::CloudWatchLogs {
            region,
            role_arn,
            endpoint,
            log_groups,
            clients,
        } = &self.kind
        else {
            return Err(QueryError::Failed(format!(
                "the analysis provider {:?} is not a log provider",
                self.name
            )));
        };
        let fields = AwsFields {
            name: &self.name,
            region,
            role_arn: role_arn.as_deref(),
            endpoint: endpoint.as_deref(),
        };
        let client = clients
            .get(fields, aws_sdk_cloudwatchlogs::Client::new)
            .await;
        let named = |e: QueryError| match e {
            QueryError::Failed(m) => {
                QueryError::Failed(format!("CloudWatch Logs provider {:?}: {m}", self.name))
            }
            no_data => no_data,
        };
        let answer = crate::logs::run(client, log_groups, query, range, timeout)
            .await
            .map_err(named)?;
        crate::logs::count(&answer).map_err(named)
    }

    /// Fixed credentials instead of the standard chain, for tests: no test reaches for a
    /// profile, a container's or an instance's credentials.
    #[cfg(test)]
    pub(crate) fn use_credentials(
        &mut self,
        credentials: aws_types::sdk_config::SharedCredentialsProvider,
    ) {
        match &mut self.kind {
            Kind::CloudWatch { clients, .. } => *clients = LazyClients::new(Some(credentials)),
            Kind::CloudWatchLogs { clients, .. } => *clients = LazyClients::new(Some(credentials)),
            _ => {}
        }
    }

    /// The points `query` gives over `range`.
    pub(crate) async fn query(
        &self,
        http: &reqwest::Client,
        query: &str,
        range: Range,
        timeout: GoDuration,
    ) -> Result<Vec<f64>, QueryError> {
        let work = async {
            match &self.kind {
                Kind::Prometheus {
                    base,
                    step,
                    username,
                    password,
                } => {
                    let span = range.to.since(range.from).get().as_secs().max(1);
                    let step = span.min(step.get().as_secs());
                    let mut request = http.get(join(base, "api/v1/query_range")).query(&[
                        ("query", query.to_owned()),
                        ("start", seconds(range.from)),
                        ("end", seconds(range.to)),
                        ("step", format!("{step}s")),
                    ]);
                    if let (Some(user), Some(password)) = (username, password) {
                        request = request.basic_auth(user.read()?, Some(password.read()?));
                    }
                    prometheus_points(&answer("Prometheus", request).await?)
                }
                Kind::Datadog {
                    base,
                    api_key,
                    application_key,
                } => {
                    let request = http
                        .get(join(base, "api/v1/query"))
                        .query(&[
                            ("from", (range.from.0 / 1000).to_string()),
                            ("to", (range.to.0 / 1000).to_string()),
                            ("query", query.to_owned()),
                        ])
                        .header("DD-API-KEY", api_key.read()?)
                        .header("DD-APPLICATION-KEY", application_key.read()?);
                    datadog_points(&answer("Datadog", request).await?)
                }
                Kind::CloudWatch {
                    region,
                    role_arn,
                    endpoint,
                    clients,
                } => {
                    let fields = AwsFields {
                        name: &self.name,
                        region,
                        role_arn: role_arn.as_deref(),
                        endpoint: endpoint.as_deref(),
                    };
                    let client = clients.get(fields, aws_sdk_cloudwatch::Client::new).await;
                    cloudwatch_points(client, query, range).await
                }
                Kind::CloudWatchLogs { .. } | Kind::Unsupported { .. } => Err(QueryError::Failed(
                    self.serves(Reads::Metrics).err().unwrap_or_default(),
                )),
            }
        };
        tokio::time::timeout(timeout.get(), work)
            .await
            .unwrap_or_else(|_| {
                Err(QueryError::Failed(format!(
                    "{} did not answer within {timeout}",
                    self.type_name()
                )))
            })
    }
}

/// Log group names as CloudWatch Logs takes them: 1 to 512 of `A-Za-z0-9._-/#`, at most 50.
fn check_log_groups(at: &str, groups: &[String]) -> Result<(), FieldError> {
    let error = |message: String| FieldError {
        path: at.to_owned(),
        message,
    };
    if groups.is_empty() {
        return Err(error(
            "is required: the log groups (names) the provider's queries read".into(),
        ));
    }
    if groups.len() > MAX_LOG_GROUPS {
        return Err(error(format!(
            "{} log groups: a Logs Insights query reads at most {MAX_LOG_GROUPS}",
            groups.len()
        )));
    }
    for (i, group) in groups.iter().enumerate() {
        let valid = (1..=512).contains(&group.len())
            && group
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/#".contains(c));
        if !valid {
            return Err(FieldError {
                path: format!("{at}[{i}]"),
                message: format!(
                    "{:?} is not a log group name (1 to 512 of A-Z a-z 0-9 . _ - / #)",
                    gannet_domain::report::cut(group, 80)
                ),
            });
        }
    }
    Ok(())
}

fn join(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let mut url = base.clone();
    let joined = format!("{}/{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url
}

/// Unix seconds with milliseconds: `1732550400.250`.
fn seconds(at: Millis) -> String {
    format!("{}.{:03}", at.0 / 1000, at.0 % 1000)
}

/// Sends `request` and reads its JSON answer (at most [`MAX_ANSWER_BYTES`]); an error status
/// fails with the provider's message.
async fn answer(provider: &str, request: reqwest::RequestBuilder) -> Result<Value, QueryError> {
    let fail = |m: String| QueryError::Failed(format!("{provider}: {m}"));
    let mut response = request
        .send()
        .await
        .map_err(|e| fail(gannet_domain::report::error_chain(&e.without_url())))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(gannet_domain::report::error_chain(&e.without_url())))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(fail(format!("the answer is over {MAX_ANSWER_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    let json: Option<Value> = serde_json::from_slice(&body).ok();
    if !status.is_success() {
        let said = json
            .as_ref()
            .and_then(|j| j.get("error").or_else(|| j.get("errors")))
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        return Err(fail(format!(
            "{status}: {}",
            gannet_domain::report::cut(&said, 500)
        )));
    }
    json.ok_or_else(|| fail("the answer is not JSON".into()))
}

/// The points of a Prometheus API answer (`matrix`, `vector` or `scalar`).
fn prometheus_points(answer: &Value) -> Result<Vec<f64>, QueryError> {
    let fail = |m: &str| QueryError::Failed(format!("Prometheus: {m}"));
    if answer["status"] != "success" {
        return Err(fail(answer["error"].as_str().unwrap_or("the query failed")));
    }
    let data = &answer["data"];
    let number = |v: &Value| -> Result<f64, QueryError> {
        let text = v[1].as_str().ok_or_else(|| fail("a sample has no value"))?;
        let value: f64 = text
            .parse()
            .map_err(|_| fail(&format!("{text:?} is not a number")))?;
        if value.is_nan() {
            return Err(QueryError::NoData("the value is NaN".into()));
        }
        Ok(value)
    };
    let result = &data["result"];
    let points = match data["resultType"].as_str() {
        Some("matrix") => {
            let series = result.as_array().ok_or_else(|| fail("no result list"))?;
            let mut points = Vec::new();
            for s in series {
                for v in s["values"].as_array().into_iter().flatten() {
                    points.push(number(v)?);
                }
            }
            points
        }
        Some("vector") => {
            let samples = result.as_array().ok_or_else(|| fail("no result list"))?;
            samples
                .iter()
                .map(|s| number(&s["value"]))
                .collect::<Result<_, _>>()?
        }
        Some("scalar") => vec![number(result)?],
        other => return Err(fail(&format!("unexpected result type {other:?}"))),
    };
    if points.is_empty() {
        return Err(QueryError::NoData("the query matched no series".into()));
    }
    Ok(points)
}

/// The points of a Datadog `v1/query` answer: every series' `pointlist` values (`null` gaps
/// skipped).
fn datadog_points(answer: &Value) -> Result<Vec<f64>, QueryError> {
    if answer["status"] == "error" {
        let said = answer["error"].as_str().unwrap_or("the query failed");
        return Err(QueryError::Failed(format!("Datadog: {said}")));
    }
    let points: Vec<f64> = answer["series"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["pointlist"].as_array().into_iter().flatten())
        .filter_map(|p| p.get(1).and_then(Value::as_f64))
        .collect();
    if points.is_empty() {
        return Err(QueryError::NoData(
            "no series had points in the range".into(),
        ));
    }
    Ok(points)
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct WrittenQuery {
    id: String,
    #[serde(default)]
    metric_stat: Option<WrittenStat>,
    #[serde(default)]
    expression: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    return_data: Option<bool>,
    #[serde(default)]
    period: Option<i32>,
    #[serde(default)]
    account_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct WrittenStat {
    metric: WrittenMetric,
    period: i32,
    stat: String,
    #[serde(default)]
    unit: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct WrittenMetric {
    namespace: String,
    metric_name: String,
    #[serde(default)]
    dimensions: Vec<BTreeMap<String, String>>,
}

/// Reads a CloudWatch query, as `aws cloudwatch get-metric-data --metric-data-queries` takes
/// it: a list (or one) of `MetricDataQuery`, in JSON or YAML. Errors say what is wrong with it.
fn cloudwatch_queries(query: &str) -> Result<Vec<MetricDataQuery>, String> {
    // The query comes from a repository: read under gannet's YAML limits (JSON is YAML too).
    let value: serde_json::Value =
        gannet_config::yaml::from_str(query).map_err(|e| match e.line() {
            Some(line) => format!("does not read: line {line}: {e}"),
            None => format!("does not read: {e}"),
        })?;
    let list = match value {
        serde_json::Value::Array(items) => items,
        one => vec![one],
    };
    let written: Vec<WrittenQuery> = list
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::from_value(item).map_err(|e| {
                format!("[{i}] is not a MetricDataQuery (Id, MetricStat or Expression) as aws cloudwatch get-metric-data takes: {e}")
            })
        })
        .collect::<Result<_, _>>()?;
    if written.is_empty() {
        return Err("has no MetricDataQuery".into());
    }
    written
        .into_iter()
        .map(|q| {
            let stat = match q.metric_stat {
                Some(s) => {
                    let mut metric = Metric::builder()
                        .namespace(s.metric.namespace)
                        .metric_name(s.metric.metric_name);
                    for d in s.metric.dimensions {
                        let (Some(name), Some(value)) = (d.get("Name"), d.get("Value")) else {
                            return Err(format!(
                                "query {}: a dimension needs Name and Value",
                                q.id
                            ));
                        };
                        metric =
                            metric.dimensions(Dimension::builder().name(name).value(value).build());
                    }
                    Some(
                        MetricStat::builder()
                            .metric(metric.build())
                            .period(s.period)
                            .stat(s.stat)
                            .set_unit(s.unit.map(|u| u.as_str().into()))
                            .build(),
                    )
                }
                None => None,
            };
            if stat.is_none() == q.expression.is_none() {
                return Err(format!(
                    "query {}: give MetricStat or Expression, one of them",
                    q.id
                ));
            }
            Ok(MetricDataQuery::builder()
                .id(q.id)
                .set_metric_stat(stat)
                .set_expression(q.expression)
                .set_label(q.label)
                .set_return_data(q.return_data)
                .set_period(q.period)
                .set_account_id(q.account_id)
                .build())
        })
        .collect()
}

async fn cloudwatch_points(
    client: &aws_sdk_cloudwatch::Client,
    query: &str,
    range: Range,
) -> Result<Vec<f64>, QueryError> {
    let queries = cloudwatch_queries(query)
        .map_err(|m| QueryError::Failed(format!("CloudWatch query {m}")))?;
    let time = |at: Millis| aws_smithy_types::DateTime::from_millis(at.0 as i64);
    let mut points = Vec::new();
    let mut next: Option<String> = None;
    // Bounded: at most 10 pages of answers.
    for _ in 0..10 {
        let out = client
            .get_metric_data()
            .set_metric_data_queries(Some(queries.clone()))
            .start_time(time(range.from))
            .end_time(time(range.to))
            .scan_by(ScanBy::TimestampAscending)
            .set_next_token(next.take())
            .send()
            .await
            .map_err(|e| {
                QueryError::Failed(format!(
                    "CloudWatch GetMetricData: {}",
                    aws_smithy_types::error::display::DisplayErrorContext(&e)
                ))
            })?;
        for result in out.metric_data_results() {
            points.extend_from_slice(result.values());
        }
        match out.next_token() {
            Some(token) => next = Some(token.to_owned()),
            None => break,
        }
    }
    if points.is_empty() {
        return Err(QueryError::NoData(
            "CloudWatch returned no datapoints in the range".into(),
        ));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prometheus_answers_are_read_as_points() {
        let matrix = json!({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"job": "a"}, "values": [[1.0, "0.5"], [2.0, "0.25"]]},
            {"metric": {"job": "b"}, "values": [[1.0, "1"]]}]}});
        assert_eq!(prometheus_points(&matrix), Ok(vec![0.5, 0.25, 1.0]));
        let vector = json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {}, "value": [1.0, "3"]}]}});
        assert_eq!(prometheus_points(&vector), Ok(vec![3.0]));
        let empty = json!({"status": "success", "data": {"resultType": "matrix", "result": []}});
        assert!(matches!(
            prometheus_points(&empty),
            Err(QueryError::NoData(_))
        ));
        let nan =
            json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "NaN"]}});
        assert!(matches!(
            prometheus_points(&nan),
            Err(QueryError::NoData(_))
        ));
        let error =
            json!({"status": "error", "errorType": "bad_data", "error": "parse error at char 5"});
        assert_eq!(
            prometheus_points(&error),
            Err(QueryError::Failed(
                "Prometheus: parse error at char 5".into()
            ))
        );
    }

    #[test]
    fn datadog_answers_are_read_as_points() {
        let ok = json!({"status": "ok", "series": [{"pointlist": [[1000.0, 0.5], [2000.0, null], [3000.0, 2.0]], "length": 3}]});
        assert_eq!(datadog_points(&ok), Ok(vec![0.5, 2.0]));
        let none = json!({"status": "ok", "series": []});
        assert!(matches!(datadog_points(&none), Err(QueryError::NoData(_))));
    }

    #[test]
    fn cloudwatch_queries_read_as_the_cli_takes_them() {
        let q = r#"[{"Id": "errors", "MetricStat": {"Metric": {"Namespace": "App", "MetricName": "Errors", "Dimensions": [{"Name": "Variant", "Value": "canary"}]}, "Period": 60, "Stat": "Average"}}]"#;
        let read = cloudwatch_queries(q).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].id(), Some("errors"));
        let yaml = "Id: rate\nExpression: errors / requests\n";
        assert_eq!(
            cloudwatch_queries(yaml).unwrap()[0].expression(),
            Some("errors / requests")
        );
        let both_missing = cloudwatch_queries("Id: x\n").unwrap_err();
        assert!(
            both_missing.contains("give MetricStat or Expression"),
            "{both_missing}"
        );
        let bomb = cloudwatch_queries(&gannet_config::fixture::yaml_bomb(9)).unwrap_err();
        // Refused by the limits, without expanding it.
        assert!(bomb.contains("too many aliases"), "{bomb}");
        let typo = cloudwatch_queries("Id: x\nExpresion: a\n").unwrap_err();
        assert!(typo.contains("Expresion"), "{typo}");
    }

    #[test]
    fn providers_are_checked_field_by_field() {
        let runtime = gannet_sdk::registry::RuntimeInfo::default();
        let build = |v: Value| {
            from_settings(&PluginSettings::new("plugins.analysis", &v, &runtime))
                .map(|l| l.len())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            build(json!({"providers": [
                {"name": "p", "type": "PROMETHEUS", "config": {"address": "http://127.0.0.1:9090"}},
                {"name": "d", "type": "DATADOG", "config": {"apiKeyEnv": "DD_API", "applicationKeyFile": "/k"}},
                {"name": "c", "type": "CLOUDWATCH", "config": {"region": "us-east-1"}},
                {"name": "l", "type": "CLOUDWATCH_LOGS", "config": {"region": "us-east-1", "logGroups": ["/aws/lambda/app", "app#errors"], "roleArn": "arn:aws:iam::123456789012:role/logs-reader"}},
                {"name": "s", "type": "STACKDRIVER", "config": {"serviceAccountFile": "/etc/sa.json"}}]})),
            Ok(5)
        );
        let cases = [
            (json!({"name": "p", "type": "STACKDRIVERR"}), "plugins.analysis.providers[0].type: \"STACKDRIVERR\" is not a provider type"),
            (json!({"name": "l", "type": "CLOUDWATCH_LOGS", "config": {"region": "us-east-1"}}), "plugins.analysis.providers[0].config: missing field `logGroups`"),
            (json!({"name": "l", "type": "CLOUDWATCH_LOGS", "config": {"region": "us-east-1", "logGroups": []}}), "plugins.analysis.providers[0].config.logGroups: is required"),
            (json!({"name": "l", "type": "CLOUDWATCH_LOGS", "config": {"region": "us-east-1", "logGroups": ["ok", "no spaces"]}}), "plugins.analysis.providers[0].config.logGroups[1]: \"no spaces\" is not a log group name"),
            (json!({"name": "l", "type": "CLOUDWATCH_LOGS", "config": {"region": "us-east-1", "logGroups": ["a"], "logGroup": "b"}}), "plugins.analysis.providers[0].config.logGroup: unknown field"),
            (json!({"name": "s", "type": "STACKDRIVER", "config": {"projectId": "p"}}), "plugins.analysis.providers[0].config.projectId: unknown field"),
            (json!({"name": "p", "type": "PROMETHEUS", "config": {"address": "http://prom.internal:9090"}}), "plugins.analysis.providers[0].config.address: \"http://prom.internal:9090\": must be an https:// URL"),
            (json!({"name": "p", "type": "PROMETHEUS", "config": {"address": "http://localhost:pw@prom.internal:9090"}}), "plugins.analysis.providers[0].config.address: \"http://***@prom.internal:9090\": has a user name or password"),
            (json!({"name": "p", "type": "PROMETHEUS", "config": {"address": "https://p", "passwordFile": "/p"}}), "plugins.analysis.providers[0].config: basic auth needs both"),
            (json!({"name": "d", "type": "DATADOG", "config": {"applicationKeyFile": "/k"}}), "plugins.analysis.providers[0].config.apiKeyFile: is required"),
            (json!({"name": "c", "type": "CLOUDWATCH", "config": {"region": "Mars"}}), "plugins.analysis.providers[0].config.region:"),
            (json!({"name": "c", "type": "CLOUDWATCH", "config": {"regon": "us-east-1"}}), "plugins.analysis.providers[0].config.regon: unknown field"),
        ];
        for (provider, want) in cases {
            let got = build(json!({ "providers": [provider] })).unwrap_err();
            assert!(got.starts_with(want), "{got}");
        }
    }
}
