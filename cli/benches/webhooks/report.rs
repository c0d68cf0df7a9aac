//! The numbers: each phase's percentiles, rate and CPU, and the markdown table of the medians
//! over the runs against the targets.

use std::time::Instant;

use crate::driver::{Driver, Phase};
use crate::setup::{cpu_ticks, machine_ticks};
use crate::stats::median;
use crate::Settings;

/// The targets (issue 34).
const TARGET_P99_MS: f64 = 10.0;
const TARGET_PER_MINUTE: f64 = 10_000.0;
const TARGET_IDLE_RSS_MB: f64 = 20.0;
const TARGET_PEAK_RSS_MB: f64 = 40.0;

/// One phase's results; times in ms.
pub(crate) struct PhaseResult {
    pushes: usize,
    succeeded: usize,
    latency: [f64; 2],
    response: [f64; 2],
    per_minute: f64,
    /// gannet's own CPU, its git subprocesses' CPU, and the driver's, per deployment.
    cpu_ms: [f64; 3],
    /// The share of the machine's CPU used meanwhile by anything but gannet, its git runs and
    /// this driver (other processes, the kernel's loopback networking): noise, in %.
    others_pct: f64,
    wall_s: f64,
}

/// One run's results.
pub(crate) struct RunResult {
    pub(crate) paced: PhaseResult,
    pub(crate) unpaced: PhaseResult,
    pub(crate) idle_rss_mb: f64,
    pub(crate) peak_rss_mb: f64,
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn p50_p99(mut v: Vec<f64>) -> [f64; 2] {
    v.sort_by(f64::total_cmp);
    [percentile(&v, 50.0), percentile(&v, 99.0)]
}

pub(crate) fn measure(driver: &Driver<'_>, phase: &Phase, concurrency: usize) -> PhaseResult {
    let self_stat = "/proc/self/stat";
    let before = (driver.up.cpu_ticks(), cpu_ticks(self_stat), machine_ticks());
    let wall = Instant::now();
    let samples = driver.run(phase, concurrency);
    let wall_s = wall.elapsed().as_secs_f64();
    let after = (driver.up.cpu_ticks(), cpu_ticks(self_stat), machine_ticks());
    let ours = (after.0 .0 + after.0 .1 + after.1 .0 + after.1 .1)
        - (before.0 .0 + before.0 .1 + before.1 .0 + before.1 .1);
    let (busy, total) = (after.2 .0 - before.2 .0, after.2 .1 - before.2 .1);
    let others_pct = busy.saturating_sub(ours) as f64 * 100.0 / total.max(1) as f64;
    let n = samples.len().max(1) as f64;
    let per_deployment = |b: u64, a: u64| (a - b) as f64 * 10.0 / n;
    let cpu_ms = [
        per_deployment(before.0 .0, after.0 .0),
        per_deployment(before.0 .1, after.0 .1),
        // The driver's threads and its finished git update-ref children.
        per_deployment(before.1 .0 + before.1 .1, after.1 .0 + after.1 .1),
    ];
    let succeeded = samples.iter().filter(|s| s.status == "SUCCESS").count();
    let first_send = samples.iter().map(|s| s.sent_ms).min().unwrap_or(0);
    let last_success = samples
        .iter()
        .filter(|s| s.status == "SUCCESS")
        .filter_map(|s| s.completed_ms)
        .max()
        .unwrap_or(first_send);
    PhaseResult {
        pushes: samples.len(),
        succeeded,
        latency: p50_p99(
            samples
                .iter()
                .filter_map(|s| Some((s.first_stage_started_ms? - s.sent_ms) as f64))
                .collect(),
        ),
        response: p50_p99(
            samples
                .iter()
                .map(|s| s.response.as_secs_f64() * 1000.0)
                .collect(),
        ),
        per_minute: succeeded as f64 * 60_000.0 / (last_success - first_send).max(1) as f64,
        cpu_ms,
        others_pct,
        wall_s,
    }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**NO**"
    }
}

/// Formats the median of a metric over the runs, with the min–max range when there are
/// several runs.
struct Table<'a> {
    results: &'a [RunResult],
}

impl Table<'_> {
    fn median(&self, f: impl Fn(&RunResult) -> f64) -> f64 {
        median(self.results.iter().map(f).collect())
    }

    fn value(&self, f: impl Fn(&RunResult) -> f64, decimals: usize, unit: &str) -> String {
        let mid = self.median(&f);
        if self.results.len() < 2 {
            return format!("{mid:.decimals$}{unit}");
        }
        let v: Vec<f64> = self.results.iter().map(&f).collect();
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(*x), hi.max(*x))
            });
        format!("{mid:.decimals$}{unit} ({lo:.decimals$}–{hi:.decimals$})")
    }
}

