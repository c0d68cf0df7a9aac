//! Test support: moto on loopback (from `GANNET_MOTO_ENDPOINT`, never skipped when missing),
//! clients with fixed test credentials, and fresh, uniquely named tables and queues.

#![allow(dead_code)] // Each test binary uses its own part of the support module.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use gannet_aws::{
    provision, sdk_config, ClientOptions, DynamoStore, ProvisionOptions, Provisioned, SqsOptions,
    SqsQueue, StoreOptions,
};
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{Clock, Queue, QueueName, Received};

pub const REGION: &str = "us-east-1";

/// moto's endpoint; a loud failure (never a skip) when the tests run without it.
pub fn moto_endpoint() -> String {
    let Ok(endpoint) = std::env::var("GANNET_MOTO_ENDPOINT") else {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: the gannet-aws tests need moto_server on loopback. \
             Run `make test`, or: scripts/moto.sh ensure && \
             eval \"$(scripts/moto.sh start /tmp/motostate-aws)\" \
             (and scripts/moto.sh stop /tmp/motostate-aws afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "GANNET_MOTO_ENDPOINT must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// A name no other test (or earlier run against the same moto) uses; short enough for SQS.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Clients on moto.
#[derive(Clone)]
pub struct Aws {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
}

impl Aws {
    pub async fn connect() -> Self {
        let options = ClientOptions {
            region: REGION.to_owned(),
            endpoint: Some(moto_endpoint()),
            credentials: Some(SharedCredentialsProvider::new(Credentials::new(
                "testing", "testing", None, None, "tests",
            ))),
        };
        let config = sdk_config(&options).await;
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
        }
    }

    /// A fresh table and queues.
    pub async fn provision(&self) -> Provisioned {
        provision(
            &self.dynamodb,
            &self.sqs,
            &unique("g"),
            &ProvisionOptions::default(),
        )
        .await
        .expect("provision on moto")
    }

    pub fn queue(
        &self,
        made: &Provisioned,
        clock: Arc<dyn Clock>,
        options: SqsOptions,
    ) -> SqsQueue {
        SqsQueue::new(self.sqs.clone(), made.queues.clone(), clock, options)
    }

    pub fn store(&self, made: &Provisioned, queue: SqsQueue) -> DynamoStore {
        DynamoStore::new(
            self.dynamodb.clone(),
            made.table.clone(),
            Arc::new(queue),
            StoreOptions::default(),
        )
    }
}

/// Receives up to `max` and checks (body, attempts) in order.
pub async fn check_receive(
    queue: &SqsQueue,
    from: QueueName,
    max: usize,
    visibility: GoDuration,
    want: &[(&str, u32)],
    context: &str,
) -> Vec<Received> {
    let got = queue.receive(from, max, visibility).await.expect("receive");
    let seen: Vec<(&str, u32)> = got.iter().map(|r| (r.body.as_str(), r.attempts)).collect();
    assert_eq!(seen, want, "{context}");
    got
}
