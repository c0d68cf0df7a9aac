//! The ANALYSIS stage against real servers: a real Prometheus scraping an exporter the test
//! controls, CloudWatch on moto, an HTTP endpoint on loopback, and a small Datadog fake (Datadog
//! cannot run here; the fake replays the shape of its `v1/query` answers).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use gannet_domain::deployment::{Deployment, Stage, StageStatus};
use gannet_domain::fixture::wall_clock as now;
use gannet_sdk::fixture::RecordingIo;
use gannet_sdk::jobs::NoJobs;
use gannet_sdk::plugin::{Plugin, StageResult, StepContext, StepOutcome, Steps};
use gannet_sdk::registry::{PluginSettings, RuntimeInfo};
use serde_json::{json, Value};

use super::*;
use crate::testkit::{health_endpoint, Exporter, Prometheus};
use gannet_plugin_aws_common::AwsFields;

/// The plugin built from `providers` as `plugins.analysis.providers`.
fn plugin(providers: Value) -> Arc<AnalysisPlugin> {
    let settings = json!({ "providers": providers });
    let runtime = RuntimeInfo::default();
    let plugin = AnalysisPlugin::from_settings(&PluginSettings::new(
        "plugins.analysis",
        &settings,
        &runtime,
    ))
    .expect("providers build");
    Arc::new(plugin)
}

/// The plugin with no providers whose `https` checks may reach loopback
/// (`plugins.analysis.http.allowPrivateNetworks: [127.0.0.0/8]`), where the tests' servers are.
fn loopback_plugin() -> Arc<AnalysisPlugin> {
    plugin_with(json!({"http": {"allowPrivateNetworks": ["127.0.0.0/8"]}}))
}

/// The plugin built from `settings` as `plugins.analysis`.
fn plugin_with(settings: Value) -> Arc<AnalysisPlugin> {
    let runtime = RuntimeInfo::default();
    let plugin = AnalysisPlugin::from_settings(&PluginSettings::new(
        "plugins.analysis",
        &settings,
        &runtime,
    ))
    .expect("settings build");
    Arc::new(plugin)
}

/// How a test's time passes: virtually (jumps to when the step asked to be run again) or on
/// the wall clock (sleeps until then), for checks against servers that keep real time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clock {
    Virtual,
    Real,
}

/// Drives one ANALYSIS stage step by step, as the controller would, keeping what each step
/// saved; optionally runs every step twice (a redelivered message).
struct Driver {
    plugin: Arc<AnalysisPlugin>,
    deployment: Deployment,
    previous: Option<Deployment>,
    now: Millis,
    clock: Clock,
    twice: bool,
    logs: Vec<String>,
    steps: usize,
}

impl Driver {
    fn new(plugin: Arc<AnalysisPlugin>, with: Value, clock: Clock) -> Self {
        let with = plugin
            .validate_stage(STAGE_ANALYSIS, &with)
            .expect("valid options");
        let mut stage = Stage::test("stage-1", STAGE_ANALYSIS);
        stage.with = with;
        Self {
            plugin,
            deployment: Deployment::test().with_stages(vec![stage]),
            previous: None,
            now: now(),
            clock,
            twice: false,
            logs: Vec::new(),
            steps: 0,
        }
    }

    fn stage(&self) -> &Stage {
        &self.deployment.stages[0]
    }

