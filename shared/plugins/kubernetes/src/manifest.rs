//! The desired state: the app's Kubernetes manifests read from Git, plain YAML files or
//! directories (every `*.yaml` and `*.yml` in the app's directory when the config names none).
//! A repository is untrusted: files are measured before they are parsed (YAML bombs), must stay
//! inside the app's directory, and are read through gannet's checked reader
//! ([`gannet_sdk::tree`]): a symlink is followed only while it stays inside the app's directory.

use std::fmt;
use std::path::{Component, Path};

use gannet_config::{is_app_config_path, AppConfig, AppKind};

use crate::spec::KubernetesSpec;
use gannet_sdk::plugin::AppFileError;
use gannet_sdk::tree::AppFiles;
use serde_json::Value;

/// One object of a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The file, relative to the app's directory.
    pub file: String,
    /// The line its document starts at (1-based).
    pub line: usize,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `metadata.namespace` as written; the app's `spec.input.namespace` wins over it.
    pub namespace: Option<String>,
    pub body: Value,
}

/// Where an object lives: `Deployment/default/web` (`Namespace/prod` when cluster-scoped).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl ObjectRef {
    /// PipeCD's resource key: `apps/v1:Deployment:default:web`.
    pub fn pipecd_key(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.api_version, self.kind, self.namespace, self.name
        )
    }

    /// The object `value` (as the API server returns it) names.
    pub fn of(value: &Value) -> Self {
        let text = |p: &str| {
            value
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Self {
            api_version: text("/apiVersion"),
            kind: text("/kind"),
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
        }
    }

    /// The same object under another name (a variant's copy).
    pub fn renamed(&self, name: String) -> Self {
        Self {
            name,
            ..self.clone()
        }
    }
}

/// The config field that names the manifests.
const NAMED_BY: &str = "spec.input.manifests";

fn error(file: &str, line: Option<usize>, field: &str, message: impl Into<String>) -> AppFileError {
    AppFileError {
        named_by: NAMED_BY.into(),
        file: file.into(),
        line,
        field: field.into(),
        message: message.into(),
        unsupported: false,
    }
}

/// The app's Kubernetes spec: a `KubernetesApp`'s, or `spec.plugins.kubernetes` of an
/// `Application`.
pub fn spec_of(app: &AppConfig) -> Result<KubernetesSpec, AppFileError> {
    let (spec, at) = if app.kind != AppKind::Application {
        (
            app.platform_spec::<KubernetesSpec>()?,
            "spec.input.multiTargets",
        )
    } else {
        match app.plugin_config("kubernetes") {
            None => return Ok(KubernetesSpec::default()),
            Some(v) => (
                serde_json::from_value(v.clone()).map_err(|e| {
                    AppFileError::in_config("spec.plugins.kubernetes", e.to_string())
                })?,
                "spec.plugins.kubernetes.input.multiTargets",
            ),
        }
    };
    if !spec.input.multi_targets.is_empty() {
        return Err(AppFileError::in_config(
            at,
            "deploying to several clusters is the kubernetes_multicluster plugin's: put the app's Kubernetes fields under spec.plugins.kubernetes_multicluster",
        ));
    }
    Ok(spec)
}

/// What gannet does not build: charts that are not in the repository, kustomize options
/// that would run code ([`crate::render::check`]), PipeCD's SMI routing and resource routes.
pub fn check_supported(spec: &KubernetesSpec) -> Result<(), AppFileError> {
    crate::render::check(spec)?;
    if spec
        .traffic_routing
        .as_ref()
        .is_some_and(|t| t.method == crate::spec::TrafficRoutingMethod::Smi)
    {
        return Err(AppFileError::unsupported_in_config(
            "spec.trafficRouting.method",
            "traffic routing by SMI is not supported: use podselector or istio",
        ));
    }
    if !spec.resource_routes.is_empty() {
        return Err(AppFileError::unsupported_in_config(
            "spec.resourceRoutes",
            "resource routes (objects sent to other deploy targets) are not supported yet",
        ));
    }
    Ok(())
}

/// The app's workloads among `manifests`: those `spec.workloads` names (by kind, `Deployment`
/// when it says none, and by name when it gives one), or every Deployment.
pub fn workloads<'m>(spec: &KubernetesSpec, manifests: &'m [Manifest]) -> Vec<&'m Manifest> {
    if spec.workloads.is_empty() {
        return manifests
            .iter()
            .filter(|m| m.kind == "Deployment")
            .collect();
    }
    manifests
        .iter()
        .filter(|m| {
            spec.workloads.iter().any(|w| {
                let kind = if w.kind.is_empty() {
                    "Deployment"
                } else {
                    w.kind.as_str()
                };
                m.kind == kind && (w.name.is_empty() || m.name == w.name)
            })
        })
        .collect()
}

