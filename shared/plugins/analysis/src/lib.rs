//! The ANALYSIS stage, with PipeCD's options: for `duration`, each check (`metrics[]`,
//! `logs[]`, `https[]`) is measured every `interval`, and the stage fails as soon as a check
//! has failed more than its `failureLimit` times; otherwise it succeeds when the duration is
//! over.
//!
//! **One measurement per step.** Measurement *n* of a check is due `n × interval` after the
//! stage started and covers the interval before that (its *slot*). A step takes the newest
//! measurement that has fallen due, saves it in the stage metadata ([`record`]) and returns
//! `Continue{after}` until the next one is due; it never sleeps. A repeated step finds the slot
//! taken and measures nothing; a restarted controller reads the saved counts and goes on. The
//! slots that passed while no step ran (gannet was down) are counted as missed, except the
//! newest, which is taken late over its own interval; the stage's last slot is always taken.
//!
//! The providers (Prometheus, Datadog, CloudWatch; CloudWatch Logs for `logs`, [`logs`]) are
//! configured once, in `plugins.analysis.providers` ([`providers`]). What an `https` check,
//! written in the repository, may reach is the operator's to widen, in
//! `plugins.analysis.http` ([`egress`]).

mod egress;
mod logs;
pub mod mannwhitney;
mod measure;
mod options;
mod providers;
mod record;
mod template;
#[cfg(feature = "test-util")]
pub mod testkit;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use gannet_config::typed::FieldError;
use gannet_domain::deployment::{Deployment, Stage, StageStatus};
use gannet_domain::duration::Millis;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{
    Plugin, Presenter, StageConfigError, StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::{FromSettings, Installation, PluginSettings, PluginSpec};
use gannet_sdk::stage_meta::StageMeta;
use gannet_sdk::stage_options;
use serde_json::Value;

use crate::egress::{Egress, Lookup, SystemLookup};
use crate::measure::Inputs;
use crate::options::{AnalysisOptions, Check, CheckKind, Strategy};
use crate::providers::{Provider, Range, Reads};
use crate::record::{CheckRecord, Verdict, STARTED_AT};

/// The stage this plugin runs.
pub const STAGE_ANALYSIS: &str = "ANALYSIS";

/// Runs ANALYSIS stages against the configured providers.
pub struct AnalysisPlugin {
    providers: Vec<Provider>,
    /// What `https` checks may reach.
    egress: Arc<Egress>,
    /// How `https` checks' names are looked up: the system's resolver outside tests.
    lookup: Arc<dyn Lookup>,
    /// The providers' client. Both are built on the first measurement, not when the plugin is:
    /// every function builds every plugin at start-up, and loading the system's TLS roots is
    /// not free.
    http: OnceLock<reqwest::Client>,
    /// The `https` checks' client: held to [`egress`], no redirect followed.
    checks: OnceLock<reqwest::Client>,
    /// Whose settings `providers` are: what planning checks against them.
    installation: Installation,
}

impl AnalysisPlugin {
    fn new(providers: Vec<Provider>, egress: Egress, lookup: Arc<dyn Lookup>) -> Self {
        Self {
            providers,
            egress: Arc::new(egress),
            lookup,
            http: OnceLock::new(),
            checks: OnceLock::new(),
            installation: Installation::None,
        }
    }

    /// Every metric or log check names a provider the settings define, of its kind (a log
    /// provider gannet can query for `logs`) and, where the stage runs in this process (`gannet
    /// up`), whose credentials can be read now: a deployment that would fail its first query is
    /// refused before its first stage instead. Without settings (`config check`), nothing here
    /// is known.
    fn check_providers(&self, options: &AnalysisOptions) -> Result<(), StageConfigError> {
        if self.installation == Installation::None {
            return Ok(());
        }
        for check in &options.checks {
            let (provider, reads) = match &check.kind {
                CheckKind::Metric { provider, .. } => (provider, Reads::Metrics),
                CheckKind::Log { provider, .. } => (provider, Reads::Logs),
                CheckKind::Http { .. } => continue,
            };
            let field = format!("{}.provider", check.id);
            let Some(found) = self.providers.iter().find(|p| &p.name == provider) else {
                let names: Vec<&str> = self.providers.iter().map(|p| p.name.as_str()).collect();
                return Err(StageConfigError::new(
                    field,
                    format!(
                        "no analysis provider named {provider:?} in plugins.analysis.providers (it has: {}); add it there",
                        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                    ),
                ));
            };
            found
                .serves(reads)
                .map_err(|why| StageConfigError::new(field.clone(), why))?;
            if self.installation == Installation::OneProcess {
                found.secrets_readable().map_err(|why| {
                    StageConfigError::new(
                        field,
                        format!("the analysis provider {provider:?} cannot be queried: {why}"),
                    )
                })?;
            }
        }
        Ok(())
    }

    fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(concat!("gannet/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        })
    }

    fn checks(&self) -> &reqwest::Client {
        self.checks
            .get_or_init(|| egress::client(self.egress.clone(), self.lookup.clone()))
    }
}

#[cfg(test)]
impl AnalysisPlugin {
    /// Fixed AWS credentials for every AWS provider (tests).
    fn use_test_credentials(&mut self) {
        let credentials = gannet_plugin_aws_common::test_util::credentials();
        for p in &mut self.providers {
            p.use_credentials(credentials.clone());
        }
    }
}

impl std::fmt::Debug for AnalysisPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnalysisPlugin")
            .field("providers", &self.providers)
            .finish()
    }
}

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "analysis";

