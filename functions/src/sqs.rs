//! The SQS consumers (`trigger`, `plan`, `stage`, `notify`): one [`SqsEvent`] batch from the
//! event source mapping, each record handled on its own, and a partial batch response.
//!
//! Every record is settled by itself, so one record never fails its batch-mates, with the
//! controller's [`settle`] (as `gannet up` settles its messages) once it is handled:
//!
//! | the record | this function does | reported |
//! |---|---|---|
//! | an early copy of a long delay ([`DUE_AT`] ahead) | sends it on with the remaining delay, deletes it | success |
//! | handled: `Ack` | nothing | success (Lambda deletes it) |
//! | `Retry { after }` | ChangeMessageVisibility to `after` | failure (it stays, visible again after `after`) |
//! | `Requeue { after }` | sends a fresh copy delayed by `after` | success |
//! | `DeadLetter { reason }` (a body that does not decode, ...) | sends it to the DLQ with the reason, deletes it | success |
//! | settling failed (SQS unreachable) | logs it | failure (visible again after the queue's visibility timeout) |
//!
//! Records run concurrently; each is its own task, so even a panic fails only its record.

use std::collections::HashMap;

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use gannet_aws::{SqsQueue, DUE_AT};
use gannet_controller::{error_chain, settle, Removal, Settled};
use gannet_domain::ports::{QueueName, Received};
use lambda_runtime::LambdaEvent;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::Runtime;

/// SQS's attribute counting deliveries, the current one included.
const RECEIVE_COUNT: &str = "ApproximateReceiveCount";

/// Handles a batch from `queue`'s event source mapping; the response lists the records to
/// deliver again.
pub async fn handle_batch(
    runtime: &Runtime,
    queue: QueueName,
    event: LambdaEvent<SqsEvent>,
) -> SqsBatchResponse {
    let request_id = event.context.request_id;
    let deadline = invocation_deadline(event.context.deadline);
    let records = event.payload.records;
    tracing::debug!(queue = queue.as_str(), %request_id, records = records.len(), "batch");
    let mut tasks = JoinSet::new();
    let mut order = Vec::with_capacity(records.len());
    for record in records {
        let Some(message_id) = record.message_id.clone() else {
            // Without an id it cannot be reported; Lambda always sets one.
            tracing::error!(queue = queue.as_str(), "record without a messageId skipped");
            continue;
        };
        let span = tracing::info_span!("record", queue = queue.as_str(), message_id = %message_id);
        let runtime = runtime.clone();
        let task = tasks.spawn(
            async move { handle_record(&runtime, queue, &record, deadline).await }.instrument(span),
        );
        order.push((task.id(), message_id));
    }
    let mut settled = HashMap::with_capacity(order.len());
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((task, outcome)) => settled.insert(task, outcome),
            Err(err) => {
                tracing::error!(queue = queue.as_str(), error = %err, "record handler panicked");
                settled.insert(err.id(), Settled::Again)
            }
        };
    }
    // Failures in the batch's order.
    let mut response = SqsBatchResponse::default();
    for (task, message_id) in order {
        if settled.get(&task) != Some(&Settled::Done) {
            response.add_failure(message_id);
        }
    }
    response
}

/// The invocation's deadline (Lambda's, in ms since the epoch) on tokio's clock; `None` when
/// it is unset or unreadable.
fn invocation_deadline(deadline_ms: u64) -> Option<tokio::time::Instant> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    let left = u128::from(deadline_ms).checked_sub(now_ms)?;
    let left = std::time::Duration::from_millis(u64::try_from(left).ok()?);
    Some(tokio::time::Instant::now() + left)
}

/// Handles one record: sends on an early copy, or runs its handler and settles it.
async fn handle_record(
    runtime: &Runtime,
    queue: QueueName,
    record: &SqsMessage,
    deadline: Option<tokio::time::Instant>,
) -> Settled {
    let Some(handle) = record.receipt_handle.as_deref() else {
        tracing::error!("record without a receipt handle");
        return Settled::Again;
    };
    let body = record.body.as_deref().unwrap_or_default();
    let due_at = record
        .message_attributes
        .get(DUE_AT)
        .and_then(|a| a.string_value.as_deref());
    match runtime
        .queue()
        .forward_if_early(queue, handle, body, due_at)
        .await
    {
        Ok(true) => {
            tracing::debug!("early copy of a long delay sent on");
            return Settled::Done;
        }
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(error = %error_chain(&err), "could not send an early copy on; it comes back");
            return Settled::Again;
        }
    }
    let attempts = record
        .attributes
        .get(RECEIVE_COUNT)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let received = Received {
        receipt: SqsQueue::receipt_of(queue, handle, body, attempts),
        queue,
        body: body.to_owned(),
        attempts,
    };
    let disposition = runtime.controller().handle_by(&received, deadline).await;
    // Lambda deletes the records the response does not list as failed.
    settle(runtime.queue(), &received, disposition, Removal::Reported).await
}