pub(crate) fn print_table(settings: &Settings, label: &str, results: &[RunResult]) {
    let t = Table { results };
    let (rate, inflight) = (settings.rate, settings.concurrency);
    let pushes: usize = results
        .iter()
        .map(|r| r.paced.pushes + r.unpaced.pushes)
        .sum();
    let succeeded: usize = results
        .iter()
        .map(|r| r.paced.succeeded + r.unpaced.succeeded)
        .sum();
    println!();
    println!(
        "gannet up, {label}: {} apps, {} signed pushes per phase, ≤ {inflight} in flight, {} cores, {} run(s){}",
        settings.apps,
        settings.apps * settings.commits,
        std::thread::available_parallelism().map_or(0, usize::from),
        results.len(),
        if results.len() > 1 { "; median (min–max)" } else { "" }
    );
    println!();
    println!("| metric | value | target | met? |");
    println!("|---|---|---|---|");
    println!(
        "| webhook → first stage RUNNING, p50, paced at {rate}/min | {} | | |",
        t.value(|r| r.paced.latency[0], 0, " ms")
    );
    let p99 = t.median(|r| r.paced.latency[1]);
    println!(
        "| webhook → first stage RUNNING, p99, paced at {rate}/min | {} | < {TARGET_P99_MS:.0} ms | {} |",
        t.value(|r| r.paced.latency[1], 0, " ms"),
        met(p99 < TARGET_P99_MS)
    );
    println!(
        "| webhook response, p50 / p99, paced | {} / {} | | |",
        t.value(|r| r.paced.response[0], 1, " ms"),
        t.value(|r| r.paced.response[1], 1, " ms")
    );
    let per_minute = t.median(|r| r.unpaced.per_minute);
    println!(
        "| deployments completed per minute, unpaced, {inflight} in flight | {} | ≥ {TARGET_PER_MINUTE:.0} | {} |",
        t.value(|r| r.unpaced.per_minute, 0, ""),
        met(per_minute >= TARGET_PER_MINUTE)
    );
    println!(
        "| webhook → first stage RUNNING, p50 / p99, unpaced | {} / {} | | |",
        t.value(|r| r.unpaced.latency[0], 0, " ms"),
        t.value(|r| r.unpaced.latency[1], 0, " ms")
    );
    println!(
        "| webhook response, p50 / p99, unpaced | {} / {} | | |",
        t.value(|r| r.unpaced.response[0], 1, " ms"),
        t.value(|r| r.unpaced.response[1], 1, " ms")
    );
    println!(
        "| deployments ending SUCCESS | {succeeded} of {pushes} | all | {} |",
        met(succeeded == pushes)
    );
    let idle = t.median(|r| r.idle_rss_mb);
    println!(
        "| idle RSS after start-up | {} | < {TARGET_IDLE_RSS_MB:.0} MB | {} |",
        t.value(|r| r.idle_rss_mb, 1, " MB"),
        met(idle < TARGET_IDLE_RSS_MB)
    );
    let peak = t.median(|r| r.peak_rss_mb);
    println!(
        "| peak RSS (VmHWM) | {} | < {TARGET_PEAK_RSS_MB:.0} MB | {} |",
        t.value(|r| r.peak_rss_mb, 1, " MB"),
        met(peak < TARGET_PEAK_RSS_MB)
    );
    println!(
        "| CPU per deployment, unpaced: gannet / its git subprocesses / this driver | {} / {} / {} | | |",
        t.value(|r| r.unpaced.cpu_ms[0], 1, " ms"),
        t.value(|r| r.unpaced.cpu_ms[1], 1, " ms"),
        t.value(|r| r.unpaced.cpu_ms[2], 1, " ms")
    );
    println!(
        "| machine CPU used elsewhere (noise), paced / unpaced | {} / {} | | |",
        t.value(|r| r.paced.others_pct, 0, " %"),
        t.value(|r| r.unpaced.others_pct, 0, " %")
    );
    println!(
        "| wall time, paced / unpaced | {} / {} | | |",
        t.value(|r| r.paced.wall_s, 1, " s"),
        t.value(|r| r.unpaced.wall_s, 1, " s")
    );
    if results.len() < 2 {
        return;
    }
    // Each run on its own, so latency can be read against the noise of that run.
    println!();
    println!("| run | paced p50 / p99 | CPU used elsewhere, paced | unpaced per minute | CPU used elsewhere, unpaced |");
    println!("|---|---|---|---|---|");
    for (i, r) in results.iter().enumerate() {
        println!(
            "| {} | {:.0} / {:.0} ms | {:.0} % | {:.0} | {:.0} % |",
            i + 1,
            r.paced.latency[0],
            r.paced.latency[1],
            r.paced.others_pct,
            r.unpaced.per_minute,
            r.unpaced.others_pct
        );
    }
}

/// The medians of a baseline's runs and this build's, measured in the same runs, side by side
/// with the ratio: how many times better this build is (above 1: better), whichever way the
/// metric points.
pub(crate) fn print_comparison(before: &[RunResult], after: &[RunResult]) {
    let (b, a) = (Table { results: before }, Table { results: after });
    println!();
    println!("Side by side, medians of {} run(s) each:", after.len());
    println!();
    println!("| metric | baseline | this build | this build is |");
    println!("|---|---|---|---|");
    let row = |name: &str,
               f: &dyn Fn(&RunResult) -> f64,
               unit: &str,
               decimals: usize,
               more_is_better: bool| {
        let (x, y) = (b.median(f), a.median(f));
        let ratio = if more_is_better { y / x } else { x / y };
        let ratio = if ratio.is_finite() {
            format!(
                "{ratio:.2}× {}",
                if more_is_better { "more" } else { "less" }
            )
        } else {
            "none left".to_owned()
        };
        println!("| {name} | {x:.decimals$}{unit} | {y:.decimals$}{unit} | {ratio} |");
    };
    row(
        "webhook → first stage RUNNING, p50, paced",
        &|r| r.paced.latency[0],
        " ms",
        1,
        false,
    );
    row(
        "webhook → first stage RUNNING, p99, paced",
        &|r| r.paced.latency[1],
        " ms",
        1,
        false,
    );
    row(
        "deployments completed per minute, unpaced",
        &|r| r.unpaced.per_minute,
        "",
        0,
        true,
    );
    row(
        "gannet CPU per deployment, unpaced",
        &|r| r.unpaced.cpu_ms[0],
        " ms",
        1,
        false,
    );
    row(
        "its subprocesses' CPU per deployment, unpaced",
        &|r| r.unpaced.cpu_ms[1],
        " ms",
        1,
        false,
    );
    row("idle RSS", &|r| r.idle_rss_mb, " MB", 1, false);
    row("peak RSS", &|r| r.peak_rss_mb, " MB", 1, false);
}
