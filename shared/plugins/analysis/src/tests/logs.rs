//! Analysis by logs (`logs[]`) on CloudWatch Logs Insights: on moto, which runs `StartQuery`
//! and `GetQueryResults` over the events put with `PutLogEvents` but ignores `filter` and
//! `stats` (every event of the interval is a row), and on a FAKE of CloudWatch Logs that
//! replays the JSON shapes of real Logs Insights answers (`stats count(*)` rows, statistics,
//! queries still running, AWS's errors), for what moto does not do.

use std::collections::VecDeque;

use axum::routing::post;

use super::*;

const REGION: &str = gannet_plugin_aws_common::test_util::REGION;

/// The plugin with `providers`, its AWS providers on fixed test credentials, on `installation`.
fn aws_plugin(
    providers: Value,
    installation: gannet_sdk::registry::Installation,
) -> Arc<AnalysisPlugin> {
    let settings = json!({ "providers": providers });
    let runtime = RuntimeInfo {
        installation,
        ..RuntimeInfo::default()
    };
    let mut plugin = AnalysisPlugin::from_settings(&PluginSettings::new(
        "plugins.analysis",
        &settings,
        &runtime,
    ))
    .expect("providers build");
    plugin.use_test_credentials();
    Arc::new(plugin)
}

fn logs_plugin(providers: Value) -> Arc<AnalysisPlugin> {
    aws_plugin(providers, gannet_sdk::registry::Installation::None)
}

/// What the fake answers for one query, in the order queries are started.
#[derive(Clone, Debug)]
enum Answer {
    /// `Running` for `running` polls, then `Complete` with these rows and statistics.
    Complete {
        running: usize,
        rows: Value,
        matched: f64,
        scanned: f64,
    },
    /// Never complete.
    Running,
    /// `StartQuery` fails with this error type and message.
    Error(&'static str, &'static str),
}

/// `stats count(*)`'s answer: one row.
fn counted(n: u64, scanned: f64) -> Answer {
    Answer::Complete {
        running: 1,
        rows: json!([[{"field": "count(*)", "value": n.to_string()}]]),
        matched: n as f64,
        scanned,
    }
}

#[derive(Default)]
struct Fake {
    answers: VecDeque<Answer>,
    /// Running queries: their id, answer and polls left before they complete.
    queries: Vec<(String, Answer, usize)>,
    /// Every `StartQuery` request body.
    started: Vec<Value>,
    stopped: Vec<String>,
    /// Queries started since the fake started: their ids are unique.
    count: usize,
}

type FakeState = Arc<Mutex<Fake>>;

/// FAKE CloudWatch Logs (JSON 1.1, `X-Amz-Target: Logs_20140328.<operation>`): CloudWatch Logs
/// Insights cannot run here, and moto ignores `filter` and `stats`. It answers `StartQuery`,
/// `GetQueryResults` and `StopQuery` in the shapes of real answers, with what the test queued.
async fn logs_fake(state: FakeState) -> SocketAddr {
    async fn handle(
        State(state): State<FakeState>,
        headers: HeaderMap,
        body: axum::body::Bytes,
    ) -> (StatusCode, HeaderMap, String) {
        let target = headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut fake = state.lock().unwrap();
        let mut out = HeaderMap::new();
        out.insert(
            "content-type",
            "application/x-amz-json-1.1".parse().unwrap(),
        );
        let error = |out: &mut HeaderMap, kind: &str, body: Value| {
            out.insert("x-amzn-errortype", kind.parse().unwrap());
            (StatusCode::BAD_REQUEST, out.clone(), body.to_string())
        };
        match target.as_str() {
            "Logs_20140328.StartQuery" => {
                fake.started.push(request);
                let Some(answer) = fake.answers.pop_front() else {
                    return error(
                        &mut out,
                        "InvalidParameterException",
                        json!({"__type": "InvalidParameterException", "message": "fake: no answer queued for this query"}),
                    );
                };
                if let Answer::Error(kind, message) = answer {
                    // As CloudWatch Logs answers a query it cannot parse.
                    return error(
                        &mut out,
                        kind,
                        json!({"__type": kind, "message": message,
                            "queryCompileError": {"location": {"startCharOffset": 0, "endCharOffset": 1}, "message": message}}),
                    );
                }
                fake.count += 1;
                let id = format!("7f3c1d2e-0000-4000-8000-{:012}", fake.count);
                let running = match &answer {
                    Answer::Complete { running, .. } => *running,
                    _ => usize::MAX,
                };
                fake.queries.push((id.clone(), answer, running));
                (StatusCode::OK, out, json!({"queryId": id}).to_string())
            }
            "Logs_20140328.GetQueryResults" => {
                let id = request["queryId"].as_str().unwrap_or("").to_owned();
                let Some((_, answer, left)) = fake.queries.iter_mut().find(|q| q.0 == id) else {
                    return error(
                        &mut out,
                        "ResourceNotFoundException",
                        json!({"__type": "ResourceNotFoundException", "message": "The specified query could not be found."}),
                    );
                };
                let running = json!({"results": [], "statistics": {"recordsMatched": 0.0,
                    "recordsScanned": 0.0, "estimatedRecordsSkipped": 0.0, "bytesScanned": 0.0,
                    "estimatedBytesSkipped": 0.0, "logGroupsScanned": 0.0}, "status": "Running"});
                let body = match answer {
                    Answer::Complete {
                        rows,
                        matched,
                        scanned,
                        ..
                    } if *left == 0 => json!({"results": rows, "statistics": {
                        "recordsMatched": matched, "recordsScanned": scanned,
                        "estimatedRecordsSkipped": 0.0, "bytesScanned": *scanned * 120.0,
                        "estimatedBytesSkipped": 0.0, "logGroupsScanned": 1.0}, "status": "Complete"}),
                    _ => {
                        *left = left.saturating_sub(1);
                        running
                    }
                };
                (StatusCode::OK, out, body.to_string())
            }
            "Logs_20140328.StopQuery" => {
                let id = request["queryId"].as_str().unwrap_or("").to_owned();
                fake.stopped.push(id);
                (StatusCode::OK, out, json!({"success": true}).to_string())
            }
            other => error(
                &mut out,
                "InvalidAction",
                json!({"__type": "InvalidAction", "message": format!("fake: {other} is not faked")}),
            ),
        }
    }
    serve(Router::new().route("/", post(handle)).with_state(state)).await
}

