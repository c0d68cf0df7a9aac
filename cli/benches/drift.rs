//! The drift benchmark: BENCH_APPS (1,000) `LambdaApp`s, each its own function with zip code,
//! deployed by a real `gannet up` (embedded runtime) to moto on loopback, then swept for drift.
//! Every AWS call goes through a loopback proxy that counts them.
//!
//! A sweep is measured from the moment its checks are queued (their `sent_at` in the state
//! file) to the moment the drift queue is empty again (every check ran and was acknowledged),
//! read from the state file every 5 ms. Each sweep is a fresh start of `gannet up` on the same
//! state: its drift timer sweeps at once, and nothing else runs (the poll finds the head
//! already triggered, no deployment is in flight). The first sweep after the deployments
//! writes every app (its live resources are new); the following ones find nothing new and
//! write nothing, the steady state of a fleet.
//!
//! Settings (environment): BENCH_APPS (1000), BENCH_SWEEPS (5 steady sweeps), BENCH_WORKERS
//! (gannet's default, 8), BENCH_KEEP (set: keep the work directory). moto: the one at
//! GANNET_MOTO_ENDPOINT, or one started here with scripts/moto.sh and stopped by its PID.

#[path = "../../tests/lambda_moto/mod.rs"]
mod lambda_moto;
#[path = "common/stats.rs"]
mod stats;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lambda_moto as moto;
use lambda_moto::Proxy;
use stats::{env_number, shown};
use support::Gannet;

/// The bound on the deployments of the whole fleet.
const DEPLOY_LIMIT: Duration = Duration::from_secs(45 * 60);
/// The bound on one sweep.
const SWEEP_LIMIT: Duration = Duration::from_secs(10 * 60);

struct Settings {
    apps: usize,
    sweeps: usize,
    workers: usize,
    keep: bool,
}

impl Settings {
    fn from_env() -> Self {
        Self {
            apps: env_number("BENCH_APPS", 1000).max(1),
            sweeps: env_number("BENCH_SWEEPS", 5).max(1),
            workers: env_number("BENCH_WORKERS", 8).clamp(1, 256),
            keep: std::env::var_os("BENCH_KEEP").is_some(),
        }
    }
}

/// moto for the benchmark: the one named by GANNET_MOTO_ENDPOINT, or one started here (and
/// stopped by its PID when this is dropped).
struct Moto {
    /// The state directory of a moto started here.
    started: Option<PathBuf>,
    pid: Option<u32>,
}

fn moto_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/moto.sh")
}

impl Moto {
    fn ensure(dir: &Path) -> Self {
        if std::env::var_os("GANNET_MOTO_ENDPOINT").is_some() {
            return Self {
                started: None,
                pid: None,
            };
        }
        let script = moto_script();
        let status = Command::new(&script)
            .arg("ensure")
            .status()
            .expect("scripts/moto.sh runs");
        assert!(status.success(), "scripts/moto.sh ensure failed");
        let out = Command::new(&script)
            .arg("start")
            .arg(dir)
            .output()
            .expect("scripts/moto.sh runs");
        assert!(
            out.status.success(),
            "scripts/moto.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some((name, value)) = line
                .strip_prefix("export ")
                .and_then(|kv| kv.split_once('='))
            {
                // Before any thread of ours starts: the helpers read it.
                std::env::set_var(name, value);
            }
        }
        let pid = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok());
        Self {
            started: Some(dir.to_owned()),
            pid,
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(dir) = &self.started {
            let _ = Command::new(moto_script()).arg("stop").arg(dir).status();
        }
    }
}

/// User + system CPU time of process `pid` so far, in ms (from /proc; 0 when unreadable).
fn cpu_ms(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of stat, in 10 ms ticks.
    (fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)) * 10
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Commits the fleet: `apps/fn-NNNN/` holds each app's config, function manifest and zip.
fn build_repo(repo: &support::Repo, apps: usize, prefix: &str) {
    for i in 0..apps {
        let dir = repo.path().join(format!("apps/fn-{i:04}"));
        std::fs::create_dir_all(&dir).expect("app dir");
        let config =
            format!("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn-{i:04}\n");
        let manifest = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {prefix}-{i:04}\n  role: {}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  zipFile: fn.zip\n  environments: {{APP: fn-{i:04}}}\n  vpcConfig:\n    subnetIds: [subnet-a, subnet-b]\n    securityGroupIds: [sg-a]\n",
            moto::ROLE
        );
        std::fs::write(dir.join("app.pipecd.yaml"), config).expect("write config");
        std::fs::write(dir.join("function.yaml"), manifest).expect("write manifest");
        std::fs::write(dir.join("fn.zip"), moto::zip_bytes(&format!("fn-{i}"))).expect("zip");
    }
    repo.commit(&[], "the fleet");
}

