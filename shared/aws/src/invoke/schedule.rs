//! One-time EventBridge Scheduler schedules for messages that fall due later than the `later`
//! function sleeps.

use aws_sdk_scheduler::types::{
    ActionAfterCompletion, DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode,
    RetryPolicy, Target,
};
use std::time::Duration;

use gannet_domain::duration::Millis;
use gannet_domain::ports::QueueError;
use sha2::{Digest, Sha256};

use super::{failed, Envelope, InvokeError, Relayed};

/// Scheduler's most retries of a failed invocation, and the oldest event it still delivers.
const RETRIES: i32 = 185;
const MAX_EVENT_AGE_SECONDS: i32 = 24 * 3600;

/// Where the `later` function's schedules go, and what they invoke.
///
/// Scheduler invokes a schedule at some second of its minute (its precision is one minute).
/// A message due at `D` is scheduled at the start of the minute that holds `D - 60 s`, so
/// Scheduler invokes `later` before `D` and at most two minutes before it, and `later` sleeps
/// the rest. Each schedule deletes itself once it has run.
///
/// The schedule's name comes from the envelope (a hash of it), so a `later` invocation run
/// twice by Lambda makes the schedule once: the second finds it there and is done.
#[derive(Clone, Debug)]
pub struct Schedules {
    pub client: aws_sdk_scheduler::Client,
    /// The schedule group the one-time schedules go in.
    pub group: String,
    /// The `later` function's ARN, every schedule's target.
    pub later_arn: String,
    /// The role Scheduler takes to invoke `later`.
    pub role_arn: String,
    /// The dead-letter queue's ARN, for inputs Scheduler could not deliver.
    pub dead_letter_arn: String,
}

impl Schedules {
    /// Makes the schedule that brings `envelope` back to `later` before `due`.
    pub(super) async fn schedule(
        &self,
        envelope: &Envelope,
        due: Millis,
    ) -> Result<Relayed, QueueError> {
        let payload = envelope.payload();
        let name = schedule_name(&payload);
        let at = at_expression(schedule_time(due));
        let build = |what, e| failed("schedule", InvokeError::Build(what, e));
        let target = Target::builder()
            .arn(&self.later_arn)
            .role_arn(&self.role_arn)
            .input(payload)
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_retry_attempts(RETRIES)
                    .maximum_event_age_in_seconds(MAX_EVENT_AGE_SECONDS)
                    .build(),
            )
            .dead_letter_config(
                DeadLetterConfig::builder()
                    .arn(&self.dead_letter_arn)
                    .build(),
            )
            .build()
            .map_err(|e| build("schedule target", e))?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| build("flexible time window", e))?;
        let created = self
            .client
            .create_schedule()
            .name(&name)
            .group_name(&self.group)
            .schedule_expression(&at)
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .target(target)
            .action_after_completion(ActionAfterCompletion::Delete)
            .send()
            .await;
        match created {
            Ok(_) => {}
            // Made by an earlier run of this invocation.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conflict_exception()) => {}
            Err(e) => {
                return Err(QueueError::Unavailable {
                    operation: "schedule",
                    source: Box::new(e),
                })
            }
        }
        Ok(Relayed::Scheduled { name, at })
    }
}

/// When the schedule for a message due at `due` runs: the start of the minute a minute before
/// it, so that Scheduler's invocation (within that minute) comes before `due`.
pub(super) fn schedule_time(due: Millis) -> Millis {
    let earlier = due.0.saturating_sub(60_000);
    Millis(earlier - earlier % 60_000)
}

/// The epoch ms `at` as Scheduler's `at()` time, UTC, to the second.
pub(super) fn at_expression(at: Millis) -> String {
    let time = std::time::UNIX_EPOCH + Duration::from_millis(at.0);
    let text = humantime::format_rfc3339_seconds(time).to_string();
    format!("at({})", text.trim_end_matches('Z'))
}

/// The schedule's name: `gannet-` and the hash of the payload (names take at most 64 of
/// `[0-9A-Za-z_.-]`).
pub(super) fn schedule_name(payload: &str) -> String {
    let hash = Sha256::digest(payload.as_bytes());
    format!("gannet-{}", &hex::encode(hash)[..40])
}