    async fn step(&mut self) -> StepOutcome {
        if self.clock == Clock::Real {
            self.now = now();
        }
        let io = match &self.previous {
            Some(d) => RecordingIo::with_previous(d.clone()),
            None => RecordingIo::default(),
        };
        let stage = self.stage().clone();
        let dir = std::env::temp_dir();
        let outcome = self
            .plugin
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage: &stage,
                app_dir: &dir,
                running_app_dir: None,
                now: self.now,
                io: &io,
                jobs: &NoJobs,
            })
            .await
            .expect("the step answers");
        self.deployment.stages[0].metadata.extend(io.saved());
        self.logs.extend(io.logs());
        self.steps += 1;
        outcome
    }

    /// Steps until the stage ends (at most 200 steps).
    async fn run(&mut self) -> StageResult {
        for _ in 0..200 {
            let outcome = self.step().await;
            if self.twice {
                let saved = self.stage().metadata.clone();
                let again = self.step().await;
                assert_eq!(again, outcome, "a repeated step answered differently");
                assert_eq!(
                    self.stage().metadata,
                    saved,
                    "a repeated step measured again"
                );
            }
            match outcome {
                StepOutcome::Done(result) => return result,
                StepOutcome::Continue { after } => match self.clock {
                    Clock::Virtual => self.now = self.now.plus(after),
                    Clock::Real => tokio::time::sleep(after.get()).await,
                },
            }
        }
        panic!(
            "the analysis did not end in 200 steps; log:\n{}",
            self.logs.join("\n")
        );
    }

    fn record(&self, id: &str) -> CheckRecord {
        CheckRecord::read(
            self.stage()
                .metadata
                .get(&record::key(id))
                .map(String::as_str),
        )
        .expect("record reads")
    }

    fn log(&self) -> String {
        self.logs.join("\n")
    }
}

