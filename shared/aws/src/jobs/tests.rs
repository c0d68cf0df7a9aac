//! The CodeBuild job runner against moto (CodeBuild, S3 and CloudWatch Logs on loopback), and,
//! for what moto cannot do, against a fake CodeBuild that replays the shapes of real responses.
//!
//! moto runs no container: a build it starts never runs the buildspec, it reports every
//! build SUCCEEDED the first time it is read (and again after StopBuild), and it keeps no
//! environment variables of a build. So the tests here write what the build would have
//! written (its log events, its exit code) themselves, or run the buildspec's commands with
//! bash and curl with the variables the build was started with (its presigned URLs, which
//! [`FakeCodeBuild`] records), and the parts that depend on a build's real life (running,
//! failing in a phase, timing out, stopped, found again by its environment after a crash) run
//! against [`FakeCodeBuild`], a fake, serving responses shaped like CodeBuild's API reference
//! examples.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{JobEnd, JobError, JobInput, JobKey, JobRunner, JobSpec};
use serde_json::{json, Value};

use super::{CodeBuildJobs, JobsConfig};
use crate::test_moto::{moto_config, unique};

const ROLE: &str = "arn:aws:iam::123456789012:role/gannet-jobs";

struct Moto {
    jobs: CodeBuildJobs,
    s3: aws_sdk_s3::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    codebuild: aws_sdk_codebuild::Client,
    config: JobsConfig,
}

/// A bucket, a log group and a CodeBuild project on moto, and the runner on them; its
/// CodeBuild client goes to `codebuild_endpoint` instead when given (the fake).
async fn moto(codebuild_endpoint: Option<&str>) -> Moto {
    let sdk = moto_config().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let logs = aws_sdk_cloudwatchlogs::Client::new(&sdk);
    let on_moto = aws_sdk_codebuild::Client::new(&sdk);
    let mut codebuild = aws_sdk_codebuild::config::Builder::from(&sdk);
    if let Some(endpoint) = codebuild_endpoint {
        codebuild = codebuild.endpoint_url(endpoint);
    }
    let codebuild = aws_sdk_codebuild::Client::from_conf(codebuild.build());
    // The project is made on moto; with a fake, the runner's CodeBuild calls go to the fake.
    let config = crate::provision_jobs(&on_moto, &s3, &logs, &unique("jobs"), ROLE)
        .await
        .expect("the jobs' resources on moto");
    let jobs = CodeBuildJobs::new(codebuild.clone(), s3.clone(), logs.clone(), config.clone());
    Moto {
        jobs,
        s3,
        logs,
        codebuild,
        config,
    }
}

fn key(stage: &str) -> JobKey {
    JobKey::new(
        &DeploymentId::parse("web-0123abcd").unwrap(),
        &StageId::parse(stage).unwrap(),
        1,
    )
}

fn app_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("infra")).unwrap();
    std::fs::write(dir.path().join("infra/main.tf"), "# the app\n").unwrap();
    dir
}

impl Moto {
    async fn start(&self, key: &JobKey, dir: &std::path::Path) {
        let env = vec![
            ("SR_DEPLOYMENT_ID".to_owned(), "web-0123abcd".to_owned()),
            ("WITH_ENV".to_owned(), "a value with spaces".to_owned()),
        ];
        self.jobs
            .start(JobSpec {
                key,
                script: "terraform plan",
                dir,
                env: &env,
                timeout: GoDuration::from_secs(90),
                inputs: &[],
                role: None,
                cache: None,
            })
            .await
            .expect("start");
    }

    async fn object(&self, key: &JobKey, name: &str) -> Option<Vec<u8>> {
        let got = self
            .s3
            .get_object()
            .bucket(&self.config.bucket)
            .key(format!("jobs/{key}/{name}"))
            .send()
            .await
            .ok()?;
        Some(got.body.collect().await.unwrap().into_bytes().to_vec())
    }

