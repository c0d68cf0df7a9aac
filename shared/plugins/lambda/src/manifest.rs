//! The function manifest (`function.yaml`, `kind: LambdaFunction`): PipeCD's fields, plus
//! gannet's `zipFile`, parsed and validated into a [`FunctionManifest`] whose every error names
//! its field.
//!
//! The code comes from exactly one source: `image` (a container image URI), `s3Bucket` with
//! `s3Key` (and optionally `s3ObjectVersion`), `zipFile` (a `.zip` in the repository, relative
//! to the app's directory), or PipeCD's `source: {git, ref, path}` (a directory of another git
//! repository at a ref, which a job fetches and gannet zips: [`crate::gitzip`]).
//!
//! gannet is stricter than PipeCD: an unknown field is an error (PipeCD ignores it), and memory,
//! timeout and ephemeral storage are checked against AWS's limits here rather than by the API.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The manifest's `apiVersion`.
const API_VERSION: &str = "pipecd.dev/v1beta1";
/// The manifest's `kind`.
const KIND: &str = "LambdaFunction";

/// A manifest that did not parse or validate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The manifest file, relative to the app's directory.
    pub file: String,
    /// 1-based, when the YAML parser knows it.
    pub line: Option<usize>,
    /// Such as `spec.memory`; empty for a YAML syntax error.
    pub field: String,
    pub message: String,
}

