//! Unit-test support: a store on a fresh table in moto (from `GANNET_MOTO_ENDPOINT`, never
//! skipped when missing), for tests that need the crate's private parts.

use std::sync::Arc;

use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};

use crate::{provision, sdk_config, ClientOptions, DynamoStore, ProvisionOptions, SqsOptions};
use crate::{SqsQueue, StoreOptions, SystemClock};

/// The SDK configuration for moto on loopback (from `GANNET_MOTO_ENDPOINT`, never skipped).
pub(crate) async fn moto_config() -> aws_config::SdkConfig {
    let endpoint = std::env::var("GANNET_MOTO_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: these tests need moto_server on loopback \
             (run `make test`, or start it with scripts/moto.sh)"
        )
    });
    assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
    let options = ClientOptions {
        region: "us-east-1".to_owned(),
        endpoint: Some(endpoint),
        credentials: Some(SharedCredentialsProvider::new(Credentials::new(
            "testing", "testing", None, None, "tests",
        ))),
    };
    sdk_config(&options).await
}

/// A name no other test run uses.
pub(crate) fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

pub(crate) async fn fresh_store() -> DynamoStore {
    let config = moto_config().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let sqs = aws_sdk_sqs::Client::new(&config);
    let name = unique("unit");
    let made = provision(&dynamodb, &sqs, &name, &ProvisionOptions::default())
        .await
        .expect("provision on moto");
    let queue = SqsQueue::new(
        sqs,
        made.queues,
        Arc::new(SystemClock),
        SqsOptions::default(),
    );
    DynamoStore::new(
        dynamodb,
        made.table,
        Arc::new(queue),
        StoreOptions::default(),
    )
}