    /// What the build would have written: its exit code, and its log lines in the stream
    /// CodeBuild names `<key>/<build uuid>`.
    async fn build_writes(&self, key: &JobKey, exit: Option<&str>, lines: &[&str]) {
        if let Some(code) = exit {
            self.s3
                .put_object()
                .bucket(&self.config.bucket)
                .key(format!("jobs/{key}/exit"))
                .body(format!("{code}\n").into_bytes().into())
                .send()
                .await
                .unwrap();
        }
        let build = String::from_utf8(self.object(key, "build").await.unwrap()).unwrap();
        let stream = format!("{key}/{}", build.rsplit_once(':').unwrap().1);
        let _ = self
            .logs
            .create_log_stream()
            .log_group_name(&self.config.log_group)
            .log_stream_name(&stream)
            .send()
            .await;
        let now = i64::try_from(gannet_core_now()).unwrap();
        let events = lines
            .iter()
            .map(|l| {
                InputLogEvent::builder()
                    .timestamp(now)
                    .message(format!("{l}\n"))
                    .build()
                    .unwrap()
            })
            .collect();
        self.logs
            .put_log_events()
            .log_group_name(&self.config.log_group)
            .log_stream_name(&stream)
            .set_log_events(Some(events))
            .send()
            .await
            .unwrap();
    }

    async fn builds(&self) -> usize {
        self.codebuild
            .list_builds_for_project()
            .project_name(&self.config.project)
            .send()
            .await
            .unwrap()
            .ids
            .unwrap_or_default()
            .len()
    }
}

fn gannet_core_now() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Polls until the job ends (bounded); every line and the end.
async fn finish(jobs: &CodeBuildJobs, key: &JobKey) -> (Vec<String>, JobEnd) {
    let (mut lines, mut cursor) = (Vec::new(), String::new());
    for _ in 0..20 {
        let poll = jobs.poll(key, &cursor).await.expect("poll");
        lines.extend(poll.lines);
        cursor = poll.cursor;
        if let Some(end) = poll.end {
            return (lines, end);
        }
    }
    panic!("job {key} did not end in 20 polls: {lines:?}");
}

#[tokio::test]
async fn on_moto_a_start_packs_the_job_and_starting_it_again_starts_no_second_build() {
    let m = moto(None).await;
    let (k, dir) = (key("plan"), app_dir());
    m.start(&k, dir.path()).await;
    m.start(&k, dir.path()).await;
    assert_eq!(m.builds().await, 1, "one build for one key");

    let packed = m
        .object(&k, "source.tar.gz")
        .await
        .expect("the job's tarball");
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&packed[..]));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mut body = String::new();
        entry.read_to_string(&mut body).unwrap();
        files.insert(path, body);
    }
    assert_eq!(files["work/infra/main.tf"], "# the app\n");
    assert_eq!(files["script"], "terraform plan");
    assert_eq!(
        files["env"],
        "SR_DEPLOYMENT_ID=web-0123abcd\0WITH_ENV=a value with spaces\0"
    );
}

#[tokio::test]
async fn on_moto_a_poll_reads_the_output_without_codebuilds_lines_then_the_exit_code() {
    let m = moto(None).await;
    let (k, dir) = (key("apply"), app_dir());
    m.start(&k, dir.path()).await;
    m.build_writes(
        &k,
        Some("3"),
        &[
            "[Container] 2026/11/25 12:00:00.000000 Running command sh ../script",
            "Plan: 1 to add, 0 to change, 0 to destroy.",
            "Error: boom",
        ],
    )
    .await;
    let (lines, end) = finish(&m.jobs, &k).await;
    assert_eq!(
        lines,
        ["Plan: 1 to add, 0 to change, 0 to destroy.", "Error: boom"]
    );
    assert_eq!(end, JobEnd::Exited(3));
}

#[tokio::test]
async fn on_moto_cancel_stops_the_build_and_an_unknown_job_is_said_so() {
    let m = moto(None).await;
    let (k, dir) = (key("cancel"), app_dir());
    m.start(&k, dir.path()).await;
    m.jobs.cancel(&k).await.expect("cancel");
    m.jobs
        .cancel(&key("never-started"))
        .await
        .expect("cancel of nothing");
    let err = m.jobs.poll(&key("never-started"), "").await.unwrap_err();
    assert!(err.to_string().contains("no job"), "{err}");
}

#[tokio::test]
async fn on_moto_a_build_codebuild_no_longer_knows_is_lost() {
    let m = moto(None).await;
    let k = key("gone");
    m.s3.put_object()
        .bucket(&m.config.bucket)
        .key(format!("jobs/{k}/build"))
        .body(
            b"some-project:0b7d8e5c-0000-0000-0000-000000000000"
                .to_vec()
                .into(),
        )
        .send()
        .await
        .unwrap();
    let (_, end) = finish(&m.jobs, &k).await;
    assert!(
        matches!(&end, JobEnd::Lost { reason } if reason.contains("no longer knows")),
        "{end:?}"
    );
}

