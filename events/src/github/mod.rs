//! GitHub webhooks, without IO: signature checks, payload parsing, and matching a pushed
//! repository to a configured one.

mod payload;
mod repo_match;
mod signature;

pub use payload::{parse_event, Event, PayloadError, PullRequest, Push};
pub use repo_match::repo_matches;
pub use signature::{sign, verify_signature, verify_signature_parts, SignatureError};
