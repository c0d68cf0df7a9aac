//! An ANALYSIS stage's `with`, as PipeCD writes it: `duration`, `metrics[]`, `https[]`,
//! `logs[]` and `restartThreshold`.
//!
//! Every check is read once into [`Check`], with PipeCD's defaults filled in; what PipeCD
//! accepts and gannet does not run (analysis templates, `skipOn`) is refused as unsupported,
//! naming the field.

use std::collections::BTreeMap;

use gannet_domain::GoDuration;
use gannet_sdk::plugin::StageConfigError;
use gannet_sdk::stage_options;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::template::{self, Variant};

/// PipeCD's default query timeout.
const DEFAULT_TIMEOUT: GoDuration = GoDuration::from_secs(30);

/// The stage's options as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Written {
    duration: Option<GoDuration>,
    #[serde(default)]
    metrics: Vec<WrittenMetric>,
    #[serde(default)]
    https: Vec<WrittenHttp>,
    #[serde(default)]
    logs: Vec<WrittenLog>,
    /// PipeCD reads it and does nothing with it.
    #[serde(default)]
    restart_threshold: Option<u32>,
    /// Not a PipeCD option (PipeCD ignores unknown options), but its own examples write it:
    /// read and ignored, as PipeCD does.
    #[serde(default, rename = "threshold")]
    _threshold: Option<serde::de::IgnoredAny>,
    /// PipeCD's `skipOn`: not supported.
    #[serde(default)]
    skip_on: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WrittenMetric {
    #[serde(default)]
    strategy: Option<Strategy>,
    #[serde(default)]
    provider: String,
    #[serde(default)]
    query: String,
    #[serde(default)]
    expected: Option<Expected>,
    #[serde(default)]
    interval: Option<GoDuration>,
    #[serde(default)]
    failure_limit: Option<u32>,
    #[serde(default)]
    skip_on_no_data: bool,
    #[serde(default)]
    timeout: Option<GoDuration>,
    #[serde(default)]
    deviation: Option<Deviation>,
    #[serde(default)]
    canary_args: BTreeMap<String, String>,
    #[serde(default)]
    baseline_args: BTreeMap<String, String>,
    #[serde(default)]
    primary_args: BTreeMap<String, String>,
    #[serde(default)]
    template: Option<Value>,
}

/// PipeCD's `AnalysisLog`, and gannet's `maxCount`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WrittenLog {
    #[serde(default)]
    provider: String,
    #[serde(default)]
    query: String,
    #[serde(default)]
    interval: Option<GoDuration>,
    #[serde(default)]
    failure_limit: Option<u32>,
    #[serde(default)]
    skip_on_no_data: bool,
    #[serde(default)]
    timeout: Option<GoDuration>,
    /// gannet's: the most matching lines an interval may have and pass. PipeCD has no such
    /// option: an interval with any matching line fails, which is the default, 0.
    #[serde(default)]
    max_count: Option<u64>,
    #[serde(default)]
    template: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WrittenHttp {
    #[serde(default)]
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: Vec<Header>,
    #[serde(default)]
    expected_code: Option<u16>,
    /// PipeCD's `v0/cloudrun/analysis` example writes `expected` for `expectedCode`.
    #[serde(default)]
    expected: Option<u16>,
    #[serde(default)]
    expected_response: Option<String>,
    #[serde(default)]
    interval: Option<GoDuration>,
    #[serde(default)]
    failure_limit: Option<u32>,
    #[serde(default)]
    skip_on_no_data: bool,
    #[serde(default)]
    timeout: Option<GoDuration>,
    #[serde(default)]
    template: Option<Value>,
}

/// How a metric is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Strategy {
    /// Every point within `expected`.
    Threshold,
    /// The primary now against the primary at the same time into the last successful
    /// deployment's analysis.
    Previous,
    CanaryBaseline,
    CanaryPrimary,
}

impl Strategy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Threshold => "THRESHOLD",
            Self::Previous => "PREVIOUS",
            Self::CanaryBaseline => "CANARY_BASELINE",
            Self::CanaryPrimary => "CANARY_PRIMARY",
        }
    }

    /// The variants whose metrics the strategy reads: the one judged first.
    pub(crate) fn variants(self) -> &'static [Variant] {
        match self {
            Self::Threshold | Self::Previous => &[Variant::Primary],
            Self::CanaryBaseline => &[Variant::Canary, Variant::Baseline],
            Self::CanaryPrimary => &[Variant::Canary, Variant::Primary],
        }
    }
}

/// Which way a difference fails a comparing strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Deviation {
    Either,
    High,
    Low,
}

impl Deviation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Either => "EITHER",
            Self::High => "HIGH",
            Self::Low => "LOW",
        }
    }
}

/// The range a THRESHOLD metric's points must fall in (both ends included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expected {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max: Option<f64>,
}

impl Expected {
    pub(crate) fn contains(&self, value: f64) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }
}