/// True for a file name gannet reads as a manifest.
fn is_manifest_file(name: &str) -> bool {
    (name.ends_with(".yaml") || name.ends_with(".yml"))
        && !is_app_config_path(name)
        && !is_kustomization(name)
}

/// The file names that make a directory a kustomization.
pub(crate) const KUSTOMIZATIONS: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

fn is_kustomization(name: &str) -> bool {
    KUSTOMIZATIONS.contains(&name)
}

/// Every object the app's manifests hold, in file order; none is an error (nothing to deploy).
pub fn load(files: &AppFiles, spec: &KubernetesSpec) -> Result<Vec<Manifest>, AppFileError> {
    let out = read_all(files, spec)?;
    if out.is_empty() {
        return Err(error("", None, "", "the app has no Kubernetes manifests: add YAML files to its directory, or list them in spec.input.manifests"));
    }
    Ok(out)
}

/// Every object the app's manifests hold, each file read and checked as a deployment reads it,
/// but none is not an error here: planning and `config check` check what there is, and the
/// stage says there is nothing to deploy.
/// A chart or a kustomization is rendered first ([`crate::render`]), and what it prints is read
/// as one file.
pub fn read_all(app: &AppFiles, spec: &KubernetesSpec) -> Result<Vec<Manifest>, AppFileError> {
    check_supported(spec)?;
    if let Some(rendered) = crate::render::render(app, spec)? {
        let out = parse(&rendered.source, &rendered.text)?;
        check_unique(&out)?;
        return Ok(out);
    }
    let app_dir = &app.root().join(app.in_repo(".").unwrap_or_default());
    let listed = &spec.input.manifests;
    let mut files = Vec::new();
    if listed.is_empty() {
        files = yaml_files_in(app_dir, "")?;
    } else {
        for name in listed {
            let rel = name.trim_start_matches("./");
            inside(rel).map_err(|m| error(rel, None, "", m))?;
            // Through gannet's checked reader: links are followed only while they stay
            // inside the app's directory, however many there are.
            let found = gannet_sdk::tree::resolve(app_dir, rel).map_err(|e| unread(rel, e))?;
            if found.is_dir {
                files.extend(yaml_files_in(&app_dir.join(&found.path), rel)?);
            } else {
                files.push(rel.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    for file in files {
        let text = gannet_sdk::tree::read(app_dir, &file, gannet_config::bounded::MAX_BYTES as u64)
            .map_err(|e| unread(&file, e))?;
        out.extend(parse(&file, &text)?);
    }
    check_unique(&out)?;
    Ok(out)
}

/// Why the manifest file `rel` was not read (never what it holds).
fn unread(rel: &str, e: gannet_sdk::tree::TreeError) -> AppFileError {
    match e {
        gannet_sdk::tree::TreeError::NotFound => {
            error(rel, None, "", "does not exist in the app directory")
        }
        other => error(rel, None, "", other.to_string()),
    }
}

/// A path that stays inside the app's directory.
fn inside(rel: &str) -> Result<(), String> {
    let path = Path::new(rel);
    if rel.is_empty()
        || path.is_absolute()
        || path.components().any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!(
            "{rel:?}: a manifest is a path inside the app's directory"
        ));
    }
    Ok(())
}

/// The manifest files directly in `dir` (not in its subdirectories), sorted; `rel` is `dir`
/// relative to the app's directory. Symlinks are skipped.
fn yaml_files_in(dir: &Path, rel: &str) -> Result<Vec<String>, AppFileError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| error(rel, None, "", format!("cannot be listed: {e}")))?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if regular && is_manifest_file(&name) {
            files.push(if rel.is_empty() {
                name
            } else {
                format!("{}/{name}", rel.trim_end_matches('/'))
            });
        }
    }
    files.sort();
    Ok(files)
}