/// The registry's entry: `plugins.analysis.providers` lists the analysis providers.
pub const SPEC: PluginSpec = PluginSpec::stages::<AnalysisPlugin>(NAME);

impl FromSettings for AnalysisPlugin {
    fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let mut plugin = AnalysisPlugin::new(
            providers::from_settings(settings)?,
            Egress::from_settings(settings)?,
            Arc::new(SystemLookup),
        );
        plugin.installation = settings.runtime.installation;
        Ok(plugin)
    }
}

/// When the measurement of slot `slot` of `check` is due.
fn due(started: Millis, check: &Check, slot: u64) -> Millis {
    started.plus(GoDuration::from_millis(
        check.interval.as_millis().saturating_mul(slot),
    ))
}

/// The last slot of `check` within `duration`.
fn last_slot(check: &Check, duration: GoDuration) -> u64 {
    duration.as_millis() / check.interval.as_millis().max(1)
}

/// The slot `check` should measure now, if one is due and not measured yet.
fn slot_due(
    check: &Check,
    record: &CheckRecord,
    started: Millis,
    now: Millis,
    duration: GoDuration,
) -> Option<u64> {
    let elapsed = now.since(started).as_millis();
    let slot = (elapsed / check.interval.as_millis().max(1)).min(last_slot(check, duration));
    (slot > record.slot).then_some(slot)
}

/// The same interval of the last successful deployment's analysis, for PREVIOUS: its
/// ANALYSIS stage with this stage's id (or, failing that, its first successful one) started
/// `elapsed` before the slot's end.
fn previous_range(
    previous: Option<&Deployment>,
    stage: &Stage,
    range: Range,
    started: Millis,
) -> Option<Range> {
    let d = previous?;
    let ran = |s: &&Stage| s.name == STAGE_ANALYSIS && s.status == StageStatus::Success;
    let then = d
        .stages
        .iter()
        .filter(ran)
        .find(|s| s.id == stage.id)
        .or_else(|| d.stages.iter().find(ran))?;
    let then_started = then
        .metadata
        .get(STARTED_AT)
        .and_then(|t| t.parse().ok())
        .map(Millis)
        .or(then.started_at)?;
    let offset = |at: Millis| then_started.plus(at.since(started));
    Some(Range {
        from: offset(range.from),
        to: offset(range.to),
    })
}