fn config(port: u16, repo: &Path, proxy: &str, workers: usize) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nworkers: {workers}\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\nintervals: {{poll: 1h, resume: 30s, drift: 1h}}\nrepos:\n  - id: fleet\n    path: {}\n    branch: main\n    onFirstSight: deploy\nplugins:\n  lambda:\n    deployTargets:\n      - name: moto\n        region: {}\n        endpoint: {proxy}\n",
        repo.display(),
        moto::REGION
    )
}

/// Polls `f` every `every` until it returns Some, or panics after `limit` with gannet's log.
fn poll<T>(
    g: &Gannet,
    limit: Duration,
    every: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            let log = g.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "timed out after {limit:?} waiting until {what}\n--- gannet log (last lines, newest first) ---\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(every);
    }
}

/// Deployments by status, from the state file.
fn deployment_counts(g: &Gannet) -> Vec<(String, i64)> {
    let db = g.db();
    let mut stmt = db
        .prepare("SELECT status, COUNT(*) FROM deployments GROUP BY status ORDER BY status")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<Vec<(String, i64)>, _>>()
        .expect("rows");
    rows
}

/// (how many, earliest `sent_at`) of the drift checks waiting or in flight.
fn drift_queue(g: &Gannet) -> (i64, Option<i64>) {
    g.db()
        .query_row(
            "SELECT COUNT(*), MIN(sent_at) FROM messages WHERE queue = 'drift'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or((0, None))
}

/// Apps that are not SYNCED with no drift, as (id, status, reason), from the state file.
fn unsynced(g: &Gannet) -> Vec<(String, String, String)> {
    g.stored_rows("apps")
        .into_iter()
        .filter_map(|(id, body)| {
            let app: serde_json::Value = serde_json::from_str(&body).expect("app JSON");
            let clean = app["sync_status"] == "SYNCED"
                && app["drift"].as_array().is_some_and(Vec::is_empty)
                && app["live"].as_array().is_some_and(|l| l.len() == 2);
            (!clean).then(|| {
                (
                    id,
                    app["sync_status"].as_str().unwrap_or_default().to_owned(),
                    app["sync_reason"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

struct Sample {
    wall_ms: f64,
    calls: u64,
    gannet_cpu_ms: u64,
    moto_cpu_ms: Option<u64>,
}

/// Restarts `gannet up` (its drift timer sweeps at once) and measures that sweep.
fn sweep(g: Gannet, proxy: &Proxy, moto_pid: Option<u32>, apps: usize) -> (Gannet, Sample) {
    let calls_before = proxy.requests();
    let moto_before = moto_pid.map(cpu_ms);
    let started = now_ms();
    let g = g.restart();
    let sent_at = poll(
        &g,
        Duration::from_secs(60),
        Duration::from_millis(5),
        "the sweep queues its checks",
        || match drift_queue(&g) {
            (n, Some(at)) if n > 0 && at >= started => Some(at),
            _ => None,
        },
    );
    let done = poll(
        &g,
        SWEEP_LIMIT,
        Duration::from_millis(5),
        "every drift check ran",
        || (drift_queue(&g).0 == 0).then(now_ms),
    );
    let calls = proxy.requests() - calls_before;
    let sample = Sample {
        wall_ms: (done - sent_at) as f64,
        calls,
        gannet_cpu_ms: cpu_ms(g.child.id()),
        moto_cpu_ms: moto_before
            .zip(moto_pid)
            .map(|(b, pid)| cpu_ms(pid).saturating_sub(b)),
    };
    let dead: i64 = g
        .db()
        .query_row(
            "SELECT COUNT(*) FROM dead_letters WHERE queue = 'drift'",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    assert_eq!(dead, 0, "drift checks were dead-lettered\n{}", g.log());
    eprintln!(
        "sweep of {apps} apps: {:.0} ms, {} AWS calls, gannet CPU {} ms",
        sample.wall_ms, sample.calls, sample.gannet_cpu_ms
    );
    (g, sample)
}

fn row(label: &str, samples: &[Sample], apps: usize) -> String {
    let n = apps as f64;
    let walls: Vec<f64> = samples.iter().map(|s| s.wall_ms / 1000.0).collect();
    let rate: Vec<f64> = samples
        .iter()
        .map(|s| n * 1000.0 / s.wall_ms.max(1.0))
        .collect();
    let calls: Vec<f64> = samples.iter().map(|s| s.calls as f64 / n).collect();
    let cpu: Vec<f64> = samples.iter().map(|s| s.gannet_cpu_ms as f64 / n).collect();
    let moto: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.moto_cpu_ms.map(|m| m as f64 / n))
        .collect();
    let moto = if moto.is_empty() {
        "n/a".to_owned()
    } else {
        shown(&moto, 2, " ms")
    };
    format!(
        "| {label} | {} | {} | {} | {} | {} | {moto} |",
        samples.len(),
        shown(&walls, 2, " s"),
        shown(&rate, 0, "/s"),
        shown(&calls, 2, ""),
        shown(&cpu, 2, " ms"),
    )
}

fn main() {
    let settings = Settings::from_env();
    let root = tempfile::tempdir().expect("tempdir");
    let moto_dir = root.path().join("moto");
    std::fs::create_dir_all(&moto_dir).expect("moto dir");
    let moto_server = Moto::ensure(&moto_dir);
    moto::ensure_role();
    let proxy = Proxy::start();

    let repo = support::Repo::new();
    let prefix = moto::unique("drift");
    let built = Instant::now();
    build_repo(&repo, settings.apps, &prefix);
    eprintln!(
        "committed {} apps in {:.1} s",
        settings.apps,
        built.elapsed().as_secs_f64()
    );

    let state = root.path().join("gannet");
    std::fs::create_dir_all(&state).expect("state dir");
    let started = Instant::now();
    let mut g = Gannet::start_raw(
        &state,
        |port| config(port, repo.path(), &proxy.url, settings.workers),
        &moto::gannet_env(),
    );
    let apps = settings.apps as i64;
    poll(
        &g,
        DEPLOY_LIMIT,
        Duration::from_secs(1),
        "every app is deployed",
        || {
            let counts = deployment_counts(&g);
            let of = |s: &str| counts.iter().find(|(k, _)| k == s).map_or(0, |(_, n)| *n);
            assert_eq!(
                of("FAILURE"),
                0,
                "deployments failed: {counts:?}\n{}",
                g.log()
            );
            (of("SUCCESS") == apps).then_some(())
        },
    );
    g.wait_idle(Duration::from_secs(120));
    let deploy_s = started.elapsed().as_secs_f64();
    let deploy_calls = proxy.requests();
    eprintln!("deployed {apps} apps in {deploy_s:.1} s ({deploy_calls} AWS calls)");

    let (g2, first) = sweep(g, &proxy, moto_server.pid, settings.apps);
    g = g2;
    let bad = unsynced(&g);
    assert!(
        bad.is_empty(),
        "{} apps are not SYNCED with no drift after the first sweep, such as {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
    let mut steady = Vec::new();
    for _ in 0..settings.sweeps {
        let (g2, s) = sweep(g, &proxy, moto_server.pid, settings.apps);
        g = g2;
        steady.push(s);
    }
    assert!(unsynced(&g).is_empty(), "a steady sweep changed a status");

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!();
    println!(
        "gannet up (release): {} LambdaApps on moto, {} workers, {cores} cores; deployed in {deploy_s:.0} s ({:.1} AWS calls per deployment)",
        settings.apps,
        settings.workers,
        deploy_calls as f64 / settings.apps as f64,
    );
    println!();
    println!("| sweep | runs | wall time (queued → all checked) | checks per second | AWS calls per app | gannet CPU per check | moto CPU per check |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "{}",
        row(
            "first after deploying (writes every app)",
            std::slice::from_ref(&first),
            settings.apps
        )
    );
    println!(
        "{}",
        row("steady (nothing new, no writes)", &steady, settings.apps)
    );
    println!();
    println!("Medians, with the min–max range over the runs. gannet CPU counts the whole process since its start (the sweep is nearly all of it).");

    drop(g);
    if settings.keep {
        eprintln!("work directory kept at {}", root.path().display());
        std::mem::forget(root);
    }
}
