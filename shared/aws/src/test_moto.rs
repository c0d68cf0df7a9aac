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

/// One HTTP/1.1 request read from `stream` (a fake service's): its head (request line and
/// headers) and its body (by `content-length`). An empty head when the peer closed first.
pub(crate) fn read_http_request(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            return (String::new(), Vec::new());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let length: usize = header(&head, "content-length").parse().unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    (head, buf.split_off(header_end))
}

/// The value of header `name` in a request's `head`; empty when it has none.
pub(crate) fn header(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
        .unwrap_or_default()
}