impl Plugin for AnalysisPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_ANALYSIS]
    }

    fn validate_stage(&self, _name: &str, with: &Value) -> Result<Value, StageConfigError> {
        let options = AnalysisOptions::parse(with)?;
        self.check_providers(&options)?;
        // A URL whose host says where it goes is refused now; a name, at each request.
        for check in &options.checks {
            if let CheckKind::Http { url, .. } = &check.kind {
                let refused = reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| self.egress.check_host(&u).err());
                if let Some(refused) = refused {
                    return Err(StageConfigError::new(
                        format!("{}.url", check.id),
                        refused.to_string(),
                    ));
                }
            }
        }
        Ok(stage_options::to_value(&options))
    }

    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        // The analysis' own duration, and time for its last queries.
        match AnalysisOptions::from_stored(&stage.with) {
            Ok(o) => GoDuration::from_millis(o.duration.as_millis().saturating_add(10 * 60 * 1000)),
            Err(_) => GoDuration::from_secs(6 * 3600),
        }
    }
}

impl Presenter for AnalysisPlugin {
    /// The checks' latest measurements.
    fn present(&self, stage: &Stage) -> Vec<gannet_sdk::presentation::Detail> {
        let rows: Vec<Vec<String>> = record::all(&stage.metadata)
            .into_iter()
            .flat_map(|(id, record)| {
                record.last.into_iter().map(move |m| {
                    vec![
                        id.to_owned(),
                        format!("#{}", m.slot),
                        m.value,
                        m.expected,
                        m.verdict.as_str().to_ascii_uppercase(),
                        m.detail,
                    ]
                })
            })
            .collect();
        if rows.is_empty() {
            return Vec::new();
        }
        vec![gannet_sdk::presentation::Detail::Table {
            title: "Measurements".into(),
            columns: ["CHECK", "#", "VALUE", "EXPECTED", "VERDICT", "DETAIL"]
                .map(str::to_owned)
                .to_vec(),
            rows,
        }]
    }
}

#[async_trait]
impl Steps for AnalysisPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let opts = AnalysisOptions::from_stored(&stage.with)
            .map_err(|e| StepError::permanent(format!("stage {}: invalid with.{e}", stage.id)))?;
        let mut meta = StageMeta::new(ctx.io, stage);
        let started = match meta.get(STARTED_AT).and_then(|t| t.parse().ok()) {
            Some(at) => Millis(at),
            None => {
                meta.save(&[(STARTED_AT, ctx.now.0.to_string())]).await?;
                start_log(&ctx, &opts).await;
                ctx.now
            }
        };
        let mut records = Vec::with_capacity(opts.checks.len());
        for check in &opts.checks {
            let record = CheckRecord::read(meta.get(&record::key(&check.id))).map_err(|e| {
                StepError::permanent(format!(
                    "{}: its saved measurements do not read: {e}",
                    check.id
                ))
            })?;
            records.push(record);
        }
        // A check over its limit has failed the stage (a repeated step answers the same).
        let over_limit = |records: &[CheckRecord]| {
            let reason = opts
                .checks
                .iter()
                .zip(records)
                .find_map(|(c, r)| failed(c, r))?;
            Some(StepOutcome::Done(StageResult::Failure { reason }))
        };
        if let Some(failure) = over_limit(&records) {
            return Ok(failure);
        }
        // The most overdue measurement: one a step.
        let next = opts
            .checks
            .iter()
            .zip(&records)
            .enumerate()
            .filter_map(|(i, (c, r))| {
                slot_due(c, r, started, ctx.now, opts.duration)
                    .map(|slot| (due(started, c, slot), i, slot))
            })
            .min();
        if let Some((_, i, slot)) = next {
            let check = &opts.checks[i];
            let to = due(started, check, slot);
            let range = Range {
                from: Millis(to.0.saturating_sub(check.interval.as_millis())),
                to,
            };
            let previous = match &check.kind {
                CheckKind::Metric {
                    strategy: Strategy::Previous,
                    ..
                } => {
                    let d = ctx.io.previous_success().await?;
                    previous_range(d.as_ref(), stage, range, started)
                }
                _ => None,
            };
            let inputs = Inputs {
                http: self.http(),
                checks: self.checks(),
                egress: &self.egress,
                providers: &self.providers,
                app_name: &ctx.deployment.app_name,
                range,
                previous,
                slot,
                now: ctx.now,
            };
            let m = measure::measure(check, &inputs).await;
            let record = &mut records[i];
            record.add(m.clone());
            meta.save(&[(&record::key(&check.id), record.to_text())])
                .await?;
            let mut line = format!(
                "[{}] #{slot}: {} (expected {}) {}",
                check.id,
                m.value,
                m.expected,
                m.verdict.as_str().to_ascii_uppercase()
            );
            if !m.detail.is_empty() {
                line.push_str(&format!(": {}", m.detail));
            }
            if m.verdict == Verdict::Fail {
                line.push_str(&format!(
                    " ({} of {} failures allowed)",
                    record.failures, check.failure_limit
                ));
            }
            ctx.io.log(&line).await;
        }
        if let Some(failure) = over_limit(&records) {
            return Ok(failure);
        }
        // What is due next: another measurement, or the end of the analysis.
        let end = started.plus(opts.duration);
        let pending = opts
            .checks
            .iter()
            .zip(&records)
            .filter(|(c, r)| r.slot < last_slot(c, opts.duration))
            .map(|(c, r)| {
                let behind = slot_due(c, r, started, ctx.now, opts.duration).is_some();
                if behind {
                    ctx.now
                } else {
                    due(started, c, r.slot + 1)
                }
            })
            .min();
        let wake = pending.unwrap_or(end).min(end).max(ctx.now);
        if pending.is_none() && ctx.now >= end {
            let summary: Vec<String> = opts
                .checks
                .iter()
                .zip(&records)
                .map(|(c, r)| {
                    let missed = if r.missed > 0 {
                        format!(", {} missed", r.missed)
                    } else {
                        String::new()
                    };
                    format!(
                        "{}: {} measured, {} failed{missed}",
                        c.id, r.taken, r.failures
                    )
                })
                .collect();
            let line = if summary.is_empty() {
                format!("analysis of {} passed (no checks)", opts.duration)
            } else {
                format!(
                    "analysis of {} passed: {}",
                    opts.duration,
                    summary.join("; ")
                )
            };
            ctx.io.log(&line).await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
        Ok(StepOutcome::Continue {
            after: wake.since(ctx.now),
        })
    }
}