fn fake_provider(addr: SocketAddr) -> Value {
    json!([{"name": "app-logs", "type": "CLOUDWATCH_LOGS", "config": {"region": REGION,
        "logGroups": ["/app/web", "/app/worker"], "endpoint": format!("http://{addr}")}}])
}

fn queue(state: &FakeState, answers: impl IntoIterator<Item = Answer>) {
    let mut fake = state.lock().unwrap();
    fake.answers = answers.into_iter().collect();
    fake.queries.clear();
    fake.started.clear();
    fake.stopped.clear();
}

#[tokio::test]
async fn log_lines_on_the_fake_pass_under_max_count_then_fail_over_it_each_step_twice() {
    let state = FakeState::default();
    let addr = logs_fake(state.clone()).await;
    let with = json!({"duration": "3m", "logs": [{"provider": "app-logs", "interval": "1m",
        "query": "filter @message like /ERROR/ | stats count(*)", "maxCount": 5, "failureLimit": 1}]});

    // A few errors an interval: 2, none (logs were written, nothing matched), then 4 over two
    // bins of `stats count(*) as errors by bin(30s)`.
    let binned = Answer::Complete {
        running: 0,
        rows: json!([
            [{"field": "bin(30s)", "value": "2026-11-28 09:02:00.000"}, {"field": "errors", "value": "1"}],
            [{"field": "bin(30s)", "value": "2026-11-28 09:02:30.000"}, {"field": "errors", "value": "3"}]]),
        matched: 4.0,
        scanned: 800.0,
    };
    let nothing = Answer::Complete {
        running: 0,
        rows: json!([]),
        matched: 0.0,
        scanned: 950.0,
    };
    queue(&state, [counted(2, 1000.0), nothing, binned]);
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        with.clone(),
        Clock::Virtual,
    );
    d.twice = true;
    let started = d.now;
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    let r = d.record("logs[0]");
    assert_eq!((r.taken, r.failures, r.missed), (3, 0, 0), "{}", d.log());
    for line in [
        "[logs[0]] lines matching on app-logs, at most 5 an interval, every 1m, failureLimit 1",
        "[logs[0]] #1: 2 (expected count <= 5) PASS: 2 matching lines",
        "[logs[0]] #2: 0 (expected count <= 5) PASS: 0 matching lines",
        "[logs[0]] #3: 4 (expected count <= 5) PASS: 4 matching lines",
        "logs[0]: 3 measured, 0 failed",
    ] {
        assert!(d.log().contains(line), "{line}\n{}", d.log());
    }
    {
        let fake = state.lock().unwrap();
        // One query a measurement: the repeated steps queried nothing.
        assert_eq!(fake.started.len(), 3, "{:?}", fake.started);
        let first = &fake.started[0];
        assert_eq!(first["logGroupNames"], json!(["/app/web", "/app/worker"]));
        assert_eq!(
            first["queryString"],
            "filter @message like /ERROR/ | stats count(*)"
        );
        // The first interval, in epoch seconds.
        assert_eq!(first["startTime"], json!(started.0 / 1000));
        assert_eq!(first["endTime"], json!((started.0 + 60_000) / 1000));
        assert!(fake.stopped.is_empty());
    }

    // Over the limit twice: failureLimit 1 allows one failed interval, the second fails.
    queue(&state, [counted(9, 1000.0), counted(12, 1000.0)]);
    let mut d = Driver::new(logs_plugin(fake_provider(addr)), with, Clock::Virtual);
    d.twice = true;
    let reason = failure(d.run().await);
    assert_eq!(
        reason,
        "logs[0]: 2 of 2 measurements failed, more than its failureLimit 1: last: 12 (12 matching lines, more than 5)"
    );
    assert!(
        d.log().contains(
            "[logs[0]] #1: 9 (expected count <= 5) FAIL: 9 matching lines, more than 5 (1 of 1 failures allowed)"
        ),
        "{}",
        d.log()
    );
    assert_eq!(state.lock().unwrap().started.len(), 2);
}

