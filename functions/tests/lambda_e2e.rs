//! End to end on moto: the functions' real handlers, driven by a harness that plays the
//! Lambda service (see `support`), deploy a `LambdaApp` to moto's Lambda API. A canary runs
//! to SUCCESS (its AWS requests counted per service and operation); a failing SCRIPT_RUN rolls
//! the canary back; a plan that dies before its message is sent is re-driven by `resume`
//! within one interval; a step record delivered again after its visibility timeout changes
//! nothing; bad records go to the dead-letter queue without failing their batch-mates.
//!
//! These tests need moto: `make test` starts it and sets GANNET_MOTO_ENDPOINT; without it they
//! fail saying how to start it.

// The helpers allow their own dead code (each test file uses a part of them).
#[path = "../../tests/lambda_moto/mod.rs"]
mod lambda_moto;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gannet_domain::app::SyncStatus;
use gannet_domain::deployment::{DeploymentStatus, StageStatus};
use gannet_domain::ports::{QueueName, Store};
use gannet_domain::DeploymentId;
use gannet_functions::{Function, Runtime};
use lambda_moto as moto;
use lambda_moto::Routing;
use serde_json::{json, Value};
use support::stack::Template;
use support::{owned, stages, Lab, LabOptions};

const APP_DIR: &str = "apps/fn";
const ALIAS: &str = "Service";

fn lambda_app(stages: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n  pipeline:\n    stages:\n{stages}"
    )
}

fn function_yaml(function: &str, bucket: &str, key: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {function}\n  role: {}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  s3Bucket: {bucket}\n  s3Key: {key}\n",
        moto::ROLE
    )
}

/// The five-stage canary of the issue, with short waits.
const CANARY: &str = "      - name: LAMBDA_CANARY_ROLLOUT
      - name: WAIT
        with: {duration: 0s}
      - name: LAMBDA_PROMOTE
        with: {percent: 50}
      - name: WAIT
        with: {duration: 2s}
      - name: LAMBDA_PROMOTE
        with: {percent: 100}
";

const CANARY_STAGES: [(&str, StageStatus); 6] = [
    ("LAMBDA_CANARY_ROLLOUT", StageStatus::Success),
    ("WAIT", StageStatus::Success),
    ("LAMBDA_PROMOTE", StageStatus::Success),
    ("WAIT", StageStatus::Success),
    ("LAMBDA_PROMOTE", StageStatus::Success),
    ("LAMBDA_ROLLBACK", StageStatus::NotStartedYet),
];

/// A lab with one Lambda function already deployed at version 1 (the first deployment, a
/// quick sync).
struct Canary {
    lab: Lab,
    function: String,
    bucket: String,
}

impl Canary {
    fn new(prefix: &str, options: LabOptions) -> Self {
        moto::ensure_role();
        let mut c = Self {
            lab: Lab::new(options),
            function: moto::unique(prefix),
            bucket: moto::unique("code").to_lowercase(),
        };
        moto::create_bucket(&c.bucket);
        let v1 = c.commit("v1", CANARY);
        let id = c.push(&v1);
        let d = c.lab.drive_to_end(&id);
        assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
        assert_eq!(
            stages(&d),
            owned(&[
                ("LAMBDA_SYNC", StageStatus::Success),
                ("LAMBDA_ROLLBACK", StageStatus::NotStartedYet)
            ]),
            "the first deployment is a quick sync"
        );
        assert_eq!(c.alias(), Some(Routing::all_to("1")));
        c
    }

    /// Uploads code `version` and commits a manifest deploying it with `stages`.
    fn commit(&self, version: &str, stages: &str) -> String {
        let key = format!("{version}.zip");
        moto::put_object(&self.bucket, &key, moto::zip_bytes(version));
        self.lab.repo.commit(
            &[
                (&format!("{APP_DIR}/app.pipecd.yaml"), &lambda_app(stages)),
                (
                    &format!("{APP_DIR}/function.yaml"),
                    &function_yaml(&self.function, &self.bucket, &key),
                ),
            ],
            &format!("deploy {version}"),
        )
    }

    /// A signed push of `commit` through the webhook function; returns its deployment.
    fn push(&mut self, commit: &str) -> DeploymentId {
        let (status, body) = self.lab.push(commit);
        assert_eq!(status, 202, "{body}");
        assert_eq!(body["status"], "queued", "{body}");
        self.lab.deployment_of(commit)
    }

    /// How many deployments the API lists.
    fn deployment_count(&mut self) -> usize {
        self.lab.api("GET", "/api/v1/deployments").1["deployments"]
            .as_array()
            .map_or(0, Vec::len)
    }

    fn alias(&self) -> Option<Routing> {
        moto::alias(&self.function, ALIAS)
    }

    fn versions(&self) -> Vec<String> {
        moto::versions(&self.function)
    }
}