/// Why `check` failed the stage, when its failures are over its limit.
fn failed(check: &Check, record: &CheckRecord) -> Option<String> {
    if record.failures <= u64::from(check.failure_limit) {
        return None;
    }
    let (value, detail) = match record.last.last() {
        Some(m) if !m.detail.is_empty() => (m.value.as_str(), format!(" ({})", m.detail)),
        Some(m) => (m.value.as_str(), String::new()),
        None => ("-", String::new()),
    };
    Some(format!(
        "{}: {} of {} measurements failed, more than its failureLimit {}: last: {value}{detail}",
        check.id, record.failures, record.taken, check.failure_limit
    ))
}

/// The first step's log: what will be measured, and how often.
async fn start_log(ctx: &StepContext<'_>, opts: &AnalysisOptions) {
    ctx.io
        .log(&format!(
            "analysing for {} with {} check(s)",
            opts.duration,
            opts.checks.len()
        ))
        .await;
    for c in &opts.checks {
        let what = match &c.kind {
            CheckKind::Metric {
                strategy, provider, ..
            } => {
                format!("{} on {provider}", strategy.as_str())
            }
            CheckKind::Log {
                provider,
                max_count,
                ..
            } => {
                format!("lines matching on {provider}, at most {max_count} an interval")
            }
            CheckKind::Http { method, url, .. } => {
                format!("{method} {}", gannet_domain::report::redact_urls(url))
            }
        };
        ctx.io
            .log(&format!(
                "[{}] {what}, every {}, failureLimit {}",
                c.id, c.interval, c.failure_limit
            ))
            .await;
    }
    if let Some(n) = opts.restart_threshold {
        ctx.io
            .log(&format!(
                "restartThreshold {n} is not acted on (PipeCD does not either)"
            ))
            .await;
    }
}

#[cfg(test)]
mod tests;
