//! The web console benchmark: how long the deployment page of a 10-stage deployment with a
//! 5,000-line stage log takes to render in Debian's Chromium (headless, Playwright), from
//! navigation start until every stage is shown and the opened log shows its last line, against
//! a `gannet up` built with the bench profile. The peer is the same stages and log as one
//! static HTML page loaded from a file (no script, no API calls): the floor for showing that
//! much text in that browser. The table quotes medians of BENCH_RUNS page loads (11) each and
//! their ratio. Needs GANNET_CHROMIUM (or `scripts/chromium.sh ensure` run once) and Node.js.

#[path = "common/stats.rs"]
mod stats;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use stats::{bounded, env_number};
use support::{app_config, token_of, Gannet, Repo, UpOptions};

const STAGES: usize = 10;
const LINES: usize = 5_000;
const LIMIT: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chromium() -> String {
    if let Ok(path) = std::env::var("GANNET_CHROMIUM") {
        return path;
    }
    let out = Command::new(root().join("scripts/chromium.sh"))
        .arg("path")
        .output()
        .expect("scripts/chromium.sh runs");
    assert!(
        out.status.success(),
        "no Chromium: run scripts/chromium.sh ensure ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn last_line() -> String {
    format!("log line {LINES} of {LINES}")
}

/// Ten stages; the last prints the 5,000 lines.
fn stages() -> String {
    let mut text = String::new();
    for i in 0..STAGES - 1 {
        text.push_str(&format!(
            "      - name: SCRIPT_RUN\n        with: {{run: echo stage {i} done}}\n"
        ));
    }
    text.push_str(&format!(
        "      - name: SCRIPT_RUN\n        with: {{run: 'for i in $(seq 1 {LINES}); do echo log line $i of {LINES}; done'}}\n"
    ));
    text
}

/// The peer: the same stage names and log lines as one static page.
fn static_page(dir: &Path, log: &[String]) -> PathBuf {
    let mut html = String::from("<!doctype html><meta charset=utf-8><title>peer</title><ol>");
    for i in 0..STAGES {
        html.push_str(&format!("<li>SCRIPT_RUN stage-{i} SUCCESS</li>"));
    }
    html.push_str("</ol><pre>");
    for line in log {
        let text = line.replace('&', "&amp;").replace('<', "&lt;");
        html.push_str(&text);
        html.push('\n');
    }
    html.push_str("</pre>");
    let path = dir.join("peer.html");
    std::fs::write(&path, html).expect("write peer page");
    path
}

/// Runs a render scenario; returns each run's milliseconds.
fn render(name: &str, g: &Gannet, deployment: &str, expect: Value) -> Vec<f64> {
    let mut cmd = Command::new("node");
    cmd.arg(root().join("console/e2e/run.mjs"))
        .arg(name)
        .current_dir(root().join("console"))
        .env("GANNET_CHROMIUM", chromium())
        .env("GANNET_URL", &g.url)
        .env("GANNET_TOKEN", token_of("vic"))
        .env("GANNET_DEPLOYMENT", deployment)
        .env("GANNET_EXPECT", expect.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = bounded(&mut cmd, Duration::from_secs(600), name);
    assert!(
        out.status.success(),
        "{name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("run").is_some())
        .filter_map(|v| v["ms"].as_f64())
        .collect()
}

fn main() {
    let runs = env_number("BENCH_RUNS", 11);
    let repo = Repo::new();
    let head = repo.commit(
        &[(
            "apps/bench/app.pipecd.yaml",
            &app_config("bench", &stages()),
        )],
        "ten stages",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let stage = format!("stage-{}", STAGES - 1);
    let log = g.stage_log(&id, &stage);
    assert!(
        log.len() >= LINES && log.iter().any(|l| l == &last_line()),
        "{} lines",
        log.len()
    );
    // The page is done when the log's last line shows (the script's own, or gannet's exit line).
    let last = log.last().cloned().unwrap_or_default();

    let console = render(
        "render-speed",
        &g,
        &id,
        json!({"runs": runs, "stages": STAGES, "last_line": last, "stage": stage}),
    );
    let peer = render(
        "render-static",
        &g,
        &id,
        json!({"runs": runs, "file": static_page(state.path(), &log), "last_line": last}),
    );
    let (c, p) = (stats::median(console.clone()), stats::median(peer.clone()));
    println!(
        "| page ({STAGES} stages, {LINES} log lines, Chromium headless) | median (min–max) | runs |"
    );
    println!("|---|---|---|");
    println!(
        "| gannet console, deployment page (`gannet up`, bench profile) | **{}** | {} |",
        stats::shown(&console, 0, " ms"),
        console.len()
    );
    println!(
        "| peer: the same text as one static HTML page from a file | {} | {} |",
        stats::shown(&peer, 0, " ms"),
        peer.len()
    );
    println!(
        "| ratio of the medians (console / static page) | {:.2}× | |",
        c / p
    );
    println!();
    println!("Target: under 1,000 ms. Chromium: {}", chromium());
}
