//! End to end: the ANALYSIS stage judging a Lambda canary, run by a real `gannet up`.
//!
//! Nothing is faked. The metrics come from a real Prometheus (the pinned binary of
//! `scripts/prometheus.sh`, from `GANNET_PROMETHEUS`) scraping an exporter whose gauge the test
//! sets, or from CloudWatch on moto, fed by PutMetricData; the canary runs on Lambda on moto
//! and its routing is read back through the Lambda API. A canary whose error rate stays under
//! `expected.max` is promoted to 100%; one that breaks it fails ANALYSIS at failureLimit + 1
//! failures and is rolled back to exactly the routing before it; the stage log and `gannet
//! deployments show` tell each measurement. A SIGKILL mid-analysis loses no count: the
//! restarted server goes on from the saved measurements, measuring no slot twice. PipeCD's
//! examples with an ANALYSIS stage pass `gannet config check` (analysis by logs aside).
//!
//! These tests need moto (`make test` starts it and sets GANNET_MOTO_ENDPOINT, and
//! GANNET_MOTO_CLOUDWATCH_ENDPOINT for CloudWatch) and Prometheus (`make prometheus-ensure`);
//! without them they fail saying how to get them. Every server is on loopback and every wait
//! is bounded.

mod lambda_moto;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum};
use gannet_plugin_analysis::testkit::{Exporter, Prometheus};
use gannet_plugin_aws_common::{sdk_config, test_util, AwsFields};
use lambda_moto as moto;
use lambda_moto::Routing;
use serde_json::{json, Value};
use support::{app_config, stage_named, Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(45);
/// The bound on Prometheus' first scrape (5 to 6 s after its start) and on a new value.
const SCRAPE: Duration = Duration::from_secs(20);
const ALIAS: &str = "Service";
const GAUGE: &str = "http_error_rate";
const PROM_QUERY: &str = "max(http_error_rate{variant=\"canary\"})";
/// The id of the canary pipeline's ANALYSIS stage (the third).
const ANALYSIS: &str = "stage-2";
/// How a run of the controller is configured beside its plugins.
const BASE: &str = "intervals: {poll: 1m, resume: 1s}\nqueue: {visibility: 3s}\n";

/// A real Prometheus scraping an exporter that serves `http_error_rate{variant="canary"}`.
struct Metrics {
    exporter: Exporter,
    prometheus: Prometheus,
    // Dropped last: the exporter's server runs on it.
    rt: tokio::runtime::Runtime,
}

impl Metrics {
    fn start(rate: f64) -> Self {
        let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        let exporter = rt.block_on(Exporter::start()).expect("exporter starts");
        exporter.set(GAUGE, &[("variant", "canary")], rate);
        let prometheus = rt
            .block_on(Prometheus::start(&[exporter.addr()]))
            .unwrap_or_else(|e| panic!("{e}"));
        let metrics = Self {
            exporter,
            prometheus,
            rt,
        };
        metrics.set(rate);
        metrics
    }

    /// Sets the canary's error rate and waits until Prometheus has scraped it.
    fn set(&self, rate: f64) {
        self.exporter.set(GAUGE, &[("variant", "canary")], rate);
        let seen = self
            .prometheus
            .wait_for_sample(PROM_QUERY, |v| v == rate, SCRAPE);
        self.rt.block_on(seen).unwrap_or_else(|e| panic!("{e}"));
    }

    fn provider(&self) -> String {
        format!(
            "{{name: prom, type: PROMETHEUS, config: {{address: '{}', step: 1s}}}}",
            self.prometheus.url()
        )
    }
}

/// An ANALYSIS `with`: one THRESHOLD metric, every 2s, at most 0.01.
fn analysis(duration: &str, failure_limit: u32, provider: &str, query: &str) -> Value {
    json!({"duration": duration, "metrics": [{"strategy": "THRESHOLD", "provider": provider,
        "query": query, "interval": "2s", "failureLimit": failure_limit, "expected": {"max": 0.01}}]})
}

/// The canary pipeline, judged by `analysis` at 10%.
fn canary(analysis: &Value) -> String {
    format!(
        "      - name: LAMBDA_CANARY_ROLLOUT\n      - name: LAMBDA_PROMOTE\n        with: {{percent: 10}}\n      - name: ANALYSIS\n        with: {analysis}\n      - name: LAMBDA_PROMOTE\n        with: {{percent: 100}}\n"
    )
}

/// One Lambda function on moto, deployed from a repository by a canary app.
struct Lambda {
    repo: Repo,
    function: moto::Function,
}

impl Lambda {
    fn new() -> Self {
        Self {
            repo: Repo::new(),
            function: moto::Function::new("analysis"),
        }
    }

    /// Uploads code `version` and commits a manifest deploying it through the canary.
    fn commit(&self, version: &str, analysis: &Value) -> String {
        let app = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n  pipeline:\n    stages:\n{}",
            canary(analysis)
        );
        let manifest = self.function.upload(version);
        let files = [
            ("apps/fn/app.pipecd.yaml", app),
            ("apps/fn/function.yaml", manifest),
        ];
        let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
        self.repo.commit(&files, &format!("deploy {version}"))
    }

    fn alias(&self) -> Option<Routing> {
        self.function.alias(ALIAS)
    }

    /// `gannet up` on the repository, deploying to moto's Lambda, with the analysis provider
    /// `provider` (a YAML flow mapping); its state directory goes with it.
    fn start(&self, provider: &str) -> (Gannet, tempfile::TempDir) {
        let state = tempfile::tempdir().expect("tempdir");
        let extra_config = format!(
            "{BASE}plugins:\n  lambda:\n    deployTargets:\n      - {{name: local, region: {}, endpoint: '{}'}}\n  analysis:\n    providers:\n      - {provider}\n",
            moto::REGION,
            moto::endpoint()
        );
        let mut opts = UpOptions::default();
        (opts.extra_config, opts.env) = (extra_config, moto::gannet_env());
        (Gannet::start(&self.repo, state.path(), &opts), state)
    }
}

