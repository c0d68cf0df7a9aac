//! Reading the one dead-letter queue: gannet's own letters, Lambda's destination records and
//! Scheduler's undelivered inputs, each told apart and sorted to the queue its message was for.

use aws_sdk_sqs::types::Message;
use gannet_domain::duration::Millis;
use gannet_domain::ports::{DeadLetter, QueueError, QueueName};
use serde_json::Value;

use super::Envelope;
use crate::sqs::dead::{kept, peek, sent_at, text_of, REASON};

/// Up to 100 letters of the dead-letter queue at `url` that were for `queue`, oldest first,
/// left in the queue.
pub(super) async fn read(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    queue: QueueName,
) -> Result<Vec<DeadLetter>, QueueError> {
    let mut letters: Vec<DeadLetter> = peek(sqs, url)
        .await?
        .iter()
        .filter_map(|m| letter(m, queue))
        .collect();
    letters.sort_by_key(|l| l.at);
    Ok(letters)
}

/// The letter `m` is, if it was for `queue`.
pub(super) fn letter(m: &Message, queue: QueueName) -> Option<DeadLetter> {
    if text_of(m, REASON).is_some() {
        return kept(m, queue);
    }
    let body: Value = serde_json::from_str(m.body()?).ok()?;
    let at = Millis(sent_at(m));
    if let (Some(payload), Some(context)) = (body.get("requestPayload"), body.get("requestContext"))
    {
        let envelope = Envelope::from_payload(payload)?.ok()?;
        return (envelope.queue == queue).then(|| destination_record(envelope, context, &body, at));
    }
    let envelope = Envelope::from_payload(&body)?.ok()?;
    (envelope.queue == queue).then(|| undelivered_schedule(envelope, m, at))
}

/// A record Lambda sent to the on-failure destination: the invocation failed every time it
/// ran (`RetriesExhausted`) or waited too long in Lambda's queue (`EventAgeExceeded`).
fn destination_record(envelope: Envelope, context: &Value, body: &Value, at: Millis) -> DeadLetter {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let condition = text(&context["condition"]).unwrap_or_else(|| "failed".to_owned());
    let function = text(&context["functionArn"]).unwrap_or_else(|| "the function".to_owned());
    let runs = context["approximateInvokeCount"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1);
    let response = &body["responsePayload"];
    let error = text(&response["errorMessage"])
        .or_else(|| text(&response["errorType"]))
        .or_else(|| text(&body["responseContext"]["functionError"]))
        .unwrap_or_else(|| "no error was returned".to_owned());
    DeadLetter {
        queue: envelope.queue,
        body: envelope.body,
        reason: format!(
            "Lambda gave up on the invocation of {function} ({condition}) after {runs} run(s): {error}"
        ),
        attempts: envelope.attempt.max(runs),
        at,
    }
}

/// An input Scheduler could not deliver to the `later` function; its error is in attributes.
fn undelivered_schedule(envelope: Envelope, m: &Message, at: Millis) -> DeadLetter {
    let code = text_of(m, "ERROR_CODE").unwrap_or_else(|| "unknown error".to_owned());
    let message = text_of(m, "ERROR_MESSAGE").unwrap_or_default();
    DeadLetter {
        queue: envelope.queue,
        body: envelope.body,
        reason: format!("EventBridge Scheduler could not deliver it: {code} {message}")
            .trim_end()
            .to_owned(),
        attempts: envelope.attempt,
        at,
    }
}
