//! The live-state and drift faces: what the alias serves, read in two calls (GetAlias, then
//! GetFunction at the alias, which answers with the configuration, code and tags of the version
//! the alias points at), compared with the function manifest at the branch head.
//!
//! Drift is every manifest field whose live value differs, named as in `function.yaml`
//! (`spec.memory`, `spec.vpcConfig.subnetIds`, ...), and the alias: routed to more than one
//! version (a canary left behind), or pointing at a version whose code differs from Git's (an
//! image URI or digest; a zip's SHA-256). A missing function or alias is drift, named.
//!
//! Subnets and security groups compare in any order (AWS gives their order no meaning: pipecd
//! #6529); layers compare in order (it decides which layer's files win). Tags compare as a map,
//! and only the manifest's own: gannet's tags and AWS's are computed. Code from S3 is not
//! compared: Lambda does not report which object its code came from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use gannet_config::AppConfig;
use gannet_domain::drift::{self, DriftField, Health, LiveResource, LiveState, Rules, UNSET};
use gannet_sdk::plugin::StepError;
use serde_json::{json, Map, Value};

use crate::api::LambdaApi;
use crate::function::{Code, FunctionState, LiveFunction, UpdateStatus};
use crate::manifest::{CodeSource, FunctionManifest};
use crate::routing::AliasRouting;
use crate::source;

/// How the manifest's fields compare; paths as in [`desired_doc`].
const RULES: Rules<'static> = Rules {
    unordered: &[
        "spec.vpcConfig.subnetIds",
        "spec.vpcConfig.securityGroupIds",
    ],
    ignored: &[],
    keyed: &[],
};

/// A weight at or below this is no traffic (AWS stores doubles).
const NO_WEIGHT: f64 = 1e-9;

/// The code Git asks for, as far as a live version can show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GitCode {
    /// Compared with the version's `CodeSha256` (base64, as Lambda reports it).
    Zip { sha256: String },
    /// Compared with the version's image URI, or with its resolved digest when Git pins one.
    Image { uri: String },
    /// Not compared, for this reason (shown with the function).
    NotCompared { why: String },
}

/// What the function's alias serves, as read.
#[derive(Clone, Debug)]
pub(crate) enum Live {
    NoFunction,
    /// The function exists without the alias: `$LATEST` as read.
    NoAlias {
        latest: Box<LiveFunction>,
    },
    Alias {
        routing: AliasRouting,
        /// The version the alias points at.
        function: Box<LiveFunction>,
    },
}

/// Reads what `alias` of the app's function serves and compares it with the manifest in
/// `app_dir`. Two Lambda calls: GetAlias, then GetFunction at the alias (or, when the alias is
/// missing, without one, to tell a missing alias from a missing function).
pub(crate) async fn read(
    api: &LambdaApi,
    alias: &str,
    app: &AppConfig,
    app_rel: &str,
    app_dir: &Path,
) -> Result<LiveState, StepError> {
    let permanent = |e: source::SourceError| StepError::permanent(e);
    let manifest = source::load_manifest(app_dir, app_rel, app).map_err(permanent)?;
    let code = git_code(&manifest, app, app_rel, app_dir).map_err(permanent)?;
    let name = manifest.name.as_str();
    let live = match api.alias(name, alias).await? {
        Some(routing) => match api.function_at(name, Some(alias)).await? {
            Some(function) => Live::Alias {
                routing,
                function: Box::new(function),
            },
            // The alias was there a moment ago: the function is changing under us.
            None => {
                return Err(StepError::transient(
                    format!("Lambda GetFunction {name}:{alias}"),
                    "the alias vanished between two reads",
                ))
            }
        },
        None => match api.function(name).await? {
            Some(latest) => Live::NoAlias {
                latest: Box::new(latest),
            },
            None => Live::NoFunction,
        },
    };
    Ok(compare(&manifest, &code, alias, &live))
}