#[test]
fn a_five_stage_canary_runs_to_success_and_its_aws_requests_are_counted() {
    let mut c = Canary::new("canary", LabOptions::default());
    let v2 = c.commit("v2", CANARY);
    // Count from the push of the new commit on.
    c.lab.proxy.take();
    c.lab.proxy.take_units();
    c.lab.invocations.clear();
    c.lab.busy.clear();
    c.lab.esm.clear();

    let id = c.push(&v2);
    let mut during_wait = None;
    c.lab
        .drive_until("the canary to finish", support::LIMIT, |lab| {
            let d = lab.deployment(&id);
            if d.stages[3].status == StageStatus::Running && during_wait.is_none() {
                during_wait = Some(moto::alias(&c.function, ALIAS));
            }
            d.status.is_terminal()
        });
    let requests = c.lab.proxy.take();
    let units = c.lab.proxy.take_units();
    let busy = c.lab.busy.clone();
    let invocations = c.lab.invocations.clone();
    let esm = c.lab.esm.clone();

    let d = c.lab.deployment(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    assert_eq!(stages(&d), owned(&CANARY_STAGES));
    assert_eq!(
        during_wait,
        Some(Some(Routing::split("2", "1", 0.5))),
        "during the second WAIT, version 2 has 50% and version 1 the rest"
    );
    assert_eq!(
        c.alias(),
        Some(Routing::all_to("2")),
        "100%: no routing config"
    );
    assert_eq!(c.versions(), ["1", "2"]);

    // The api function answers through lambda_http with the same JSON as `gannet up`.
    let (status, body) = c.lab.api("GET", &format!("/api/v1/deployments/{id}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deployment"]["status"], "SUCCESS", "{body}");

    let cost = report(&requests, &units, &invocations, &busy, &esm);
    assert!(cost > 0.0 && cost < 0.01, "${cost} per deployment");
    let count = |service: &str, op: &str| {
        requests
            .get(&(service.to_owned(), op.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    let total: u64 = requests.values().sum();
    assert!(
        (20..600).contains(&total),
        "{total} AWS requests for one deployment"
    );
    assert!(
        requests
            .keys()
            .all(|(service, _)| ["dynamodb", "sqs", "lambda"].contains(&service.as_str())),
        "only DynamoDB, SQS and Lambda are called: {requests:?}"
    );
    // Every stage's outcome is a conditional write; publishing happens exactly once.
    assert!(count("dynamodb", "TransactWriteItems") + count("dynamodb", "PutItem") >= 6);
    assert_eq!(count("lambda", "PublishVersion"), 1, "{requests:?}");
    assert_eq!(
        count("lambda", "UpdateAlias"),
        2,
        "50% then 100%: {requests:?}"
    );
    assert_eq!(invocations.get(&Function::Webhook), Some(&1));
    for f in [Function::Trigger, Function::Plan, Function::Notify] {
        assert!(
            invocations.get(&f).is_some_and(|n| (1..50).contains(n)),
            "{f}: {invocations:?}"
        );
    }
    assert!(
        invocations
            .get(&Function::Stage)
            .is_some_and(|n| (5..50).contains(n)),
        "at least one stage invocation per stage: {invocations:?}"
    );
}

/// Prints the request table and writes it as JSON for BENCHMARKS.md.
/// us-east-1 list prices (USD), on-demand, as of 2026-11.
mod price {
    /// DynamoDB on-demand, per read / write request unit.
    pub const RRU: f64 = 0.125e-6;
    pub const WRU: f64 = 0.625e-6;
    /// SQS standard, per request (64 KB chunk).
    pub const SQS_REQUEST: f64 = 0.40e-6;
    /// Lambda, per invocation and per GB-second on arm64.
    pub const LAMBDA_REQUEST: f64 = 0.20e-6;
    pub const LAMBDA_GB_SECOND_ARM: f64 = 0.000_013_333_4;
}

/// The memory infra/template.yaml gives each function, in MB.
fn memory_mb(f: Function) -> f64 {
    if f == Function::Stage {
        512.0
    } else {
        256.0
    }
}

/// Prints the request table and the cost it comes to, writes both as JSON for BENCHMARKS.md,
/// and returns the cost of the deployment in dollars.
fn report(
    requests: &support::counting::Counts,
    units: &support::counting::Units,
    invocations: &BTreeMap<Function, u64>,
    busy: &BTreeMap<Function, Duration>,
    esm: &BTreeMap<&'static str, u64>,
) -> f64 {
    let mut by_service: BTreeMap<&str, u64> = BTreeMap::new();
    println!("AWS requests of one five-stage LambdaApp canary (push to SUCCESS):");
    println!("| service | operation | requests |\n|---|---|---|");
    for ((service, operation), n) in requests {
        println!("| {service} | {operation} | {n} |");
        *by_service.entry(service).or_default() += n;
    }
    for (service, n) in &by_service {
        println!("| {service} | (all) | {n} |");
    }
    println!("\n| function | invocations |\n|---|---|");
    for (f, n) in invocations {
        println!("| {f} | {n} |");
    }
    println!("\n| event source mapping (harness) | calls |\n|---|---|");
    for (call, n) in esm {
        println!("| {call} | {n} |");
    }
    let (rru, wru) = units
        .values()
        .fold((0, 0), |(r, w), (ur, uw)| (r + ur, w + uw));
    let sqs = by_service.get("sqs").copied().unwrap_or(0) + esm.values().sum::<u64>();
    let calls: u64 = invocations.values().sum();
    let gb_seconds: f64 = busy
        .iter()
        .map(|(f, t)| t.as_secs_f64() * memory_mb(*f) / 1024.0)
        .sum();
    let lines = [
        ("DynamoDB reads", rru as f64, price::RRU, "RRU"),
        ("DynamoDB writes", wru as f64, price::WRU, "WRU"),
        (
            "SQS requests (functions + event source mapping)",
            sqs as f64,
            price::SQS_REQUEST,
            "requests",
        ),
        (
            "Lambda invocations",
            calls as f64,
            price::LAMBDA_REQUEST,
            "invocations",
        ),
        (
            "Lambda duration (arm64)",
            gb_seconds,
            price::LAMBDA_GB_SECOND_ARM,
            "GB-s",
        ),
    ];
    println!("\n| cost item | quantity | unit price | dollars |\n|---|---|---|---|");
    let mut total = 0.0;
    for (item, quantity, unit_price, unit) in lines {
        let dollars = quantity * unit_price;
        total += dollars;
        println!("| {item} | {quantity:.2} {unit} | ${unit_price:.10} | ${dollars:.7} |");
    }
    println!("| **per deployment** | | | **${total:.6}** |");
    let json = json!({
        "deployment": "LambdaApp canary: LAMBDA_CANARY_ROLLOUT, WAIT 0s, LAMBDA_PROMOTE 50, WAIT 2s, LAMBDA_PROMOTE 100; from the signed push to SUCCESS",
        "aws_requests": requests
            .iter()
            .map(|((service, operation), n)| json!({"service": service, "operation": operation, "requests": n}))
            .collect::<Vec<_>>(),
        "aws_requests_by_service": by_service,
        "aws_requests_total": requests.values().sum::<u64>(),
        "function_invocations": invocations.iter().map(|(f, n)| (f.name(), *n)).collect::<BTreeMap<_, _>>(),
        "event_source_mapping_calls": esm,
        "dynamodb_capacity_units": units.iter().map(|(op, (r, w))| (op.clone(), json!({"read": r, "write": w}))).collect::<BTreeMap<_, _>>(),
        "lambda_busy_ms": busy.iter().map(|(f, t)| (f.name(), t.as_millis() as u64)).collect::<BTreeMap<_, _>>(),
        "lambda_gb_seconds": gb_seconds,
        "dollars_per_deployment": total,
        "note": "Requests from the functions' clients (DynamoDB, SQS, Lambda deploy target), counted by a proxy in front of moto. The event source mapping's calls are the harness's: one non-empty ReceiveMessage per batch and one DeleteMessageBatch per batch with successes; Lambda's real pollers also long-poll while idle.",
    });
    let path = std::env::var_os("GANNET_REQUESTS_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| target_dir().join("gannet-aws-requests.json"));
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    println!("\nwritten to {}", path.display());
    total
}

/// `$CARGO_TARGET_DIR`, or the target directory this test binary was built in.
fn target_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return dir.into();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<binary>
    exe.ancestors()
        .nth(3)
        .map(std::path::Path::to_path_buf)
        .expect("the target directory")
}

#[test]
fn a_failing_script_after_the_promote_rolls_the_canary_back_to_the_old_version() {
    let failing = "      - name: LAMBDA_CANARY_ROLLOUT
      - name: LAMBDA_PROMOTE
        with: {percent: 50}
      - name: SCRIPT_RUN
        with: {run: 'echo checking; exit 1'}
";
    let mut c = Canary::new("rollback", LabOptions::default());
    let v2 = c.commit("v2", failing);
    let id = c.push(&v2);
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Failure, "{d:?}");
    assert_eq!(
        stages(&d),
        owned(&[
            ("LAMBDA_CANARY_ROLLOUT", StageStatus::Success),
            ("LAMBDA_PROMOTE", StageStatus::Success),
            ("SCRIPT_RUN", StageStatus::Failure),
            ("LAMBDA_ROLLBACK", StageStatus::Success),
        ]),
        "{d:?}"
    );
    assert!(
        d.status_reason.contains("stage-2 failed"),
        "{}",
        d.status_reason
    );
    assert_eq!(
        c.alias(),
        Some(Routing::all_to("1")),
        "the alias routes everything to the old version again"
    );
    assert_eq!(c.versions(), ["1", "2"]);
}

#[test]
fn a_script_runs_as_a_codebuild_job_not_in_the_stage_function_and_its_output_reaches_the_log() {
    let script = "      - name: SCRIPT_RUN
        with:
          run: 'echo \"from $SR_APPLICATION_NAME at $(pwd | sed s,.*/,,)\"; test -z \"$GANNET_TABLE\" && echo no-gannet-env'
";
    let mut c = Canary::new("job", LabOptions::default());
    let v2 = c.commit("v2", &format!("{script}      - name: LAMBDA_SYNC\n"));
    let id = c.push(&v2);
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    let stage = &d.stages[0];
    assert_eq!(stage.name, "SCRIPT_RUN");
    let key = stage
        .metadata
        .get("job")
        .expect("the stage recorded its job");
    assert!(c.lab.played.contains(key), "the job ran as a build: {key}");
    let log: Vec<String> = c
        .lab
        .rt
        .block_on(c.lab.store.logs(&d.id, &stage.id, 0, usize::MAX))
        .expect("stage log")
        .into_iter()
        .map(|l| l.text)
        .collect();
    for want in [
        "from fn at work",
        "no-gannet-env",
        "Script finished successfully",
    ] {
        assert!(log.iter().any(|l| l == want), "{want:?} not in {log:?}");
    }
    assert!(
        !log.iter().any(|l| l.starts_with("[Container]")),
        "CodeBuild's own lines stay out of the stage log: {log:?}"
    );
}

#[test]
fn the_api_knows_its_caller_by_the_iam_principal() {
    let mut c = Canary::new("caller", LabOptions::default());
    let sync = "/api/v1/apps/fn/sync";
    let before = c.deployment_count();
    // No IAM context: nobody is identified, nothing changes.
    let (status, body) = c.lab.api_as(None, "POST", sync, Some(json!({})));
    assert_eq!(status, 401, "{body}");
    // Nobody acts as someone else.
    let deployer = "arn:aws:sts::123456789012:assumed-role/Deployer/session-7";
    let (status, body) = c.lab.api_as(
        Some(deployer),
        "POST",
        sync,
        Some(json!({"commander": "bob"})),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(c.deployment_count(), before, "refusals start nothing");
    // The principal, named and given its role through GANNET_CALLER_NAMES, is the commander.
    let (status, body) = c.lab.api_as(Some(deployer), "POST", sync, Some(json!({})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deployment"]["commander"], "alice", "{body}");
    let (_, body) = c.lab.api_as(Some(deployer), "GET", "/api/v1/whoami", None);
    assert_eq!(
        body["caller"],
        json!({"name": "alice", "role": "deployer"}),
        "{body}"
    );
    // An admin is mapped by a prefix: every session of the role is that admin.
    let admin = "arn:aws:sts::123456789012:assumed-role/Admin/oncall-3";
    let (_, body) = c.lab.api_as(Some(admin), "GET", "/api/v1/whoami", None);
    assert_eq!(
        body["caller"],
        json!({"name": "erin", "role": "admin"}),
        "{body}"
    );
    // alice's deployment of the head is still under way: without `force` the sync answers
    // with it.
    let (status, body) = c.lab.api_as(
        Some(admin),
        "POST",
        sync,
        Some(json!({"key": "erin", "force": true})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deployment"]["commander"], "erin", "{body}");
    // Without a role in the table (an entry with a name only, or no entry: an IAM user is
    // then named by its user name) the caller is a viewer, whatever its IAM policy allows:
    // whoami says so (the web console shows no controls), reads are answered and a sync is
    // refused, storing nothing.
    for (principal, name) in [
        ("arn:aws:iam::123456789012:user/ops/vic", "vic"),
        ("arn:aws:iam::123456789012:user/ops/carol", "carol"),
    ] {
        let caller = Some(principal);
        let (status, body) = c.lab.api_as(caller, "GET", "/api/v1/whoami", None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["caller"],
            json!({"name": name, "role": "viewer"}),
            "{body}"
        );
        assert_eq!(body["may"]["deploy"], false, "{body}");
        for read in ["/api/v1/apps", "/api/v1/deployments", "/api/v1/apps/fn"] {
            let (status, body) = c.lab.api_as(caller, "GET", read, None);
            assert_eq!(status, 200, "{name} GET {read}: {body}");
        }
        let before = c.deployment_count();
        let (status, body) = c.lab.api_as(caller, "POST", sync, Some(json!({})));
        assert_eq!(status, 403, "{body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("{name} has the role viewer"))),
            "{body}"
        );
        assert_eq!(
            c.deployment_count(),
            before,
            "{name}'s refusal stored nothing"
        );
    }
}

/// The api function answers only events from its own HTTP API: an event naming another API or
/// account, or without the API's context, is refused with 403 (JSON) before any route runs,
/// whoever it claims signed it; and the function does not start without knowing its API.
#[test]
fn the_api_function_refuses_events_not_from_its_http_api() {
    let mut c = Canary::new("forged", LabOptions::default());
    let sync = "/api/v1/apps/fn/sync";
    let before = c.deployment_count();
    let admin = Some(support::OPS_PRINCIPAL);
    let genuine = support::http_api_event(admin, "POST", sync, Some(json!({"key": "forged"})));
    let read = support::http_api_event(admin, "GET", "/api/v1/apps", None);
    let forged = |event: &Value, change: &dyn Fn(&mut Value)| {
        let mut event = event.clone();
        change(&mut event);
        event
    };
    let another_api = |e: &mut Value| e["requestContext"]["apiId"] = json!("a1b2c3d4e5");
    let cases = [
        ("another API", forged(&genuine, &another_api)),
        (
            "another account",
            forged(&genuine, &|e| {
                e["requestContext"]["accountId"] = json!("210987654321")
            }),
        ),
        (
            "no API id",
            forged(&genuine, &|e| {
                e["requestContext"]
                    .as_object_mut()
                    .map(|ctx| ctx.remove("apiId"));
            }),
        ),
        (
            "no account",
            forged(&genuine, &|e| {
                e["requestContext"]["accountId"] = Value::Null
            }),
        ),
        ("a read from another API", forged(&read, &another_api)),
    ];
    for (what, event) in cases {
        let (status, body) = c.lab.api_event(&event);
        assert_eq!(status, 403, "{what}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("only requests through its own HTTP API")),
            "{what}: {body}"
        );
    }
    assert_eq!(
        c.deployment_count(),
        before,
        "no forged event started anything"
    );
    // The same event from the stack's API is answered.
    let (status, body) = c.lab.api_event(&genuine);
    assert_eq!(status, 200, "{body}");
    assert_eq!(c.deployment_count(), before + 1);
    // Without GANNET_API_ID and GANNET_ACCOUNT_ID the api function does not start.
    let mut config = c.lab.config.clone();
    config.http_api = None;
    let started = c
        .lab
        .rt
        .block_on(Runtime::with_clients(Function::Api, &config, &c.lab.direct));
    let err = started.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("set GANNET_API_ID and GANNET_ACCOUNT_ID"),
        "{err}"
    );
}

/// The approval gate on AWS: an IAM principal mapped to `deployer` cannot force a quick sync
/// past WAIT_APPROVAL, what it may start waits for the approval, and an admin's skip (a
/// principal mapped to `admin` by a prefix) is recorded with its reason.
#[test]
fn an_iam_deployer_cannot_skip_the_approval_gate_and_an_admins_skip_is_recorded() {
    const GATED: &str = "      - name: LAMBDA_CANARY_ROLLOUT
      - name: WAIT_APPROVAL
        with: {approvers: [alice]}
      - name: LAMBDA_PROMOTE
        with: {percent: 100}
";
    let mut c = Canary::new("gate", LabOptions::default());
    let dora = Some("arn:aws:iam::123456789012:user/ops/dora");
    let erin = Some("arn:aws:sts::123456789012:assumed-role/Admin/oncall-1");
    let sync = "/api/v1/apps/fn/sync";
    let at_the_gate = |c: &mut Canary, id: &DeploymentId| {
        c.lab
            .drive_until("the deployment waits for approval", support::LIMIT, |lab| {
                lab.deployment(id)
                    .stages
                    .iter()
                    .any(|s| s.name == "WAIT_APPROVAL" && s.status == StageStatus::Running)
            });
        assert_eq!(
            c.alias(),
            Some(Routing::all_to("1")),
            "nothing promoted before the approval"
        );
    };
    let cancel = |c: &mut Canary, id: &DeploymentId| {
        let (status, body) = c.lab.api_as(
            dora,
            "POST",
            &format!("/api/v1/deployments/{id}/cancel"),
            Some(json!({})),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(c.lab.drive_to_end(id).status, DeploymentStatus::Cancelled);
    };
    let v2 = c.commit("v2", GATED);
    let id = c.push(&v2);
    at_the_gate(&mut c, &id);
    cancel(&mut c, &id);
    let count = c.lab.api("GET", "/api/v1/deployments").1["deployments"]
        .as_array()
        .map_or(0, Vec::len);
    let (status, body) = c
        .lab
        .api_as(dora, "POST", sync, Some(json!({"strategy": "QUICK_SYNC"})));
    assert_eq!(status, 403, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("dora has the role deployer") && error.contains("only an admin may skip"),
        "{body}"
    );
    assert_eq!(
        c.lab.api("GET", "/api/v1/deployments").1["deployments"]
            .as_array()
            .map_or(0, Vec::len),
        count,
        "the refusal stored nothing"
    );
    c.lab
        .drive_until("the queues are quiet", support::LIMIT, |_| true);
    assert_eq!(c.alias(), Some(Routing::all_to("1")));
    // What the deployer may start waits for the approval.
    let (status, body) = c.lab.api_as(dora, "POST", sync, Some(json!({})));
    assert_eq!(status, 200, "{body}");
    let id = DeploymentId::parse(body["deployment"]["id"].as_str().expect("id")).expect("id");
    at_the_gate(&mut c, &id);
    cancel(&mut c, &id);
    // An admin skips it, saying why; the deployment records who and why.
    let (status, body) = c.lab.api_as(
        erin,
        "POST",
        sync,
        Some(json!({"strategy": "QUICK_SYNC", "reason": "sev1"})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["deployment"]["gate_skip"],
        json!({"by": "erin", "reason": "sev1"}),
        "{body}"
    );
    let id = DeploymentId::parse(body["deployment"]["id"].as_str().expect("id")).expect("id");
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    assert_eq!(d.trigger.gate_skip.map(|s| s.by).as_deref(), Some("erin"));
    // The canaries that waited published versions; the quick sync routes to a newer one.
    let newest = c.versions().last().cloned().expect("versions");
    assert_ne!(newest, "1");
    assert_eq!(c.alias(), Some(Routing::all_to(&newest)));
}

#[test]
fn the_drift_function_finds_an_alias_repointed_by_hand() {
    let mut c = Canary::new("drift", LabOptions::default());
    let sweep = |c: &mut Canary| {
        let done = c.lab.drift();
        assert_eq!(done["job"], "drift", "{done}");
        assert_eq!(done["checks"], 1, "one check per app: {done}");
        c.lab
            .drive_until("the drift checks", support::LIMIT, |_| true);
        let apps = c.lab.apps();
        assert_eq!(apps.len(), 1, "{apps:?}");
        apps.into_iter().next().expect("the app")
    };
    let app = sweep(&mut c);
    assert_eq!(app.sync_status, SyncStatus::Synced, "{app:?}");
    assert!(app.drift.is_empty(), "{app:?}");

    // Someone gives the function more memory by hand and points the alias at that version.
    moto::update_memory(&c.function, 256);
    let by_hand = moto::publish_version(&c.function);
    moto::update_alias(&c.function, ALIAS, &Routing::all_to(&by_hand));

    let app = sweep(&mut c);
    assert_eq!(app.sync_status, SyncStatus::OutOfSync, "{app:?}");
    assert!(
        app.drift
            .iter()
            .any(|f| f.field.contains("memory") && f.git == "128" && f.live == "256"),
        "the drifted field is named with both values: {app:?}"
    );
    assert!(
        c.lab.deployments().iter().all(|d| d.status.is_terminal()),
        "onOutOfSync is off by default: no deployment starts"
    );
}

/// Milliseconds since the epoch, as the store's clock reads them.
fn now_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    u64::try_from(since.as_millis()).expect("millis")
}

#[test]
fn a_plan_that_dies_before_sending_its_message_is_redriven_by_resume_within_one_interval() {
    let mut c = Canary::new(
        "crash",
        LabOptions {
            resume_interval: Some("3s"),
            ..LabOptions::default()
        },
    );
    let v2 = c.commit("v2", CANARY);
    let (status, body) = c.lab.push(&v2);
    assert_eq!(status, 202, "{body}");
    assert_eq!(c.lab.deliver(QueueName::Trigger), 1, "the push's trigger");
    let id = c
        .lab
        .find_deployment(&v2)
        .expect("the trigger made the deployment");

    // The plan function whose SQS sends fail at once (a closed port, no retries): it writes
    // the plan to DynamoDB, then cannot send the step message, as if it died between the two.
    let broken = {
        let mut clients = c.lab.rt.block_on(support::clients_on(&c.lab.proxy.url));
        let closed = c.lab.rt.block_on(support::sdk_on(&format!(
            "http://127.0.0.1:{}",
            support::closed_port()
        )));
        let sqs = aws_sdk_sqs::config::Builder::from(&closed)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build();
        clients.sqs = aws_sdk_sqs::Client::from_conf(sqs);
        c.lab
            .rt
            .block_on(Runtime::with_clients(
                Function::Plan,
                &c.lab.config,
                &clients,
            ))
            .expect("the broken plan function starts")
    };
    let plan = c.lab.receive(QueueName::Plan, support::VISIBILITY_SECONDS);
    assert_eq!(plan.len(), 1, "one plan message");
    let response = c.lab.invoke_with(&broken, QueueName::Plan, &plan);
    assert_eq!(
        response.batch_item_failures.len(),
        1,
        "the dying plan reports its record failed"
    );
    // A crashed invocation's record would come back and be dropped as stale; drop it now.
    c.lab.drop_message(QueueName::Plan, &plan[0]);

    let d = c.lab.deployment(&id);
    assert_eq!(
        d.status,
        DeploymentStatus::Planned,
        "the plan was written: {d:?}"
    );
    let interval = c.lab.config.intervals.resume.as_millis();
    let lease_end = d.due_at.0 + interval;
    assert!(
        now_ms() < lease_end,
        "the crash took longer than a resume interval"
    );
    c.lab.round();
    assert_eq!(
        c.lab.deployment(&id),
        d,
        "the queues hold nothing that carries the deployment on"
    );
    assert_eq!(
        c.lab.resume(),
        json!({"job": "resume", "steps": 0, "plans": 0, "chains": 0}),
        "within its lease the deployment is left alone"
    );

    std::thread::sleep(Duration::from_millis(
        lease_end.saturating_sub(now_ms()) + 100,
    ));
    assert_eq!(
        c.lab.resume(),
        json!({"job": "resume", "steps": 1, "plans": 0, "chains": 0}),
        "one resume interval after the crash, the sweep sends the step again"
    );
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    assert_eq!(stages(&d), owned(&CANARY_STAGES));
    assert_eq!(c.alias(), Some(Routing::all_to("2")));
    assert_eq!(c.versions(), ["1", "2"]);
}

#[test]
fn a_step_record_delivered_again_after_its_visibility_timeout_changes_nothing() {
    let mut c = Canary::new("again", LabOptions::default());
    let v2 = c.commit("v2", CANARY);
    let (status, body) = c.lab.push(&v2);
    assert_eq!(status, 202, "{body}");
    assert_eq!(c.lab.deliver(QueueName::Trigger), 1);
    assert_eq!(c.lab.deliver(QueueName::Plan), 1);
    let id = c
        .lab
        .find_deployment(&v2)
        .expect("the trigger made the deployment");

    // The first step (LAMBDA_CANARY_ROLLOUT publishes version 2): handled, never deleted.
    let first = c.lab.receive(QueueName::Stage, 2);
    assert_eq!(first.len(), 1, "one step message");
    let response = c.lab.invoke(QueueName::Stage, &first);
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let after_once = c.lab.deployment(&id);
    assert_eq!(
        after_once.stages[0].status,
        StageStatus::Success,
        "{after_once:?}"
    );
    assert_eq!(c.versions(), ["1", "2"]);

    // SQS delivers it again once its visibility timeout has passed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let again = loop {
        let got = c.lab.receive(QueueName::Stage, 2);
        if let Some(m) = got.iter().find(|m| m.message_id() == first[0].message_id()) {
            break m.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the record was not delivered again within 20 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let receives = again
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
        })
        .cloned();
    assert_eq!(
        receives.as_deref(),
        Some("2"),
        "the same record, second delivery"
    );
    let response = c.lab.invoke(QueueName::Stage, std::slice::from_ref(&again));
    assert!(
        response.batch_item_failures.is_empty(),
        "a stale step is done with: {response:?}"
    );
    c.lab
        .delete_done(QueueName::Stage, std::slice::from_ref(&again), &response);
    let after_twice = c.lab.deployment(&id);
    assert_eq!(after_twice.seq, after_once.seq, "no step was taken twice");
    assert_eq!(stages(&after_twice), stages(&after_once));
    assert_eq!(c.versions(), ["1", "2"], "no version was published again");

    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    assert_eq!(c.versions(), ["1", "2"]);
    assert_eq!(c.alias(), Some(Routing::all_to("2")));
}

/// Sends `body` to `queue` straight to moto (with a `due_at` attribute when given).
fn send_raw(lab: &Lab, queue: QueueName, body: &str, due_at: Option<u64>) {
    let mut send = lab
        .direct
        .sqs
        .send_message()
        .queue_url(&lab.made.queues[&queue].queue)
        .message_body(body);
    if let Some(due) = due_at {
        send = send.message_attributes(
            gannet_aws::DUE_AT,
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("Number")
                .string_value(due.to_string())
                .build()
                .expect("attribute"),
        );
    }
    lab.rt.block_on(send.send()).expect("SendMessage");
}

#[test]
fn bad_records_are_dead_lettered_with_their_reason_without_failing_their_batch_mates() {
    let broken = support::unique("broken");
    let mut lab = Lab::new(LabOptions {
        extra_repos: vec![json!({"id": broken, "url": "/nonexistent/gannet-e2e-repo"})],
        ..LabOptions::default()
    });
    lab.repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  pipeline:\n    stages:\n      - name: WAIT\n        with: {duration: 0s}\n",
        )],
        "web",
    );
    let trigger = |repo: &str| {
        json!({"v": 1, "type": "trigger", "repo": repo, "cause": {"kind": "poll"}}).to_string()
    };
    let far = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("millis")
        + 3_600_000;
    let sent = [
        ("good", trigger(&lab.repo_id), None),
        ("not json", "this is not JSON".to_owned(), None),
        (
            "wrong version",
            json!({"v": 2, "type": "trigger", "repo": lab.repo_id}).to_string(),
            None,
        ),
        ("git fails", trigger(&broken), None),
        ("early hop", trigger(&lab.repo_id), Some(far)),
    ];
    for (_, body, due) in &sent {
        send_raw(&lab, QueueName::Trigger, body, *due);
    }
    let mut batch = Vec::new();
    for _ in 0..20 {
        batch.extend(lab.receive(QueueName::Trigger, support::VISIBILITY_SECONDS));
        if batch.len() == sent.len() {
            break;
        }
    }
    assert_eq!(batch.len(), sent.len(), "one batch of every record");
    let id_of = |what: &str| {
        let (_, body, due) = sent.iter().find(|(w, _, _)| *w == what).expect("sent");
        batch
            .iter()
            .find(|m| {
                m.body() == Some(body.as_str())
                    && m.message_attributes()
                        .is_some_and(|a| a.contains_key(gannet_aws::DUE_AT))
                        == due.is_some()
            })
            .and_then(|m| m.message_id())
            .expect("received")
            .to_owned()
    };

    let response = lab.invoke(QueueName::Trigger, &batch);
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(
        failed,
        [id_of("git fails").as_str()],
        "only the record that can succeed later fails"
    );
    lab.delete_done(QueueName::Trigger, &batch, &response);

    // The good record ran: the app has a deployment, and its plan message is queued.
    let deployments = lab.deployments();
    assert_eq!(deployments.len(), 1, "{deployments:?}");
    assert_eq!(
        lab.receive(QueueName::Plan, 1).len(),
        1,
        "the good trigger queued a plan"
    );

    // The undecodable ones wait in the DLQ with their reasons.
    let letters = lab
        .rt
        .block_on(gannet_domain::ports::Queue::dead_letters(
            lab.runtime(Function::Trigger).queue(),
            QueueName::Trigger,
        ))
        .expect("dead letters");
    let mut reasons: Vec<(String, String)> = letters
        .iter()
        .map(|l| (l.body.clone(), l.reason.clone()))
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0].0, "this is not JSON");
    assert!(
        reasons[0]
            .1
            .starts_with("cannot decode message: message is not JSON with a version"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].1.contains("message version 2 is not supported"),
        "{reasons:?}"
    );

    // The early hop was sent on toward its due time, not handled; the failed record comes
    // back after its retry delay, counted as its second receive.
    let attributes = lab
        .rt
        .block_on(
            lab.direct
                .sqs
                .get_queue_attributes()
                .queue_url(&lab.made.queues[&QueueName::Trigger].queue)
                .attribute_names(
                    aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed,
                )
                .send(),
        )
        .expect("GetQueueAttributes");
    let delayed = attributes
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        })
        .cloned();
    assert_eq!(
        delayed.as_deref(),
        Some("1"),
        "the forwarded hop waits, delayed"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let again = loop {
        let got = lab.receive(QueueName::Trigger, support::VISIBILITY_SECONDS);
        if let Some(m) = got.into_iter().next() {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the failed record did not come back within 15 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(again.body(), Some(trigger(&broken).as_str()));
}

#[test]
fn the_webhook_function_answers_each_request_as_github_needs() {
    let mut lab = Lab::new(LabOptions::default());
    let head = lab.repo.commit(&[("README", "hi")], "first");
    let body = support::push_payload(&lab.repo, &head);
    let good = gannet_events::github::sign(support::SECRET.as_bytes(), body.as_bytes());
    let bad = gannet_events::github::sign(b"not the secret", body.as_bytes());
    let ping = json!({"zen": "Keep it logically awesome.", "hook_id": 1}).to_string();
    let ping_sig = gannet_events::github::sign(support::SECRET.as_bytes(), ping.as_bytes());
    // (what, event header, delivery, signature, method, body) → (status, outcome)
    let cases = [
        (
            (
                "bad signature",
                "push",
                "d1",
                Some(bad.as_str()),
                "POST",
                body.as_str(),
            ),
            (401, "rejected"),
        ),
        (
            ("no signature", "push", "d2", None, "POST", body.as_str()),
            (401, "rejected"),
        ),
        (
            ("not POST", "push", "d3", Some(good.as_str()), "GET", ""),
            (405, "rejected"),
        ),
        (
            (
                "ping",
                "ping",
                "d4",
                Some(ping_sig.as_str()),
                "POST",
                ping.as_str(),
            ),
            (200, "pong"),
        ),
        (
            (
                "push",
                "push",
                "d5",
                Some(good.as_str()),
                "POST",
                body.as_str(),
            ),
            (202, "queued"),
        ),
        (
            (
                "same delivery again",
                "push",
                "d5",
                Some(good.as_str()),
                "POST",
                body.as_str(),
            ),
            (200, "duplicate"),
        ),
    ];
    for ((what, event, delivery, signature, method, body), (status, outcome)) in cases {
        let mut headers = vec![("x-github-event", event), ("x-github-delivery", delivery)];
        headers.extend(signature.map(|s| ("x-hub-signature-256", s)));
        let (got, answer) = lab.webhook(&headers, method, body);
        assert_eq!(
            (got, answer["status"].as_str()),
            (status, Some(outcome)),
            "{what}: {answer}"
        );
    }
    let queued = lab.receive(QueueName::Trigger, support::VISIBILITY_SECONDS);
    assert_eq!(queued.len(), 1, "one trigger, for the one accepted push");

    // The Scheduler's poll queues a trigger for every repository.
    assert_eq!(lab.poll(), json!({"job": "poll", "triggers": 1}));
    let polled = lab.receive(QueueName::Trigger, support::VISIBILITY_SECONDS);
    let bodies: Vec<Value> = polled
        .iter()
        .filter_map(|m| serde_json::from_str(m.body().unwrap_or_default()).ok())
        .collect();
    assert_eq!(
        bodies,
        [json!({"v": 1, "type": "trigger", "repo": lab.repo_id, "cause": {"kind": "poll"}})]
    );
}

/// Creates a Secrets Manager secret on moto holding `value`; returns its ARN.
fn secret(lab: &Lab, value: &str) -> String {
    lab.rt
        .block_on(
            lab.direct
                .secrets
                .create_secret()
                .name(support::unique("secret"))
                .secret_string(value)
                .send(),
        )
        .expect("CreateSecret")
        .arn()
        .expect("ARN")
        .to_owned()
}

/// Creates an SSM `SecureString` parameter on moto holding `value`; returns its ARN.
fn parameter(lab: &Lab, value: &str) -> String {
    let name = format!("/gannet/{}", support::unique("parameter"));
    lab.rt.block_on(async {
        lab.direct
            .ssm
            .put_parameter()
            .name(&name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
            .send()
            .await
            .expect("PutParameter");
        lab.direct
            .ssm
            .get_parameter()
            .name(&name)
            .send()
            .await
            .expect("GetParameter")
            .parameter
            .and_then(|p| p.arn)
            .expect("ARN")
    })
}

fn stored(arn: &str) -> gannet_functions::config::SecretArn {
    gannet_functions::config::SecretArn::parse(arn).expect("a secret or parameter ARN")
}

#[test]
fn each_function_starts_with_the_secrets_it_needs_or_says_what_is_missing() {
    use gannet_functions::config::{GithubConfig, WebhookSecret};
    let lab = Lab::new(LabOptions::default());
    let token = secret(&lab, r#"{"token":"ghp_e2etoken"}"#);
    let not_json = secret(&lab, "ghp_plain");
    let missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:nothing-here".to_owned();
    let token_in_ssm = parameter(&lab, r#"{"token":"ghp_e2etoken"}"#);
    let not_json_in_ssm = parameter(&lab, "ghp_plain");
    let hook_in_ssm = parameter(&lab, "ghp_hook");
    let missing_in_ssm = "arn:aws:ssm:us-east-1:123456789012:parameter/gannet/nothing-here";
    let on_github = |mut c: gannet_functions::FunctionConfig, arn: Option<&str>| {
        c.repos[0].url = None;
        c.repos[0].github = Some("acme/shop".into());
        c.github = GithubConfig {
            secret_arn: arn.map(stored),
            api_url: None,
        };
        c
    };
    let base = lab.config.clone();
    let with_webhook_secret = |arn: Option<&str>| gannet_functions::FunctionConfig {
        webhook_secret: arn.map(|a| WebhookSecret::Arn(stored(a))),
        ..base.clone()
    };
    // A Slack receiver's URL is a secret only the notify function reads.
    let with_slack = |arn: &str| gannet_functions::FunctionConfig {
        receivers: vec![gannet_functions::config::ReceiverConfig {
            name: "team".into(),
            target: gannet_functions::config::ReceiverTarget::Slack(stored(arn)),
        }],
        ..base.clone()
    };
    let mut no_trigger_queue = base.clone();
    no_trigger_queue.queues.remove(&QueueName::Trigger);
    let not_json_in_ssm_error = format!("GANNET_GITHUB_SECRET_ARN: SSM parameter {not_json_in_ssm} is not GitHub credentials: GitHub secret is not valid JSON");
    let cases = [
        (Function::Trigger, on_github(base.clone(), None), "GANNET_REPOS lists GitHub repositories, so the trigger function needs GANNET_GITHUB_SECRET_ARN"),
        (Function::Trigger, on_github(base.clone(), Some(&token)), ""),
        (Function::Notify, on_github(base.clone(), Some(&token)), ""),
        (Function::Plan, on_github(base.clone(), Some(&not_json)), "is not GitHub credentials: GitHub secret is not valid JSON"),
        (Function::Stage, on_github(base.clone(), Some(&missing)), "GANNET_GITHUB_SECRET_ARN: reading Secrets Manager secret arn:aws:secretsmanager:us-east-1:123456789012:secret:nothing-here"),
        (Function::Webhook, on_github(base.clone(), None), ""),
        (Function::Resume, on_github(base.clone(), None), ""),
        (Function::Webhook, with_webhook_secret(None), "the webhook function needs the webhook secret"),
        (Function::Webhook, with_webhook_secret(Some(&missing)), "GANNET_WEBHOOK_SECRET_ARN: reading Secrets Manager secret arn:aws:secretsmanager:us-east-1:123456789012:secret:nothing-here"),
        (Function::Trigger, no_trigger_queue, "the trigger function consumes the trigger queue, but GANNET_QUEUES has no trigger entry"),
        // The same secrets as SSM parameters.
        (Function::Trigger, on_github(base.clone(), Some(&token_in_ssm)), ""),
        (Function::Notify, on_github(base.clone(), Some(&token_in_ssm)), ""),
        (Function::Plan, on_github(base.clone(), Some(&not_json_in_ssm)), not_json_in_ssm_error.as_str()),
        (Function::Stage, on_github(base.clone(), Some(missing_in_ssm)), "GANNET_GITHUB_SECRET_ARN: reading SSM parameter arn:aws:ssm:us-east-1:123456789012:parameter/gannet/nothing-here"),
        (Function::Webhook, with_webhook_secret(Some(&hook_in_ssm)), ""),
        (Function::Webhook, with_webhook_secret(Some(missing_in_ssm)), "GANNET_WEBHOOK_SECRET_ARN: reading SSM parameter arn:aws:ssm:us-east-1:123456789012:parameter/gannet/nothing-here"),
        (Function::Notify, with_slack(&hook_in_ssm), ""),
        (Function::Notify, with_slack(missing_in_ssm), "GANNET_RECEIVERS: reading SSM parameter arn:aws:ssm:us-east-1:123456789012:parameter/gannet/nothing-here"),
        (Function::Trigger, with_slack(missing_in_ssm), ""),
    ];
    for (function, config, want) in cases {
        let started = lab
            .rt
            .block_on(Runtime::with_clients(function, &config, &lab.direct));
        match started {
            Ok(_) => assert_eq!(want, "", "{function} started"),
            Err(err) => {
                let chain = gannet_controller::error_chain(&err);
                assert!(
                    !want.is_empty() && chain.contains(want),
                    "{function}: {chain}"
                );
                assert!(!chain.contains("ghp_"), "no secret in errors: {chain}");
            }
        }
    }
}

#[test]
fn the_webhook_checks_signatures_with_the_secret_from_secrets_manager_or_ssm() {
    use gannet_functions::config::WebhookSecret;
    let lab = Lab::new(LabOptions::default());
    let value = "webhook-secret-in-a-store";
    let ping = json!({"zen": "Design for failure.", "hook_id": 2}).to_string();
    let signed_with = |key: &[u8]| gannet_events::github::sign(key, ping.as_bytes());
    for arn in [secret(&lab, value), parameter(&lab, value)] {
        let config = gannet_functions::FunctionConfig {
            webhook_secret: Some(WebhookSecret::Arn(stored(&arn))),
            ..lab.config.clone()
        };
        let runtime = lab
            .rt
            .block_on(Runtime::with_clients(
                Function::Webhook,
                &config,
                &lab.direct,
            ))
            .unwrap_or_else(|e| panic!("{arn}: {}", gannet_controller::error_chain(&e)));
        for (key, want) in [(value.as_bytes(), 200), (b"another secret".as_slice(), 401)] {
            let signature = signed_with(key);
            let event = support::function_url_event(
                &[
                    ("x-github-event", "ping"),
                    ("x-github-delivery", &support::unique("delivery")),
                    ("x-hub-signature-256", &signature),
                ],
                "POST",
                &ping,
            );
            let request = lambda_http::request::from_str(&event).expect("a Function URL event");
            let response = lab
                .rt
                .block_on(gannet_functions::http::webhook(&runtime, request));
            assert_eq!(response.status().as_u16(), want, "{arn}");
        }
    }
}

/// A `TerraformApp` whose state is in a moto bucket (S3 backend, S3 lockfile); only the
/// built-in `terraform_data` resource, so nothing is downloaded.
fn terraform_app(bucket: &str, image: &str, stages: &str) -> [(String, String); 2] {
    let main_tf = format!(
        r#"terraform {{
  backend "s3" {{
    bucket                      = "{bucket}"
    key                         = "infra/terraform.tfstate"
    region                      = "us-east-1"
    endpoints                   = {{ s3 = "{moto}" }}
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_region_validation      = true
    use_lockfile                = true
  }}
}}
resource "terraform_data" "app" {{
  input = "{image}"
}}
"#,
        moto = support::moto_endpoint(),
    );
    let config = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n{stages}"
    );
    [
        ("apps/infra/app.pipecd.yaml".to_owned(), config),
        ("apps/infra/main.tf".to_owned(), main_tf),
    ]
}

#[test]
fn terraform_plans_and_applies_as_codebuild_jobs_with_the_plan_carried_in_the_jobs_bucket() {
    terraform_plans_and_applies_as_jobs(LabOptions::default());
}

/// The same on the SAM stack, every function as its role: the stage function's role signs the
/// jobs' URLs, and the builds reach the bucket only through them (the job role has no S3
/// rights), so the hand-off passes only because the template grants what it must.
#[test]
fn on_the_sam_stack_terraform_plans_and_applies_as_jobs_through_their_urls() {
    terraform_plans_and_applies_as_jobs(LabOptions {
        stack: Some(Template::Sam),
        ..LabOptions::default()
    });
}

fn terraform_plans_and_applies_as_jobs(options: LabOptions) {
    let mut lab = Lab::new(options);
    let state = moto::unique("tfstate").to_lowercase();
    moto::create_bucket(&state);
    let commit = |lab: &Lab, image: &str, stages: &str| {
        let files = terraform_app(&state, image, stages);
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        lab.repo.commit(&files, image)
    };
    let first = commit(&lab, "nginx:1", "");
    let (status, body) = lab.push(&first);
    assert_eq!(status, 202, "{body}");
    let id = lab.deployment_of(&first);
    let d = lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "the quick sync: {d:?}");

    let pipeline =
        "  pipeline:\n    stages:\n      - name: TERRAFORM_PLAN\n      - name: TERRAFORM_APPLY\n";
    let second = commit(&lab, "nginx:2", pipeline);
    let (status, body) = lab.push(&second);
    assert_eq!(status, 202, "{body}");
    let id = lab.deployment_of(&second);
    let d = lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    let (plan, apply) = (&d.stages[0], &d.stages[1]);
    let plan_job = plan.metadata.get("job").expect("the plan's job");
    assert!(lab.played.contains(plan_job), "the plan ran as a build");
    assert_eq!(
        plan.metadata.get("planSummary").map(String::as_str),
        Some("Plan: 0 to add, 1 to change, 0 to destroy.")
    );
    let log: Vec<String> = lab
        .rt
        .block_on(lab.store.logs(&d.id, &apply.id, 0, usize::MAX))
        .expect("stage log")
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert!(
        log.iter().any(|l| l.contains(plan_job.as_str())),
        "the apply applies the plan's job's file: {log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.starts_with("Apply complete! Resources: 0 added, 1 changed")),
        "{log:?}"
    );
    // The saved plan travelled in the apply job's own tarball (its build reaches the bucket
    // only through that job's URLs).
    let apply_job = apply.metadata.get("job").expect("the apply's job");
    let source = lab
        .rt
        .block_on(
            lab.direct_jobs
                .s3
                .get_object()
                .bucket(&lab.jobs.bucket)
                .key(format!("jobs/{apply_job}/source.tar.gz"))
                .send(),
        )
        .expect("the apply's tarball");
    let source = lab
        .rt
        .block_on(source.body.collect())
        .expect("its bytes")
        .into_bytes();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&source[..]));
    let names: Vec<String> = archive
        .entries()
        .expect("a tarball")
        .map(|e| {
            e.expect("an entry")
                .path()
                .expect("a path")
                .display()
                .to_string()
        })
        .collect();
    assert!(
        names.iter().any(|n| n == "in/plan.tfplan"),
        "the saved plan was given to the apply's job: {names:?}"
    );
}

