//! The notify handler: logs every event and posts it, as a structured CloudEvent, to each
//! configured HTTP receiver. A receiver that fails makes the message retry; receivers drop
//! repeats by the event `id`.

use gannet_events::Event;

use crate::{Controller, HandlerError};

impl Controller {
    pub(crate) async fn notify(&self, event: &Event) -> Result<(), HandlerError> {
        tracing::info!(
            event = %event.kind,
            app = %event.data.app,
            deployment = event.data.deployment.as_ref().map(|d| d.as_str()).unwrap_or(""),
            stage = event.data.stage.as_deref().unwrap_or(""),
            status = %event.data.status,
            "event"
        );
        for receiver in &self.inner.settings.receivers {
            self.inner
                .http
                .post(&receiver.url)
                .header("content-type", "application/cloudevents+json")
                .json(event)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|source| HandlerError::Notify {
                    receiver: receiver.name.clone(),
                    source,
                })?;
        }
        Ok(())
    }
}