fn failure(result: StageResult) -> String {
    match result {
        StageResult::Failure { reason } => reason,
        other => panic!("expected a failure, got {other:?}"),
    }
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn an_http_check_counts_failures_up_to_its_limit_with_each_step_twice() {
    let status = Arc::new(Mutex::new(200));
    let addr = health_endpoint(status.clone()).await;
    let with = json!({"duration": "10s", "https": [{
        "url": format!("http://{addr}/health"), "expectedCode": 200, "interval": "2s",
        "failureLimit": 1, "expectedResponse": "serving"}]});
    let mut d = Driver::new(loopback_plugin(), with.clone(), Clock::Virtual);
    d.twice = true;
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    let r = d.record("https[0]");
    assert_eq!(
        (r.taken, r.failures, r.slot, r.missed),
        (5, 0, 5, 0),
        "{}",
        d.log()
    );
    assert!(
        d.log()
            .contains("[https[0]] #1: HTTP 200 (expected HTTP 200 with \"serving\") PASS"),
        "{}",
        d.log()
    );

    // 503 twice: failureLimit 1 allows one failure, the second fails the stage.
    *status.lock().unwrap() = 503;
    let mut d = Driver::new(loopback_plugin(), with, Clock::Virtual);
    let reason = failure(d.run().await);
    assert_eq!(
        reason,
        "https[0]: 2 of 2 measurements failed, more than its failureLimit 1: last: HTTP 503 (answered 503)"
    );
    assert_eq!(d.record("https[0]").taken, 2);
}

#[tokio::test]
async fn a_restart_resumes_counting_and_a_late_step_misses_slots_but_not_the_last() {
    let status = Arc::new(Mutex::new(500));
    let addr = health_endpoint(status.clone()).await;
    let with = json!({"duration": "10s", "https": [{
        "url": format!("http://{addr}/health"), "interval": "2s", "failureLimit": 2}]});
    let mut d = Driver::new(loopback_plugin(), with.clone(), Clock::Virtual);
    let started = d.now;
    // Two failed measurements, then the process dies (the driver is dropped; what it saved
    // is all that is left).
    for _ in 0..3 {
        if let StepOutcome::Continue { after } = d.step().await {
            d.now = d.now.plus(after);
        }
    }
    assert_eq!(d.record("https[0]").failures, 2);
    let saved = d.deployment.clone();

    // A new process, much later (slots 3 and 4 passed unmeasured), with the endpoint healthy.
    *status.lock().unwrap() = 200;
    let mut restarted = Driver::new(loopback_plugin(), with, Clock::Virtual);
    restarted.deployment = saved;
    restarted.now = started.plus(GoDuration::from_secs(11));
    assert_eq!(
        restarted.run().await,
        StageResult::Success,
        "{}",
        restarted.log()
    );
    let r = restarted.record("https[0]");
    assert_eq!((r.taken, r.failures, r.missed, r.slot), (3, 2, 2, 5));
    assert!(
        restarted.log().contains("3 measured, 2 failed, 2 missed"),
        "{}",
        restarted.log()
    );
}

#[tokio::test]
async fn a_threshold_on_real_prometheus_passes_then_fails_past_the_limit() {
    let exporter = Exporter::start().await.unwrap();
    exporter.set("http_error_rate", &[("variant", "canary")], 0.002);
    exporter.set("http_error_rate", &[("variant", "primary")], 0.001);
    let prometheus = Prometheus::start(&[exporter.addr()]).await.unwrap();
    prometheus
        .wait_for_sample("http_error_rate", |_| true, Duration::from_secs(20))
        .await
        .unwrap();
    let providers = json!([{"name": "prom", "type": "PROMETHEUS", "config": {"address": prometheus.url(), "step": "1s"}}]);
    let with = json!({"duration": "4s", "metrics": [{
        "provider": "prom", "interval": "2s", "failureLimit": 1, "expected": {"max": 0.01},
        "query": "max(http_error_rate{variant=\"{{ .VariantCustomArgs.variant }}\"})",
        "primaryArgs": {"variant": "canary"}}]});
    let mut d = Driver::new(plugin(providers.clone()), with.clone(), Clock::Real);
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    assert_eq!(d.record("metrics[0]").taken, 2, "{}", d.log());
    assert!(
        d.log().contains("#2: 0.002 (expected x <= 0.01) PASS"),
        "{}",
        d.log()
    );

    // The canary's error rate goes up: two measurements over the limit fail the stage.
    exporter.set("http_error_rate", &[("variant", "canary")], 0.25);
    prometheus
        .wait_for_sample(
            "http_error_rate{variant=\"canary\"}",
            |v| v > 0.2,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut d = Driver::new(plugin(providers), with, Clock::Real);
    let reason = failure(d.run().await);
    assert!(
        reason.starts_with(
            "metrics[0]: 2 of 2 measurements failed, more than its failureLimit 1: last: 0.25"
        ),
        "{reason}"
    );
}

#[tokio::test]
async fn canary_against_baseline_on_real_prometheus_is_judged_by_mann_whitney() {
    let exporter = Exporter::start().await.unwrap();
    exporter.set("latency", &[("variant", "canary")], 0.1);
    exporter.set("latency", &[("variant", "baseline")], 0.1);
    let prometheus = Prometheus::start(&[exporter.addr()]).await.unwrap();
    prometheus
        .wait_for_sample("latency", |_| true, Duration::from_secs(20))
        .await
        .unwrap();
    let providers = json!([{"name": "prom", "type": "PROMETHEUS", "config": {"address": prometheus.url(), "step": "1s"}}]);
    // A 12s window queried at a 1s step: 13 points a variant.
    let with = json!({"duration": "12s", "metrics": [{"strategy": "CANARY_BASELINE",
        "provider": "prom", "interval": "12s", "deviation": "HIGH",
        "query": "latency{variant=\"{{ .Variant.Name }}\"}"}]});
    // Equal samples pass.
    let mut d = Driver::new(plugin(providers.clone()), with.clone(), Clock::Real);
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    assert!(
        d.log().contains("every point is the same value"),
        "{}",
        d.log()
    );

    // The canary is clearly slower from now on.
    exporter.set("latency", &[("variant", "canary")], 0.9);
    let mut d = Driver::new(plugin(providers), with, Clock::Real);
    let reason = failure(d.run().await);
    assert!(
        reason.contains("significant HIGH deviation: Mann-Whitney U="),
        "{reason}"
    );
    assert!(
        reason.contains("canary 0.9 vs baseline 0.1 (medians)"),
        "{reason}"
    );
}

#[tokio::test]
async fn previous_compares_with_the_last_successful_deployments_analysis() {
    let exporter = Exporter::start().await.unwrap();
    exporter.set("cpu", &[], 0.5);
    let prometheus = Prometheus::start(&[exporter.addr()]).await.unwrap();
    prometheus
        .wait_for_sample("cpu", |_| true, Duration::from_secs(20))
        .await
        .unwrap();
    let providers = json!([{"name": "prom", "type": "PROMETHEUS", "config": {"address": prometheus.url(), "step": "1s"}}]);
    let with = json!({"duration": "6s", "metrics": [{"strategy": "PREVIOUS",
        "provider": "prom", "interval": "6s", "deviation": "HIGH", "query": "cpu"}]});
    // A first deployment has nothing to compare with.
    let mut first = Driver::new(plugin(providers.clone()), with.clone(), Clock::Real);
    assert_eq!(first.run().await, StageResult::Success);
    assert!(
        first
            .log()
            .contains("first deployment: nothing to compare with"),
        "{}",
        first.log()
    );
    let mut previous = first.deployment.clone();
    previous.stages[0].status = StageStatus::Success;

    // The next deployment uses twice the CPU over the same span of its analysis.
    exporter.set("cpu", &[], 1.0);
    prometheus
        .wait_for_sample("cpu", |v| v > 0.9, Duration::from_secs(20))
        .await
        .unwrap();
    let mut d = Driver::new(plugin(providers), with, Clock::Real);
    d.previous = Some(previous);
    let reason = failure(d.run().await);
    assert!(
        reason.contains("now 1 vs previous 0.5 (medians)"),
        "{reason}"
    );
}

/// The series the Datadog fake answers with, by query.
type DatadogSeries = Arc<Mutex<BTreeMap<String, Vec<f64>>>>;

/// FAKE Datadog `GET /api/v1/query`: Datadog cannot run here. It checks the two key headers
/// (403 with Datadog's `{"errors": ["Forbidden"]}` otherwise) and answers with the series the
/// test set for the query, in Datadog's shape (`pointlist` of `[ms, value]`).
async fn datadog_fake(series: DatadogSeries) -> SocketAddr {
    async fn query(
        State(series): State<DatadogSeries>,
        headers: HeaderMap,
        Query(q): Query<BTreeMap<String, String>>,
    ) -> (StatusCode, Json<Value>) {
        let key = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        if key("DD-API-KEY") != "api-key-1" || key("DD-APPLICATION-KEY") != "app-key-1" {
            return (
                StatusCode::FORBIDDEN,
                Json(json!({"errors": ["Forbidden"]})),
            );
        }
        let from: u64 = q["from"].parse().unwrap();
        let values = series
            .lock()
            .unwrap()
            .get(&q["query"])
            .cloned()
            .unwrap_or_default();
        let pointlist: Vec<Value> = values
            .iter()
            .enumerate()
            .map(|(i, v)| json!([((from + i as u64) * 1000) as f64, v]))
            .collect();
        let list = if values.is_empty() {
            json!([])
        } else {
            json!([{"metric": "app.errors", "pointlist": pointlist, "length": values.len(),
                "scope": "env:prod", "expression": q["query"], "aggr": "avg"}])
        };
        let body = json!({"status": "ok", "res_type": "time_series", "query": q["query"],
            "from_date": from * 1000, "series": list});
        (StatusCode::OK, Json(body))
    }
    serve(
        Router::new()
            .route("/api/v1/query", get(query))
            .with_state(series),
    )
    .await
}

#[tokio::test]
async fn datadog_answers_are_judged_and_a_wrong_key_is_named() {
    let series = Arc::new(Mutex::new(BTreeMap::new()));
    series
        .lock()
        .unwrap()
        .insert("avg:app.errors{variant:canary}".to_owned(), vec![0.5, 0.7]);
    let addr = datadog_fake(series).await;
    let keys = tempfile::tempdir().unwrap();
    std::fs::write(keys.path().join("api"), "api-key-1\n").unwrap();
    std::fs::write(keys.path().join("app"), "app-key-1").unwrap();
    let provider = |app_key: &str| {
        json!([{"name": "dd", "type": "DATADOG", "config": {"address": format!("http://{addr}"),
            "apiKeyFile": keys.path().join("api"), "applicationKeyFile": keys.path().join(app_key)}}])
    };
    let with = json!({"duration": "1m", "metrics": [{"provider": "dd", "interval": "1m",
        "expected": {"max": 0.6}, "query": "avg:app.errors{variant:{{ .Variant.Name }}}",
        "primaryArgs": {}}]});
    let mut d = Driver::new(plugin(provider("app")), with.clone(), Clock::Virtual);
    // THRESHOLD reads the primary; the fake has only the canary's series.
    let reason = failure(d.run().await);
    assert!(reason.contains("no data"), "{reason}");

    let canary = with.to_string().replace("{{ .Variant.Name }}", "canary");
    let with: Value = serde_json::from_str(&canary).unwrap();
    let mut d = Driver::new(plugin(provider("app")), with.clone(), Clock::Virtual);
    let reason = failure(d.run().await);
    assert!(
        reason.contains("last: 0.7 (1 of 2 points; this one is outside)"),
        "{reason}"
    );

    std::fs::write(keys.path().join("wrong"), "nope").unwrap();
    let mut d = Driver::new(plugin(provider("wrong")), with, Clock::Virtual);
    let reason = failure(d.run().await);
    assert!(
        reason.contains("Datadog: 403 Forbidden: [\"Forbidden\"]"),
        "{reason}"
    );
    assert!(
        !d.log().contains("app-key-1") && !d.log().contains("nope"),
        "{}",
        d.log()
    );
}

#[tokio::test]
async fn cloudwatch_on_moto_feeds_a_threshold() {
    // CloudWatch on moto is reached through the rpc-v2-cbor front scripts/moto.sh starts beside
    // moto_server (scripts/moto_cbor.py): the SDK speaks only CBOR, moto only JSON 1.0.
    let endpoint = std::env::var("GANNET_MOTO_CLOUDWATCH_ENDPOINT").expect(
        "GANNET_MOTO_CLOUDWATCH_ENDPOINT is not set: this test needs moto_server and its CloudWatch \
         front on loopback (make test, or: eval \"$(scripts/moto.sh start /tmp/motostate)\")",
    );
    let config = gannet_plugin_aws_common::sdk_config(
        AwsFields {
            name: "t",
            region: "us-east-1",
            role_arn: None,
            endpoint: Some(&endpoint),
        },
        None,
    )
    .await;
    let cw = aws_sdk_cloudwatch::Client::new(&config);
    let namespace = gannet_sdk::test_run::unique("gannet-test");
    let start = now();
    for (i, value) in [0.01, 0.02, 0.3].iter().enumerate() {
        let at =
            aws_smithy_types::DateTime::from_millis(start.0 as i64 + 5_000 + 10_000 * i as i64);
        cw.put_metric_data()
            .namespace(&namespace)
            .metric_data(
                aws_sdk_cloudwatch::types::MetricDatum::builder()
                    .metric_name("ErrorRate")
                    .dimensions(
                        aws_sdk_cloudwatch::types::Dimension::builder()
                            .name("Variant")
                            .value("canary")
                            .build(),
                    )
                    // moto matches a query with dimensions on them alone, not the namespace:
                    // a dimension of this run's own keeps other runs' data out.
                    .dimensions(
                        aws_sdk_cloudwatch::types::Dimension::builder()
                            .name("Run")
                            .value(&namespace)
                            .build(),
                    )
                    .timestamp(at)
                    .value(*value)
                    .build(),
            )
            .send()
            .await
            .unwrap();
    }
    let providers = json!([{"name": "cw", "type": "CLOUDWATCH", "config": {"region": "us-east-1", "endpoint": endpoint}}]);
    let query = format!(
        r#"[{{"Id": "e", "MetricStat": {{"Metric": {{"Namespace": "{namespace}", "MetricName": "ErrorRate",
            "Dimensions": [{{"Name": "Variant", "Value": "{{{{ .Variant.Name }}}}"}}, {{"Name": "Run", "Value": "{namespace}"}}]}}, "Period": 10, "Stat": "Maximum"}}}}]"#
    );
    let with = json!({"duration": "30s", "metrics": [{"provider": "cw", "interval": "10s",
        "expected": {"max": 0.1}, "failureLimit": 0, "query": query,
        "strategy": "CANARY_BASELINE"}]});
    // CANARY_BASELINE does not read expected: refused when the config is checked.
    let refused = plugin(providers.clone())
        .validate_stage(STAGE_ANALYSIS, &with)
        .unwrap_err();
    assert_eq!(refused.field, "metrics[0].expected");

    let mut with = with;
    with["metrics"][0]
        .as_object_mut()
        .unwrap()
        .remove("strategy");
    with["metrics"][0]["primaryArgs"] = json!({});
    let query = with["metrics"][0]["query"]
        .as_str()
        .unwrap()
        .replace("{{ .Variant.Name }}", "canary");
    with["metrics"][0]["query"] = json!(query);
    let mut d = Driver::new(plugin(providers), with, Clock::Virtual);
    d.now = start;
    d.twice = true;
    let reason = failure(d.run().await);
    assert!(
        reason.starts_with(
            "metrics[0]: 1 of 3 measurements failed, more than its failureLimit 0: last: 0.3"
        ),
        "{reason}\n{}",
        d.log()
    );
    let r = d.record("metrics[0]");
    assert_eq!((r.taken, r.failures), (3, 1), "{}", d.log());
}

