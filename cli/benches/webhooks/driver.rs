//! The load: senders that advance a repository's branch, push a signed webhook, and follow
//! the deployment through the JSON API until it ends, with what each push measured.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gannet_domain::{AppId, CommitSha, DeploymentId, RepoId};
use serde_json::Value;

use crate::setup::{AppRepo, Up};
use crate::support;

/// How long any one wait may take before the benchmark gives up with gannet's log.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(60);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as the API writes it
/// (`2024-05-01T12:00:00.123Z`).
pub(crate) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = num(20..23).unwrap_or(0);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

/// Checks [`parse_rfc3339_ms`] against the API's own formatting, leap days and centuries
/// included, before any latency depends on it.
pub(crate) fn check_time_parsing() {
    for ms in [
        0,
        86_399_999,
        951_782_400_123,
        1_700_000_000_456,
        4_107_542_400_999,
    ] {
        let text = gannet_events::rfc3339(gannet_domain::duration::Millis(ms));
        assert_eq!(parse_rfc3339_ms(&text), Some(ms as i64), "{text}");
    }
}

/// What one push measured.
pub(crate) struct Sample {
    pub(crate) sent_ms: i64,
    pub(crate) response: Duration,
    pub(crate) first_stage_started_ms: Option<i64>,
    pub(crate) completed_ms: Option<i64>,
    pub(crate) status: String,
}

/// Per-repository progress: the index of the next commit each repository may push.
struct Progress {
    next: Mutex<Vec<usize>>,
    changed: Condvar,
}

/// A batch of pushes: commits `first..first + count` of every repository, round by round.
pub(crate) struct Phase {
    pub(crate) first: usize,
    pub(crate) count: usize,
    /// The time between two sends; `None` sends as soon as a sender is free.
    pub(crate) every: Option<Duration>,
}

pub(crate) struct Driver<'a> {
    pub(crate) url: String,
    pub(crate) http: reqwest::blocking::Client,
    pub(crate) repos: &'a [AppRepo],
    pub(crate) poll: Duration,
    pub(crate) up: &'a Up,
}

impl Driver<'_> {
    /// Advances the repository's `main` to its commit `k`, pushes, and follows the deployment
    /// until it ends.
    fn push(&self, r: usize, k: usize) -> Sample {
        let repo = &self.repos[r];
        let sha = &repo.commits[k];
        crate::setup::move_main(repo, sha);
        let body = support::push_payload(&format!("bench/{}", repo.name), "main", sha);
        let sig = gannet_events::github::sign(support::SECRET.as_bytes(), body.as_bytes());
        let sent_ms = now_ms();
        let start = Instant::now();
        let res = self
            .http
            .post(format!("{}/hooks/github", self.url))
            .header("x-github-event", "push")
            .header("x-github-delivery", format!("bench-{}-{k}", repo.name))
            .header("x-hub-signature-256", sig)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .expect("webhook request");
        let response = start.elapsed();
        assert_eq!(res.status().as_u16(), 202, "webhook answered {res:?}");

        let id = DeploymentId::derive(
            &AppId::new(
                &RepoId::parse(&repo.name).expect("repo id"),
                &repo.config_path,
            ),
            &CommitSha::parse(sha).expect("sha"),
            "ON_COMMIT",
        );
        let url = format!("{}/api/v1/deployments/{id}", self.url);
        let started = Instant::now();
        loop {
            let res = self
                .http
                .get(&url)
                .bearer_auth(crate::setup::BENCH_TOKEN)
                .send()
                .expect("api request");
            if res.status().is_success() {
                let body: Value = res.json().expect("deployment json");
                let d = &body["deployment"];
                let status = d["status"].as_str().unwrap_or_default().to_owned();
                if matches!(status.as_str(), "SUCCESS" | "FAILURE" | "CANCELLED") {
                    let first = d["stages"]
                        .as_array()
                        .and_then(|s| s.iter().find(|s| s["rollback"] == false))
                        .and_then(|s| s["started_at"].as_str())
                        .and_then(parse_rfc3339_ms);
                    return Sample {
                        sent_ms,
                        response,
                        first_stage_started_ms: first,
                        completed_ms: d["completed_at"].as_str().and_then(parse_rfc3339_ms),
                        status,
                    };
                }
            }
            assert!(
                started.elapsed() < WAIT_LIMIT,
                "deployment {id} of {} did not end within {WAIT_LIMIT:?}\n--- gannet log ---\n{}",
                repo.name,
                self.up.log_tail()
            );
            std::thread::sleep(self.poll);
        }
    }

    /// Sends the phase's pushes with `concurrency` senders.
    pub(crate) fn run(&self, phase: &Phase, concurrency: usize) -> Vec<Sample> {
        let start = Instant::now();
        let jobs: Mutex<VecDeque<(usize, usize, Instant)>> = Mutex::new(
            (phase.first..phase.first + phase.count)
                .flat_map(|k| (0..self.repos.len()).map(move |r| (r, k)))
                .enumerate()
                .map(|(i, (r, k))| {
                    let due = phase.every.map_or(start, |every| start + every * i as u32);
                    (r, k, due)
                })
                .collect(),
        );
        let progress = Progress {
            next: Mutex::new(vec![phase.first; self.repos.len()]),
            changed: Condvar::new(),
        };
        let samples = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..concurrency {
                s.spawn(|| loop {
                    let Some((r, k, due)) = jobs.lock().expect("jobs").pop_front() else {
                        return;
                    };
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    let next = progress.next.lock().expect("progress");
                    let (next, waited) = progress
                        .changed
                        .wait_timeout_while(next, WAIT_LIMIT, |n| n[r] < k)
                        .expect("progress");
                    assert!(!waited.timed_out(), "push {k} of repo {r} never became due");
                    drop(next);
                    let sample = self.push(r, k);
                    samples.lock().expect("samples").push(sample);
                    progress.next.lock().expect("progress")[r] = k + 1;
                    progress.changed.notify_all();
                });
            }
        });
        samples.into_inner().expect("samples")
    }
}
