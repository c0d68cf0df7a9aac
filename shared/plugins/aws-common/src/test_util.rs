//! The moto test harness the AWS plugins share (feature `test-util`): moto's endpoint on
//! loopback and fixed credentials, with the core's plugin test driver
//! ([`gannet_sdk::test_run`]).

use aws_credential_types::Credentials;
use aws_types::sdk_config::SharedCredentialsProvider;
pub use gannet_sdk::test_run::{unique, Commit, Commits, Delivery, Platform, Recorder, Run, APP};

pub const REGION: &str = "us-east-1";

/// moto's endpoint; a clear failure (never a skip) when the tests are run without it.
pub fn moto_endpoint() -> String {
    let Ok(endpoint) = std::env::var("GANNET_MOTO_ENDPOINT") else {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: these tests need moto_server on loopback. Run `make test`, \
             or: scripts/moto.sh ensure && eval \"$(scripts/moto.sh start /tmp/motostate)\" \
             (and scripts/moto.sh stop /tmp/motostate afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "GANNET_MOTO_ENDPOINT must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// moto's fixed test credentials.
pub fn credentials() -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(Credentials::new("testing", "testing", None, None, "tests"))
}
