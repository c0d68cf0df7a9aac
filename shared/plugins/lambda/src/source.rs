//! What a step reads from the app's directory at a commit: the app config, the function
//! manifest it names, and the code (a zip file's bytes), turned into the [`Desired`] function
//! with gannet's managed-by, app and commit tags.

use std::collections::BTreeMap;
use std::path::Path;

use gannet_config::AppConfig;
use gannet_domain::{AppId, CommitSha};
use gannet_sdk::plugin::{AppFileError, StageResult, StepContext, StepError, StepOutcome};
use gannet_sdk::tree::LoadError;
use gannet_sdk::tree::{AppFiles, TreeError};

use crate::function::{Code, Desired};
use crate::gitzip::{self, Fetched, GitSettings, Tree};
use crate::manifest::{CodeSource, FunctionManifest, ManifestError};
use crate::spec::LambdaInput;

/// Tag on every function gannet manages.
pub const TAG_MANAGED_BY: &str = "gannet.dev/managed-by";
/// Tag naming the app (`repo:path/to/app.pipecd.yaml`) that deploys the function.
pub const TAG_APP: &str = "gannet.dev/app";
/// Tag naming the commit whose manifest the function's `$LATEST` was last set from.
pub const TAG_COMMIT: &str = "gannet.dev/commit";

/// The largest zip Lambda takes in the request itself.
const MAX_ZIP_BYTES: u64 = 50 * 1024 * 1024;

/// Why a step cannot read what it deploys.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Config(#[from] LoadError),
    #[error("{field}: the function manifest {file} does not exist or cannot be read")]
    ManifestMissing { field: String, file: String },
    #[error("invalid function manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error("{file}: spec.zipFile: {reason}")]
    Zip { file: String, reason: String },
    #[error("spec.source: the code was not fetched")]
    NotFetched,
}

/// The app config file in the app's directory.
pub(crate) fn load_app_config(app_dir: &Path, app: &AppId) -> Result<AppConfig, SourceError> {
    Ok(gannet_sdk::tree::load_app_config(app_dir, app)?)
}

/// The manifest file the app names, and the config field that names it.
pub(crate) fn manifest_file(app: &AppConfig) -> (String, String) {
    let (named, field) = app.input_field(crate::NAME, "functionManifestFile");
    let file = named.map_or_else(
        || LambdaInput::default().function_manifest_file,
        str::to_owned,
    );
    (file, field)
}

/// Reads and validates the app's function manifest from the app's directory `app_dir`, which is
/// `app_rel` in the repository, through gannet's checked reader ([`gannet_sdk::tree`]).
pub(crate) fn load_manifest(
    app_dir: &Path,
    app_rel: &str,
    app: &AppConfig,
) -> Result<FunctionManifest, SourceError> {
    let files = AppFiles::at(app_dir, app_rel);
    check_function_manifest(app, &|rel| files.read(rel).ok())
}

