//! Stage metadata: what a step records before it depends on it, so a repeated step (a
//! duplicate message, a restart) picks up where the last one stopped.

use gannet_domain::deployment::Stage;
use gannet_sdk::plugin::StepError;

use crate::function::Applied;
use crate::routing::AliasRouting;

/// The function the stage deploys.
pub const FUNCTION: &str = "function";
/// What the code is (image tag, S3 object version, zip digest).
pub const ARTIFACT_VERSION: &str = "artifactVersion";
/// The alias's routing before the stage changed anything (JSON, or `none`).
pub const ALIAS_BEFORE: &str = "aliasBefore";
/// `<code identity> <CodeSha256>` of the code this stage last sent.
pub const APPLIED_CODE: &str = "appliedCode";
/// Digest of the configuration this stage last sent.
pub const APPLIED_CONFIG: &str = "appliedConfig";
/// The description sent with PublishVersion, saved before the call.
pub const PUBLISHING: &str = "publishing";
/// The version this stage published.
pub const VERSION: &str = "version";

/// A stage's metadata as this step sees it, saved through the step's IO.
pub(crate) use gannet_plugin_aws_common::StageMeta as Meta;

/// The code and configuration this stage last sent, as `meta` recorded them.
pub(crate) fn applied(meta: &Meta<'_>) -> Applied {
    Applied {
        code: meta
            .get(APPLIED_CODE)
            .and_then(|s| s.rsplit_once(' '))
            .map(|(identity, sha)| (identity.to_owned(), sha.to_owned())),
        config: meta.get(APPLIED_CONFIG).map(str::to_owned),
    }
}

/// The routing saved in `stage`'s metadata: `None` when it saved none, `Some(None)` when the
/// alias did not exist then.
pub(crate) fn saved_routing(stage: &Stage) -> Result<Option<Option<AliasRouting>>, StepError> {
    match stage.metadata.get(ALIAS_BEFORE) {
        None => Ok(None),
        Some(text) => AliasRouting::from_metadata(text)
            .map(Some)
            .map_err(|e| StepError::permanent(format!("stage {}: {e}", stage.id))),
    }
}