#[test]
fn the_stage_function_deploys_to_cloud_run_with_workload_identity_federation_from_its_role() {
    // Google's APIs cannot run here: the fake Cloud Run Admin API v2 (with Google's STS and IAM
    // credentials endpoints) stands in for them, marked as a fake in its crate.
    let fake = gannet_cloudrun_fake::FakeRun::start();
    fake.set_polls_until_done(1);
    let target = json!({
        "name": "gcp", "project": "gannet-test", "region": "us-central1",
        "apiEndpoint": fake.url(),
        "workloadIdentity": {
            "audience": fake.wif_audience(),
            "serviceAccount": fake.impersonated_email(),
            "tokenUrl": format!("{}/v1/token", fake.url()),
            "iamCredentialsEndpoint": fake.url(),
        },
    });
    let mut plugins = serde_json::Map::new();
    plugins.insert("cloudrun".into(), json!({"deployTargets": [target]}));
    let mut lab = Lab::new(LabOptions {
        extra_plugins: plugins,
        ..LabOptions::default()
    });
    let service = "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - image: gcr.io/demo/web:v1\n";
    let commit = lab.repo.commit(
        &[
            (
                "apps/run/app.pipecd.yaml",
                "apiVersion: pipecd.dev/v1beta1\nkind: CloudRunApp\nspec:\n  name: run\n",
            ),
            ("apps/run/service.yaml", service),
        ],
        "deploy to Cloud Run",
    );
    let (status, body) = lab.push(&commit);
    assert_eq!(status, 202, "{body}");
    let id = lab.deployment_of(&commit);
    let d = lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    let revision = format!("web-v1-{}", &commit[..7]);
    assert_eq!(fake.traffic("web"), [(revision, 100)]);
    // The signed GetCallerIdentity carried the function's AWS identity (moto's test keys);
    // Google then acted as the impersonated service account.
    assert_eq!(
        fake.aws_access_key_ids(),
        [std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default()]
    );
    assert_eq!(
        fake.service("web").expect("service")["creator"],
        fake.impersonated_email()
    );
}