/// v1 is quick-synced; v2, whose error rate `set_rate` keeps at 0.001, passes its analysis and
/// is promoted to 100%; v3, at 0.5, fails it at the second measurement and is rolled back.
/// `provider` is the analysis provider as a YAML flow mapping.
fn promote_then_roll_back(provider: &str, analysis: &Value, set_rate: impl Fn(f64)) {
    let lambda = Lambda::new();
    let v1 = lambda.commit("v1", analysis);
    let (g, _state) = lambda.start(provider);
    let d = g.wait_terminal(&g.deploy(LIMIT, &v1), LIMIT);
    assert!(
        d["status"] == "SUCCESS" && d["strategy"] == "QUICK_SYNC",
        "{d}"
    );
    assert_eq!(lambda.alias(), Some(Routing::all_to("1")));

    set_rate(0.001);
    let v2 = lambda.commit("v2", analysis);
    let id = g.deploy(LIMIT, &v2);
    g.wait_stage(&id, "ANALYSIS", "RUNNING", LIMIT);
    assert_eq!(
        lambda.alias(),
        Some(Routing::split("2", "1", 0.9)),
        "the analysis judges a 10% canary"
    );
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    let promoted = "LAMBDA_CANARY_ROLLOUT SUCCESS, LAMBDA_PROMOTE SUCCESS, ANALYSIS SUCCESS, LAMBDA_PROMOTE SUCCESS, LAMBDA_ROLLBACK NOT_STARTED_YET";
    assert_eq!(support::stage_statuses(&d), promoted, "{d}");
    assert_eq!(
        lambda.alias(),
        Some(Routing::all_to("2")),
        "promoted to 100%"
    );
    let log = g.stage_log(&id, ANALYSIS).join("\n");
    for slot in 1..=3 {
        let line = format!("[metrics[0]] #{slot}: 0.001 (expected x <= 0.01) PASS");
        assert!(log.contains(&line), "no {line:?} in:\n{log}");
    }
    assert!(
        log.contains("analysis of 6s passed: metrics[0]: 3 measured, 0 failed"),
        "{log}"
    );

    set_rate(0.5);
    let v3 = lambda.commit("v3", analysis);
    let id = g.deploy(LIMIT, &v3);
    g.wait_stage(&id, "ANALYSIS", "RUNNING", LIMIT);
    assert_eq!(lambda.alias(), Some(Routing::split("3", "2", 0.9)));
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}\n{}", g.log());
    let rolled_back = "LAMBDA_CANARY_ROLLOUT SUCCESS, LAMBDA_PROMOTE SUCCESS, ANALYSIS FAILURE, LAMBDA_PROMOTE NOT_STARTED_YET, LAMBDA_ROLLBACK SUCCESS";
    assert_eq!(support::stage_statuses(&d), rolled_back, "{d}");
    assert_eq!(
        lambda.alias(),
        Some(Routing::all_to("2")),
        "back to the routing before v3, exactly"
    );
    assert_eq!(moto::versions(&lambda.function.name), ["1", "2", "3"]);
    let log = g.stage_log(&id, ANALYSIS).join("\n");
    let reason = stage_named(&d, "ANALYSIS")["status_reason"]
        .as_str()
        .unwrap_or("");
    assert!(
        reason.starts_with("stage stage-2 failed: metrics[0]: 2 of 2 measurements failed, more than its failureLimit 1: last: 0.5 ("),
        "{reason}"
    );
    for (slot, allowed) in [
        (1, "(1 of 1 failures allowed)"),
        (2, "(2 of 1 failures allowed)"),
    ] {
        let head = format!("[metrics[0]] #{slot}: 0.5 (expected x <= 0.01) FAIL");
        let line = log.lines().find(|l| l.starts_with(&head));
        assert!(
            line.is_some_and(|l| l.ends_with(allowed)),
            "no {head:?}…{allowed} in:\n{log}"
        );
    }
    assert!(
        !log.contains("#3:"),
        "the stage failed at once, at the limit:\n{log}"
    );

    let (code, out) = g.cli(&["deployments", "show", &id]);
    assert_eq!(code, 0, "{out}");
    // The table's first columns (DETAIL, the points' count, depends on the provider).
    let table: Vec<String> = out
        .lines()
        .skip_while(|l| *l != "Measurements of stage stage-2:")
        .take(4)
        .map(|l| l.split_whitespace().take(7).collect::<Vec<_>>().join(" "))
        .collect();
    let want = "Measurements of stage stage-2:\nCHECK # VALUE EXPECTED VERDICT DETAIL\nmetrics[0] #1 0.5 x <= 0.01 FAIL\nmetrics[0] #2 0.5 x <= 0.01 FAIL";
    assert_eq!(table.join("\n"), want, "{out}");
}