/// Planning refuses an ANALYSIS whose provider the settings do not define, and on `gannet up`
/// one whose provider's credentials cannot be read, naming the field the config wrote; without
/// settings (`config check`) neither is known, so neither is checked.
#[test]
fn a_missing_provider_or_credential_is_refused_at_planning() {
    use gannet_sdk::registry::Installation;
    let providers = json!({"providers": [
        {"name": "prom", "type": "PROMETHEUS", "config": {"address": "https://prom.example.com", "usernameEnv": "GANNET_TEST_NO_SUCH_USER_VAR", "passwordEnv": "GANNET_TEST_NO_SUCH_PASSWORD_VAR"}},
    ]});
    let build = |installation: Installation| {
        let runtime = RuntimeInfo {
            installation,
            ..RuntimeInfo::default()
        };
        AnalysisPlugin::from_settings(&PluginSettings::new(
            "plugins.analysis",
            &providers,
            &runtime,
        ))
        .expect("settings build")
    };
    let stage = |provider: &str| json!({"duration": "1m", "metrics": [{"provider": provider, "query": "up", "interval": "1m", "expected": {"min": 1}}]});
    let refused = |p: &AnalysisPlugin, provider: &str| {
        p.validate_stage(STAGE_ANALYSIS, &stage(provider))
            .err()
            .map(|e| format!("{}: {}", e.field, e.message))
    };
    for installation in [Installation::OneProcess, Installation::Functions] {
        let p = build(installation);
        let why = refused(&p, "promm").expect("an unknown provider is refused");
        assert!(
            why.starts_with("metrics[0].provider: no analysis provider named \"promm\"")
                && why.contains("(it has: prom)"),
            "{why}"
        );
    }
    let why = refused(&build(Installation::OneProcess), "prom").expect("unset credentials");
    assert!(
        why.contains("usernameEnv: environment variable GANNET_TEST_NO_SUCH_USER_VAR is not set"),
        "names the field written: {why}"
    );
    assert_eq!(
        refused(&build(Installation::Functions), "prom"),
        None,
        "the plan function does not hold the stage function's secrets"
    );
    assert_eq!(refused(&build(Installation::None), "promm"), None);
}