#[tokio::test]
async fn log_provider_errors_timeouts_and_no_data_are_named() {
    let state = FakeState::default();
    let addr = logs_fake(state.clone()).await;
    let check = |extra: Value| {
        let mut log = json!({"provider": "app-logs", "interval": "1m", "query": "filter @message like /ERROR/ | stats count(*)"});
        log.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"duration": "1m", "logs": [log]})
    };

    // A query CloudWatch Logs cannot parse: its error, naming the provider.
    queue(
        &state,
        [Answer::Error(
            "MalformedQueryException",
            "unexpected symbol found | at line 1 and position 1",
        )],
    );
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        check(json!({"query": "| stats"})),
        Clock::Virtual,
    );
    let reason = failure(d.run().await);
    assert!(
        reason.contains("CloudWatch Logs provider \"app-logs\": StartQuery: MalformedQueryException: unexpected symbol found | at line 1"),
        "{reason}"
    );

    // Still running at the check's timeout: failed, and the query stopped.
    queue(&state, [Answer::Running]);
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        check(json!({"timeout": "2s"})),
        Clock::Virtual,
    );
    let took = std::time::Instant::now();
    let reason = failure(d.run().await);
    assert!(
        reason.contains(
            "CloudWatch Logs provider \"app-logs\": the query did not complete within its timeout 2s"
        ),
        "{reason}"
    );
    assert!(
        took.elapsed() < Duration::from_secs(10),
        "{:?}",
        took.elapsed()
    );
    {
        let fake = state.lock().unwrap();
        assert_eq!(fake.stopped.len(), 1, "the query is stopped");
        assert_eq!(fake.queries.last().map(|q| &q.0), fake.stopped.first());
    }

    // Nothing logged at all in the interval: no data, a failure unless skipOnNoData.
    let silent = || Answer::Complete {
        running: 2,
        rows: json!([]),
        matched: 0.0,
        scanned: 0.0,
    };
    queue(&state, [silent()]);
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        check(json!({})),
        Clock::Virtual,
    );
    let reason = failure(d.run().await);
    assert!(
        reason.contains("no data: no log events in the log groups over the interval"),
        "{reason}"
    );
    queue(&state, [silent()]);
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        check(json!({"skipOnNoData": true})),
        Clock::Virtual,
    );
    d.twice = true;
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    assert!(
        d.log().contains(
            "SKIP: no data (no log events in the log groups over the interval); skipOnNoData"
        ),
        "{}",
        d.log()
    );

    // An answer that is not a count says so.
    queue(
        &state,
        [Answer::Complete {
            running: 0,
            rows: json!([[{"field": "status", "value": "500"}, {"field": "errors", "value": "3"}]]),
            matched: 3.0,
            scanned: 10.0,
        }],
    );
    let mut d = Driver::new(
        logs_plugin(fake_provider(addr)),
        check(json!({})),
        Clock::Virtual,
    );
    let reason = failure(d.run().await);
    assert!(
        reason.contains("more than one numeric field (status, errors): name the count `count(*)`"),
        "{reason}"
    );
}