/// The drift and live resources of `live` against the manifest and Git's code.
pub(crate) fn compare(
    manifest: &FunctionManifest,
    code: &GitCode,
    alias: &str,
    live: &Live,
) -> LiveState {
    let name = &manifest.name;
    let text = |s: &str| Value::String(s.to_owned()).to_string();
    match live {
        Live::NoFunction => LiveState {
            resources: Vec::new(),
            drift: vec![DriftField {
                field: "function".into(),
                git: text(name),
                live: UNSET.into(),
            }],
        },
        Live::NoAlias { latest } => LiveState {
            resources: vec![function_resource(name, latest, code)],
            drift: vec![DriftField {
                field: "alias".into(),
                git: text(alias),
                live: UNSET.into(),
            }],
        },
        Live::Alias { routing, function } => {
            let mut found = Vec::new();
            if split(routing) {
                found.push(DriftField {
                    field: "alias.routing".into(),
                    git: text("all traffic to one version"),
                    live: text(&routing.to_string()),
                });
            }
            found.extend(code_drift(code, function));
            found.extend(drift::diff(
                &desired_doc(manifest),
                &live_doc(function),
                &RULES,
            ));
            found.extend(extra_environment(manifest, function));
            LiveState {
                resources: vec![
                    LiveResource {
                        kind: "LambdaAlias".into(),
                        id: format!("{name}:{alias}"),
                        health: Health::Healthy,
                        summary: routing.to_string(),
                    },
                    function_resource(name, function, code),
                ],
                drift: found,
            }
        }
    }
}

/// More than one version gets traffic.
fn split(routing: &AliasRouting) -> bool {
    routing
        .weights
        .iter()
        .any(|(version, weight)| *weight > NO_WEIGHT && *version != routing.version)
}

/// The manifest's fields as `function.yaml` names them. A field the manifest leaves to the
/// function (handler and runtime of an image, ephemeral storage, architecture) is left out, so
/// it is never drift; no VPC is an empty VPC, and no layers are no layers.
fn desired_doc(m: &FunctionManifest) -> Value {
    let mut spec = Map::new();
    spec.insert("role".into(), json!(m.role));
    if let Some(handler) = &m.handler {
        spec.insert("handler".into(), json!(handler));
    }
    if let Some(runtime) = &m.runtime {
        spec.insert("runtime".into(), json!(runtime));
    }
    spec.insert("memory".into(), json!(m.memory));
    spec.insert("timeout".into(), json!(m.timeout));
    spec.insert("environments".into(), json!(m.environments));
    if let Some(size) = m.ephemeral_storage {
        spec.insert("ephemeralStorage".into(), json!({ "size": size }));
    }
    let vpc = m.vpc_config.clone().unwrap_or_default();
    spec.insert(
        "vpcConfig".into(),
        json!({ "subnetIds": vpc.subnet_ids, "securityGroupIds": vpc.security_group_ids }),
    );
    spec.insert("layers".into(), json!(m.layers));
    if let Some(arch) = &m.architecture {
        spec.insert("architectures".into(), json!([{ "name": arch }]));
    }
    spec.insert("tags".into(), json!(m.tags));
    json!({ "spec": spec })
}

/// The live version in [`desired_doc`]'s shape; computed fields are not in it.
fn live_doc(f: &LiveFunction) -> Value {
    let architectures: Vec<Value> = f
        .architectures
        .iter()
        .map(|a| json!({ "name": a }))
        .collect();
    json!({ "spec": {
        "role": f.role,
        "handler": f.handler,
        "runtime": f.runtime,
        "memory": f.memory,
        "timeout": f.timeout,
        "environments": f.environments,
        "ephemeralStorage": f.ephemeral_storage.map(|size| json!({ "size": size })),
        "vpcConfig": { "subnetIds": f.subnet_ids, "securityGroupIds": f.security_group_ids },
        "layers": f.layers,
        "architectures": architectures,
        "tags": f.tags,
    }})
}

/// Environment variables set on the function that the manifest does not have.
fn extra_environment(m: &FunctionManifest, f: &LiveFunction) -> Vec<DriftField> {
    f.environments
        .iter()
        .filter(|(key, _)| !m.environments.contains_key(*key))
        .map(|(key, value)| DriftField {
            field: format!("spec.environments.{key}"),
            git: UNSET.into(),
            live: Value::String(value.clone()).to_string(),
        })
        .collect()
}

