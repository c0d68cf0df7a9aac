//! Every event to an Amazon EventBridge bus (`GANNET_EVENT_BUS`, the template's `EventBusName`):
//! one `PutEvents` entry per event, source `gannet`, detail type the CloudEvent's `type`
//! (`dev.gannet.deployment.succeeded`), the whole CloudEvent as the detail. EventBridge has no
//! idempotency key: a redelivered event carries the same CloudEvent `id` in its detail, for
//! consumers to drop repeats by.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use gannet_controller::EventBus;
use gannet_domain::ports::BoxError;
use gannet_events::Event;

/// The source of every entry gannet puts: what an EventBridge rule matches on.
pub const SOURCE: &str = "gannet";

pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    /// The bus's name or ARN.
    bus: String,
}

impl EventBridgeBus {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: String) -> Self {
        Self { client, bus }
    }
}

/// The notify function's event bus ([`crate::BusFactory`]): the bus `bus` through the SDK.
/// Only the notify function's `main` names it, so only its zip links the EventBridge SDK.
pub fn eventbridge_bus(sdk: &aws_config::SdkConfig, bus: String) -> std::sync::Arc<dyn EventBus> {
    std::sync::Arc::new(EventBridgeBus::new(
        aws_sdk_eventbridge::Client::new(sdk),
        bus,
    ))
}

#[async_trait]
impl EventBus for EventBridgeBus {
    fn name(&self) -> &str {
        &self.bus
    }

    async fn publish(&self, event: &Event) -> Result<(), BoxError> {
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(SOURCE)
            .detail_type(&event.kind)
            .detail(serde_json::to_string(event)?)
            .resources(format!("gannet:{}", event.subject))
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| aws_smithy_types::error::display::DisplayErrorContext(e).to_string())?;
        // PutEvents answers 200 with the entries it could not put.
        if out.failed_entry_count() > 0 {
            let why = out
                .entries()
                .iter()
                .filter_map(|e| {
                    Some(format!(
                        "{}: {}",
                        e.error_code()?,
                        e.error_message().unwrap_or("")
                    ))
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(format!("EventBridge refused event {}: {why}", event.id).into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use gannet_aws::{sdk_config, ClientOptions};
    use gannet_domain::deployment::{Deployment, DeploymentStatus};
    use gannet_domain::duration::Millis;
    use gannet_events::EventKind;
    use serde_json::Value;

    use super::*;

    /// On moto: a bus whose rule sends gannet's events to an SQS queue, as a consumer would
    /// set it up; each publish arrives with the CloudEvent as its detail.
    #[tokio::test]
    async fn events_reach_a_rule_on_the_bus_with_the_cloudevent_as_detail() {
        let endpoint = std::env::var("GANNET_MOTO_ENDPOINT").expect(
            "GANNET_MOTO_ENDPOINT is not set: this test needs moto_server on loopback (make test)",
        );
        let sdk = sdk_config(&ClientOptions {
            region: "us-east-1".into(),
            endpoint: Some(endpoint),
            credentials: Some(aws_sdk_sqs::config::SharedCredentialsProvider::new(
                aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "tests"),
            )),
        })
        .await;
        let events = aws_sdk_eventbridge::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let name = format!("gannet-events-{}", std::process::id());
        let bus = events.create_event_bus().name(&name).send().await.unwrap();
        let queue = sqs.create_queue().queue_name(&name).send().await.unwrap();
        let queue_url = queue.queue_url().unwrap().to_owned();
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap();
        let queue_arn =
            attrs.attributes().unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone();
        events
            .put_rule()
            .name("gannet")
            .event_bus_name(&name)
            .event_pattern(r#"{"source": ["gannet"]}"#)
            .send()
            .await
            .unwrap();
        events
            .put_targets()
            .rule("gannet")
            .event_bus_name(&name)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("q")
                    .arn(&queue_arn)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();

        let publisher =
            EventBridgeBus::new(events.clone(), bus.event_bus_arn().unwrap().to_owned());
        let d = Deployment::test().with_status(DeploymentStatus::Success);
        let event = Event::deployment(EventKind::DeploymentSucceeded, &d, None, Millis(1_000));
        // Delivered twice (a redelivered notify message): the same id both times.
        publisher.publish(&event).await.unwrap();
        publisher.publish(&event).await.unwrap();

        let mut got: Vec<Value> = Vec::new();
        for _ in 0..20 {
            let out = sqs
                .receive_message()
                .queue_url(&queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            got.extend(
                out.messages()
                    .iter()
                    .filter_map(|m| serde_json::from_str(m.body()?).ok()),
            );
            if got.len() >= 2 {
                break;
            }
        }
        assert_eq!(got.len(), 2, "{got:?}");
        for envelope in &got {
            assert_eq!(envelope["source"], SOURCE, "{envelope}");
            assert_eq!(
                envelope["detail-type"], "dev.gannet.deployment.succeeded",
                "{envelope}"
            );
            assert_eq!(envelope["detail"]["id"], event.id.as_str(), "{envelope}");
            assert_eq!(
                envelope["detail"]["data"]["status"], "SUCCESS",
                "{envelope}"
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_bus_is_an_error_naming_it() {
        let sdk = sdk_config(&ClientOptions {
            region: "us-east-1".into(),
            endpoint: Some("http://127.0.0.1:1".into()),
            credentials: Some(aws_sdk_sqs::config::SharedCredentialsProvider::new(
                aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "tests"),
            )),
        })
        .await;
        let publisher =
            EventBridgeBus::new(aws_sdk_eventbridge::Client::new(&sdk), "nowhere".into());
        let d = Deployment::test();
        let event = Event::deployment(EventKind::DeploymentStarted, &d, None, Millis(1));
        assert!(publisher.publish(&event).await.is_err());
        assert_eq!(publisher.name(), "nowhere");
    }
}
