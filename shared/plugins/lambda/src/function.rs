//! The function as it should be ([`Desired`]) and as it is ([`LiveFunction`]), and the one
//! decision that drives LAMBDA_SYNC, LAMBDA_CANARY_ROLLOUT and rollback: what to do next to make
//! the live function match ([`next_action`]). Pure: the AWS calls live in `api`.
//!
//! The decision compares live state with the manifest, so a repeated step does nothing twice.
//! What live state cannot show is kept in stage metadata ([`Applied`]): the S3 object last
//! applied (Lambda does not report where code came from), and the configuration last applied
//! (so a field the API silently ignores cannot make a step update forever).

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::manifest::{FunctionManifest, VpcConfig};

/// The function's code, ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    Zip {
        bytes: Vec<u8>,
        /// Base64 SHA-256, as Lambda reports `CodeSha256`.
        sha256: String,
        /// Hex SHA-256, for the artifact version.
        hex: String,
    },
    S3 {
        bucket: String,
        key: String,
        object_version: Option<String>,
    },
    Image {
        uri: String,
    },
}

impl Code {
    pub(crate) fn zip(bytes: Vec<u8>) -> Self {
        let digest = Sha256::digest(&bytes);
        Self::Zip {
            sha256: base64(&digest),
            hex: hex::encode(digest),
            bytes,
        }
    }

    /// What this code is, for stage metadata: the same text means the same code.
    pub(crate) fn identity(&self) -> String {
        match self {
            Self::Zip { hex, .. } => format!("zip:sha256:{hex}"),
            Self::S3 {
                bucket,
                key,
                object_version,
            } => match object_version {
                Some(v) => format!("s3://{bucket}/{key}?versionId={v}"),
                None => format!("s3://{bucket}/{key}"),
            },
            Self::Image { uri } => format!("image:{uri}"),
        }
    }
}

/// Standard base64 with padding (Lambda's `CodeSha256`).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The function a manifest asks for, with gannet's tags.
#[derive(Clone, Debug)]
pub(crate) struct Desired {
    pub manifest: FunctionManifest,
    pub code: Code,
    /// The manifest's tags plus the managed-by, app and commit tags.
    pub tags: BTreeMap<String, String>,
}

impl Desired {
    pub(crate) fn name(&self) -> &str {
        &self.manifest.name
    }

    /// A digest of the configuration (everything UpdateFunctionConfiguration sets).
    pub(crate) fn config_digest(&self) -> String {
        #[derive(Serialize)]
        struct Config<'a> {
            role: &'a str,
            handler: &'a Option<String>,
            runtime: &'a Option<String>,
            memory: i32,
            timeout: i32,
            environments: &'a BTreeMap<String, String>,
            ephemeral_storage: Option<i32>,
            vpc_config: Option<&'a VpcConfig>,
            layers: &'a [String],
        }
        let m = &self.manifest;
        let config = Config {
            role: &m.role,
            handler: &m.handler,
            runtime: &m.runtime,
            memory: m.memory,
            timeout: m.timeout,
            environments: &m.environments,
            ephemeral_storage: m.ephemeral_storage,
            vpc_config: m.vpc_config.as_ref(),
            layers: &m.layers,
        };
        let json = serde_json::to_vec(&config).unwrap_or_default();
        hex::encode(Sha256::digest(json))
    }
}

/// `State` of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FunctionState {
    Pending,
    Active,
    Inactive,
    Failed,
    Other,
}

/// `LastUpdateStatus` of a function; `None` before its first update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpdateStatus {
    None,
    InProgress,
    Successful,
    Failed,
}

/// What GetFunction says about `$LATEST`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LiveFunction {
    pub arn: String,
    pub state: Option<FunctionState>,
    pub state_reason: String,
    pub update: Option<UpdateStatus>,
    pub update_reason: String,
    /// `Version`: `$LATEST` or a published version's number.
    pub version: Option<String>,
    pub code_sha256: String,
    pub image_uri: Option<String>,
    /// The image's digest form (`repo@sha256:...`) Lambda resolved `image_uri` to.
    pub resolved_image_uri: Option<String>,
    pub revision_id: Option<String>,
    pub role: String,
    pub handler: Option<String>,
    pub runtime: Option<String>,
    pub memory: Option<i32>,
    pub timeout: Option<i32>,
    pub environments: BTreeMap<String, String>,
    pub ephemeral_storage: Option<i32>,
    pub subnet_ids: Vec<String>,
    pub security_group_ids: Vec<String>,
    pub layers: Vec<String>,
    pub architectures: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// What earlier steps of this stage applied, from its metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// [`Code::identity`] of the code last sent, and the `CodeSha256` Lambda answered.
    pub code: Option<(String, String)>,
    /// [`Desired::config_digest`] of the configuration last sent.
    pub config: Option<String>,
}