#[test]
fn a_canary_whose_error_rate_stays_under_max_is_promoted_and_one_that_breaks_it_rolls_back_on_prometheus(
) {
    let metrics = Metrics::start(0.001);
    let analysis = analysis("6s", 1, "prom", PROM_QUERY);
    promote_then_roll_back(&metrics.provider(), &analysis, |rate| metrics.set(rate));
}

/// CloudWatch on moto, from `GANNET_MOTO_CLOUDWATCH_ENDPOINT`: the rpc-v2-cbor front
/// `scripts/moto.sh start` runs beside moto_server (scripts/moto_cbor.py), since the SDK speaks
/// only CBOR to CloudWatch and moto only JSON 1.0. The state is moto's, as at `moto::endpoint()`.
fn cloudwatch_endpoint() -> String {
    moto::loopback_endpoint("GANNET_MOTO_CLOUDWATCH_ENDPOINT")
}

#[test]
fn a_canary_whose_error_rate_stays_under_max_is_promoted_and_one_that_breaks_it_rolls_back_on_cloudwatch(
) {
    let endpoint = cloudwatch_endpoint();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let target = AwsFields {
        name: "e2e",
        region: moto::REGION,
        role_arn: None,
        endpoint: Some(&endpoint),
    };
    let config = rt.block_on(sdk_config(target, Some(test_util::credentials())));
    let cw = aws_sdk_cloudwatch::Client::new(&config);
    let namespace = moto::unique("gannet-e2e");
    // moto matches a query with dimensions on the metric name and dimensions only, not the
    // namespace: a dimension unique to this test keeps other tests' data out.
    let series = moto::unique("canary");
    let query = json!([{"Id": "errors", "MetricStat": {"Metric": {"Namespace": namespace,
        "MetricName": "ErrorRate", "Dimensions": [{"Name": "Series", "Value": series}]},
        "Period": 2, "Stat": "Maximum"}}])
    .to_string();
    let analysis = analysis("6s", 1, "cw", &query);
    let provider = format!(
        "{{name: cw, type: CLOUDWATCH, config: {{region: {}, endpoint: '{endpoint}'}}}}",
        moto::REGION
    );
    // The canary's error rate, one point a second from 2 s ago to 30 s ahead: every measurement
    // window of the coming deployment holds points (the Maximum sees a later, higher rate).
    let set_rate = |rate: f64| {
        let now = DateTime::from(SystemTime::now()).secs();
        let points: Vec<MetricDatum> = (now - 2..=now + 30)
            .map(|at| {
                let dimension = Dimension::builder().name("Series").value(&series).build();
                MetricDatum::builder()
                    .metric_name("ErrorRate")
                    .dimensions(dimension)
                    .timestamp(DateTime::from_secs(at))
                    .value(rate)
                    .build()
            })
            .collect();
        let put = cw
            .put_metric_data()
            .namespace(&namespace)
            .set_metric_data(Some(points));
        rt.block_on(put.send()).expect("PutMetricData to moto");
    };
    promote_then_roll_back(&provider, &analysis, set_rate);
}