/// Runs the buildspec's commands as CodeBuild would (bash, curl on PATH) with `env`, the
/// build's variables (and, under IAM, its role's credentials); its exit code and output.
pub(super) fn run_buildspec(env: &[(String, String)], path_first: Option<&Path>) -> (i32, String) {
    let spec: serde_json::Value =
        gannet_config::yaml::from_str(super::BUILDSPEC).expect("the buildspec");
    let commands = spec["phases"]["build"]["commands"][0]
        .as_str()
        .expect("one command block");
    let home = tempfile::tempdir().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let path = match path_first {
        Some(dir) => format!("{}:{path}", dir.display()),
        None => path,
    };
    // Bounded: curl gives up after its retries, the script is the test's.
    let out = std::process::Command::new("timeout")
        .args(["120", "bash", "-c", commands])
        .env_clear()
        .env("PATH", path)
        .env("HOME", home.path())
        .envs(env.iter().cloned())
        .output()
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(128), text)
}

/// The variables the build of `key` was started with, as the fake CodeBuild recorded them.
pub(super) fn started_env(fake: &FakeCodeBuild, key: &JobKey) -> Vec<(String, String)> {
    let started = fake.started.lock().unwrap();
    let env = started
        .iter()
        .find(|env| env.get(super::JOB_VARIABLE).map(String::as_str) == Some(key.as_str()))
        .unwrap_or_else(|| panic!("no build of {key} was started"));
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[tokio::test]
async fn a_jobs_files_are_kept_through_its_urls_and_given_to_a_later_job() {
    let fake = FakeCodeBuild::new(Vec::new());
    let m = moto(Some(&fake.url)).await;
    let (plan, apply) = (key("plan"), key("apply"));
    let dir = app_dir();
    let spec = |key, script, inputs| JobSpec {
        key,
        script,
        dir: dir.path(),
        env: &[],
        timeout: GoDuration::from_secs(90),
        inputs,
        role: None,
        cache: None,
    };
    m.jobs
        .start(spec(
            &plan,
            "printf 'the plan' >\"$GANNET_JOB_OUT/plan.bin\"; echo planned",
            &[],
        ))
        .await
        .expect("start");
    let (code, output) = run_buildspec(&started_env(&fake, &plan), None);
    assert_eq!((code, output.trim()), (0, "planned"));
    assert_eq!(m.object(&plan, "exit").await, Some(b"0\n".to_vec()));
    assert_eq!(
        m.jobs.output(&plan, "plan.bin").await.expect("read"),
        Some(b"the plan".to_vec())
    );
    assert_eq!(m.jobs.output(&plan, "absent").await.expect("read"), None);
    assert!(matches!(
        m.jobs.output(&plan, "../build").await,
        Err(JobError::Refused(_))
    ));

    // The apply job gets the plan in GANNET_JOB_IN, inside its own tarball.
    let given = [JobInput {
        job: &plan,
        file: "plan.bin",
    }];
    m.jobs
        .start(spec(
            &apply,
            "cp \"$GANNET_JOB_IN/plan.bin\" \"$GANNET_JOB_OUT/applied\"; echo 'Error: no' >&2; exit 3",
            &given,
        ))
        .await
        .expect("start");
    let (code, output) = run_buildspec(&started_env(&fake, &apply), None);
    assert_eq!(code, 3, "{output}");
    // Its stderr lines reach the build's log marked, as the embedded runner marks them.
    assert!(
        output
            .lines()
            .any(|l| l == format!("{}Error: no", gannet_domain::ports::STDERR_MARK)),
        "{output:?}"
    );
    assert_eq!(m.object(&apply, "exit").await, Some(b"3\n".to_vec()));
    assert_eq!(
        m.jobs.output(&apply, "applied").await.expect("read"),
        Some(b"the plan".to_vec()),
        "the files a failed script left are kept too"
    );
    // The build is given its URLs and its key; no bucket name, no credential.
    let names: Vec<String> = started_env(&fake, &apply)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        names,
        [
            "GANNET_JOB",
            "GANNET_JOB_EXIT_URL",
            "GANNET_JOB_OUT_URL",
            "GANNET_JOB_SOURCE_URL"
        ]
    );

    // A file the earlier job did not leave refuses the start before any build.
    let missing = [JobInput {
        job: &plan,
        file: "other.bin",
    }];
    let err = m
        .jobs
        .start(spec(&key("third"), "true", &missing))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("left no file other.bin"), "{err}");
    assert_eq!(*fake.starts.lock().unwrap(), 2, "no build for the third");
}

