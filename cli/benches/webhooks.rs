//! The webhook benchmark: pushes signed GitHub webhooks across many apps into a real release
//! `gannet up` and prints a markdown table of webhook → first stage RUNNING latency, webhook
//! response time, deployments completed per minute and resident memory, against the targets.
//!
//! Each app is its own repository holding one `Application` with two `WAIT {duration: 0s}`
//! stages, so each push is exactly one deployment through trigger → plan → two stages →
//! finalize. All commits are made up front on side refs; a repository's `main` advances to
//! commit k only just before push k. The pushes to one repository are sequential: push k+1
//! waits until the deployment of push k has ended, so no deployment queues behind its app's
//! lock. Across repositories, at most BENCH_CONCURRENCY pushes are in flight.
//!
//! Two phases of BENCH_COMMITS pushes per app each, on one `gannet up`:
//! - paced: pushes sent at BENCH_RATE a minute (the throughput target), for latency under the
//!   load the targets name;
//! - unpaced: every sender pushes again as soon as its deployment ends, for capacity
//!   (deployments completed per minute) and the latency of a saturated process.
//!
//! Settings (environment): BENCH_RUNS (1), BENCH_APPS (100), BENCH_COMMITS (10 per app and
//! phase), BENCH_CONCURRENCY (16), BENCH_RATE (1000 pushes a minute), BENCH_POLL_MS (10: how
//! often a sender looks at its deployment), BENCH_KEEP (set: keep the work directory, gannet's
//! log included), BENCH_BASELINE (the path of another `gannet` binary, such as a build of an
//! earlier commit: each run then runs it too, right before or after this build, alternating,
//! and a last table sets the two side by side as ratios). With more than one run the table
//! quotes medians and the min–max range.

#[path = "common/stats.rs"]
mod stats;
#[path = "../../tests/support/mod.rs"]
mod support;

#[path = "webhooks/driver.rs"]
mod driver;
#[path = "webhooks/report.rs"]
mod report;
#[path = "webhooks/setup.rs"]
mod setup;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use driver::{Driver, Phase};
use report::{measure, print_comparison, print_table, RunResult};
use setup::{build_repo, write_config, AppRepo, Up};
use stats::env_number;

struct Settings {
    runs: usize,
    apps: usize,
    commits: usize,
    concurrency: usize,
    rate: usize,
    poll: Duration,
}

impl Settings {
    fn from_env() -> Self {
        Self {
            runs: env_number("BENCH_RUNS", 1).max(1),
            apps: env_number("BENCH_APPS", 100).max(1),
            commits: env_number("BENCH_COMMITS", 10).max(1),
            concurrency: env_number("BENCH_CONCURRENCY", 16).max(1),
            rate: env_number("BENCH_RATE", 1000).max(1),
            poll: Duration::from_millis(env_number("BENCH_POLL_MS", 10).max(1) as u64),
        }
    }
}

fn run_once(settings: &Settings, gannet: &Path, run: usize) -> RunResult {
    let root = tempfile::tempdir().expect("tempdir");
    let repos: Vec<AppRepo> = (0..settings.apps)
        .map(|i| build_repo(root.path(), i, 2 * settings.commits))
        .collect();
    let port = support::free_port();
    let config = write_config(root.path(), port, &repos);
    let up = Up::start(gannet, root.path(), &config);
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(settings.concurrency + 1)
        .build()
        .expect("http client");
    let started = Instant::now();
    while !http
        .get(format!("{url}/healthz"))
        .send()
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "gannet up did not answer /healthz\n{}",
            up.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Start-up idle: at least 2 s, then until a whole second passes without CPU use (the
    // start-up poll scans every repository once).
    std::thread::sleep(Duration::from_secs(2));
    let mut ticks = up.cpu_ticks();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_secs(1));
        let now = up.cpu_ticks();
        if now == ticks {
            break;
        }
        ticks = now;
    }
    let idle_rss_mb = up.status_kb("VmRSS") / 1024.0;

    let driver = Driver {
        url,
        http,
        repos: &repos,
        poll: settings.poll,
        up: &up,
    };
    let pushes = settings.apps * settings.commits;
    eprintln!(
        "run {run}: {pushes} pushes across {} apps at {} a minute",
        settings.apps, settings.rate
    );
    let paced = Phase {
        first: 0,
        count: settings.commits,
        every: Some(Duration::from_secs(60) / settings.rate as u32),
    };
    let paced = measure(&driver, &paced, settings.concurrency);
    eprintln!(
        "run {run}: {pushes} pushes, unpaced, {} in flight",
        settings.concurrency
    );
    let unpaced = Phase {
        first: settings.commits,
        count: settings.commits,
        every: None,
    };
    let unpaced = measure(&driver, &unpaced, settings.concurrency);
    let peak_rss_mb = up.status_kb("VmHWM") / 1024.0;
    drop(up);
    if std::env::var_os("BENCH_KEEP").is_some() {
        eprintln!(
            "run {run}: work directory kept at {}",
            root.path().display()
        );
        std::mem::forget(root);
    }
    RunResult {
        paced,
        unpaced,
        idle_rss_mb,
        peak_rss_mb,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a `cargo test --benches` run passes nothing and only
    // checks that the benchmark builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    driver::check_time_parsing();
    let settings = Settings::from_env();
    let this = PathBuf::from(env!("CARGO_BIN_EXE_gannet"));
    let Some(baseline) = std::env::var_os("BENCH_BASELINE").map(PathBuf::from) else {
        let results: Vec<RunResult> = (1..=settings.runs)
            .map(|run| run_once(&settings, &this, run))
            .collect();
        print_table(&settings, "this build", &results);
        return;
    };
    assert!(
        baseline.is_file(),
        "BENCH_BASELINE {} is not a file",
        baseline.display()
    );
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for run in 1..=settings.runs {
        // Alternate which goes first, so neither always meets a warmer or a busier machine.
        if run % 2 == 1 {
            eprintln!("run {run}: baseline first");
            before.push(run_once(&settings, &baseline, run));
            after.push(run_once(&settings, &this, run));
        } else {
            eprintln!("run {run}: this build first");
            after.push(run_once(&settings, &this, run));
            before.push(run_once(&settings, &baseline, run));
        }
    }
    let label = format!("baseline ({})", baseline.display());
    print_table(&settings, &label, &before);
    print_table(&settings, "this build", &after);
    print_comparison(&before, &after);
}