/// The next thing to do to make the live function match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Create,
    /// The function is busy; look again later.
    Wait {
        why: String,
    },
    UpdateCode,
    UpdateConfig {
        fields: Vec<&'static str>,
    },
    Tag {
        tags: BTreeMap<String, String>,
    },
    /// Code, configuration and tags match. `ignored` lists fields that still differ although
    /// this stage applied them (the API did not take them); worth a log line, not a loop.
    Ready {
        ignored: Vec<&'static str>,
    },
    Failed {
        reason: String,
    },
}

/// Decides the next action from the live function, the desired one and what was applied.
pub(crate) fn next_action(live: Option<&LiveFunction>, want: &Desired, applied: &Applied) -> Next {
    let Some(live) = live else {
        return Next::Create;
    };
    if live.state == Some(FunctionState::Pending) {
        return Next::Wait {
            why: "the function is being created (State Pending)".into(),
        };
    }
    if live.update == Some(UpdateStatus::InProgress) {
        return Next::Wait {
            why: "an update is in progress (LastUpdateStatus InProgress)".into(),
        };
    }
    if live.state == Some(FunctionState::Failed) {
        return Next::Failed {
            reason: format!("the function is in state Failed: {}", live.state_reason),
        };
    }
    let code_ok = code_matches(live, want, applied);
    let fields = config_differences(live, want);
    let config_applied = applied.config.as_deref() == Some(want.config_digest().as_str());
    if live.update == Some(UpdateStatus::Failed) {
        // Our own update failed: trying again would fail again. Someone else's failed update
        // is repaired by applying ours.
        let ours = code_ok && (fields.is_empty() || config_applied);
        if ours {
            return Next::Failed {
                reason: format!("the function's last update failed: {}", live.update_reason),
            };
        }
    }
    if !code_ok {
        return Next::UpdateCode;
    }
    if !fields.is_empty() && !config_applied {
        return Next::UpdateConfig { fields };
    }
    let missing: BTreeMap<String, String> = want
        .tags
        .iter()
        .filter(|(k, v)| live.tags.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !missing.is_empty() {
        return Next::Tag { tags: missing };
    }
    Next::Ready { ignored: fields }
}

fn code_matches(live: &LiveFunction, want: &Desired, applied: &Applied) -> bool {
    let code = match &want.code {
        Code::Zip { sha256, .. } => live.code_sha256 == *sha256,
        Code::Image { uri } => live.image_uri.as_deref() == Some(uri.as_str()),
        // Lambda does not say which object its code came from: trust what this stage applied,
        // as long as the code has not changed since.
        Code::S3 { .. } => applied.code.as_ref().is_some_and(|(identity, sha)| {
            *identity == want.code.identity() && *sha == live.code_sha256
        }),
    };
    let arch = match &want.manifest.architecture {
        Some(a) => live.architectures.is_empty() || live.architectures == [a.clone()],
        None => true,
    };
    // An architecture the API ignored (after we sent it with this code) is not worth a loop.
    let arch_applied = applied.code.as_ref().is_some_and(|(identity, sha)| {
        *identity == want.code.identity() && *sha == live.code_sha256
    });
    code && (arch || arch_applied)
}

/// The configuration fields whose live value differs from the manifest.
pub(crate) fn config_differences(live: &LiveFunction, want: &Desired) -> Vec<&'static str> {
    let m = &want.manifest;
    let mut out = Vec::new();
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    let vpc = m.vpc_config.clone().unwrap_or_default();
    let checks = [
        ("role", live.role == m.role),
        ("handler", m.handler.is_none() || live.handler == m.handler),
        ("runtime", m.runtime.is_none() || live.runtime == m.runtime),
        ("memory", live.memory == Some(m.memory)),
        ("timeout", live.timeout == Some(m.timeout)),
        ("environments", live.environments == m.environments),
        (
            "ephemeralStorage",
            m.ephemeral_storage.is_none() || live.ephemeral_storage == m.ephemeral_storage,
        ),
        // Order means nothing to AWS here (pipecd #6529).
        (
            "vpcConfig",
            sorted(&live.subnet_ids) == sorted(&vpc.subnet_ids)
                && sorted(&live.security_group_ids) == sorted(&vpc.security_group_ids),
        ),
        ("layers", live.layers == m.layers),
    ];
    for (field, same) in checks {
        if !same {
            out.push(field);
        }
    }
    out
}

#[cfg(test)]
mod tests;
