//! The step benchmark: how long one stage-handler invocation takes when its stage runs a job,
//! whatever the job's length. The handlers run in this process on the embedded runtime (SQLite
//! store and queue, local git, the detached-process job runner), as `gannet up` runs them.
//!
//! For each script length (BENCH_LENGTHS, seconds: 1, 60 and 600 by default), BENCH_APPS apps
//! (10) each deploy a `SCRIPT_RUN` of `sleep <length>`. Every message is handled as the worker
//! would; each stage step is timed: the first (it starts the job) and the later ones (each
//! polls the job and returns `Continue`). After BENCH_POLLS polls (10) per deployment, the
//! deployments are cancelled, which stops their jobs (timed too). The peer column is what a
//! step that ran the script to its end would take: the script's length.
//!
//! Settings (environment): BENCH_LENGTHS, BENCH_APPS, BENCH_POLLS, BENCH_RUNS (3; the table
//! quotes medians over runs of each run's median).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gannet_controller::{Controller, RepoSettings, Settings, Supersede};
use gannet_domain::deployment::{CancelMode, DeploymentStatus};
use gannet_domain::ports::{Clock, DeploymentFilter, Queue, QueueName, Store};
use gannet_domain::{GoDuration, RepoId};
use gannet_embedded::{ProcessJobs, RuntimeOptions, SqliteRuntime, SystemClock};
use gannet_events::Message;
use gannet_git::{LocalGit, Location, RepoSpec};

/// The bound on one run.
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v:?} is not a list of numbers"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    env_list(name, &[default])[0]
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository of `apps` apps, each a `SCRIPT_RUN` of `sleep <seconds>`.
fn repo(dir: &Path, apps: u64, seconds: u64) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..apps {
        let app = dir.join(format!("apps/a{i}"));
        std::fs::create_dir_all(&app).expect("app dir");
        std::fs::write(
            app.join("app.pipecd.yaml"),
            format!(
                "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: a{i}\n  pipeline:\n    stages:\n      - name: SCRIPT_RUN\n        with: {{run: 'sleep {seconds}'}}\n"
            ),
        )
        .expect("app config");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "apps"]);
}

#[derive(Default)]
struct Timings {
    starts: Vec<f64>,
    polls: Vec<f64>,
    stops: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

async fn run_once(seconds: u64, apps: u64, polls: u64) -> Timings {
    let work = tempfile::tempdir().expect("tempdir");
    let repo_dir = work.path().join("repo");
    std::fs::create_dir(&repo_dir).expect("repo dir");
    repo(&repo_dir, apps, seconds);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let runtime = SqliteRuntime::open_with(
        work.path().join("gannet.db"),
        clock.clone(),
        RuntimeOptions::default(),
    )
    .expect("state");
    let id = RepoId::parse("bench").expect("repo id");
    let git = LocalGit::new(
        work.path().join("git"),
        vec![RepoSpec {
            id: id.clone(),
            location: Location::Path(repo_dir.clone()),
            branch: "main".into(),
        }],
    )
    .expect("git");
    let settings = Settings {
        repos: vec![RepoSettings {
            id,
            branch: "main".into(),
            github: None,
            url: None,
            supersede: Supersede::Never,
            on_first_sight: gannet_controller::FirstSight::Deploy,
            plan_preview: Default::default(),
        }],
        ..Settings::default()
    };
    let plugins = gannet_plugins::registry()
        .without_settings()
        .expect("plugins");
    let jobs = ProcessJobs::new(work.path().join("jobs")).expect("jobs");
    let controller = Controller::new(
        Arc::new(runtime.clone()),
        Arc::new(git),
        clock,
        plugins,
        settings,
    )
    .with_jobs(Arc::new(jobs));
    controller.poll().await.expect("poll queues the trigger");

    let mut t = Timings::default();
    let mut polled = std::collections::BTreeMap::<String, u64>::new();
    let mut cancelled = false;
    let began = Instant::now();
    loop {
        assert!(
            began.elapsed() < RUN_LIMIT,
            "the run did not end in {RUN_LIMIT:?}"
        );
        let mut handled = 0;
        for queue in [
            QueueName::Trigger,
            QueueName::Plan,
            QueueName::Stage,
            QueueName::Notify,
        ] {
            let received = runtime
                .receive(queue, 16, GoDuration::from_secs(30))
                .await
                .expect("receive");
            for m in received {
                handled += 1;
                let step = match Message::decode(&m.body) {
                    Ok(Message::Step { deployment, .. }) => Some(deployment),
                    _ => None,
                };
                let started_job = match &step {
                    Some(id) => runtime
                        .deployment(id)
                        .await
                        .expect("deployment")
                        .map(|d| d.stages[0].metadata.contains_key("job")),
                    None => None,
                };
                let started = Instant::now();
                controller.handle(&m).await;
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                runtime.ack(&m.receipt).await.expect("ack");
                match (step, started_job) {
                    (Some(_), Some(false)) => t.starts.push(ms),
                    (Some(id), Some(true)) if !cancelled => {
                        *polled.entry(id.to_string()).or_default() += 1;
                        t.polls.push(ms);
                    }
                    (Some(_), Some(true)) => t.stops.push(ms),
                    _ => {}
                }
            }
        }
        let deployments = runtime
            .deployments(&DeploymentFilter::default())
            .await
            .expect("deployments");
        let all_done =
            deployments.len() as u64 == apps && deployments.iter().all(|d| d.status.is_terminal());
        if all_done {
            return t;
        }
        if !cancelled && polled.len() as u64 == apps && polled.values().all(|&n| n >= polls) {
            for d in deployments
                .iter()
                .filter(|d| d.status == DeploymentStatus::Running)
            {
                controller
                    .cancel(d.id.as_str(), CancelMode::WithoutRollback, "bench")
                    .await
                    .expect("cancel");
            }
            cancelled = true;
        }
        if handled == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn main() {
    let lengths = env_list("BENCH_LENGTHS", &[1, 60, 600]);
    let apps = env_number("BENCH_APPS", 10).max(1);
    let polls = env_number("BENCH_POLLS", 10).max(1);
    let runs = env_number("BENCH_RUNS", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    println!(
        "| script length | start step p50 (ms) | poll step p50 (ms) | poll step p99 (ms) | stop step p50 (ms) | steps timed | a step that ran the script (ms) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for seconds in lengths {
        let results: Vec<Timings> = (0..runs)
            .map(|_| rt.block_on(run_once(seconds, apps, polls)))
            .collect();
        let of = |f: &dyn Fn(&Timings) -> f64| median(results.iter().map(f).collect());
        let start = of(&|t| median(t.starts.clone()));
        let poll = of(&|t| median(t.polls.clone()));
        let poll99 = of(&|t| percentile(t.polls.clone(), 0.99));
        let stop = of(&|t| median(t.stops.clone()));
        let count: usize = results
            .iter()
            .map(|t| t.starts.len() + t.polls.len() + t.stops.len())
            .sum();
        let peer = seconds as f64 * 1000.0;
        // No stop when every script ended before its deployment was cancelled.
        let stop = if stop.is_nan() {
            "-".to_owned()
        } else {
            format!("{stop:.1}")
        };
        println!(
            "| {seconds} s | {start:.1} | {poll:.1} | {poll99:.1} | {stop} | {count} | {peer:.0} | {:.0}x |",
            peer / start.max(poll)
        );
    }
}
