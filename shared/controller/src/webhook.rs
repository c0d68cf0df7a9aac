//! The webhook handler: GitHub `push`, `pull_request` (plan previews, [`crate::preview`])
//! and `ping`. It checks the signature, deduplicates on
//! the delivery id and queues a trigger, all before answering, and stores nothing for a
//! request it refuses.

use axum::http;
use gannet_domain::ports::{Changes, StoreError, Write};
use gannet_events::github::{self as webhook, Event};
use gannet_events::{Message, TriggerCause};
use serde_json::json;

use crate::settings::RepoSettings;
use crate::{Controller, HandlerError};

/// GitHub caps webhook payloads at 25 MB.
pub const MAX_WEBHOOK_BODY: usize = 25 * 1024 * 1024;

/// The longest delivery id stored (GitHub's are UUIDs, 36 characters).
const MAX_DELIVERY_ID: usize = 128;

/// The longest pusher name kept (GitHub's user names are at most 39 characters).
const MAX_PUSHER_CHARS: usize = 100;

/// A webhook request as received, whatever the transport (HTTP server, Lambda Function URL).
#[derive(Clone, Debug, Default)]
pub struct WebhookRequest {
    pub event: Option<String>,
    pub delivery: Option<String>,
    pub signature: Option<String>,
    pub body: Vec<u8>,
}

/// The headers of a GitHub delivery, read the one way both runtimes read them: by name,
/// ignoring case, and a value that is not visible ASCII counts as missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookHeaders {
    /// `X-GitHub-Event`.
    pub event: Option<String>,
    /// `X-GitHub-Delivery`.
    pub delivery: Option<String>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<String>,
}

impl WebhookHeaders {
    pub fn read(headers: &http::HeaderMap) -> Self {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Self {
            event: text("x-github-event"),
            delivery: text("x-github-delivery"),
            signature: text("x-hub-signature-256"),
        }
    }