/// Validates the function manifest `app` names, as planning can: `read` gives a file's text by
/// its path relative to the app's directory (`None` when it does not exist). Every error names
/// the field at fault.
pub fn check_function_manifest(
    app: &AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<FunctionManifest, SourceError> {
    let (file, field) = manifest_file(app);
    let Some(text) = read(&file) else {
        return Err(SourceError::ManifestMissing { field, file });
    };
    Ok(FunctionManifest::parse(&file, &text)?)
}

/// [`check_function_manifest`] as the planner reports it: the file, and the field at fault in
/// it or the config field that names it.
pub(crate) fn check_app(
    app: &AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<(), AppFileError> {
    let (file, named_by) = manifest_file(app);
    let error = |line, field: String, message: String| AppFileError {
        named_by: named_by.clone(),
        file: file.clone(),
        line,
        field,
        message,
        unsupported: false,
    };
    match check_function_manifest(app, read) {
        Ok(_) => Ok(()),
        Err(SourceError::Manifest(e)) => Err(AppFileError {
            file: e.file.clone(),
            unsupported: e.is_unsupported(),
            ..error(e.line, e.field, e.message)
        }),
        Err(SourceError::ManifestMissing { .. }) => Err(error(
            None,
            String::new(),
            "does not exist in the app directory".to_owned(),
        )),
        Err(other) => Err(error(None, String::new(), other.to_string())),
    }
}

/// The function to deploy from the app's directory: manifest, code and tags.
pub(crate) struct Deployable {
    pub desired: Desired,
    pub manifest_file: String,
}

/// Everything [`Deployable`] needs to know about where it is deployed from.
pub(crate) struct Origin<'a> {
    pub app_dir: &'a Path,
    pub app_id: &'a AppId,
    pub commit: &'a CommitSha,
}

/// What a step deploys from `origin`: the deployable, or, while a git source's code is
/// fetched or when it cannot be, the outcome the step ends with. `at` goes before every
/// reason (a rollback says which commit it read).
pub(crate) async fn for_step(
    ctx: &StepContext<'_>,
    git: &GitSettings,
    tree: Tree,
    origin: &Origin<'_>,
    at: &str,
) -> Result<Result<Deployable, StepOutcome>, StepError> {
    let permanent = |e: SourceError| StepError::permanent(format!("{at}{e}"));
    let app = load_app_config(origin.app_dir, origin.app_id).map_err(permanent)?;
    let manifest = load_manifest(origin.app_dir, origin.app_id.dir(), &app).map_err(permanent)?;
    let fetched = match gitzip::fetch(
        ctx,
        git,
        tree,
        origin.app_dir,
        origin.commit,
        &manifest.code,
    )
    .await?
    {
        Fetched::NotGit => None,
        Fetched::Ready(code) => Some(code),
        Fetched::Running(after) => return Ok(Err(StepOutcome::Continue { after })),
        Fetched::Failed(reason) => {
            let reason = format!("{at}{reason}");
            return Ok(Err(StepOutcome::Done(StageResult::Failure { reason })));
        }
    };
    deployable(&app, manifest, origin, fetched)
        .map(Ok)
        .map_err(permanent)
}

/// The function `manifest` (of `app`, read from `origin`) describes, with its code: read
/// from the repository, or `fetched` for a git source.
fn deployable(
    app: &AppConfig,
    manifest: FunctionManifest,
    origin: &Origin<'_>,
    fetched: Option<Code>,
) -> Result<Deployable, SourceError> {
    let (manifest_file, _) = manifest_file(app);
    let code = match &manifest.code {
        CodeSource::Image { uri } => Code::Image { uri: uri.clone() },
        CodeSource::S3 {
            bucket,
            key,
            object_version,
        } => Code::S3 {
            bucket: bucket.clone(),
            key: key.clone(),
            object_version: object_version.clone(),
        },
        CodeSource::ZipFile { path } => {
            read_zip(origin.app_dir, origin.app_id.dir(), path, &manifest_file)?
        }
        CodeSource::Git { .. } => fetched.ok_or(SourceError::NotFetched)?,
    };
    let mut tags = manifest.tags.clone();
    tags.extend(managed_tags(origin.app_id, origin.commit));
    Ok(Deployable {
        desired: Desired {
            manifest,
            code,
            tags,
        },
        manifest_file,
    })
}

/// The tags gannet puts on every function it manages.
pub fn managed_tags(app: &AppId, commit: &CommitSha) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAG_MANAGED_BY.to_owned(), "gannet".to_owned()),
        (TAG_APP.to_owned(), app.to_string()),
        (TAG_COMMIT.to_owned(), commit.to_string()),
    ])
}

/// Reads the zip at `rel` (relative to the app's directory `app_dir`, which is `app_rel` in
/// the repository); it must stay inside the repository.
pub(crate) fn read_zip(
    app_dir: &Path,
    app_rel: &str,
    rel: &str,
    file: &str,
) -> Result<Code, SourceError> {
    let err = |reason: String| SourceError::Zip {
        file: file.to_owned(),
        reason,
    };
    // Through gannet's checked reader: no link out of the repository, measured before read.
    let bytes = AppFiles::at(app_dir, app_rel)
        .read_bytes(rel, MAX_ZIP_BYTES)
        .map_err(|e| match e {
            TreeError::OutsidePath => err(format!("{rel:?} leads out of the repository")),
            TreeError::TooLarge { size, .. } => err(format!(
                "{rel} is {} MB; Lambda takes at most 50 MB in the request, so upload it to S3 and use spec.s3Bucket and spec.s3Key",
                size / (1024 * 1024)
            )),
            other => err(format!("cannot read {rel}: it {other}")),
        })?;
    if !(bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")) {
        return Err(err(format!("{rel} is not a zip archive")));
    }
    Ok(Code::zip(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_files_are_read_and_checked() {
        let repo = tempfile::tempdir().unwrap();
        let app_dir = repo.path().join("apps/web");
        std::fs::create_dir_all(&app_dir).unwrap();
        std::fs::write(app_dir.join("ok.zip"), b"PK\x03\x04rest").unwrap();
        std::fs::write(app_dir.join("text.zip"), b"hello").unwrap();
        std::fs::write(repo.path().join("shared.zip"), b"PK\x05\x06").unwrap();
        // Links that each stay inside, which together reach the repository's parent.
        std::os::unix::fs::symlink("../..", app_dir.join("top")).unwrap();
        std::os::unix::fs::symlink("top/..", app_dir.join("above")).unwrap();
        let read = |rel: &str| read_zip(&app_dir, "apps/web", rel, "function.yaml");
        match read("ok.zip").unwrap() {
            Code::Zip { bytes, sha256, .. } => {
                assert_eq!(bytes, b"PK\x03\x04rest");
                assert_eq!(sha256.len(), 44);
            }
            other => panic!("{other:?}"),
        }
        assert!(read("../../shared.zip").is_ok());
        for (rel, expected) in [
            ("text.zip", "is not a zip archive"),
            ("missing.zip", "cannot read missing.zip"),
            ("../../../x.zip", "leads out of the repository"),
            ("above/outside.zip", "leads outside the repository"),
        ] {
            let err = read(rel).unwrap_err().to_string();
            assert!(err.contains("function.yaml: spec.zipFile: "), "{err}");
            assert!(err.contains(expected), "{rel}: {err}");
        }
    }
}
