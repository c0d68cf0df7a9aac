//! The shared AWS SDK configuration: HTTPS through rustls with the ring provider (no aws-lc,
//! no cmake), bounded timeouts, and an optional endpoint for a local AWS API server.

use std::time::Duration;

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::SharedCredentialsProvider;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

/// Where the clients talk to.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Such as `us-east-1`.
    pub region: String,
    /// Another endpoint for every AWS API (moto on loopback in tests).
    pub endpoint: Option<String>,
    /// Fixed credentials instead of the standard chain (tests).
    pub credentials: Option<SharedCredentialsProvider>,
}

impl ClientOptions {
    /// `region` on AWS itself, with credentials from the standard chain.
    pub fn new(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            endpoint: None,
            credentials: None,
        }
    }
}

/// Loads the SDK configuration once; build the DynamoDB and SQS clients from it.
pub async fn sdk_config(options: &ClientOptions) -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(20))
        .operation_timeout(Duration::from_secs(60))
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(options.region.clone()))
        .http_client(http)
        .timeout_config(timeouts);
    if let Some(endpoint) = &options.endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some(credentials) = &options.credentials {
        loader = loader.credentials_provider(credentials.clone());
    }
    loader.load().await
}