#[test]
fn a_jobs_urls_outlive_its_queue_and_timeout_within_s3s_bound() {
    use super::url_life;
    let hours = |h: u64| GoDuration::from_secs(h * 3600);
    // 8 h in the queue, the timeout, 10 minutes.
    assert_eq!(
        url_life(hours(1)),
        GoDuration::from_secs((8 * 60 + 60 + 10) * 60)
    );
    assert!(url_life(hours(6)) > hours(14));
    assert_eq!(
        url_life(hours(100)),
        GoDuration::from_secs((8 * 60 + 36 * 60 + 10) * 60),
        "CodeBuild's longest timeout (36 h) keeps them within S3's week"
    );
}

#[tokio::test]
async fn a_missing_app_directory_is_refused_before_anything_starts() {
    let m = moto(None).await;
    let k = key("nodir");
    let err = m
        .jobs
        .start(JobSpec {
            key: &k,
            script: "true",
            dir: std::path::Path::new("/nonexistent/gannet-app"),
            env: &[],
            timeout: GoDuration::from_secs(60),
            inputs: &[],
            role: None,
            cache: None,
        })
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot pack /nonexistent/gannet-app"),
        "{err}"
    );
    assert_eq!(m.builds().await, 0);
}

// ---- What moto cannot do: a fake CodeBuild replaying the shapes of its responses ----

/// A fake CodeBuild endpoint (JSON 1.1 over HTTP on loopback): it answers the four calls the
/// runner makes from a table of builds, shaped like the API reference's examples, and counts
/// StartBuild calls.
pub(super) struct FakeCodeBuild {
    pub(super) url: String,
    builds: Arc<Mutex<Vec<Value>>>,
    starts: Arc<Mutex<usize>>,
    /// The environment variables of each StartBuild, in order.
    started: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
    /// The `serviceRoleOverride` of each StartBuild, in order.
    role_overrides: Arc<Mutex<Vec<Option<String>>>>,
}