/// gannet's own stack, made from `template` on the IAM-enforcing moto, with every function
/// running as its role from the stack (support::stack): the canary runs webhook → trigger →
/// plan → five stages → notify to SUCCESS, the API answers its callers by their roles, and
/// the drift function finds a change made by hand. Any call a role's policies do not allow
/// fails with AWS's AccessDenied, so the run passing is the template granting enough.
fn the_stack_runs_a_deployment_with_every_function_as_its_role(template: Template) {
    let mut c = Canary::new(
        "stack",
        LabOptions {
            stack: Some(template),
            ..LabOptions::default()
        },
    );
    let v2 = c.commit("v2", CANARY);
    let id = c.push(&v2);
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{template:?}: {d:?}");
    assert_eq!(stages(&d), owned(&CANARY_STAGES));
    assert_eq!(c.alias(), Some(Routing::all_to("2")));

    // The api function, as its role: an admin reads, a viewer is refused a sync.
    let (status, body) = c.lab.api("GET", &format!("/api/v1/deployments/{id}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deployment"]["status"], "SUCCESS", "{body}");
    let viewer = Some("arn:aws:iam::123456789012:user/ops/vic");
    let (status, body) = c
        .lab
        .api_as(viewer, "POST", "/api/v1/apps/fn/sync", Some(json!({})));
    assert_eq!(status, 403, "{body}");

    // The scheduled functions, as their roles: the poll queues a check per repository, the
    // resume sweep finds nothing stuck.
    let polled = c.lab.poll();
    assert_eq!(polled["job"], "poll", "{polled}");
    let resumed = c.lab.resume();
    assert_eq!(resumed["job"], "resume", "{resumed}");
    c.lab
        .drive_until("the poll's trigger", support::LIMIT, |_| true);

    // The drift function, as its role, sees a version made by hand behind the alias.
    moto::update_memory(&c.function, 256);
    let by_hand = moto::publish_version(&c.function);
    moto::update_alias(&c.function, ALIAS, &Routing::all_to(&by_hand));
    let done = c.lab.drift();
    assert_eq!(done["checks"], 1, "{done}");
    c.lab
        .drive_until("the drift check", support::LIMIT, |_| true);
    let apps = c.lab.apps();
    assert_eq!(apps[0].sync_status, SyncStatus::OutOfSync, "{apps:?}");
}