impl std::fmt::Display for Expected {
    /// `0.1 <= x <= 0.5`, `x <= 0.01`, `x >= 3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.max) {
            (Some(min), Some(max)) => write!(f, "{min} <= x <= {max}"),
            (Some(min), None) => write!(f, "x >= {min}"),
            (None, Some(max)) => write!(f, "x <= {max}"),
            (None, None) => f.write_str("any value"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Header {
    pub(crate) key: String,
    pub(crate) value: String,
}

/// One check of the stage, metric, log or HTTP, with its schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Check {
    /// `metrics[0]`, `logs[0]`, `https[1]`: where it is written, and its name in logs and
    /// metadata.
    pub(crate) id: String,
    pub(crate) interval: GoDuration,
    /// Failures tolerated: the check fails at `failureLimit + 1`.
    pub(crate) failure_limit: u32,
    pub(crate) skip_on_no_data: bool,
    pub(crate) timeout: GoDuration,
    pub(crate) kind: CheckKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub(crate) enum CheckKind {
    #[serde(rename_all = "camelCase")]
    Metric {
        strategy: Strategy,
        provider: String,
        query: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<Expected>,
        deviation: Deviation,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        canary_args: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        baseline_args: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        primary_args: BTreeMap<String, String>,
    },
    /// Lines of a log provider matching `query` over the interval: more than `max_count`
    /// fails the measurement.
    #[serde(rename_all = "camelCase")]
    Log {
        provider: String,
        query: String,
        #[serde(default)]
        max_count: u64,
    },
    #[serde(rename_all = "camelCase")]
    Http {
        url: String,
        method: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<Header>,
        /// `None`: any 2xx.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_code: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_response: Option<String>,
    },
}

/// The validated options, as the planned stage stores them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnalysisOptions {
    pub(crate) duration: GoDuration,
    pub(crate) checks: Vec<Check>,
    /// Kept to say in the log that it is not acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) restart_threshold: Option<u32>,
}

impl AnalysisOptions {
    /// Reads and checks a stage's `with` as written in the app config.
    pub(crate) fn parse(with: &Value) -> Result<Self, StageConfigError> {
        let written: Written = stage_options::parse(with)?;
        let duration = match written.duration {
            Some(d) if d > GoDuration::default() => d,
            _ => {
                return Err(StageConfigError::new(
                    "duration",
                    "is required (such as 10m): how long the analysis runs",
                ))
            }
        };
        if written.skip_on.is_some() {
            return Err(StageConfigError::unsupported(
                "skipOn",
                "skipping a stage by commit message or paths is not supported yet",
            ));
        }
        let mut checks = Vec::new();
        for (i, m) in written.metrics.into_iter().enumerate() {
            checks.push(metric(format!("metrics[{i}]"), m)?);
        }
        for (i, l) in written.logs.into_iter().enumerate() {
            checks.push(log(format!("logs[{i}]"), l)?);
        }
        for (i, h) in written.https.into_iter().enumerate() {
            checks.push(http(format!("https[{i}]"), h)?);
        }
        for check in &checks {
            if check.interval > duration {
                return Err(StageConfigError::new(
                    format!("{}.interval", check.id),
                    format!(
                        "{} is longer than the stage's duration {duration}: the check would never run",
                        check.interval
                    ),
                ));
            }
        }
        Ok(Self {
            duration,
            checks,
            restart_threshold: written.restart_threshold,
        })
    }

