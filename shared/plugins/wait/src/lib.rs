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
use gannet_core::duration::Millis;
use gannet_core::plugin::{
    Plugin, StageConfigError, StageResult, StepContext, StepError, StepOutcome,
};
use gannet_core::ports::Metadata;
use gannet_core::stage_options::{self, json_kind};
use gannet_core::GoDuration;
use serde_json::{json, Value};

/// The stage name this plugin runs.
pub const STAGE_WAIT: &str = "WAIT";

/// PipeCD's default wait.
const DEFAULT_DURATION: GoDuration = GoDuration::from_secs(60);

/// Stage metadata key: when the wait began, in epoch milliseconds.
const STARTED_AT: &str = "startedAt";

/// Runs `WAIT` stages.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitPlugin;

/// A WAIT stage's validated `with`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WaitOptions {
    duration: GoDuration,
}

impl WaitOptions {
    fn parse(with: &Value) -> Result<Self, StageConfigError> {
        let fields = match with {
            Value::Null => {
                return Ok(Self {
                    duration: DEFAULT_DURATION,
                })
            }
            Value::Object(fields) => fields,
            other => {
                return Err(StageConfigError::new(
                    "with",
                    format!("expected a map of options, got {}", json_kind(other)),
                ))
            }
        };
        if let Some(unknown) = fields.keys().find(|k| k.as_str() != "duration") {
            return Err(StageConfigError::new(
                unknown.as_str(),
                "unknown option for a WAIT stage (the only option is `duration`)",
            ));
        }
        let duration = stage_options::duration("duration", fields.get("duration"), "30s")?
            .unwrap_or(DEFAULT_DURATION);
        // Stored durations are whole milliseconds; keep a sub-millisecond wait non-zero.
        let duration = if duration == GoDuration::default() {
            duration
        } else {
            GoDuration::from_millis(duration.as_millis().max(1))
        };
        Ok(Self { duration })
    }

    fn to_value(self) -> Value {
        json!({ "duration": self.duration.to_string() })
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

#[async_trait]
impl Plugin for WaitPlugin {
    fn name(&self) -> &'static str {
        "wait"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_WAIT]
    }

    fn validate_stage(&self, _name: &str, with: &Value) -> Result<Value, StageConfigError> {
        WaitOptions::parse(with).map(WaitOptions::to_value)
    }

    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let opts = WaitOptions::parse(&ctx.stage.with).map_err(|e| {
            StepError::Permanent(format!("stage {}: invalid with.{e}", ctx.stage.id))
        })?;
        let (started, resumed) = match saved_start(&ctx.stage.metadata) {
            Some(at) => (at, true),
            None => {
                let entry = Metadata::from([(STARTED_AT.to_owned(), ctx.now.0.to_string())]);
                ctx.io.save_metadata(entry).await?;
                ctx.io
                    .log(&format!("Waiting for {}...", opts.duration))
                    .await;
                (ctx.now, false)
            }
        };
        let elapsed = ctx.now.since(started);
        if elapsed >= opts.duration {
            ctx.io.log(&format!("Waited for {}", opts.duration)).await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }
        let remaining = GoDuration::from_millis(opts.duration.as_millis() - elapsed.as_millis());
        if resumed {
            ctx.io
                .log(&format!(
                    "{} of {} elapsed, {} left",
                    for_log(elapsed),
                    opts.duration,
                    for_log(remaining)
                ))
                .await;
        }
        Ok(StepOutcome::Continue { after: remaining })
    }
}

#[cfg(test)]
mod tests;
