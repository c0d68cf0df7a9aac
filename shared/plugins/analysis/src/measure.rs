//! One measurement of one check: the queries it makes and how their answer is judged.
//!
//! - THRESHOLD: every point of the primary's query over the slot's interval must be within
//!   `expected`.
//! - PREVIOUS: the primary now against the primary over the same interval of the last
//!   successful deployment's analysis, by a Mann-Whitney U test; a first deployment passes.
//! - CANARY_BASELINE / CANARY_PRIMARY: the canary against the baseline (or primary) over the
//!   same interval, by a Mann-Whitney U test.
//! - logs: the number of log lines the query matches over the slot's interval must be at most
//!   `maxCount` (0 unless set: PipeCD fails an interval with any matching line); nothing
//!   logged at all in the interval is no data.
//!
//! A comparison fails when the test finds a significant difference (p < 0.05) in the
//! direction `deviation` names. Samples that are all equal do not differ.
//!
//! A query that fails counts as a failed measurement, as in PipeCD; a query with no data
//! (no series, NaN) fails too, unless the check skips on no data. Unlike PipeCD, a query
//! matching no series is "no data" rather than a pass: a misspelt label must not pass a canary.

use std::time::Duration;

use gannet_domain::duration::Millis;
use gannet_domain::report::cut;
use gannet_domain::GoDuration;

use crate::egress::{self, Egress};
use crate::mannwhitney::{self, Alternative};
use crate::options::{Check, CheckKind, Deviation, Strategy};
use crate::providers::{Provider, QueryError, Range};
use crate::record::{Measurement, Verdict};
use crate::template::{self, Variant};

/// The most of an HTTP check's response body read.
const MAX_BODY_BYTES: usize = 1 << 20;

/// What one measurement needs besides its check.
pub(crate) struct Inputs<'a> {
    /// The providers' client.
    pub(crate) http: &'a reqwest::Client,
    /// The `https` checks' client, whose resolver holds every name to `egress`.
    pub(crate) checks: &'a reqwest::Client,
    /// What an `https` check may reach.
    pub(crate) egress: &'a Egress,
    pub(crate) providers: &'a [Provider],
    pub(crate) app_name: &'a str,
    /// The slot's interval: the range the queries cover.
    pub(crate) range: Range,
    /// The same interval of the last successful deployment's analysis (PREVIOUS): `None` on a
    /// first deployment.
    pub(crate) previous: Option<Range>,
    pub(crate) slot: u64,
    pub(crate) now: Millis,
}