#[test]
fn a_sigkill_mid_analysis_resumes_counting_from_the_saved_measurements() {
    let metrics = Metrics::start(0.5);
    let state = tempfile::tempdir().expect("tempdir");
    let repo = Repo::new();
    let with = analysis("10s", 2, "prom", PROM_QUERY);
    let stages = format!("      - id: analysis\n        name: ANALYSIS\n        with: {with}\n");
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", &stages))],
        "add web",
    );
    let mut opts = UpOptions::default();
    let provider = metrics.provider();
    opts.extra_config =
        format!("{BASE}plugins:\n  analysis:\n    providers:\n      - {provider}\n");
    let mut g = Gannet::start(&repo, state.path(), &opts);
    let id = g.deploy(LIMIT, &head);
    let first = "[metrics[0]] #1: 0.5 (expected x <= 0.01) FAIL";
    g.wait_stage(&id, "ANALYSIS", "RUNNING", LIMIT);
    g.wait_until(LIMIT, "measurement #1 has failed", || {
        g.stage_log(&id, "analysis")
            .iter()
            .any(|l| l.starts_with(first))
            .then_some(())
    });
    g.kill();
    g = g.restart();

    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}\n{}", g.log());
    let stage = stage_named(&d, "ANALYSIS");
    let reason = stage["status_reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with(
            "stage analysis failed: metrics[0]: 3 of 3 measurements failed, more than its failureLimit 2: last: 0.5"
        ),
        "the failure before the kill counts: {reason}"
    );
    // The saved record: three measurements, all failed, slots strictly increasing from 1 (none
    // measured twice), and any slot that passed while gannet was down counted as missed.
    let saved = stage["metadata"]["check.metrics[0]"].as_str().unwrap_or("");
    let record: Value = serde_json::from_str(saved).expect("the record is JSON");
    let slots: Vec<u64> = record["last"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["slot"].as_u64())
        .collect();
    assert!(record["taken"] == 3 && record["failures"] == 3, "{record}");
    assert!(slots.len() == 3 && slots[0] == 1, "{record}");
    assert!(slots.windows(2).all(|w| w[0] < w[1]), "{record}");
    assert!(
        record["slot"] == slots[2] && record["missed"] == slots[2] - 3,
        "{record}"
    );
    // The killed server took #1 and started the analysis; the restarted one did neither again.
    let log = g.stage_log(&id, "analysis");
    let count = |start: &str| log.iter().filter(|l| l.starts_with(start)).count();
    assert_eq!(
        (count(first), count("analysing for 10s")),
        (1, 1),
        "{log:?}"
    );
}

/// Every `app.pipecd.yaml` under `dir` (at most 8 levels down).
fn app_configs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() && depth < 8 {
            app_configs(&path, depth + 1, out);
        } else if path.file_name().is_some_and(|n| n == "app.pipecd.yaml") {
            out.push(path);
        }
    }
}

#[test]
fn pipecds_examples_with_analysis_pass_config_check() {
    let Some(dir) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let mut files = Vec::new();
    app_configs(&dir, 0, &mut files);
    files.retain(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("name: ANALYSIS")));
    files.sort();
    let run = support::run_gannet(&["config", "check", "--json", &dir.to_string_lossy()], &[]);
    let report: Value = serde_json::from_str(&run.stdout).expect("json report");
    let apps = report["apps"].as_array().expect("apps");
    let mut clean = Vec::new();
    for file in &files {
        let app = apps
            .iter()
            .find(|a| a["path"].as_str().is_some_and(|p| Path::new(p) == file))
            .unwrap_or_else(|| panic!("config check does not report {}: {report}", file.display()));
        let config: Value =
            gannet_config::yaml::from_str(&std::fs::read_to_string(file).expect("read"))
                .expect("yaml");
        let analyses: Vec<String> = config["spec"]["pipeline"]["stages"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, s)| s["name"].as_str() == Some("ANALYSIS"))
            .map(|(i, _)| format!("spec.pipeline.stages[{i}]"))
            .collect();
        assert!(!analyses.is_empty(), "{}", file.display());
        let mut errors = 0;
        for e in app["errors"].as_array().expect("errors") {
            let field = e["field"].as_str().unwrap_or("");
            let within = |s: &String| {
                field
                    .strip_prefix(s.as_str())
                    .is_some_and(|r| r.is_empty() || r.starts_with('.'))
            };
            if analyses.iter().any(within) {
                errors += 1;
                let logs = field.ends_with(".with.logs") && e["unsupported"] == true;
                assert!(logs, "{}: {field}: {}", file.display(), e["message"]);
            }
        }
        if errors == 0 {
            clean.extend(file.parent().map(Path::to_owned));
        }
    }
    for example in [
        "v0/cloudrun/analysis",
        "v0/lambda/analysis",
        "v0/kubernetes/analysis-by-metrics",
        "v0/kubernetes/analysis-by-http",
        "v0/kubernetes/analysis-with-baseline",
    ] {
        assert!(clean.contains(&dir.join(example)), "{example}: {clean:?}");
    }
}