/// PipeCD's own `analysis-by-log` example names a `stackdriver-dev` provider: a STACKDRIVER
/// provider in gannet.yaml is read (a piped's providers carry over) and every use of it fails
/// naming it as not supported, at planning where settings are known and at run time; a name
/// gannet.yaml lacks is named with the ones it has; a provider of the other kind is refused.
#[tokio::test]
async fn a_provider_gannet_cannot_query_or_of_the_wrong_kind_is_named() {
    use gannet_sdk::registry::Installation;
    let example = json!({"duration": "10m", "logs": [{"query": "logName = \"projects/demo/logs/error",
        "interval": "1m", "provider": "stackdriver-dev"}]});
    let providers = json!([
        {"name": "stackdriver-dev", "type": "STACKDRIVER", "config": {"serviceAccountFile": "/etc/gannet/sa.json"}},
        {"name": "app-logs", "type": "CLOUDWATCH_LOGS", "config": {"region": REGION, "logGroups": ["/app/web"], "endpoint": "http://127.0.0.1:1"}},
        {"name": "prom", "type": "PROMETHEUS", "config": {"address": "http://127.0.0.1:1"}},
    ]);
    let not_supported = "the analysis provider \"stackdriver-dev\" is of type STACKDRIVER (Google Cloud Logging), which gannet cannot query (not supported)";

    // `config check` (no settings) accepts the example as written.
    assert!(logs_plugin(json!([]))
        .validate_stage(STAGE_ANALYSIS, &example)
        .is_ok());
    // Planning with settings refuses it, naming the provider and why.
    for installation in [Installation::OneProcess, Installation::Functions] {
        let refused = aws_plugin(providers.clone(), installation)
            .validate_stage(STAGE_ANALYSIS, &example)
            .unwrap_err();
        assert_eq!(refused.field, "logs[0].provider");
        assert!(
            refused.message.starts_with(not_supported),
            "{}",
            refused.message
        );
    }
    // At run time (the settings changed after planning): the measurement fails, naming it.
    let mut d = Driver::new(logs_plugin(json!([])), example.clone(), Clock::Virtual);
    d.plugin = logs_plugin(providers.clone());
    let reason = failure(d.run().await);
    assert!(
        reason.starts_with("logs[0]: 1 of 1 measurements failed, more than its failureLimit 0: last: - (the analysis provider \"stackdriver-dev\" is of type STACKDRIVER"),
        "{reason}"
    );
    assert!(reason.contains("not supported"), "{reason}");
    // Without it in gannet.yaml: named, with the ones there are.
    let mut d = Driver::new(logs_plugin(json!([])), example, Clock::Virtual);
    d.plugin = logs_plugin(json!([providers[1].clone()]));
    let reason = failure(d.run().await);
    assert!(
        reason.contains("no analysis provider named \"stackdriver-dev\" in the controller config (it has: app-logs)"),
        "{reason}"
    );

    // A logs check on a metrics provider, a metrics check on a log provider.
    let planner = aws_plugin(providers, Installation::Functions);
    let logs_on_prom =
        json!({"duration": "1m", "logs": [{"provider": "prom", "query": "x", "interval": "1m"}]});
    let why = planner
        .validate_stage(STAGE_ANALYSIS, &logs_on_prom)
        .unwrap_err()
        .message;
    assert!(
        why.contains("\"prom\" is Prometheus, a metrics provider: a logs check needs a log provider (CLOUDWATCH_LOGS)"),
        "{why}"
    );
    let metrics_on_logs = json!({"duration": "1m", "metrics": [{"provider": "app-logs", "query": "x", "interval": "1m", "expected": {"max": 1}}]});
    let why = planner
        .validate_stage(STAGE_ANALYSIS, &metrics_on_logs)
        .unwrap_err()
        .message;
    assert!(
        why.contains("\"app-logs\" is CLOUDWATCH_LOGS, a log provider"),
        "{why}"
    );
}

