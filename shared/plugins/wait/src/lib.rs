//! The WAIT stage: holds the pipeline for `with.duration` (1m by default, as in PipeCD).
//!
//! A step never sleeps. The first step records when the wait began (`startedAt`, epoch
//! milliseconds) in the stage metadata, and every step answers `Continue { after: remaining }`
//! until the time is up. A restarted controller or a duplicated message therefore resumes the
//! same wait instead of starting it over.
//!
//! Differences from PipeCD: a bare number (`duration: 30`) is rejected because it has no unit
//! (PipeCD reads it as 30 nanoseconds), and an explicit zero (`0s`) waits for no time at all,
//! where PipeCD replaces it with the 1m default. Only a missing duration means 1m.

use async_trait::async_trait;
use gannet_domain::deployment::Stage;
use gannet_domain::duration::Millis;
use gannet_domain::ports::Metadata;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{
    Plugin, Presenter, StageConfigError, StageResult, StepContext, StepError, StepOutcome, Steps,
};
use gannet_sdk::registry::PluginSpec;
use gannet_sdk::stage_options;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The stage name this plugin runs.
pub const STAGE_WAIT: &str = "WAIT";

/// PipeCD's default wait.
const DEFAULT_DURATION: GoDuration = GoDuration::from_secs(60);

/// Stage metadata key: when the wait began, in epoch milliseconds.
const STARTED_AT: &str = "startedAt";

/// Runs `WAIT` stages.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitPlugin;

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "wait";

/// The registry's entry: `plugins.wait` takes no settings.
pub const SPEC: PluginSpec = PluginSpec::stages_without_settings::<WaitPlugin>(NAME);

/// A WAIT stage's `with`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct WaitOptions {
    /// How long to wait; absent (or null) is PipeCD's 1m.
    #[serde(default)]
    duration: Option<GoDuration>,
}

impl WaitOptions {
    fn parse(with: &Value) -> Result<Self, StageConfigError> {
        let opts: Self = stage_options::parse(with)?;
        let duration = opts.duration.unwrap_or(DEFAULT_DURATION);
        // Stored durations are whole milliseconds; keep a sub-millisecond wait non-zero.
        let duration = if duration == GoDuration::default() {
            duration
        } else {
            GoDuration::from_millis(duration.as_millis().max(1))
        };
        Ok(Self {
            duration: Some(duration),
        })
    }

    fn duration(self) -> GoDuration {
        self.duration.unwrap_or(DEFAULT_DURATION)
    }
}

/// The saved start of the wait, if a previous step recorded a readable one.
fn saved_start(metadata: &Metadata) -> Option<Millis> {
    metadata.get(STARTED_AT)?.parse().ok().map(Millis)
}

/// `d` rounded to whole seconds for the log, so it reads `59s` rather than `58734ms`.
fn for_log(d: GoDuration) -> GoDuration {
    let ms = d.as_millis();
    if ms < 1000 {
        d
    } else {
        GoDuration::from_secs(ms.div_ceil(1000))
    }
}

impl Plugin for WaitPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_WAIT]
    }

    fn validate_stage(&self, _name: &str, with: &Value) -> Result<Value, StageConfigError> {
        WaitOptions::parse(with).map(|o| stage_options::to_value(&o))
    }
}

impl Presenter for WaitPlugin {
    fn summary(&self, stage: &Stage) -> String {
        WaitOptions::parse(&stage.with).map_or_else(|_| String::new(), |o| o.duration().to_string())
    }
}

#[async_trait]
impl Steps for WaitPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let opts = WaitOptions::parse(&ctx.stage.with).map_err(|e| {
            StepError::permanent(format!("stage {}: invalid with.{e}", ctx.stage.id))
        })?;
        let duration = opts.duration();
        let (started, resumed) = match saved_start(&ctx.stage.metadata) {
            Some(at) => (at, true),
            None => {
                let entry = Metadata::from([(STARTED_AT.to_owned(), ctx.now.0.to_string())]);
                ctx.io.save_metadata(entry).await?;
                ctx.io.log(&format!("Waiting for {}...", duration)).await;
                (ctx.now, false)
            }
        };
        let elapsed = ctx.now.since(started);
        if elapsed >= duration {
            ctx.io.log(&format!("Waited for {}", duration)).await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
        let remaining = GoDuration::from_millis(duration.as_millis() - elapsed.as_millis());
        if resumed {
            ctx.io
                .log(&format!(
                    "{} of {} elapsed, {} left",
                    for_log(elapsed),
                    duration,
                    for_log(remaining)
                ))
                .await;
        }
        Ok(StepOutcome::Continue { after: remaining })
    }
}

#[cfg(test)]
mod tests;
