//! The SQS consumers (`trigger`, `plan`, `stage`, `notify`): one [`SqsEvent`] batch from the
//! event source mapping, each record handled on its own, and a partial batch response.
//!
//! Every record is settled by itself, so one record never fails its batch-mates:
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
use gannet_controller::{error_chain, Disposition};
use gannet_core::ports::{Outgoing, Queue, QueueName, Received};
use lambda_runtime::LambdaEvent;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::Runtime;

/// SQS's attribute counting deliveries, the current one included.
const RECEIVE_COUNT: &str = "ApproximateReceiveCount";

/// What becomes of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// Done with: reported as a success, so Lambda deletes it (if it is still there).
    Done,
    /// Reported as a batch item failure: it stays in the queue for another delivery.
    Failed,
}

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
            async move { settle(&runtime, queue, &record, deadline).await }.instrument(span),
        );
        order.push((task.id(), message_id));
    }
    let mut settled = HashMap::with_capacity(order.len());
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((task, outcome)) => settled.insert(task, outcome),
            Err(err) => {
                tracing::error!(queue = queue.as_str(), error = %err, "record handler panicked");
                settled.insert(err.id(), Settled::Failed)
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

async fn settle(
    runtime: &Runtime,
    queue: QueueName,
    record: &SqsMessage,
    deadline: Option<tokio::time::Instant>,
) -> Settled {
    let Some(handle) = record.receipt_handle.as_deref() else {
        tracing::error!("record without a receipt handle");
        return Settled::Failed;
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
            return Settled::Failed;
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
    match runtime.controller().handle_by(&received, deadline).await {
        Disposition::Ack => Settled::Done,
        Disposition::Retry { after, .. } => {
            if let Err(err) = runtime.queue().retry_later(&received.receipt, after).await {
                tracing::warn!(error = %error_chain(&err), "could not delay the retry; it comes back after the visibility timeout");
            }
            Settled::Failed
        }
        Disposition::Requeue { after } => {
            let copy = Outgoing {
                queue,
                body: received.body.clone(),
                delay: after,
                dedupe_key: None,
            };
            match runtime.queue().send(vec![copy]).await {
                Ok(()) => Settled::Done,
                Err(err) => {
                    tracing::warn!(error = %error_chain(&err), "could not requeue; it comes back");
                    Settled::Failed
                }
            }
        }
        Disposition::DeadLetter { reason } => {
            match runtime
                .queue()
                .dead_letter(&received.receipt, &reason)
                .await
            {
                Ok(()) => Settled::Done,
                Err(err) => {
                    tracing::warn!(error = %error_chain(&err), "could not dead-letter; it comes back");
                    Settled::Failed
                }
            }
        }
    }
}
