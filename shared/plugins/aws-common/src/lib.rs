//! What the AWS platform plugins (Lambda, ECS) share: SDK errors classified once
//! ([`ErrorCodes::classify`]), the SDK configuration of a deploy target ([`sdk_config`],
//! [`LazyClients`]), stage metadata ([`StageMeta`]), and, with the `test-util` feature, the moto test harness.

mod config;
mod errors;
mod meta;
mod pick;

pub use config::{sdk_config, LazyClients};
pub use errors::{build_error, ApiError, ErrorCodes, ErrorKind};
pub use meta::StageMeta;
pub use pick::{pick_target, Platform};
#[cfg(feature = "test-util")]
pub mod test_util;
