//! `gannet up`: the embedded runtime. One process serves the webhook and the JSON API, drains
//! the SQLite queues with a worker pool, and runs the poll, resume and drift timers. State
//! lives in one SQLite file, so a restart resumes every in-flight deployment.

mod serve;
mod tls;
mod worker;

pub use serve::Limits;
pub use tls::ServerTls;

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use gannet_controller::http::Access;
use gannet_controller::{Controller, Sealing};
use gannet_domain::ports::{Clock, Queue, QueueName};
use gannet_domain::GoDuration;
use gannet_embedded::{ProcessJobs, RuntimeOptions, SqliteRuntime, SystemClock};
use gannet_git::github::{GithubChecks, GithubClient};
use gannet_git::LocalGit;
use tokio::sync::watch;

use crate::settings::UpConfig;

/// Runs `gannet up` until SIGINT or SIGTERM.
pub async fn run(cfg: UpConfig) -> anyhow::Result<()> {
    run_until(cfg, shutdown_signal()).await
}

/// Runs `gannet up` until `stop` resolves, then lets the steps under way finish (10 s at most).
pub async fn run_until(
    cfg: UpConfig,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    // Not dumpable: another process of the same (non-root) user, such as a script, cannot read
    // this process's environment (its secrets) or memory through /proc or ptrace.
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %err, "cannot make the process non-dumpable; same-user processes may read its environment");
    }
    let state_dir = cfg
        .state
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("cannot create the state directory {}", state_dir.display()))?;
    // The state (deployments, logs, checked-out trees) is for this user only.
    private(&state_dir, 0o700)?;
    let lock_path = cfg.state.with_extension("lock");
    let lock = File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    private(&lock_path, 0o600)?;
    lock.try_lock().map_err(|_| {
        anyhow::anyhow!(
            "another `gannet up` is using {}; stop it first (lock file {})",
            cfg.state.display(),
            lock_path.display()
        )
    })?;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let options = RuntimeOptions {
        max_attempts: cfg.max_attempts,
        ..RuntimeOptions::default()
    };
    let runtime = SqliteRuntime::open_with(&cfg.state, clock.clone(), options)
        .with_context(|| format!("cannot open the state file {}", cfg.state.display()))?;
    // SQLite creates its files with the umask's mode; the WAL and shared-memory files exist
    // once the database is open in WAL mode.
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", cfg.state.display()));
        if file.exists() {
            private(&file, 0o600)?;
        }
    }
    // This process owns the file (the lock above): messages leased by a previous process
    // that died are ours to deliver again now.
    let released = runtime
        .release_leases()
        .await
        .context("cannot release the previous process's message leases")?;
    if released > 0 {
        tracing::info!(
            messages = released,
            "resuming messages in flight at the last stop"
        );
    }
    let git = Arc::new(LocalGit::new(state_dir.join("git"), cfg.repos.clone())?);
    // Scripts run as detached processes that outlive this one: a restart finds them running.
    let jobs_dir = state_dir.join("jobs");
    let jobs = ProcessJobs::new(&jobs_dir)
        .with_context(|| format!("cannot create the jobs directory {}", jobs_dir.display()))?;
    // Every job (scripts, terraform, lifecycle commands) is kept from gannet's keys.
    let jobs = crate::jobs::confine(jobs, &cfg.jobs, &state_dir)?;
    let controller = Controller::new(
        Arc::new(runtime.clone()),
        git.clone(),
        clock,
        cfg.plugins.clone(),
        cfg.settings.clone(),
    )
    .with_jobs(Arc::new(jobs.clone()))
    .with_previews(cfg.previews.clone())
    .with_console_url(cfg.console_url.clone());
    let controller = match &cfg.github {
        Some(github) => {
            let client = GithubClient::new(&github.auth, &github.api_url)
                .context("github: cannot set up GitHub's API client")?;
            let repos = cfg
                .settings
                .repos
                .iter()
                .filter_map(|r| Some((r.id.clone(), r.github.clone()?)))
                .collect();
            let checks = GithubChecks::new(client, repos).context("github")?;
            controller.with_check_runs(Arc::new(checks))
        }
        None => controller,
    };
    // The private copies of steps with sealed secrets or attachments: under the state, which
    // no job reads.
    let controller =
        controller.with_sealing(Sealing::new(cfg.sealing_key, state_dir.join("sealed")));
    // Without a receiver, the notify handler would only log each event at DEBUG: an event a
    // deployment step sends would cost a receive and an ack for nothing.
    if !controller.hears_events() {
        runtime.discard(vec![QueueName::Notify]);
    }

    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    tracing::info!(%addr, scheme, state = %cfg.state.display(), workers = cfg.workers, "gannet up");
    if cfg.tls.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "listening on plain HTTP beyond loopback: API tokens cross the network in clear; set api.tls or put a TLS reverse proxy in front (docs/serving.md)"
        );
    }
    println!(
        "gannet up: listening on {scheme}://{addr}, state {}",
        cfg.state.display()
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let pool = worker::Pool {
        controller: controller.clone(),
        queue: Arc::new(runtime.clone()) as Arc<dyn Queue>,
        runtime: runtime.clone(),
        visibility: cfg.visibility,
        delivery: cfg.delivery,
    };
    let mut tasks = pool.spawn(cfg.workers, &stop_rx);
    tasks.push(tokio::spawn(timer(
        "resume",
        cfg.settings.intervals.resume.get(),
        stop_rx.clone(),
        {
            let c = controller.clone();
            move || {
                let c = c.clone();
                async move { c.resume().await.map(|_| ()) }
            }
        },
    )));
    tasks.push(tokio::spawn(timer(
        "poll",
        cfg.settings.intervals.poll.get(),
        stop_rx.clone(),
        {
            let c = controller.clone();
            move || {
                let c = c.clone();
                async move { c.poll().await }
            }
        },
    )));

    tasks.push(tokio::spawn(timer(
        "drift",
        // At least MIN_INTERVAL: the settings check refuses a shorter one.
        cfg.settings.intervals.drift.get(),
        stop_rx.clone(),
        {
            let c = controller.clone();
            move || {
                let c = c.clone();
                async move { c.drift_sweep().await.map(|_| ()) }
            }
        },
    )));
    tasks.push(tokio::spawn(prune_timer(
        runtime.clone(),
        git.clone(),
        jobs,
        stop_rx.clone(),
    )));

    let access = Access {
        callers: Arc::new(cfg.tokens.clone()),
        hosts: cfg.hosts.clone(),
    };
    let app = gannet_controller::http::router(controller, access, Some(crate::CONSOLE));
    let server = tokio::spawn(serve::serve(
        listener,
        app,
        cfg.limits,
        cfg.tls.clone(),
        stop_rx.clone(),
    ));

    stop.await;
    tracing::info!("stopping: finishing the steps under way");
    let _ = stop_tx.send(true);
    let drain = async {
        for t in tasks {
            let _ = t.await;
        }
        let _ = server.await;
    };
    if tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .is_err()
    {
        tracing::warn!("steps still running after 10s; they resume at the next start");
    }
    drop(lock);
    Ok(())
}