#[test]
fn options_name_the_field_at_fault() {
    let p = plugin(json!([]));
    let check = |with: Value| {
        p.validate_stage(STAGE_ANALYSIS, &with)
            .map(drop)
            .map_err(|e| (e.field, e.message, e.unsupported))
    };
    assert!(check(json!({"duration": "10m"})).is_ok());
    let cases = [
        (json!({}), "duration", false),
        (
            json!({"duration": "10m", "logs": [{"query": "x", "provider": "s"}]}),
            "logs[0].interval",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"query": "up", "interval": "1m", "expected": {"max": 1}}]}),
            "metrics[0].provider",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"provider": "p", "query": "up", "expected": {"max": 1}}]}),
            "metrics[0].interval",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"provider": "p", "query": "up", "interval": "1m"}]}),
            "metrics[0].expected",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"provider": "p", "query": "up", "interval": "1m", "expected": {"min": 2, "max": 1}}]}),
            "metrics[0].expected",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"provider": "p", "query": "up", "interval": "1m", "expected": {"max": 1}, "failurLimit": 1}]}),
            "metrics[0].failurLimit",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"provider": "p", "query": "a{{ .K8s.Namespace }}", "interval": "1m", "expected": {"max": 1}}]}),
            "metrics[0].query",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"strategy": "CANARY_BASELINE", "provider": "p", "query": "{{ .VariantCustomArgs.job }}", "interval": "1m", "canaryArgs": {"job": "a"}}]}),
            "metrics[0].query",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"strategy": "NEWEST", "provider": "p", "query": "up", "interval": "1m"}]}),
            "metrics[0].strategy",
            false,
        ),
        (
            json!({"duration": "10m", "metrics": [{"template": {"name": "x"}}]}),
            "metrics[0].template",
            true,
        ),
        (
            json!({"duration": "1m", "https": [{"url": "https://x", "interval": "2m"}]}),
            "https[0].interval",
            false,
        ),
        (
            json!({"duration": "1m", "https": [{"url": "ftp://x", "interval": "1m"}]}),
            "https[0].url",
            false,
        ),
        (
            json!({"duration": "1m", "https": [{"url": "https://x", "interval": "1m", "expectedCode": 200, "expected": 404}]}),
            "https[0].expected",
            false,
        ),
    ];
    for (with, field, unsupported) in cases {
        let (got, message, got_unsupported) = check(with.clone()).unwrap_err();
        assert!(got.starts_with(field), "{with}: {got}: {message}");
        assert_eq!(got_unsupported, unsupported, "{with}: {message}");
    }
}

