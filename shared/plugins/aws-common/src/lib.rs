//! What the AWS platform plugins (Lambda, ECS) share: SDK errors classified once
//! ([`ErrorCodes::classify`]), the fields and checks of an AWS deploy target ([`AwsTarget`],
//! [`check_target`]), the SDK configuration of a target ([`sdk_config`], [`LazyClients`]),
//! stage metadata ([`StageMeta`]), and, with the `test-util` feature, the moto test harness.

mod config;
mod errors;
mod target;

pub use config::{sdk_config, LazyClients};
pub use errors::{build_error, ApiError, ErrorCodes, ErrorKind};
pub use gannet_sdk::stage_meta::StageMeta;
pub use target::{check_target, AwsFields, AwsTarget};
#[cfg(feature = "test-util")]
pub mod test_util;
