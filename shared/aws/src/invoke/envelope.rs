//! The payload that carries one message in a Lambda invocation, and how a function tells it
//! apart from its other events.

use gannet_domain::duration::Millis;
use gannet_domain::ports::QueueName;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The payload's one key. The functions' other events (a timer's input, a diff request, an
/// HTTP event) never have it.
pub const KEY: &str = "gannet_message";

/// Lambda's limit on an asynchronous invocation's payload is 256 KiB; a message and its
/// envelope stay under it, as they stayed under SQS's 256 KiB.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// One message on its way to the function that consumes its queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The queue it was sent to; its consumer handles it.
    pub queue: QueueName,
    /// The message (JSON, see the `gannet-events` crate), as it was sent.
    pub body: String,
    /// 1 when first sent; each retry its handler asked for sends it again with one more.
    pub attempt: u32,
    /// Not handled before this time (epoch ms), when it was sent with a delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<u64>,
}

/// A payload with the envelope's key that is not an envelope.
#[derive(Debug, thiserror::Error)]
#[error("a {KEY} payload that does not decode: {0}")]
pub struct BadEnvelope(#[source] serde_json::Error);

impl Envelope {
    /// The payload of an invocation.
    pub fn payload(&self) -> String {
        serde_json::json!({ KEY: self }).to_string()
    }

    /// The envelope in `payload`: `None` for another kind of event, an error for a payload
    /// with the envelope's key that does not decode.
    pub fn from_payload(payload: &Value) -> Option<Result<Self, BadEnvelope>> {
        let inner = payload.get(KEY)?;
        Some(Self::deserialize(inner).map_err(BadEnvelope))
    }

    /// The time it falls due, if it was sent with a delay.
    pub fn due(&self) -> Option<Millis> {
        self.due_at.map(Millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_other_events() {
        let e = Envelope {
            queue: QueueName::Stage,
            body: r#"{"kind":"step"}"#.into(),
            attempt: 2,
            due_at: Some(1_700_000_000_000),
        };
        let payload: Value = serde_json::from_str(&e.payload()).unwrap();
        assert_eq!(Envelope::from_payload(&payload).unwrap().unwrap(), e);
        let undelayed = Envelope { due_at: None, ..e };
        assert!(!undelayed.payload().contains("due_at"));

        // A timer's input and a diff request are not envelopes.
        assert!(Envelope::from_payload(&json!({"job": "tick"})).is_none());
        assert!(Envelope::from_payload(&json!({"diff": {"app": "a"}})).is_none());
        // The key with something else under it is refused, naming what is wrong.
        let bad = json!({KEY: {"queue": "stage", "body": "x", "attempt": 1, "extra": 1}});
        let err = Envelope::from_payload(&bad).unwrap().unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
        let bad = json!({KEY: {"queue": "nope", "body": "x", "attempt": 1}});
        assert!(Envelope::from_payload(&bad).unwrap().is_err());
    }
}