/// The objects of one manifest file (documents separated by `---`; empty ones skipped).
pub fn parse(file: &str, text: &str) -> Result<Vec<Manifest>, AppFileError> {
    // Read under gannet's YAML limits (alias bombs, nesting), the whole stream at once.
    let documents = gannet_config::yaml::documents(text).map_err(|e| {
        let line = if e.limit().is_some() {
            Some(1)
        } else {
            e.line()
        };
        error(
            file,
            line,
            "",
            gannet_domain::report::bound_quotes(e.message()),
        )
    })?;
    let mut out = Vec::new();
    for (line, value) in documents {
        let Value::Object(map) = &value else {
            return Err(error(
                file,
                Some(line),
                "",
                "a manifest document is a mapping with apiVersion, kind and metadata",
            ));
        };
        let text_field = |name: &str| -> Result<String, AppFileError> {
            match map.get(name) {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                Some(_) => Err(error(file, Some(line), name, "must be a non-empty string")),
                None => Err(error(file, Some(line), name, "is missing")),
            }
        };
        let api_version = text_field("apiVersion")?;
        let kind = text_field("kind")?;
        if kind.ends_with("List") {
            return Err(error(
                file,
                Some(line),
                "kind",
                format!("{kind}: write each object as a document of its own (separated by ---)"),
            ));
        }
        let metadata = map.get("metadata").and_then(Value::as_object);
        let name = match metadata.and_then(|m| m.get("name")) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                let generated = metadata.is_some_and(|m| m.contains_key("generateName"));
                let why = if generated {
                    "is required: generateName makes a new object on every apply, which gannet cannot track"
                } else {
                    "is missing"
                };
                return Err(error(file, Some(line), "metadata.name", why));
            }
        };
        let namespace = metadata
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        out.push(Manifest {
            file: file.to_owned(),
            line,
            api_version,
            kind,
            name,
            namespace,
            body: value,
        });
    }
    Ok(out)
}

/// The objects a render job printed, as one file named `source`: the same YAML limits and
/// checks as a manifest file, and no object twice.
pub(crate) fn parse_rendered(source: &str, text: &str) -> Result<Vec<Manifest>, AppFileError> {
    let out = parse(source, text)?;
    check_unique(&out)?;
    Ok(out)
}