impl FakeCodeBuild {
    pub(super) fn new(builds: Vec<Value>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let builds = Arc::new(Mutex::new(builds));
        let starts = Arc::new(Mutex::new(0));
        let started = Arc::new(Mutex::new(Vec::new()));
        let role_overrides = Arc::new(Mutex::new(Vec::new()));
        let (b, s, e) = (builds.clone(), starts.clone(), started.clone());
        let r = role_overrides.clone();
        std::thread::spawn(move || {
            // Bounded: a test makes a handful of calls.
            for stream in listener.incoming().take(200) {
                let Ok(mut stream) = stream else { return };
                let (target, body) = read_request(&mut stream);
                if target.ends_with(".StartBuild") {
                    e.lock().unwrap().push(variables(&body));
                    r.lock()
                        .unwrap()
                        .push(body["serviceRoleOverride"].as_str().map(str::to_owned));
                }
                let (status, reply) = answer(&target, &body, &b, &s);
                let reply = reply.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
        Self {
            url,
            builds,
            starts,
            started,
            role_overrides,
        }
    }
}

/// A StartBuild's `environmentVariablesOverride`, by name.
fn variables(body: &Value) -> BTreeMap<String, String> {
    body["environmentVariablesOverride"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                v["name"].as_str()?.to_owned(),
                v["value"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn read_request(stream: &mut std::net::TcpStream) -> (String, Value) {
    let (head, body) = crate::test_moto::read_http_request(stream);
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (crate::test_moto::header(&head, "x-amz-target"), body)
}

fn answer(
    target: &str,
    body: &Value,
    builds: &Mutex<Vec<Value>>,
    starts: &Mutex<usize>,
) -> (u16, Value) {
    let builds = builds.lock().unwrap();
    match target.rsplit('.').next().unwrap_or_default() {
        "ListBuildsForProject" => (
            200,
            json!({"ids": builds.iter().map(|b| b["id"].clone()).collect::<Vec<_>>()}),
        ),
        "BatchGetBuilds" => {
            let ids = body["ids"].as_array().cloned().unwrap_or_default();
            let found: Vec<_> = builds
                .iter()
                .filter(|b| ids.contains(&b["id"]))
                .cloned()
                .collect();
            (200, json!({"builds": found, "buildsNotFound": []}))
        }
        "StartBuild" => {
            *starts.lock().unwrap() += 1;
            (
                200,
                json!({"build": build("jobs:11111111-2222-3333-4444-555555555555", "IN_PROGRESS", "other")}),
            )
        }
        "StopBuild" => (
            400,
            json!({"__type": "InvalidInputException", "message": "Build jobs:x is not in progress"}),
        ),
        other => (
            400,
            json!({"__type": "InvalidInputException", "message": format!("unexpected {other}")}),
        ),
    }
}

/// A build as BatchGetBuilds returns it (fields as in the API reference).
fn build(id: &str, status: &str, job: &str) -> Value {
    json!({
        "id": id,
        "arn": format!("arn:aws:codebuild:us-east-1:123456789012:build/{id}"),
        "buildNumber": 7,
        "startTime": 1_764_072_000.0,
        "currentPhase": if status == "IN_PROGRESS" { "BUILD" } else { "COMPLETED" },
        "buildStatus": status,
        "projectName": "jobs",
        "phases": [
            {"phaseType": "SUBMITTED", "phaseStatus": "SUCCEEDED", "durationInSeconds": 0},
            {"phaseType": "PROVISIONING", "phaseStatus": "SUCCEEDED", "durationInSeconds": 21}
        ],
        "environment": {
            "type": "ARM_CONTAINER",
            "image": "aws/codebuild/amazonlinux-aarch64-standard:3.0",
            "computeType": "BUILD_GENERAL1_SMALL",
            "environmentVariables": [
                {"name": "GANNET_JOB", "value": job, "type": "PLAINTEXT"},
                {"name": "GANNET_JOB_SOURCE_URL", "value": "https://bucket.s3.us-east-1.amazonaws.com/jobs/x/source.tar.gz?X-Amz-Signature=0", "type": "PLAINTEXT"}
            ],
            "privilegedMode": false,
            "imagePullCredentialsType": "CODEBUILD"
        },
        "logs": {
            "groupName": "/gannet/jobs",
            "streamName": format!("{job}/{}", id.rsplit(':').next().unwrap()),
            "cloudWatchLogs": {"status": "ENABLED"}
        },
        "timeoutInMinutes": 30,
        "queuedTimeoutInMinutes": 480,
        "buildComplete": status != "IN_PROGRESS",
        "initiator": "gannet-stage"
    })
}

/// Records `key`'s build as `id` in the bucket, as a start does.
async fn record(m: &Moto, k: &JobKey, id: &str) {
    m.s3.put_object()
        .bucket(&m.config.bucket)
        .key(format!("jobs/{k}/build"))
        .body(id.as_bytes().to_vec().into())
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_start_that_crashed_after_startbuild_finds_the_build_by_its_job_and_starts_none() {
    let k = key("crashed");
    let fake = FakeCodeBuild::new(vec![
        build(
            "jobs:aaaaaaaa-0000-0000-0000-000000000001",
            "SUCCEEDED",
            "another-job",
        ),
        build(
            "jobs:aaaaaaaa-0000-0000-0000-000000000002",
            "IN_PROGRESS",
            k.as_str(),
        ),
    ]);
    let m = moto(Some(&fake.url)).await;
    m.start(&k, app_dir().path()).await;
    assert_eq!(
        *fake.starts.lock().unwrap(),
        0,
        "no second build was started"
    );
    let recorded = m.object(&k, "build").await.expect("the build is recorded");
    assert_eq!(recorded, b"jobs:aaaaaaaa-0000-0000-0000-000000000002");
    // A fresh key starts one build.
    m.start(&key("fresh"), app_dir().path()).await;
    assert_eq!(*fake.starts.lock().unwrap(), 1);
}

/// A job with nothing to run, as its deploy target's `role` (if any).
fn job_as<'a>(
    key: &'a JobKey,
    dir: &'a Path,
    role: Option<&'a gannet_sdk::jobs::JobRoleArn>,
) -> JobSpec<'a> {
    JobSpec {
        key,
        script: "terraform plan",
        dir,
        env: &[],
        timeout: GoDuration::from_secs(90),
        inputs: &[],
        role,
        cache: None,
    }
}

#[tokio::test]
async fn a_jobs_role_is_the_builds_service_role_override_and_no_role_sends_none() {
    let fake = FakeCodeBuild::new(Vec::new());
    let m = moto(Some(&fake.url)).await;
    let dir = app_dir();
    let role =
        gannet_sdk::jobs::JobRoleArn::parse("arn:aws:iam::123456789012:role/tf-prod").unwrap();
    let (prod, other) = (key("prod"), key("other"));
    m.jobs
        .start(job_as(&prod, dir.path(), Some(&role)))
        .await
        .expect("start as the target's role");
    m.jobs
        .start(job_as(&other, dir.path(), None))
        .await
        .expect("start as the project's role");
    assert_eq!(
        *fake.role_overrides.lock().unwrap(),
        [Some(role.to_string()), None]
    );
    // The role is not part of what the build is told: its variables are the same either way.
    let names =
        |k: &JobKey| -> Vec<String> { started_env(&fake, k).into_iter().map(|(n, _)| n).collect() };
    assert_eq!(names(&prod), names(&other));
}

#[tokio::test]
async fn a_start_as_a_role_that_crashed_after_startbuild_finds_its_build_by_its_job() {
    let k = key("crashed-with-role");
    let fake = FakeCodeBuild::new(vec![build(
        "jobs:cccccccc-0000-0000-0000-000000000001",
        "IN_PROGRESS",
        k.as_str(),
    )]);
    let m = moto(Some(&fake.url)).await;
    let dir = app_dir();
    let role =
        gannet_sdk::jobs::JobRoleArn::parse("arn:aws:iam::123456789012:role/tf-prod").unwrap();
    for _ in 0..2 {
        m.jobs
            .start(job_as(&k, dir.path(), Some(&role)))
            .await
            .expect("start again");
    }
    assert_eq!(*fake.starts.lock().unwrap(), 0, "no second build");
    assert_eq!(
        m.object(&k, "build").await.as_deref(),
        Some(&b"jobs:cccccccc-0000-0000-0000-000000000001"[..])
    );
}

#[tokio::test]
async fn a_builds_status_becomes_the_jobs_end() {
    let failed_fetch = {
        let mut b = build("jobs:bbbbbbbb-0000-0000-0000-000000000003", "FAILED", "x");
        b["phases"].as_array_mut().unwrap().push(json!({
            "phaseType": "BUILD",
            "phaseStatus": "FAILED",
            "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR", "message": "Error while executing command: ... Reason: exit status 125"}]
        }));
        b
    };
    let cases = [
        (build("jobs:bbbbbbbb-0000-0000-0000-000000000001", "IN_PROGRESS", "x"), None),
        (build("jobs:bbbbbbbb-0000-0000-0000-000000000002", "STOPPED", "x"), Some(JobEnd::Cancelled)),
        (
            build("jobs:bbbbbbbb-0000-0000-0000-000000000004", "TIMED_OUT", "x"),
            Some(JobEnd::TimedOut { after: GoDuration::from_secs(30 * 60) }),
        ),
        (
            failed_fetch.clone(),
            Some(JobEnd::Lost {
                reason: "its build failed in phase BUILD: COMMAND_EXECUTION_ERROR: Error while executing command: ... Reason: exit status 125".into(),
            }),
        ),
        (
            build("jobs:bbbbbbbb-0000-0000-0000-000000000005", "FAULT", "x"),
            Some(JobEnd::Lost {
                reason: "its build ended FAULT: its build failed without recording an exit code".into(),
            }),
        ),
    ];
    let fake = FakeCodeBuild::new(cases.iter().map(|(b, _)| b.clone()).collect());
    let m = moto(Some(&fake.url)).await;
    for (i, (b, want)) in cases.iter().enumerate() {
        let k = key(&format!("status-{i}"));
        record(&m, &k, b["id"].as_str().unwrap()).await;
        let poll = m.jobs.poll(&k, "").await.expect("poll");
        assert_eq!(&poll.end, want, "{}", b["buildStatus"]);
    }
    // A failed build that recorded its exit code ended with it.
    let k = key("failed-with-code");
    record(&m, &k, failed_fetch["id"].as_str().unwrap()).await;
    m.s3.put_object()
        .bucket(&m.config.bucket)
        .key(format!("jobs/{k}/exit"))
        .body(b"2\n".to_vec().into())
        .send()
        .await
        .unwrap();
    assert_eq!(
        m.jobs.poll(&k, "").await.unwrap().end,
        Some(JobEnd::Exited(2))
    );
    // Cancelling a build that has ended is no error.
    m.jobs.cancel(&k).await.expect("cancel of an ended build");
    assert_eq!(fake.builds.lock().unwrap().len(), cases.len());
}

#[test]
fn timeouts_are_whole_minutes_within_codebuilds_bounds() {
    use super::timeout_minutes;
    assert_eq!(timeout_minutes(GoDuration::from_secs(1)), 5);
    assert_eq!(timeout_minutes(GoDuration::from_secs(6 * 3600)), 360);
    assert_eq!(timeout_minutes(GoDuration::from_secs(361)), 7);
    assert_eq!(timeout_minutes(GoDuration::from_secs(100 * 3600)), 2160);
}
