//! The timers (`poll`, `resume`, `drift`): EventBridge Scheduler invokes them with its schedule's
//! Input JSON as-is. The input only names the run in the log; each sweep does all its work.

use gannet_controller::{error_chain, HandlerError};
use lambda_runtime::LambdaEvent;
use serde_json::{json, Value};

use crate::Runtime;

/// A sweep failed; Scheduler retries the invocation by its retry policy.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("the {job} sweep failed")]
    Sweep {
        job: &'static str,
        #[source]
        source: HandlerError,
    },
}

/// The poll backstop: queues a trigger for every repository (GitHub never redelivers a failed
/// webhook, and a push over the webhook's size limit never arrives).
pub async fn poll(runtime: &Runtime, event: LambdaEvent<Value>) -> Result<Value, ScheduleError> {
    let result = runtime.controller().poll().await;
    let repos = runtime.controller().settings().repos.len();
    finish(
        "poll",
        &event.payload,
        result.map(|()| json!({"job": "poll", "triggers": repos})),
    )
}

/// The resume sweep: re-sends the message of every deployment left without one.
pub async fn resume(runtime: &Runtime, event: LambdaEvent<Value>) -> Result<Value, ScheduleError> {
    let result = runtime.controller().resume().await;
    finish(
        "resume",
        &event.payload,
        result.map(
            |r| json!({"job": "resume", "steps": r.steps, "plans": r.plans, "chains": r.chains}),
        ),
    )
}

/// The drift sweep: queues one drift check per app on the `drift` queue.
pub async fn drift(runtime: &Runtime, event: LambdaEvent<Value>) -> Result<Value, ScheduleError> {
    let result = runtime.controller().drift_sweep().await;
    finish(
        "drift",
        &event.payload,
        result.map(|checks| json!({"job": "drift", "checks": checks})),
    )
}

fn finish(
    job: &'static str,
    input: &Value,
    result: Result<Value, HandlerError>,
) -> Result<Value, ScheduleError> {
    match result {
        Ok(done) => {
            tracing::info!(job, input = %input, done = %done, "sweep done");
            Ok(done)
        }
        Err(source) => {
            tracing::error!(job, input = %input, error = %error_chain(&source), "sweep failed");
            Err(ScheduleError::Sweep { job, source })
        }
    }
}