/// A call to CloudWatch Logs on moto (JSON 1.1), as the AWS CLI would make it.
fn logs_call(action: &str, body: &Value) -> Value {
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/", moto::endpoint()))
        .header("X-Amz-Target", format!("Logs_20140328.{action}"))
        .header("Content-Type", "application/x-amz-json-1.1")
        .header(
            "Authorization",
            format!("AWS4-HMAC-SHA256 Credential=testing/20240101/{}/logs/aws4_request, SignedHeaders=host, Signature=0", moto::REGION),
        )
        .body(body.to_string())
        .send()
        .expect("moto answers");
    let status = res.status();
    let text = res.text().unwrap_or_default();
    assert!(status.is_success(), "Logs {action}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// ANALYSIS by logs (PipeCD's `logs[]`) on a Lambda canary, with the log group on moto's
/// CloudWatch Logs (Logs Insights' StartQuery and GetQueryResults): v2 logs one error a second,
/// within its check's `maxCount`, and is promoted; v3 logs a hundred a second and is rolled
/// back, the stage naming the check and the count. (moto answers a query with every line of
/// the window, ignoring its filter: the group holds only the lines the query would match.)
#[test]
fn a_canary_judged_by_its_error_lines_is_promoted_under_the_limit_and_rolled_back_over_it() {
    let group = format!("/gannet/e2e/{}", moto::unique("errors"));
    logs_call("CreateLogGroup", &json!({"logGroupName": group}));
    logs_call(
        "CreateLogStream",
        &json!({"logGroupName": group, "logStreamName": "canary"}),
    );
    // `per_second` error lines a second, from 2 s ago to 40 s ahead.
    let log_errors = |per_second: u64| {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("time")
            .as_millis() as u64;
        let events: Vec<Value> = (0..42 * per_second)
            .map(|i| {
                let at = now - 2_000 + i * 1_000 / per_second;
                json!({"timestamp": at, "message": format!("ERROR request {i} failed")})
            })
            .collect();
        logs_call(
            "PutLogEvents",
            &json!({"logGroupName": group, "logStreamName": "canary", "logEvents": events}),
        );
    };
    let analysis = json!({"duration": "6s", "logs": [{"provider": "app-logs",
        "query": "filter @message like /ERROR/", "interval": "2s", "maxCount": 20,
        "failureLimit": 1}]});
    let provider = format!(
        "{{name: app-logs, type: CLOUDWATCH_LOGS, config: {{region: {}, logGroups: ['{group}'], endpoint: '{}'}}}}",
        moto::REGION,
        moto::endpoint()
    );
    let lambda = Lambda::new();
    let v1 = lambda.commit("v1", &analysis);
    let (g, _state) = lambda.start(&provider);
    let d = g.wait_terminal(&g.deploy(LIMIT, &v1), LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");

    log_errors(1);
    let v2 = lambda.commit("v2", &analysis);
    let id = g.deploy(LIMIT, &v2);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    assert_eq!(
        lambda.alias(),
        Some(Routing::all_to("2")),
        "promoted to 100%"
    );
    let log = g.stage_log(&id, ANALYSIS).join("\n");
    assert!(log.contains("[logs[0]] #1:"), "{log}");
    assert!(log.contains("logs[0]: 3 measured, 0 failed"), "{log}");

    log_errors(100);
    let v3 = lambda.commit("v3", &analysis);
    let id = g.deploy(LIMIT, &v3);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}\n{}", g.log());
    let rolled_back = "LAMBDA_CANARY_ROLLOUT SUCCESS, LAMBDA_PROMOTE SUCCESS, ANALYSIS FAILURE, LAMBDA_PROMOTE NOT_STARTED_YET, LAMBDA_ROLLBACK SUCCESS";
    assert_eq!(support::stage_statuses(&d), rolled_back, "{d}");
    assert_eq!(lambda.alias(), Some(Routing::all_to("2")), "back to v2");
    let reason = stage_named(&d, "ANALYSIS")["status_reason"]
        .as_str()
        .unwrap_or("");
    assert!(
        reason.contains("logs[0]: 2 of 2 measurements failed") && reason.contains("more than 20"),
        "{reason}"
    );
}