/// Takes the measurement of `check` for `inputs.slot`.
pub(crate) async fn measure(check: &Check, inputs: &Inputs<'_>) -> Measurement {
    let (value, expected, judged) = match &check.kind {
        CheckKind::Http {
            url,
            method,
            headers,
            expected_code,
            expected_response,
        } => {
            let expected = match expected_code {
                Some(code) => format!("HTTP {code}"),
                None => "HTTP 2xx".to_owned(),
            };
            let expected = match expected_response {
                Some(text) => format!("{expected} with {:?}", cut(text, 40)),
                None => expected,
            };
            let request = HttpRequest {
                method,
                url,
                headers,
                expected_response: expected_response.as_deref(),
                timeout: check.timeout,
            };
            let got = http_check(inputs, &request).await;
            let judged = got
                .as_ref()
                .map_err(Clone::clone)
                .map(|&(status, body_ok)| {
                    let code_ok = match expected_code {
                        Some(code) => status == *code,
                        None => (200..300).contains(&status),
                    };
                    if code_ok && body_ok {
                        (Verdict::Pass, String::new())
                    } else if !code_ok {
                        (Verdict::Fail, format!("answered {status}"))
                    } else {
                        (
                            Verdict::Fail,
                            "the body lacks the expected response".to_owned(),
                        )
                    }
                });
            let value = match &got {
                Ok((status, _)) => format!("HTTP {status}"),
                Err(_) => "-".to_owned(),
            };
            (value, expected, judged)
        }
        CheckKind::Metric {
            strategy,
            provider,
            query,
            expected,
            deviation,
            canary_args,
            baseline_args,
            primary_args,
        } => {
            let args = |v: Variant| match v {
                Variant::Canary => canary_args,
                Variant::Baseline => baseline_args,
                Variant::Primary => primary_args,
            };
            let want = match (strategy, expected) {
                (Strategy::Threshold, Some(e)) => e.to_string(),
                _ => format!("no {} deviation", deviation.as_str()),
            };
            let source = match find(inputs.providers, provider) {
                Ok(source) => source,
                Err(e) => return measurement(inputs, "-".into(), want, Err(e), check),
            };
            let run = |variant: Variant, range: Range| async move {
                let q = template::render(query, variant, args(variant), inputs.app_name)
                    .map_err(|e| QueryError::Failed(e.to_string()))?;
                source.query(inputs.http, &q, range, check.timeout).await
            };
            let (value, judged) = match strategy {
                Strategy::Threshold => {
                    let expected = expected.unwrap_or_default();
                    match run(Variant::Primary, inputs.range).await {
                        Ok(points) => {
                            let outlier = points.iter().copied().find(|v| !expected.contains(*v));
                            match outlier {
                                Some(v) => (
                                    number(v),
                                    Ok((
                                        Verdict::Fail,
                                        format!(
                                            "{} of {} points; this one is outside",
                                            count_outside(&points, &expected),
                                            points.len()
                                        ),
                                    )),
                                ),
                                None => (
                                    number(*points.last().unwrap_or(&0.0)),
                                    Ok((Verdict::Pass, format!("{} points", points.len()))),
                                ),
                            }
                        }
                        Err(e) => ("-".to_owned(), Err(e)),
                    }
                }
                Strategy::Previous => match inputs.previous {
                    None => (
                        "-".to_owned(),
                        Ok((
                            Verdict::Pass,
                            "first deployment: nothing to compare with".to_owned(),
                        )),
                    ),
                    Some(before) => {
                        let now = run(Variant::Primary, inputs.range).await;
                        let then = run(Variant::Primary, before).await;
                        compare(("now", now), ("previous", then), *deviation)
                    }
                },
                Strategy::CanaryBaseline | Strategy::CanaryPrimary => {
                    let [first, second] = [strategy.variants()[0], strategy.variants()[1]];
                    let a = run(first, inputs.range).await;
                    let b = run(second, inputs.range).await;
                    compare((first.name(), a), (second.name(), b), *deviation)
                }
            };
            (value, want, judged)
        }
        CheckKind::Log {
            provider,
            query,
            max_count,
        } => {
            let want = format!("count <= {max_count}");
            let source = match find(inputs.providers, provider) {
                Ok(source) => source,
                Err(e) => return measurement(inputs, "-".into(), want, Err(e), check),
            };
            match source.count_lines(query, inputs.range, check.timeout).await {
                Ok(n) => {
                    let lines = if n == 1 { "line" } else { "lines" };
                    let judged = if n <= *max_count {
                        (Verdict::Pass, format!("{n} matching {lines}"))
                    } else {
                        (
                            Verdict::Fail,
                            format!("{n} matching {lines}, more than {max_count}"),
                        )
                    };
                    (n.to_string(), want, Ok(judged))
                }
                Err(e) => ("-".to_owned(), want, Err(e)),
            }
        }
    };
    measurement(inputs, value, expected, judged, check)
}

/// The provider named `name`; the error names the ones there are.
fn find<'a>(providers: &'a [Provider], name: &str) -> Result<&'a Provider, QueryError> {
    providers.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        QueryError::Failed(format!(
            "no analysis provider named {name:?} in the controller config (it has: {}); add it under plugins.analysis.providers",
            if names.is_empty() { "none".to_owned() } else { names.join(", ") }
        ))
    })
}

fn measurement(
    inputs: &Inputs<'_>,
    value: String,
    expected: String,
    judged: Result<(Verdict, String), QueryError>,
    check: &Check,
) -> Measurement {
    let (verdict, detail) = match judged {
        Ok(v) => v,
        Err(QueryError::NoData(why)) if check.skip_on_no_data => {
            (Verdict::Skip, format!("no data ({why}); skipOnNoData"))
        }
        Err(e) => (Verdict::Fail, e.to_string()),
    };
    Measurement {
        slot: inputs.slot,
        at: inputs.now,
        value,
        expected,
        verdict,
        detail: cut(&detail, 500),
    }
}

fn count_outside(points: &[f64], expected: &crate::options::Expected) -> usize {
    points.iter().filter(|v| !expected.contains(**v)).count()
}