#[tokio::test]
async fn an_unknown_provider_fails_naming_the_configured_ones() {
    let with = json!({"duration": "1m", "metrics": [{"provider": "prometheus-prod", "interval": "1m",
        "query": "up", "expected": {"min": 1}}]});
    let providers = json!([{"name": "prom", "type": "PROMETHEUS", "config": {"address": "http://127.0.0.1:1"}}]);
    let mut d = Driver::new(plugin(providers), with, Clock::Virtual);
    let reason = failure(d.run().await);
    assert!(reason.contains("no analysis provider named \"prometheus-prod\" in the controller config (it has: prom)"), "{reason}");
}

#[tokio::test]
async fn no_checks_is_a_wait_and_the_pipecd_extras_are_read() {
    // PipeCD's analysis-with-baseline example: `threshold` is not an option; PipeCD ignores it.
    let with = json!({"duration": "10m", "threshold": 2, "restartThreshold": 3});
    let mut d = Driver::new(plugin(json!([])), with, Clock::Virtual);
    let started = d.now;
    assert_eq!(d.run().await, StageResult::Success);
    assert_eq!(d.now, started.plus(GoDuration::from_secs(600)));
    assert_eq!(d.steps, 2);
    assert!(
        d.log().contains("restartThreshold 3 is not acted on"),
        "{}",
        d.log()
    );
}

mod egress;
mod logs;