    /// The request these headers came with.
    pub fn with_body(self, body: Vec<u8>) -> WebhookRequest {
        WebhookRequest {
            event: self.event,
            delivery: self.delivery,
            signature: self.signature,
            body,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct WebhookResponse {
    pub status: u16,
    pub body: serde_json::Value,
}

impl WebhookResponse {
    pub(crate) fn new(status: u16, outcome: &str, reason: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({"status": outcome, "reason": reason.into()}),
        }
    }
}

impl Controller {
    /// Checks a delivery's signature over its body, received in `parts` (so a large body need
    /// not be joined to be refused), and logs a refusal; the answer is the one the webhook gives.
    pub fn verify_webhook(
        &self,
        parts: &[&[u8]],
        signature: Option<&str>,
        delivery: Option<&str>,
    ) -> Result<(), WebhookResponse> {
        let Some(secret) = &self.inner.settings.webhook_secret else {
            return Err(WebhookResponse::new(
                401,
                "rejected",
                "no webhook secret is configured",
            ));
        };
        webhook::verify_signature_parts(
            secret.expose().as_bytes(),
            parts.iter().copied(),
            signature,
        )
        .map_err(|err| {
            // The headers are the sender's: log a bounded part of them.
            let delivery: String = delivery.unwrap_or("").chars().take(64).collect();
            tracing::warn!(%delivery, error = %err, "webhook refused");
            WebhookResponse::new(401, "rejected", err.to_string())
        })
    }

    pub async fn webhook(&self, req: WebhookRequest) -> Result<WebhookResponse, HandlerError> {
        if req.body.len() > MAX_WEBHOOK_BODY {
            return Ok(WebhookResponse::new(
                413,
                "rejected",
                "payload larger than 25 MB",
            ));
        }
        if let Err(refused) = self.verify_webhook(
            &[&req.body],
            req.signature.as_deref(),
            req.delivery.as_deref(),
        ) {
            return Ok(refused);
        }
        let Some(event) = req.event.as_deref() else {
            return Ok(WebhookResponse::new(
                400,
                "rejected",
                "missing X-GitHub-Event header",
            ));
        };
        let parsed = match webhook::parse_event(event, &req.body) {
            Ok(parsed) => parsed,
            Err(err) => return Ok(WebhookResponse::new(400, "rejected", err.to_string())),
        };
        let push = match parsed {
            Event::Ping { zen, .. } => {
                return Ok(WebhookResponse {
                    status: 200,
                    body: json!({"status": "pong", "zen": zen}),
                })
            }
            Event::Unhandled { event } => {
                return Ok(WebhookResponse::new(
                    202,
                    "ignored",
                    format!("event {event} is not handled"),
                ))
            }
            Event::PullRequest(pr) => {
                if let Some(reason) = pr.ignored_reason() {
                    return Ok(WebhookResponse::new(202, "ignored", reason));
                }
                let delivery = match delivery_id(req.delivery) {
                    Ok(delivery) => delivery,
                    Err(refused) => return Ok(refused),
                };
                let Some(repo) = self.delivered_repo(&pr.repo_full_name, &pr.clone_url) else {
                    return Ok(not_configured(&pr.repo_full_name));
                };
                return self.pull_request_delivery(delivery, pr, repo).await;
            }
            Event::Push(push) => push,
        };
        if let Some(reason) = push.ignored_reason() {
            return Ok(WebhookResponse::new(202, "ignored", reason));
        }
        let delivery = match delivery_id(req.delivery) {
            Ok(delivery) => delivery,
            Err(refused) => return Ok(refused),
        };
        let Some(repo) = self.delivered_repo(&push.repo_full_name, &push.clone_url) else {
            return Ok(not_configured(&push.repo_full_name));
        };
        let branch = push.branch.as_deref().unwrap_or_default();
        if branch != repo.branch {
            return Ok(WebhookResponse::new(
                202,
                "ignored",
                format!(
                    "branch {branch} is not watched (repository {} watches {})",
                    repo.id, repo.branch
                ),
            ));
        }
        let pusher: String = push.pusher.chars().take(MAX_PUSHER_CHARS).collect();
        let changes = Changes {
            writes: vec![Write::RecordDelivery {
                id: delivery.clone(),
                at: self.inner.clock.now(),
            }],
            send: vec![Message::Trigger {
                repo: repo.id.clone(),
                cause: TriggerCause::Push {
                    delivery: delivery.clone(),
                    after: push.after.to_string(),
                    pusher: pusher.clone(),
                },
            }
            .outgoing()],
        };
        match self.inner.store.apply(changes).await {
            Ok(()) => {
                tracing::info!(repo = %repo.id, %delivery, after = %push.after, %pusher, "push queued");
                Ok(WebhookResponse {
                    status: 202,
                    body: json!({"status": "queued", "repo": repo.id, "delivery": delivery}),
                })
            }
            Err(StoreError::Conflict { .. }) => Ok(WebhookResponse::new(
                200,
                "duplicate",
                format!("delivery {delivery} was already received"),
            )),
            Err(err) => Err(err.into()),
        }
    }
}

impl Controller {
    /// The configured repository a delivery about `full_name` (`owner/name`) is for.
    fn delivered_repo(&self, full_name: &str, clone_url: &str) -> Option<&RepoSettings> {
        self.inner.settings.repos.iter().find(|r| {
            webhook::repo_matches(full_name, clone_url, r.github.as_deref(), r.url.as_deref())
        })
    }
}

fn not_configured(full_name: &str) -> WebhookResponse {
    WebhookResponse::new(
        202,
        "ignored",
        format!("repository {full_name} is not configured"),
    )
}

/// The delivery's id (`X-GitHub-Delivery`), or the answer refusing it.
fn delivery_id(delivery: Option<String>) -> Result<String, WebhookResponse> {
    let Some(delivery) = delivery.filter(|d| !d.is_empty()) else {
        return Err(WebhookResponse::new(
            400,
            "rejected",
            "missing X-GitHub-Delivery header",
        ));
    };
    if delivery.len() > MAX_DELIVERY_ID {
        return Err(WebhookResponse::new(
            400,
            "rejected",
            format!(
                "X-GitHub-Delivery is too long ({} bytes; GitHub's are 36, at most {MAX_DELIVERY_ID})",
                delivery.len()
            ),
        ));
    }
    Ok(delivery)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivery_headers_are_read_by_name_and_only_as_text() {
        let mut headers = http::HeaderMap::new();
        headers.insert("X-GitHub-Event", http::HeaderValue::from_static("push"));
        headers.insert("x-github-delivery", http::HeaderValue::from_static("d-1"));
        let not_text = http::HeaderValue::from_bytes(b"sha256=\xff").expect("a header value");
        headers.insert("X-Hub-Signature-256", not_text);
        let read = WebhookHeaders::read(&headers);
        assert_eq!(
            read,
            WebhookHeaders {
                event: Some("push".into()),
                delivery: Some("d-1".into()),
                signature: None,
            }
        );
        let request = read.with_body(b"{}".to_vec());
        assert_eq!(
            (request.event.as_deref(), request.body.as_slice()),
            (Some("push"), b"{}".as_slice())
        );
    }
}