/// Two documents must not describe the same object.
fn check_unique(manifests: &[Manifest]) -> Result<(), AppFileError> {
    for (i, m) in manifests.iter().enumerate() {
        let same = |o: &&Manifest| {
            o.api_version == m.api_version
                && o.kind == m.kind
                && o.name == m.name
                && o.namespace == m.namespace
        };
        if let Some(first) = manifests[..i].iter().find(same) {
            return Err(error(
                &m.file,
                Some(m.line),
                "metadata.name",
                format!(
                    "{} {} is also defined at {}:{}",
                    m.kind, m.name, first.file, first.line
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(manifests: &[&str]) -> KubernetesSpec {
        let mut spec = KubernetesSpec::default();
        spec.input.manifests = manifests.iter().map(|s| (*s).to_owned()).collect();
        spec
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n";

    #[test]
    fn yaml_reads_as_kubectl_reads_it() {
        // Merge keys are merged (serde_yaml sent `<<` to the API server as a field); `yes`
        // stays a string and a ConfigMap's number stays a number, for the API server to judge.
        let text = "# leading comment\n---\n# the map\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  labels: &labels {app: web, tier: front}\n  annotations:\n    <<: *labels\n    note: yes\ndata: {port: 8080, enabled: 'true'}\n";
        let parsed = parse("cm.yaml", text).unwrap();
        assert_eq!(parsed.len(), 1);
        // The line its content starts at (the old `---` splitter said 3, the line after it).
        assert_eq!(parsed[0].line, 4);
        assert_eq!(
            parsed[0].body["metadata"]["annotations"],
            serde_json::json!({"app": "web", "tier": "front", "note": "yes"})
        );
        assert_eq!(
            parsed[0].body["data"],
            serde_json::json!({"port": 8080, "enabled": "true"})
        );
        // A key written twice is refused at its second line (yaml.v3 refuses it too).
        let err = parse(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nkind: Secret\n",
        )
        .unwrap_err();
        assert_eq!(err.line, Some(4), "{err:?}");
        assert!(
            err.message.starts_with("duplicate mapping key: kind"),
            "{err:?}"
        );
        // A bomb is refused for the limit, at line 1 as before.
        let err = parse("cm.yaml", &gannet_config::fixture::yaml_bomb(9)).unwrap_err();
        assert_eq!(
            (err.line, err.message.as_str()),
            (
                Some(1),
                "too many aliases: its anchors expand to more than 10000 nodes"
            )
        );
    }

    #[test]
    fn every_yaml_file_of_the_app_is_read_document_by_document_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{DEPLOYMENT}---\n# a comment only\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n");
        std::fs::write(dir.path().join("app.yaml"), &text).unwrap();
        std::fs::write(dir.path().join("app.pipecd.yaml"), "kind: KubernetesApp\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not yaml").unwrap();
        let loaded = load(&AppFiles::at(dir.path(), ""), &spec(&[])).unwrap();
        let seen: Vec<(&str, usize, Option<&str>)> = loaded
            .iter()
            .map(|m| (m.kind.as_str(), m.line, m.namespace.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [("Deployment", 1, None), ("Service", 8, Some("shop"))]
        );
    }

    #[test]
    fn bad_manifests_are_refused_naming_the_file_line_and_field() {
        let cases: Vec<(&str, String, &str, &str)> = vec![
            (
                "no kind",
                "apiVersion: v1\nmetadata:\n  name: x\n".into(),
                "kind",
                "is missing",
            ),
            (
                "no name",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n".into(),
                "metadata.name",
                "is missing",
            ),
            (
                "generateName",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: x-\n".into(),
                "metadata.name",
                "generateName",
            ),
            (
                "a list",
                "apiVersion: v1\nkind: List\nitems: []\n".into(),
                "kind",
                "document of its own",
            ),
            ("not a map", "- a\n- b\n".into(), "", "a mapping"),
            (
                "twice",
                format!("{DEPLOYMENT}---\n{DEPLOYMENT}"),
                "metadata.name",
                "also defined at m.yaml:1",
            ),
            ("a YAML bomb", gannet_config::fixture::yaml_bomb(9), "", ""),
            ("bad syntax", "apiVersion: v1\nkind: [\n".into(), "", ""),
            (
                "huge",
                format!("{DEPLOYMENT}data: \"{}\"\n", "x".repeat(20 << 20)),
                "",
                "",
            ),
        ];
        for (what, text, field, says) in cases {
            let e = parse("m.yaml", &text)
                .and_then(|m| check_unique(&m))
                .unwrap_err();
            assert_eq!(e.file, "m.yaml", "{what}");
            assert!(e.line.is_some(), "{what}: {e}");
            assert_eq!(e.field, field, "{what}: {e}");
            assert!(e.message.contains(says), "{what}: {e}");
        }
    }

    #[test]
    fn a_manifest_outside_the_app_or_behind_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.yaml"), DEPLOYMENT).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.yaml"),
            dir.path().join("link.yaml"),
        )
        .unwrap();
        // Each link looks inside; together they reach the directory above the app's.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("..", dir.path().join("sub/up")).unwrap();
        std::os::unix::fs::symlink("up/..", dir.path().join("sub/out")).unwrap();
        for (listed, says) in [
            ("../x.yaml", "inside the app's directory"),
            ("/etc/passwd", "inside the app's directory"),
            ("link.yaml", "leads outside the repository"),
            ("sub/out/secret.yaml", "leads outside the repository"),
            ("missing.yaml", "does not exist"),
        ] {
            let e = load(&AppFiles::at(dir.path(), ""), &spec(&[listed])).unwrap_err();
            assert!(e.message.contains(says), "{listed}: {e}");
        }
        // Not listed, a symlink is skipped; nothing else is there.
        let e = load(&AppFiles::at(dir.path(), ""), &spec(&[])).unwrap_err();
        assert!(e.message.contains("no Kubernetes manifests"), "{e}");
    }

    #[test]
    fn value_files_from_urls_and_options_that_run_code_are_named_as_unsupported() {
        // A chart from a repository is rendered by a job ([`crate::fetch`]); a value file
        // fetched from a URL is not supported.
        let mut remote = spec(&[]);
        remote.input.helm_chart = Some(crate::spec::HelmChart {
            repository: "internal".into(),
            name: "web".into(),
            version: "1.0.0".into(),
            ..crate::spec::HelmChart::default()
        });
        check_supported(&remote).unwrap();
        remote.input.helm_options = Some(crate::spec::HelmOptions {
            value_files: vec!["https://example.com/values.yaml".into()],
            ..crate::spec::HelmOptions::default()
        });
        let e = check_supported(&remote).unwrap_err();
        assert!(
            e.unsupported && e.named_by == "spec.input.helmOptions.valueFiles[0]",
            "{e:?}"
        );
        let mut exec = spec(&[]);
        exec.input
            .kustomize_options
            .insert("enable-exec".into(), String::new());
        let e = check_supported(&exec).unwrap_err();
        assert!(
            e.unsupported && e.named_by == "spec.input.kustomizeOptions.enable-exec",
            "{e:?}"
        );
        let mut layout = spec(&[]);
        layout
            .input
            .kustomize_options
            .insert("reorder".into(), "legacy".into());
        check_supported(&layout).unwrap();
    }
}
