//! What the AWS platform plugins (Lambda, ECS) share: SDK errors classified once
//! ([`ErrorCodes::classify`]), the SDK configuration of a deploy target ([`sdk_config`],
//! [`LazyClients`]), and, with the `test-util` feature, the moto test harness.

mod config;
mod errors;

pub use config::{sdk_config, LazyClients};
pub use errors::{build_error, ApiError, ErrorCodes, ErrorKind};
#[cfg(feature = "test-util")]
pub mod test_util;