/// A value as the log shows it: up to 6 significant decimals.
fn number(v: f64) -> String {
    let text = format!("{v:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

fn median(points: &[f64]) -> f64 {
    let mut sorted = points.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

type Sample = (&'static str, Result<Vec<f64>, QueryError>);

/// Compares the experiment's points with the control's by a Mann-Whitney U test.
fn compare(
    experiment: Sample,
    control: Sample,
    deviation: Deviation,
) -> (String, Result<(Verdict, String), QueryError>) {
    let (exp_name, exp) = experiment;
    let (ctl_name, ctl) = control;
    let (exp, ctl) = match (exp, ctl) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) => return ("-".into(), Err(prefixed(exp_name, e))),
        (_, Err(e)) => return ("-".into(), Err(prefixed(ctl_name, e))),
    };
    let value = format!(
        "{exp_name} {} vs {ctl_name} {} (medians)",
        number(median(&exp)),
        number(median(&ctl))
    );
    let alternative = match deviation {
        Deviation::Either => Alternative::Differs,
        Deviation::High => Alternative::Greater,
        Deviation::Low => Alternative::Less,
    };
    let judged = match mannwhitney::test(&exp, &ctl, alternative) {
        Ok(outcome) => {
            let detail = format!(
                "Mann-Whitney U={} p={:.4} (n={}/{}, {})",
                number(outcome.u),
                outcome.p,
                outcome.n1,
                outcome.n2,
                if outcome.exact {
                    "exact"
                } else {
                    "normal approximation"
                }
            );
            if outcome.p < mannwhitney::ALPHA {
                Ok((
                    Verdict::Fail,
                    format!("significant {} deviation: {detail}", deviation.as_str()),
                ))
            } else {
                Ok((Verdict::Pass, detail))
            }
        }
        Err(mannwhitney::TestError::AllEqual) => Ok((
            Verdict::Pass,
            "every point is the same value: no difference".to_owned(),
        )),
        Err(e) => Err(QueryError::Failed(format!("Mann-Whitney U test: {e}"))),
    };
    (value, judged)
}

fn prefixed(variant: &str, e: QueryError) -> QueryError {
    match e {
        QueryError::NoData(m) => QueryError::NoData(format!("{variant}: {m}")),
        QueryError::Failed(m) => QueryError::Failed(format!("{variant}: {m}")),
    }
}

/// What an `https` check sends, and what it looks for in the body.
struct HttpRequest<'a> {
    method: &'a str,
    url: &'a str,
    headers: &'a [crate::options::Header],
    expected_response: Option<&'a str>,
    timeout: GoDuration,
}

/// Sends the check's request to an address [`Egress`] allows, following no redirect; its
/// status, and whether the body (up to 1 MB, read only when `expectedResponse` is set) holds
/// the expected response. The body itself goes nowhere: not into the log, not into an error.
async fn http_check(
    inputs: &Inputs<'_>,
    request: &HttpRequest<'_>,
) -> Result<(u16, bool), QueryError> {
    let fail = |e: reqwest::Error| match egress::refusal(&e) {
        Some(refused) => QueryError::Failed(refused.to_string()),
        None => QueryError::Failed(gannet_domain::report::redact_urls(
            &gannet_domain::report::error_chain(&e),
        )),
    };
    let method = request.method;
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| QueryError::Failed(format!("{method:?} is not an HTTP method")))?;
    let url = reqwest::Url::parse(request.url)
        .map_err(|e| QueryError::Failed(format!("the url does not read: {e}")))?;
    // An address in the URL is checked here; a name, by the client's resolver.
    inputs
        .egress
        .check_host(&url)
        .map_err(|refused| QueryError::Failed(refused.to_string()))?;
    let mut sent = inputs
        .checks
        .request(method, url)
        .timeout(Duration::from_millis(request.timeout.as_millis()));
    for h in request.headers {
        sent = sent.header(&h.key, &h.value);
    }
    let mut response = sent.send().await.map_err(fail)?;
    let status = response.status().as_u16();
    let Some(expected) = request.expected_response else {
        return Ok((status, true));
    };
    let mut body = Vec::new();
    while body.len() < MAX_BODY_BYTES {
        match response.chunk().await.map_err(fail)? {
            Some(chunk) => body.extend_from_slice(&chunk),
            None => break,
        }
    }
    Ok((status, String::from_utf8_lossy(&body).contains(expected)))
}