impl ManifestError {
    /// True for valid PipeCD that gannet does not support (none today).
    pub fn is_unsupported(&self) -> bool {
        false
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// A validated function manifest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FunctionManifest {
    pub name: String,
    pub role: String,
    pub code: CodeSource,
    /// Required for zip and S3 code; unused for an image.
    pub handler: Option<String>,
    pub runtime: Option<String>,
    /// MB.
    pub memory: i32,
    /// Seconds.
    pub timeout: i32,
    pub tags: BTreeMap<String, String>,
    pub environments: BTreeMap<String, String>,
    /// MB; `None` leaves the function's setting alone.
    pub ephemeral_storage: Option<i32>,
    /// `None` means no VPC.
    pub vpc_config: Option<VpcConfig>,
    /// Layer version ARNs, in order.
    pub layers: Vec<String>,
    /// `x86_64` or `arm64`; `None` leaves the function's setting alone.
    pub architecture: Option<String>,
}

/// Where the function's code comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum CodeSource {
    Image {
        uri: String,
    },
    S3 {
        bucket: String,
        key: String,
        object_version: Option<String>,
    },
    /// A `.zip` file in the repository, relative to the app's directory.
    ZipFile {
        path: String,
    },
    /// PipeCD's `source`: the directory `path` of the git repository `remote` at `git_ref`.
    Git {
        remote: String,
        git_ref: String,
        /// Relative to the remote's root; empty for the root.
        path: String,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct VpcConfig {
    pub security_group_ids: Vec<String>,
    pub subnet_ids: Vec<String>,
}

/// What a deployment deploys, for people: the image tag, the S3 object version, or the zip's
/// digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArtifactVersion {
    pub kind: ArtifactKind,
    /// The image's repository name, the S3 key, or the zip's path.
    pub name: String,
    pub version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ArtifactKind {
    ContainerImage,
    S3Object,
    ZipFile,
    GitSource,
}

impl fmt::Display for ArtifactVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawManifest {
    api_version: Option<String>,
    kind: Option<String>,
    spec: Option<RawSpec>,
}

/// PipeCD's `spec.source`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawGitSource {
    git: String,
    #[serde(rename = "ref")]
    git_ref: String,
    path: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct RawSpec {
    name: String,
    role: String,
    image: String,
    s3_bucket: String,
    s3_key: String,
    s3_object_version: String,
    zip_file: String,
    source: Option<RawGitSource>,
    handler: String,
    runtime: String,
    memory: Option<i32>,
    timeout: Option<i32>,
    tags: BTreeMap<String, String>,
    environments: BTreeMap<String, String>,
    ephemeral_storage: Option<RawEphemeralStorage>,
    vpc_config: Option<VpcConfig>,
    layers: Vec<String>,
    architectures: Vec<RawArchitecture>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEphemeralStorage {
    size: i32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArchitecture {
    name: String,
}

impl FunctionManifest {
    /// Parses and validates the manifest `file` (named in errors) from its text.
    pub fn parse(file: &str, text: &str) -> Result<Self, ManifestError> {
        let err = |line, field: &str, message: String| ManifestError {
            file: file.to_owned(),
            line,
            field: field.to_owned(),
            message,
        };
        // Read under gannet's YAML limits (alias bombs, nesting); a limit is the whole file's.
        let raw: RawManifest = gannet_config::yaml::from_str(text).map_err(|e| {
            if e.limit().is_some() {
                return err(None, "", e.to_string());
            }
            err(e.line(), e.path(), message_of(e.message()))
        })?;
        match raw.api_version.as_deref() {
            Some(API_VERSION) => {}
            Some(other) => {
                return Err(err(
                    None,
                    "apiVersion",
                    format!("unsupported apiVersion {other:?}; expected {API_VERSION}"),
                ))
            }
            None => {
                return Err(err(
                    None,
                    "apiVersion",
                    format!("missing; write {API_VERSION}"),
                ))
            }
        }
        match raw.kind.as_deref() {
            Some(KIND) => {}
            Some(other) => {
                return Err(err(
                    None,
                    "kind",
                    format!("{other:?} is not a function manifest; expected {KIND}"),
                ))
            }
            None => return Err(err(None, "kind", format!("missing; write {KIND}"))),
        }
        let spec = raw
            .spec
            .ok_or_else(|| err(None, "spec", "missing".to_owned()))?;
        spec.validate()
            .map_err(|(field, message)| err(None, &field, message))
    }

    /// The version of what this manifest deploys.
    pub fn artifact_version(&self, zip_sha256_hex: Option<&str>) -> ArtifactVersion {
        match &self.code {
            CodeSource::Image { uri } => {
                let (name, version) = image_name_and_tag(uri);
                ArtifactVersion {
                    kind: ArtifactKind::ContainerImage,
                    name,
                    version,
                }
            }
            CodeSource::S3 {
                key,
                object_version,
                ..
            } => ArtifactVersion {
                kind: ArtifactKind::S3Object,
                name: key.clone(),
                version: object_version
                    .clone()
                    .unwrap_or_else(|| "unversioned".to_owned()),
            },
            CodeSource::Git {
                remote,
                git_ref,
                path,
            } => ArtifactVersion {
                kind: ArtifactKind::GitSource,
                name: if path.is_empty() {
                    remote.clone()
                } else {
                    format!("{remote}//{path}")
                },
                version: match zip_sha256_hex {
                    Some(hex) => format!("{git_ref} sha256:{}", &hex[..hex.len().min(12)]),
                    None => git_ref.clone(),
                },
            },
            CodeSource::ZipFile { path } => ArtifactVersion {
                kind: ArtifactKind::ZipFile,
                name: path.clone(),
                version: zip_sha256_hex.map_or_else(
                    || "unknown".to_owned(),
                    |hex| format!("sha256:{}", &hex[..hex.len().min(12)]),
                ),
            },
        }
    }
}

/// `repo/name:tag` → (`name`, `tag`); a digest stands for the tag, `latest` when neither.
fn image_name_and_tag(uri: &str) -> (String, String) {
    let (path, digest) = match uri.split_once('@') {
        Some((p, d)) => (p, Some(d)),
        None => (uri, None),
    };
    let last = path.rsplit('/').next().unwrap_or(path);
    let (name, tag) = match last.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (last, None),
    };
    let version = digest.or(tag).unwrap_or("latest");
    (name.to_owned(), version.to_owned())
}

/// A YAML error's message; an unknown field's without serde's list of the known ones (the
/// error's path names the field itself).
fn message_of(message: &str) -> String {
    let message = gannet_domain::report::bound_quotes(message);
    match message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    {
        Some((name, _)) => format!("unknown field `{name}`"),
        None => message,
    }
}

impl RawSpec {
    fn validate(self) -> Result<FunctionManifest, (String, String)> {
        let fail = |field: &str, message: &str| Err((field.to_owned(), message.to_owned()));
        if self.name.trim().is_empty() {
            return fail("spec.name", "missing: the function's name is required");
        }
        if self.role.trim().is_empty() {
            return fail(
                "spec.role",
                "missing: the function's execution role ARN is required",
            );
        }
        let code = self.code_source()?;
        let is_image = matches!(code, CodeSource::Image { .. });
        let text = |s: String| (!s.trim().is_empty()).then_some(s);
        let handler = text(self.handler);
        let runtime = text(self.runtime);
        if !is_image {
            if handler.is_none() {
                return fail(
                    "spec.handler",
                    "missing: required unless the code is an image",
                );
            }
            if runtime.is_none() {
                return fail(
                    "spec.runtime",
                    "missing: required unless the code is an image",
                );
            }
        }
        let memory = match self.memory {
            None => return fail("spec.memory", "missing: the memory size in MB is required"),
            Some(m) if !(128..=10240).contains(&m) => {
                return Err((
                    "spec.memory".into(),
                    format!("{m} is out of range (128 to 10240 MB)"),
                ))
            }
            Some(m) => m,
        };
        let timeout = match self.timeout {
            None => {
                return fail(
                    "spec.timeout",
                    "missing: the timeout in seconds is required",
                )
            }
            Some(t) if !(1..=900).contains(&t) => {
                return Err((
                    "spec.timeout".into(),
                    format!("{t} is out of range (1 to 900 seconds)"),
                ))
            }
            Some(t) => t,
        };
        let ephemeral_storage = match self.ephemeral_storage {
            Some(e) if !(512..=10240).contains(&e.size) => {
                return Err((
                    "spec.ephemeralStorage.size".into(),
                    format!("{} is out of range (512 to 10240 MB)", e.size),
                ))
            }
            other => other.map(|e| e.size),
        };
        let architecture = match self.architectures.as_slice() {
            [] => None,
            [one] if one.name == "x86_64" || one.name == "arm64" => Some(one.name.clone()),
            [one] => {
                return Err((
                    "spec.architectures[0].name".into(),
                    format!("{:?} is not an architecture (x86_64 or arm64)", one.name),
                ))
            }
            _ => return fail("spec.architectures", "a function has one architecture"),
        };
        if let Some(i) = self.layers.iter().position(|l| l.trim().is_empty()) {
            return Err((format!("spec.layers[{i}]"), "empty layer ARN".into()));
        }
        Ok(FunctionManifest {
            name: self.name,
            role: self.role,
            code,
            handler,
            runtime,
            memory,
            timeout,
            tags: self.tags,
            environments: self.environments,
            ephemeral_storage,
            vpc_config: self.vpc_config,
            layers: self.layers,
            architecture,
        })
    }

    /// Exactly one code source, or the field at fault.
    fn code_source(&self) -> Result<CodeSource, (String, String)> {
        let set = |v: &str| !v.trim().is_empty();
        let s3_field = if set(&self.s3_bucket) {
            "spec.s3Bucket"
        } else if set(&self.s3_key) {
            "spec.s3Key"
        } else {
            "spec.s3ObjectVersion"
        };
        let s3 = set(&self.s3_bucket) || set(&self.s3_key) || set(&self.s3_object_version);
        let given: Vec<&str> = [
            ("spec.image", set(&self.image)),
            (s3_field, s3),
            ("spec.zipFile", set(&self.zip_file)),
            ("spec.source", self.source.is_some()),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(field, _)| field)
        .collect();
        let missing = |field: &str, what: &str| Err((field.to_owned(), format!("missing: {what}")));
        match given.as_slice() {
            [] => Err((
                "spec".into(),
                "no code source: set one of spec.zipFile, spec.s3Bucket with spec.s3Key, \
                 spec.image or spec.source"
                    .into(),
            )),
            [first, second, ..] => Err((
                (*second).to_owned(),
                format!("conflicts with {first}: give exactly one code source"),
            )),
            ["spec.source"] => git_source(self.source.as_ref().unwrap_or(&RawGitSource::default())),
            ["spec.image"] => Ok(CodeSource::Image {
                uri: self.image.trim().to_owned(),
            }),
            ["spec.zipFile"] => {
                let path = self.zip_file.trim();
                if !path.ends_with(".zip") {
                    return Err((
                        "spec.zipFile".into(),
                        format!("{path:?} is not a .zip file"),
                    ));
                }
                if path.starts_with('/') {
                    return Err((
                        "spec.zipFile".into(),
                        format!("{path:?} must be relative to the app's directory"),
                    ));
                }
                Ok(CodeSource::ZipFile {
                    path: path.to_owned(),
                })
            }
            _ if !set(&self.s3_bucket) => missing(
                "spec.s3Bucket",
                "the bucket that holds spec.s3Key is required",
            ),
            _ if !set(&self.s3_key) => missing("spec.s3Key", "the code object's key is required"),
            _ => Ok(CodeSource::S3 {
                bucket: self.s3_bucket.trim().to_owned(),
                key: self.s3_key.trim().to_owned(),
                object_version: set(&self.s3_object_version)
                    .then(|| self.s3_object_version.trim().to_owned()),
            }),
        }
    }
}

/// PipeCD's `spec.source`, checked for its shape (which remotes a job may fetch from is the
/// deploy target's to say, when a step runs).
fn git_source(raw: &RawGitSource) -> Result<CodeSource, (String, String)> {
    let remote = raw.git.trim();
    if remote.is_empty() || remote.starts_with('-') || remote.contains(char::is_whitespace) {
        return Err((
            "spec.source.git".into(),
            "missing or not a git remote (such as git@github.com:org/repo.git or https://...)"
                .into(),
        ));
    }
    let git_ref = raw.git_ref.trim();
    let ref_ok = !git_ref.is_empty()
        && !git_ref.starts_with('-')
        && !git_ref.contains(|c: char| c.is_whitespace() || c.is_control() || c == ':');
    if !ref_ok {
        return Err((
            "spec.source.ref".into(),
            "missing or not a branch, tag or commit".into(),
        ));
    }
    let path = raw
        .path
        .trim()
        .trim_start_matches("./")
        .trim_end_matches('/');
    let climbs = path.split('/').any(|p| p == "..");
    if path.starts_with('/') || climbs || path.contains(|c: char| c.is_control() || c == ':') {
        return Err((
            "spec.source.path".into(),
            format!("{path:?} must be a directory inside the remote, relative to its root"),
        ));
    }
    Ok(CodeSource::Git {
        remote: remote.to_owned(),
        git_ref: git_ref.to_owned(),
        path: if path == "." {
            String::new()
        } else {
            path.to_owned()
        },
    })
}

#[cfg(test)]
mod tests;