#[test]
fn the_sam_stack_runs_a_deployment_with_every_function_as_its_role() {
    the_stack_runs_a_deployment_with_every_function_as_its_role(Template::Sam);
}

#[test]
fn the_cdk_stack_runs_a_deployment_with_every_function_as_its_role() {
    the_stack_runs_a_deployment_with_every_function_as_its_role(Template::Cdk);
}

/// A permission missing from a role fails the call that needs it with AWS's AccessDenied,
/// which names the action and the resource, and loses nothing: the trigger function's role
/// without the table's write policy cannot record a push, whose record stays queued; with the
/// policy back, its retry deploys.
#[test]
fn a_permission_missing_from_a_role_fails_the_call_naming_the_action_and_resource() {
    let mut c = Canary::new(
        "denied",
        LabOptions {
            stack: Some(Template::Sam),
            ..LabOptions::default()
        },
    );
    let stack = c.lab.stack.as_ref().expect("on the stack");
    let role_arn = stack.function(Function::Trigger)["role"]
        .as_str()
        .expect("a role")
        .to_owned();
    let role = role_arn.rsplit('/').next().expect("a role name").to_owned();
    let write = stack.described["resources"]["TableWritePolicy"]["physical"]
        .as_str()
        .expect("the policy's ARN")
        .to_owned();
    let table = format!(
        "arn:aws:dynamodb:us-east-1:123456789012:table/{}",
        c.lab.made.table
    );
    let decisions = support::stack::Decisions::from_env();
    c.lab.iam(&[
        "detach-role-policy",
        "--role-name",
        &role,
        "--policy-arn",
        &write,
    ]);

    let v2 = c.commit("v2", CANARY);
    let (status, body) = c.lab.push(&v2);
    assert_eq!(status, 202, "{body}");
    let messages = c.lab.receive(QueueName::Trigger, 1);
    assert_eq!(messages.len(), 1);
    let response = c.lab.invoke(QueueName::Trigger, &messages);
    assert_eq!(
        response.batch_item_failures.len(),
        1,
        "the trigger cannot record the push: its record fails"
    );
    c.lab.delete_done(QueueName::Trigger, &messages, &response);
    let denied = decisions.denied(&role);
    assert!(
        denied
            .iter()
            .any(|d| d.action.starts_with("dynamodb:") && d.resource.starts_with(&table)),
        "the denial names a DynamoDB write on the table: {denied:?}"
    );
    assert!(
        c.lab.deployments().len() == 1,
        "only the first deployment exists"
    );

    c.lab.iam(&[
        "attach-role-policy",
        "--role-name",
        &role,
        "--policy-arn",
        &write,
    ]);
    // The record comes back after its visibility timeout (1 s here), and deploys.
    std::thread::sleep(Duration::from_millis(1_100));
    let id = c.lab.deployment_of(&v2);
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
}

