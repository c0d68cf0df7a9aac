//! The AWS SDK configuration of a deploy target, and clients built from it on first use.
//!
//! HTTPS goes through rustls with the ring provider (no C toolchain beyond a C compiler is
//! needed). Credentials come from the standard AWS chain, or fixed ones (tests); with `roleArn`
//! they are used to assume that role through STS, refreshed as they expire. `endpoint` sends
//! every call (STS included) to another server, such as moto on loopback.

use std::time::Duration;

use crate::target::AwsFields;
use aws_config::sts::AssumeRoleProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_types::sdk_config::SharedCredentialsProvider;
use tokio::sync::OnceCell;

/// The SDK configuration for `target`: its region and endpoint, timeouts, and credentials
/// (`credentials`, or the standard chain), through `roleArn` when it names one. Each plugin
/// builds its own clients from it.
pub async fn sdk_config(
    target: AwsFields<'_>,
    credentials: Option<SharedCredentialsProvider>,
) -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(30))
        .operation_timeout(Duration::from_secs(90))
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(target.region.to_owned()))
        .http_client(http)
        .timeout_config(timeouts);
    if let Some(endpoint) = target.endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some(credentials) = credentials {
        loader = loader.credentials_provider(credentials);
    }
    let base = loader.load().await;
    let Some(role) = target.role_arn else {
        return base;
    };
    let assumed = AssumeRoleProvider::builder(role)
        .session_name("gannet")
        .configure(&base)
        .build()
        .await;
    base.into_builder()
        .credentials_provider(SharedCredentialsProvider::new(assumed))
        .build()
}

/// A deploy target's clients (`C`), built from its [`sdk_config`] on first use.
#[derive(Debug)]
pub struct LazyClients<C> {
    /// Fixed credentials instead of the standard chain (tests).
    credentials: Option<SharedCredentialsProvider>,
    clients: OnceCell<C>,
}

impl<C> LazyClients<C> {
    pub fn new(credentials: Option<SharedCredentialsProvider>) -> Self {
        Self {
            credentials,
            clients: OnceCell::new(),
        }
    }

    /// The clients for `target`, built by `build` the first time.
    pub async fn get(&self, target: AwsFields<'_>, build: impl FnOnce(&SdkConfig) -> C) -> &C {
        self.clients
            .get_or_init(|| async { build(&sdk_config(target, self.credentials.clone()).await) })
            .await
    }
}