/// The code field, when the version's code is not Git's.
fn code_drift(code: &GitCode, f: &LiveFunction) -> Option<DriftField> {
    let text = |s: &str| Value::String(s.to_owned()).to_string();
    let shown = |s: Option<&String>| s.map_or_else(|| UNSET.to_owned(), |s| text(s));
    match code {
        GitCode::Zip { sha256 } if *sha256 != f.code_sha256 => Some(DriftField {
            field: "spec.zipFile".into(),
            git: text(&format!("CodeSha256 {sha256}")),
            live: text(&format!("CodeSha256 {}", f.code_sha256)),
        }),
        GitCode::Image { uri } => match uri.split_once('@') {
            // A pinned digest: the version's resolved image must be that image.
            Some((_, digest)) => {
                let same = [&f.resolved_image_uri, &f.image_uri]
                    .into_iter()
                    .flatten()
                    .any(|u| u.split_once('@').is_some_and(|(_, d)| d == digest));
                (!same).then(|| DriftField {
                    field: "spec.image".into(),
                    git: text(uri),
                    live: shown(f.resolved_image_uri.as_ref().or(f.image_uri.as_ref())),
                })
            }
            None => (f.image_uri.as_deref() != Some(uri.as_str())).then(|| DriftField {
                field: "spec.image".into(),
                git: text(uri),
                live: shown(f.image_uri.as_ref()),
            }),
        },
        _ => None,
    }
}

fn function_resource(name: &str, f: &LiveFunction, code: &GitCode) -> LiveResource {
    let version = f.version.as_deref().unwrap_or("$LATEST");
    let health = match (f.state, f.update) {
        (Some(FunctionState::Failed), _) | (_, Some(UpdateStatus::Failed)) => Health::Unhealthy,
        (Some(FunctionState::Active), _) => Health::Healthy,
        _ => Health::Unknown,
    };
    let mut summary = format!("version {version}");
    if let Some(runtime) = &f.runtime {
        summary.push_str(&format!(", {runtime}"));
    }
    if let Some(memory) = f.memory {
        summary.push_str(&format!(", {memory} MB"));
    }
    if let GitCode::NotCompared { why } = code {
        summary.push_str(&format!(" ({why})"));
    }
    LiveResource {
        kind: "LambdaFunction".into(),
        id: format!("{name}:{version}"),
        health,
        summary,
    }
}

/// The code the manifest names, in the form a live version shows.
fn git_code(
    m: &FunctionManifest,
    app: &AppConfig,
    app_rel: &str,
    app_dir: &Path,
) -> Result<GitCode, source::SourceError> {
    match &m.code {
        CodeSource::Image { uri } => Ok(GitCode::Image { uri: uri.clone() }),
        CodeSource::S3 { .. } => Ok(GitCode::NotCompared {
            why: "code from S3 is not compared: Lambda does not report which object it came from"
                .into(),
        }),
        CodeSource::Git { .. } => Ok(GitCode::NotCompared {
            why: "code from a git source is not compared: it is fetched only to deploy".into(),
        }),
        CodeSource::ZipFile { path } => {
            let (file, _) = source::manifest_file(app);
            zip_digest(app_dir, app_rel, path, &file).map(|sha256| GitCode::Zip { sha256 })
        }
    }
}

/// Digests of zips already read, by path, size and modification time: a checked-out tree
/// never changes, so a sweep does not hash the same archive again.
type DigestCache = Mutex<HashMap<(PathBuf, u64, Option<SystemTime>), String>>;

/// At most this many digests are kept; the cache starts over when full.
const MAX_DIGESTS: usize = 4096;

fn zip_digest(
    app_dir: &Path,
    app_rel: &str,
    rel: &str,
    file: &str,
) -> Result<String, source::SourceError> {
    static CACHE: OnceLock<DigestCache> = OnceLock::new();
    let path = app_dir.join(rel);
    let key = std::fs::metadata(&path)
        .ok()
        .map(|m| (path.clone(), m.len(), m.modified().ok()));
    let cache = CACHE.get_or_init(DigestCache::default);
    if let Some(key) = &key {
        if let Some(hit) = cache.lock().ok().and_then(|c| c.get(key).cloned()) {
            return Ok(hit);
        }
    }
    let sha256 = match source::read_zip(app_dir, app_rel, rel, file)? {
        Code::Zip { sha256, .. } => sha256,
        // read_zip makes only zip code; anything else would show as drift, never pass.
        other => other.identity(),
    };
    if let (Some(key), Ok(mut c)) = (key, cache.lock()) {
        if c.len() >= MAX_DIGESTS {
            c.clear();
        }
        c.insert(key, sha256.clone());
    }
    Ok(sha256)
}

#[cfg(test)]
mod tests;