#[test]
fn log_options_name_the_field_at_fault() {
    let p = logs_plugin(json!([]));
    let refused = |with: Value| {
        let e = p.validate_stage(STAGE_ANALYSIS, &with).unwrap_err();
        (e.field, e.unsupported)
    };
    let log = |fields: Value| json!({"duration": "5m", "logs": [fields]});
    assert_eq!(
        refused(log(json!({"query": "x", "interval": "1m"}))),
        ("logs[0].provider".to_owned(), false)
    );
    assert_eq!(
        refused(log(json!({"provider": "l", "interval": "1m"}))),
        ("logs[0].query".to_owned(), false)
    );
    assert_eq!(
        refused(log(json!({"provider": "l", "query": "x"}))),
        ("logs[0].interval".to_owned(), false)
    );
    assert_eq!(
        refused(log(
            json!({"provider": "l", "query": "x", "interval": "1m", "maxCount": -1})
        )),
        ("logs[0].maxCount".to_owned(), false)
    );
    assert_eq!(
        refused(log(
            json!({"provider": "l", "query": "x", "interval": "1m", "maxcount": 1})
        )),
        ("logs[0].maxcount".to_owned(), false)
    );
    assert_eq!(
        refused(log(json!({"template": {"name": "errors"}}))),
        ("logs[0].template".to_owned(), true)
    );
    // PipeCD's fields, all of them.
    let stored = p
        .validate_stage(
            STAGE_ANALYSIS,
            &log(
                json!({"provider": "l", "query": "x", "interval": "1m", "failureLimit": 2,
                "skipOnNoData": true, "timeout": "45s"}),
            ),
        )
        .unwrap();
    let o = AnalysisOptions::from_stored(&stored).unwrap();
    assert_eq!(o.checks[0].failure_limit, 2);
    assert!(o.checks[0].skip_on_no_data);
    assert_eq!(o.checks[0].timeout, GoDuration::from_secs(45));
    assert_eq!(
        o.checks[0].kind,
        CheckKind::Log {
            provider: "l".into(),
            query: "x".into(),
            max_count: 0
        }
    );
}

#[tokio::test]
async fn log_lines_on_moto_pass_then_fail_each_step_twice() {
    use aws_sdk_cloudwatchlogs::types::InputLogEvent;
    let endpoint = gannet_plugin_aws_common::test_util::moto_endpoint();
    let config = gannet_plugin_aws_common::sdk_config(
        AwsFields {
            name: "t",
            region: REGION,
            role_arn: None,
            endpoint: Some(&endpoint),
        },
        Some(gannet_plugin_aws_common::test_util::credentials()),
    )
    .await;
    let logs = aws_sdk_cloudwatchlogs::Client::new(&config);
    let run = gannet_sdk::test_run::unique("gannet-test");
    let start = now();
    // moto ignores `filter`: each group holds only the lines the query matches (errors).
    // quiet: one error an interval; noisy: one, then three, then three.
    for (group, per_interval) in [("quiet", [1, 1, 1]), ("noisy", [1, 3, 3])] {
        let name = format!("/{run}/{group}");
        logs.create_log_group()
            .log_group_name(&name)
            .send()
            .await
            .unwrap();
        logs.create_log_stream()
            .log_group_name(&name)
            .log_stream_name("web")
            .send()
            .await
            .unwrap();
        let mut events = Vec::new();
        for (interval, n) in per_interval.iter().enumerate() {
            for i in 0..*n {
                let at = start.0 as i64 + 60_000 * interval as i64 + 5_000 + 1_000 * i;
                events.push(
                    InputLogEvent::builder()
                        .timestamp(at)
                        .message(format!("ERROR request {interval}.{i} failed"))
                        .build()
                        .unwrap(),
                );
            }
        }
        logs.put_log_events()
            .log_group_name(&name)
            .log_stream_name("web")
            .set_log_events(Some(events))
            .send()
            .await
            .unwrap();
    }
    let provider = |name: &str, group: &str| {
        json!([{"name": name, "type": "CLOUDWATCH_LOGS", "config": {"region": REGION,
            "logGroups": [format!("/{run}/{group}")], "endpoint": endpoint}}])
    };
    let with = |name: &str| {
        json!({"duration": "3m", "logs": [{"provider": name, "interval": "1m", "maxCount": 1,
            "failureLimit": 1, "query": "fields @timestamp, @message | filter @message like /ERROR/"}]})
    };
    // The stage reading log group `name` through a provider of that name.
    let driver = |name: &str| {
        let mut d = Driver::new(
            logs_plugin(provider(name, name)),
            with(name),
            Clock::Virtual,
        );
        d.now = start;
        d
    };

    let mut d = driver("quiet");
    d.twice = true;
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    let r = d.record("logs[0]");
    assert_eq!((r.taken, r.failures), (3, 0), "{}", d.log());
    assert!(
        d.log()
            .contains("[logs[0]] #2: 1 (expected count <= 1) PASS: 1 matching line"),
        "{}",
        d.log()
    );

    let mut d = driver("noisy");
    d.twice = true;
    let reason = failure(d.run().await);
    assert_eq!(
        reason,
        "logs[0]: 2 of 3 measurements failed, more than its failureLimit 1: last: 3 (3 matching lines, more than 1)",
        "{}",
        d.log()
    );

    // A log group that does not exist: AWS's error, naming the provider.
    let mut d = driver("gone");
    let reason = failure(d.run().await);
    assert!(
        reason.contains("CloudWatch Logs provider \"gone\": StartQuery: ResourceNotFoundException: The specified log group does not exist."),
        "{reason}"
    );
}