    /// The options as a planned stage stores them.
    pub(crate) fn from_stored(with: &Value) -> Result<Self, StageConfigError> {
        serde_json::from_value(with.clone())
            .map_err(|e| StageConfigError::new("with", format!("stored options do not read: {e}")))
    }
}

fn required(id: &str, field: &str, value: &str) -> Result<(), StageConfigError> {
    if value.trim().is_empty() {
        return Err(StageConfigError::new(
            format!("{id}.{field}"),
            "is required",
        ));
    }
    Ok(())
}

fn interval(id: &str, value: Option<GoDuration>) -> Result<GoDuration, StageConfigError> {
    match value {
        Some(d) if d >= GoDuration::from_secs(1) => Ok(d),
        Some(d) if d > GoDuration::default() => Err(StageConfigError::new(
            format!("{id}.interval"),
            format!("{d} is too short: at least 1s"),
        )),
        _ => Err(StageConfigError::new(
            format!("{id}.interval"),
            "is required (such as 1m): how often the check runs",
        )),
    }
}

fn timeout(value: Option<GoDuration>) -> GoDuration {
    match value {
        Some(d) if d > GoDuration::default() => d,
        _ => DEFAULT_TIMEOUT,
    }
}

fn no_template(id: &str, template: Option<&Value>) -> Result<(), StageConfigError> {
    match template {
        None => Ok(()),
        Some(_) => Err(StageConfigError::unsupported(
            format!("{id}.template"),
            "analysis templates (.pipe/analysis-template.yaml) are not supported yet; write the check in the stage",
        )),
    }
}

fn metric(id: String, m: WrittenMetric) -> Result<Check, StageConfigError> {
    no_template(&id, m.template.as_ref())?;
    required(&id, "provider", &m.provider)?;
    required(&id, "query", &m.query)?;
    let strategy = m.strategy.unwrap_or(Strategy::Threshold);
    let expected = match (strategy, m.expected) {
        (
            Strategy::Threshold,
            None
            | Some(Expected {
                min: None,
                max: None,
            }),
        ) => {
            return Err(StageConfigError::new(
                format!("{id}.expected"),
                "the THRESHOLD strategy needs expected.min, expected.max or both",
            ))
        }
        (Strategy::Threshold, Some(e)) => {
            if let (Some(min), Some(max)) = (e.min, e.max) {
                if min > max {
                    return Err(StageConfigError::new(
                        format!("{id}.expected"),
                        format!("min {min} is greater than max {max}: no value can pass"),
                    ));
                }
            }
            Some(e)
        }
        (_, Some(_)) => return Err(StageConfigError::new(
            format!("{id}.expected"),
            "only the THRESHOLD strategy reads expected; the comparing strategies use deviation",
        )),
        (_, None) => None,
    };
    for &variant in strategy.variants() {
        let (field, args) = match variant {
            Variant::Canary => ("canaryArgs", &m.canary_args),
            Variant::Baseline => ("baselineArgs", &m.baseline_args),
            Variant::Primary => ("primaryArgs", &m.primary_args),
        };
        template::render(&m.query, variant, args, "app")
            .map_err(|e| StageConfigError::new(format!("{id}.query"), format!("{e} ({field})")))?;
    }
    Ok(Check {
        interval: interval(&id, m.interval)?,
        failure_limit: m.failure_limit.unwrap_or(0),
        skip_on_no_data: m.skip_on_no_data,
        timeout: timeout(m.timeout),
        kind: CheckKind::Metric {
            strategy,
            provider: m.provider,
            query: m.query,
            expected,
            deviation: m.deviation.unwrap_or(Deviation::Either),
            canary_args: m.canary_args,
            baseline_args: m.baseline_args,
            primary_args: m.primary_args,
        },
        id,
    })
}

fn log(id: String, l: WrittenLog) -> Result<Check, StageConfigError> {
    no_template(&id, l.template.as_ref())?;
    required(&id, "provider", &l.provider)?;
    required(&id, "query", &l.query)?;
    Ok(Check {
        interval: interval(&id, l.interval)?,
        failure_limit: l.failure_limit.unwrap_or(0),
        skip_on_no_data: l.skip_on_no_data,
        timeout: timeout(l.timeout),
        kind: CheckKind::Log {
            provider: l.provider,
            query: l.query,
            max_count: l.max_count.unwrap_or(0),
        },
        id,
    })
}

fn http(id: String, h: WrittenHttp) -> Result<Check, StageConfigError> {
    no_template(&id, h.template.as_ref())?;
    required(&id, "url", &h.url)?;
    let url = reqwest::Url::parse(&h.url).map_err(|e| {
        StageConfigError::new(
            format!("{id}.url"),
            format!("{:?} is not a URL: {e}", h.url),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(StageConfigError::new(
            format!("{id}.url"),
            format!("{:?}: only http and https URLs can be checked", h.url),
        ));
    }
    let method = h
        .method
        .unwrap_or_else(|| "GET".to_owned())
        .to_ascii_uppercase();
    if reqwest::Method::from_bytes(method.as_bytes()).is_err() {
        return Err(StageConfigError::new(
            format!("{id}.method"),
            format!("{method:?} is not an HTTP method"),
        ));
    }
    for (i, header) in h.headers.iter().enumerate() {
        let valid = reqwest::header::HeaderName::from_bytes(header.key.as_bytes()).is_ok()
            && reqwest::header::HeaderValue::from_str(&header.value).is_ok();
        if !valid {
            return Err(StageConfigError::new(
                format!("{id}.headers[{i}]"),
                format!("{:?} is not a valid HTTP header", header.key),
            ));
        }
    }
    let expected_code = match (h.expected_code, h.expected) {
        (Some(a), Some(b)) if a != b => {
            return Err(StageConfigError::new(
                format!("{id}.expected"),
                format!("says {b} but expectedCode says {a}; keep expectedCode"),
            ))
        }
        (code, alias) => code.or(alias),
    };
    if let Some(code) = expected_code {
        if !(100..=599).contains(&code) {
            return Err(StageConfigError::new(
                format!("{id}.expectedCode"),
                format!("{code} is not an HTTP status code"),
            ));
        }
    }
    Ok(Check {
        interval: interval(&id, h.interval)?,
        failure_limit: h.failure_limit.unwrap_or(0),
        skip_on_no_data: h.skip_on_no_data,
        timeout: timeout(h.timeout),
        kind: CheckKind::Http {
            url: h.url,
            method,
            headers: h.headers,
            expected_code,
            expected_response: h.expected_response.filter(|r| !r.is_empty()),
        },
        id,
    })
}