/// How long a webhook delivery id is kept for deduplication (GitHub redelivers for 3 days).
const DELIVERIES_KEPT: GoDuration = GoDuration::from_secs(7 * 24 * 3600);
/// A checked-out tree unused this long is removed (longer than the 6h default stage timeout).
const TREES_IDLE: Duration = Duration::from_secs(24 * 3600);
/// The most recently used trees of each repository kept whatever their age.
const TREES_KEPT: usize = 3;

/// How long an ended job's directory (its output and working copy) is kept.
const JOBS_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Every hour (and at start): forgets old webhook deliveries, removes checked-out trees
/// nobody has used for a day and the directories of jobs that ended a week ago, so the state
/// file, the git cache and the jobs directory do not grow forever.
async fn prune_timer(
    runtime: SqliteRuntime,
    git: Arc<LocalGit>,
    jobs: ProcessJobs,
    mut stop: watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_secs(3600));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {
                match runtime.prune_deliveries(DELIVERIES_KEPT).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(deliveries = n, "old webhook deliveries pruned"),
                    Err(err) => tracing::warn!(error = %gannet_controller::error_chain(&err), "pruning deliveries failed"),
                }
                if let Err(err) = git.prune_trees(TREES_IDLE, TREES_KEPT).await {
                    tracing::warn!(error = %err, "pruning checked-out trees failed");
                }
                let jobs = jobs.clone();
                match tokio::task::spawn_blocking(move || jobs.prune(JOBS_KEPT)).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(jobs = n, "ended jobs pruned"),
                    Ok(Err(err)) => tracing::warn!(error = %err, "pruning ended jobs failed"),
                    Err(err) => tracing::warn!(error = %err, "pruning ended jobs failed"),
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}

/// Makes `path` readable and writable by its owner only (`mode`, such as 0o600).
fn private(path: &std::path::Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot make {} private (mode {mode:o})", path.display()))
}

/// Runs `tick` now and then every `every`, until stopped.
async fn timer<F, Fut>(
    name: &'static str,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    tick: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), gannet_controller::HandlerError>>,
{
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {
                if let Err(err) = tick().await {
                    tracing::warn!(timer = name, error = %gannet_controller::error_chain(&err), "timer tick failed");
                }
            }
            () = stopped(&mut stop) => return,
        }
    }
}

/// Resolves once `stop` says so (or its sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = ctrl_c.await;
}