/// A deployment chain on gannet's SAM stack, every function as its role: the LambdaApp's
/// SUCCESS starts the chain (the stage function writes it with the deployment), the chain
/// messages ride the plan queue (the plan function starts each block's deployments), the two
/// chained apps' scripts run as CodeBuild jobs in order, and the API shows the chain. The
/// chain record and its listing are DynamoDB's (the store conformance suite covers both).
#[test]
fn a_chain_runs_on_the_stack_block_after_block_as_the_functions_roles() {
    let mut c = Canary::new(
        "chain",
        LabOptions {
            stack: Some(Template::Sam),
            ..LabOptions::default()
        },
    );
    moto::put_object(&c.bucket, "v2.zip", moto::zip_bytes("v2"));
    let head = format!(
        "{}  postSync:\n    chain:\n      applications:\n        - name: one\n        - name: two\n",
        lambda_app("      - name: LAMBDA_SYNC\n")
    );
    let chained = |name: &str| {
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: {name}\n  trigger:\n    onCommit: {{disabled: true}}\n    onChain: {{disabled: false}}\n  pipeline:\n    stages:\n      - name: SCRIPT_RUN\n        with: {{run: 'echo chained {name}'}}\n"
        )
    };
    let v2 = c.lab.repo.commit(
        &[
            (&format!("{APP_DIR}/app.pipecd.yaml"), &head),
            (
                &format!("{APP_DIR}/function.yaml"),
                &function_yaml(&c.function, &c.bucket, "v2.zip"),
            ),
            ("apps/one/app.pipecd.yaml", &chained("one")),
            ("apps/two/app.pipecd.yaml", &chained("two")),
        ],
        "chain one and two",
    );
    let (status, body) = c.lab.push(&v2);
    assert_eq!(status, 202, "{body}");
    let mut head_deployment = None;
    c.lab
        .drive_until("the LambdaApp's deployment", support::LIMIT, |lab| {
            head_deployment = lab
                .deployments()
                .into_iter()
                .find(|d| d.commit.sha.as_str() == v2 && d.app_name == "fn");
            head_deployment.is_some()
        });
    let id = head_deployment.expect("deployed").id;
    assert_eq!(c.lab.drive_to_end(&id).status, DeploymentStatus::Success);
    let chain_id = gannet_domain::ChainId::of(&id);
    let store = c.lab.store.clone();
    let read = |lab: &Lab| {
        lab.rt
            .block_on(store.chain(&chain_id))
            .expect("read the chain")
    };
    c.lab
        .drive_until("the chain to end", support::LIMIT, |lab| {
            let ch = read(lab);
            eprintln!(
                "DEBUG {:?}",
                ch.as_ref().map(|c| (
                    c.status,
                    c.status_reason.clone(),
                    c.version,
                    c.blocks
                        .iter()
                        .map(|b| (
                            b.status,
                            b.nodes
                                .iter()
                                .map(|n| (n.status, n.reason.clone()))
                                .collect::<Vec<_>>()
                        ))
                        .collect::<Vec<_>>()
                ))
            );
            ch.is_some_and(|ch| ch.status.is_terminal())
        });
    let chain = read(&c.lab).expect("the chain exists");
    assert_eq!(
        chain.status,
        gannet_domain::chain::ChainStatus::Success,
        "{chain:#?}"
    );
    let deployed: Vec<_> = chain.blocks[1..]
        .iter()
        .map(|b| {
            let node = &b.nodes[0];
            let d = c
                .lab
                .deployment(node.deployment.as_ref().expect("deployed"));
            (node.app_name.clone(), d.status, d.trigger.kind)
        })
        .collect();
    assert_eq!(
        deployed,
        [
            (
                "one".to_owned(),
                DeploymentStatus::Success,
                gannet_domain::deployment::TriggerKind::OnChain
            ),
            (
                "two".to_owned(),
                DeploymentStatus::Success,
                gannet_domain::deployment::TriggerKind::OnChain
            ),
        ]
    );
    let one = c
        .lab
        .deployment(chain.blocks[1].nodes[0].deployment.as_ref().unwrap());
    let two = c
        .lab
        .deployment(chain.blocks[2].nodes[0].deployment.as_ref().unwrap());
    assert!(
        one.completed_at <= Some(two.created_at),
        "block 2 after block 1"
    );
    let (status, body) = c.lab.api("GET", &format!("/api/v1/chains/{id}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["chain"]["status"], "SUCCESS", "{body}");
    let only_chained = c.lab.deployments().iter().all(|d| {
        d.app_name == "fn" || d.trigger.kind == gannet_domain::deployment::TriggerKind::OnChain
    });
    assert!(
        only_chained,
        "onCommit is off for one and two: only the chain deploys them"
    );
    let (status, body) = c.lab.api("GET", "/api/v1/chains?status=RUNNING");
    assert_eq!(
        (status, body["chains"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{body}"
    );
    // The resume sweep, as its role, reads the running chains by their index: none now.
    let resumed = c.lab.resume();
    assert_eq!(resumed["chains"], 0, "{resumed}");
}

/// An RSA private key in PKCS#8 PEM, made as the docs say (`openssl genpkey`).
fn sealing_key() -> String {
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("PEM")
}

/// The stage, drift and api functions read the sealing key when they start (a bad one stops
/// them, naming the variable and never showing the value); the others never read it.
#[test]
fn only_the_stage_drift_and_api_functions_read_the_sealing_key_and_a_bad_one_stops_them() {
    let lab = Lab::new(LabOptions::default());
    let key = sealing_key();
    let public = gannet_sdk::sealed::SealingKey::from_pem(&key)
        .expect("a key")
        .public_pem();
    let good = parameter(&lab, &key);
    let not_a_key = parameter(
        &lab,
        "-----BEGIN PRIVATE KEY-----\nbm90LWEta2V5LXNlY3JldA==\n-----END PRIVATE KEY-----\n",
    );
    let missing = "arn:aws:ssm:us-east-1:123456789012:parameter/gannet/no-sealing-key";
    let with_key = |arn: &str| gannet_functions::FunctionConfig {
        sealing_key: Some(stored(arn)),
        ..lab.config.clone()
    };
    for function in Function::ALL {
        let reads = function.reads_sealing_key();
        assert_eq!(
            reads,
            matches!(function, Function::Stage | Function::Drift | Function::Api)
        );
        let start = |config: &gannet_functions::FunctionConfig| {
            lab.rt
                .block_on(Runtime::with_clients(function, config, &lab.direct))
        };
        let runtime = start(&with_key(&good))
            .unwrap_or_else(|e| panic!("{function}: {}", gannet_controller::error_chain(&e)));
        assert_eq!(
            runtime.controller().sealing_public_key().as_deref(),
            reads.then_some(public.as_str()),
            "{function}"
        );
        for (arn, want) in [
            (
                not_a_key.as_str(),
                format!(
                    "GANNET_SEALING_KEY_ARN: SSM parameter {not_a_key} is not an RSA private key"
                ),
            ),
            (
                missing,
                format!("GANNET_SEALING_KEY_ARN: reading SSM parameter {missing}"),
            ),
        ] {
            match start(&with_key(arn)) {
                Ok(_) => assert!(!reads, "{function} started with {arn}"),
                Err(err) => {
                    let chain = gannet_controller::error_chain(&err);
                    assert!(reads && chain.starts_with(&want), "{function}: {chain}");
                    assert_eq!(
                        chain.matches("is not an RSA private key").count(),
                        usize::from(arn == not_a_key),
                        "said once: {chain}"
                    );
                    assert!(
                        !chain.contains("bm90LWEta2V5"),
                        "no value in errors: {chain}"
                    );
                }
            }
        }
    }
}

/// Sealed secrets on gannet's SAM stack, every function as its role: the private key is an SSM
/// SecureString (`SealingKeyArn`) that the stage, drift and api functions read when they
/// start. The api function serves its public key; a value sealed with it as `gannet encrypt`
/// seals reaches the deployed function's environment through a decryption target, the drift
/// check opens it too (the app stays in sync), and it is in no stage log or API answer. The
/// trigger function's role may not read the key.
#[test]
fn on_the_sam_stack_a_sealed_secret_opens_with_the_key_in_ssm_as_the_stage_role() {
    let key = sealing_key();
    let mut c = Canary::new(
        "sealed",
        LabOptions {
            stack: Some(Template::Sam),
            sealing_key: Some(key.clone()),
            ..LabOptions::default()
        },
    );
    let arn = c.lab.sealing_key_arn.clone().expect("the key's parameter");
    let stack = c.lab.stack.as_ref().expect("on the stack");
    for f in Function::ALL {
        assert_eq!(
            stack.environment(f).get("GANNET_SEALING_KEY_ARN"),
            f.reads_sealing_key().then_some(&arn),
            "{f}'s environment"
        );
    }
    let role_name = |f: Function| {
        let arn = stack.function(f)["role"].as_str().expect("a role");
        arn.rsplit('/').next().expect("a role name").to_owned()
    };
    let (stage_role, trigger_role) = (role_name(Function::Stage), role_name(Function::Trigger));
    let trigger_arn = stack.function(Function::Trigger)["role"]
        .as_str()
        .expect("a role")
        .to_owned();

    // `gannet encrypt`: the public key from the api function, the value sealed with it.
    let (status, body) = c.lab.api("GET", "/api/v1/secrets/public-key");
    assert_eq!(status, 200, "{body}");
    let public = body["publicKey"].as_str().expect("a public key").to_owned();
    assert_eq!(
        public,
        gannet_sdk::sealed::SealingKey::from_pem(&key)
            .expect("a key")
            .public_pem()
    );
    assert!(!body.to_string().contains("PRIVATE"), "{body}");
    let plain = "db-pa55-sealed-for-lambda";
    let sealed = gannet_sdk::sealed::seal(&public, plain).expect("seal");

    moto::put_object(&c.bucket, "v2.zip", moto::zip_bytes("v2"));
    let app = format!(
        "{}  encryption:\n    encryptedSecrets:\n      db: {sealed}\n    decryptionTargets:\n      - function.yaml\n",
        lambda_app("      - name: LAMBDA_SYNC\n")
    );
    let function = format!(
        "{}  environments:\n    DB_PASSWORD: \"{{{{ .encryptedSecrets.db }}}}\"\n",
        function_yaml(&c.function, &c.bucket, "v2.zip")
    );
    let v2 = c.lab.repo.commit(
        &[
            (&format!("{APP_DIR}/app.pipecd.yaml"), &app),
            (&format!("{APP_DIR}/function.yaml"), &function),
        ],
        "a sealed database password",
    );
    let id = c.push(&v2);
    let d = c.lab.drive_to_end(&id);
    assert_eq!(d.status, DeploymentStatus::Success, "{d:?}");
    assert_eq!(
        moto::environment(&c.function)
            .get("DB_PASSWORD")
            .map(String::as_str),
        Some(plain),
        "the deployed function has the opened value"
    );

    // The drift function, as its role, opens it too: live and Git agree.
    let done = c.lab.drift();
    assert_eq!(done["checks"], 1, "{done}");
    c.lab
        .drive_until("the drift check", support::LIMIT, |_| true);
    let apps = c.lab.apps();
    assert_eq!(apps[0].sync_status, SyncStatus::Synced, "{apps:?}");

    // The value is in no answer of the API: the deployment, its stage logs, the app.
    let mut answers = vec![
        c.lab.api("GET", &format!("/api/v1/deployments/{id}")).1,
        c.lab.api("GET", "/api/v1/apps").1,
    ];
    for stage in &d.stages {
        answers.push(
            c.lab
                .api(
                    "GET",
                    &format!("/api/v1/deployments/{id}/stages/{}/logs", stage.id),
                )
                .1,
        );
    }
    for answer in &answers {
        let text = answer.to_string();
        assert!(!text.contains(plain), "the value is in an answer: {text}");
    }
    let stored = serde_json::to_string(&c.lab.deployment(&id)).expect("JSON");
    assert!(!stored.contains(plain), "the value is stored: {stored}");

    // IAM: the stage role read the key; the trigger role may not.
    let decisions = support::stack::Decisions::from_env();
    assert!(
        decisions
            .of_role(&stage_role)
            .iter()
            .any(|d| d.action == "ssm:GetParameter"
                && d.resource == arn
                && d.decision == "Allowed"),
        "the stage role read the key"
    );
    let moto_iam = support::stack::IamMoto::from_env();
    let denied = c.lab.rt.block_on(async {
        let credentials = moto_iam.assume(&trigger_arn, "trigger").await;
        let sdk = moto_iam.sdk(&moto_iam.endpoint, credentials).await;
        aws_sdk_ssm::Client::new(&sdk)
            .get_parameter()
            .name(&arn)
            .with_decryption(true)
            .send()
            .await
    });
    let err = format!(
        "{:?}",
        denied.expect_err("the trigger role may not read the key")
    );
    assert!(err.contains("AccessDenied"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");
    assert!(
        decisions
            .denied(&trigger_role)
            .iter()
            .any(|d| d.action == "ssm:GetParameter" && d.resource == arn),
        "the denial names the parameter"
    );
}

/// The sealing key may be a Secrets Manager secret too: on the SAM stack, the stage, drift and
/// api functions read it as their roles when they start (the api function then serves its
/// public key), and the trigger role is denied it.
#[test]
fn on_the_sam_stack_the_sealing_key_may_be_a_secrets_manager_secret() {
    let key = sealing_key();
    let mut lab = Lab::new(LabOptions {
        stack: Some(Template::Sam),
        sealing_key: Some(key.clone()),
        sealing_key_in_secrets_manager: true,
        ..LabOptions::default()
    });
    let arn = lab.sealing_key_arn.clone().expect("the key's secret");
    assert!(arn.contains(":secretsmanager:"), "{arn}");
    let (status, body) = lab.api("GET", "/api/v1/secrets/public-key");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["publicKey"].as_str(),
        Some(
            gannet_sdk::sealed::SealingKey::from_pem(&key)
                .expect("a key")
                .public_pem()
                .as_str()
        )
    );
    let stack = lab.stack.as_ref().expect("on the stack");
    let role = |f: Function| {
        stack.function(f)["role"]
            .as_str()
            .expect("a role")
            .to_owned()
    };
    let name = |arn: &str| arn.rsplit('/').next().expect("a role name").to_owned();
    let decisions = support::stack::Decisions::from_env();
    for f in [Function::Stage, Function::Drift, Function::Api] {
        assert!(
            decisions
                .of_role(&name(&role(f)))
                .iter()
                .any(|d| d.action == "secretsmanager:GetSecretValue"
                    && d.resource == arn
                    && d.decision == "Allowed"),
            "the {f} role read the key"
        );
    }
    let moto_iam = support::stack::IamMoto::from_env();
    let trigger = role(Function::Trigger);
    let denied = lab.rt.block_on(async {
        let credentials = moto_iam.assume(&trigger, "trigger").await;
        let sdk = moto_iam.sdk(&moto_iam.endpoint, credentials).await;
        aws_sdk_secretsmanager::Client::new(&sdk)
            .get_secret_value()
            .secret_id(&arn)
            .send()
            .await
    });
    let err = format!(
        "{:?}",
        denied.expect_err("the trigger role may not read the key")
    );
    assert!(err.contains("AccessDenied"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");
}
