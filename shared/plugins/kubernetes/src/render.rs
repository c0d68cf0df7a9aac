//! Helm charts and kustomizations rendered into the app's manifests, as PipeCD renders them:
//! `helm template` of `spec.input.helmChart` with `spec.input.helmOptions`, or
//! `kustomize build` of the app's directory when it holds a `kustomization.yaml`. What they
//! print goes through the same YAML limits and checks as plain manifest files.
//!
//! The binaries are the machine's (`helm` and `kustomize` on `PATH`, or the files
//! `GANNET_HELM` and `GANNET_KUSTOMIZE` name); PipeCD's `helmVersion` and `kustomizeVersion` are
//! accepted and logged, not used to pick one. They run in gannet's process tree with a clean
//! environment (no credentials, no kubeconfig, a `HOME` of their own), a time limit and an
//! output limit, and only on what stays inside the repository:
//!
//! - a local chart (`helmChart.path`, relative to the app's directory, inside the repository);
//!   every symbolic link in the chart must stay inside the repository (Helm follows links
//!   when it loads a chart, so one could otherwise put a host file into a manifest); value
//!   files and `setFiles` are read the same checked way; a chart from a repository or a git
//!   remote is fetched and rendered by a job instead ([`crate::fetch`]), never here;
//! - a kustomization whose resources, bases and components are local paths inside the
//!   repository, each kustomization on the way checked for links that leave it; one with a
//!   remote base is built by a job instead; `kustomizeOptions` may only hold options that read
//!   nothing more (PipeCD passes them as flags: `--enable-exec`, `--enable-helm` or
//!   `--load-restrictor LoadRestrictionsNone` would run code or read outside the directory).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gannet_sdk::plugin::AppFileError;
use gannet_sdk::tree::{self, AppFiles};
use serde_json::Value;

use crate::manifest::KUSTOMIZATIONS;
use crate::spec::{HelmChart, KubernetesSpec};

/// How long a render may take.
const TIME_LIMIT: Duration = Duration::from_secs(60);
/// The most a render may print (the manifests then go through the YAML limits too).
const OUTPUT_LIMIT: usize = 32 * 1024 * 1024;
/// The most entries a chart or kustomization directory may hold for its links to be checked.
const MAX_ENTRIES: usize = 20_000;
/// `kustomizeOptions` that change only how the output is laid out.
const SAFE_KUSTOMIZE_OPTIONS: [&str; 2] = ["reorder", "enable-managedby-label"];

/// What a renderer printed, and how to name it in errors (`helm template (chart ...)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub source: String,
    pub text: String,
}

/// The error for a field of the app config.
fn in_config(field: &str, message: impl Into<String>) -> AppFileError {
    AppFileError::in_config(field, message.into())
}

fn unsupported(field: &str, message: &str) -> AppFileError {
    AppFileError::unsupported_in_config(field, message)
}

/// What the config asks that gannet does not render, checked without reading any file: a
/// chart that is not local, a kustomize option that is not a layout option.
pub fn check(spec: &KubernetesSpec) -> Result<(), AppFileError> {
    let input = &spec.input;
    if let Some(chart) = &input.helm_chart {
        let remote_values = input
            .helm_options
            .iter()
            .flat_map(|o| &o.value_files)
            .position(|f| f.contains("://"));
        if let Some(i) = remote_values {
            return Err(unsupported(
                &format!("spec.input.helmOptions.valueFiles[{i}]"),
                "a value file fetched from a URL is not supported yet: put it in this repository",
            ));
        }
        let remote =
            !chart.git_remote.is_empty() || !chart.repository.is_empty() || !chart.name.is_empty();
        if chart.path.is_empty() && !remote {
            return Err(in_config(
                "spec.input.helmChart.path",
                "names the chart's directory, relative to the app's directory",
            ));
        }
    }
    for option in input.kustomize_options.keys() {
        let flag = option.trim_start_matches('-');
        if !SAFE_KUSTOMIZE_OPTIONS.contains(&flag) {
            return Err(unsupported(
                &format!("spec.input.kustomizeOptions.{option}"),
                &format!(
                    "is not passed to kustomize: gannet passes only options that change how the output is laid out ({}), never ones that run code or read outside the directory",
                    SAFE_KUSTOMIZE_OPTIONS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The rendered manifests of the app whose files are `files`, or `None` when it has plain
/// manifests (no chart, no kustomization).
/// The caller has checked `spec` ([`check`], through `manifest::check_supported`).
pub fn render(files: &AppFiles, spec: &KubernetesSpec) -> Result<Option<Rendered>, AppFileError> {
    let input = &spec.input;
    if let Some(chart) = &input.helm_chart {
        if !chart.git_remote.is_empty() || !chart.repository.is_empty() {
            return Err(in_config(
                "spec.input.helmChart",
                "is fetched and rendered by a job when a stage of the kubernetes plugin runs; kubernetes_multicluster does not fetch charts yet",
            ));
        }
        return helm(files, spec, chart).map(Some);
    }
    let app_dir = files.in_repo(".").unwrap_or_default();
    let kustomized = KUSTOMIZATIONS
        .iter()
        .any(|n| files.root().join(&app_dir).join(n).is_file());
    if kustomized {
        return kustomize(files, spec).map(Some);
    }
    Ok(None)
}

fn helm(
    files: &AppFiles,
    spec: &KubernetesSpec,
    chart: &HelmChart,
) -> Result<Rendered, AppFileError> {
    let field = "spec.input.helmChart.path";
    let chart_dir = local_dir(files, &chart.path, field)?;
    links_stay_inside(files.root(), &chart_dir).map_err(|e| in_config(field, e))?;
    let root = files.root();
    let mut args = helm_args(
        files,
        spec,
        root.join(&chart_dir).display().to_string(),
        |rel| root.join(rel).display().to_string(),
    )?;
    args.insert(0, "template".into());
    let source = format!("helm template (chart {})", chart.path);
    let text =
        run(&tool("helm", "GANNET_HELM"), &args, files.root()).map_err(|e| in_config(field, e))?;
    Ok(Rendered { source, text })
}

/// `helm template`'s arguments after `template`, as PipeCD gives them: the release, `chart`,
/// the namespace and `spec.input.helmOptions`, each local file checked and named by `at` (given
/// its path relative to the repository root).
pub(crate) fn helm_args(
    files: &AppFiles,
    spec: &KubernetesSpec,
    chart: String,
    at: impl Fn(&str) -> String,
) -> Result<Vec<String>, AppFileError> {
    let options = spec.input.helm_options.clone().unwrap_or_default();
    let release = if options.release_name.is_empty() {
        "release".to_owned()
    } else {
        options.release_name.clone()
    };
    let namespace = if spec.input.namespace.is_empty() {
        "default"
    } else {
        spec.input.namespace.as_str()
    };
    // As PipeCD runs it: no hooks (a chart's tests are not the app), CRDs included.
    let mut args: Vec<String> = vec![
        "--no-hooks".into(),
        "--include-crds".into(),
        release,
        chart,
        "--namespace".into(),
        namespace.into(),
    ];
    for (i, f) in options.value_files.iter().enumerate() {
        let field = format!("spec.input.helmOptions.valueFiles[{i}]");
        args.push("--values".into());
        args.push(at(&local_file(files, f, &field)?));
    }
    for (k, v) in &options.set_values {
        args.push("--set".into());
        args.push(format!("{k}={v}"));
    }
    for (k, f) in &options.set_files {
        let field = format!("spec.input.helmOptions.setFiles.{k}");
        args.push("--set-file".into());
        args.push(format!("{k}={}", at(&local_file(files, f, &field)?)));
    }
    for v in &options.api_versions {
        args.push("--api-versions".into());
        args.push(v.clone());
    }
    if !options.kube_version.is_empty() {
        args.push("--kube-version".into());
        args.push(options.kube_version.clone());
    }
    Ok(args)
}

/// The remote bases and resources of the app's kustomization and every local one it names
/// (each as the kustomization file naming it and the entry), its local paths checked; `None`
/// when the app has no kustomization.
pub(crate) fn kustomize_remotes(
    files: &AppFiles,
) -> Result<Option<Vec<(String, String)>>, AppFileError> {
    let app_dir = files.in_repo(".").unwrap_or_default();
    let kustomized = KUSTOMIZATIONS
        .iter()
        .any(|n| files.root().join(&app_dir).join(n).is_file());
    if !kustomized {
        return Ok(None);
    }
    let mut seen = Vec::new();
    let mut remotes = Vec::new();
    check_kustomization(files.root(), &app_dir, &mut seen, &mut remotes)?;
    Ok(Some(remotes))
}

/// `kustomize build`'s arguments: the app's directory (as `dir` names it) and the options.
pub(crate) fn kustomize_args(spec: &KubernetesSpec, dir: String) -> Vec<String> {
    let mut args = vec!["build".to_owned(), dir];
    for (option, value) in &spec.input.kustomize_options {
        let flag = option.trim_start_matches('-');
        args.push(if value.is_empty() {
            format!("--{flag}")
        } else {
            format!("--{flag}={value}")
        });
    }
    args
}

fn kustomize(files: &AppFiles, spec: &KubernetesSpec) -> Result<Rendered, AppFileError> {
    let app_dir = files.in_repo(".").unwrap_or_default();
    let remotes = kustomize_remotes(files)?.unwrap_or_default();
    if let Some((file, entry)) = remotes.first() {
        return Err(in_config(
            KUSTOMIZE_FIELD,
            format!("{file}: the remote base {entry} is fetched and built by a job when a stage of the kubernetes plugin runs; kubernetes_multicluster does not fetch bases yet"),
        ));
    }
    let args = kustomize_args(spec, files.root().join(&app_dir).display().to_string());
    let text = run(&tool("kustomize", "GANNET_KUSTOMIZE"), &args, files.root())
        .map_err(|e| in_config(KUSTOMIZE_FIELD, e))?;
    Ok(Rendered {
        source: format!(
            "kustomize build ({})",
            if app_dir.is_empty() { "." } else { &app_dir }
        ),
        text,
    })
}

/// Where a kustomization's errors are reported.
const KUSTOMIZE_FIELD: &str = "spec.input.kustomizeVersion";

/// The kustomization in `dir` (relative to `root`) and every local one it names: each
/// directory's links stay inside the repository, every path names a place inside it, and no
/// remote entry is followed (each is added to `remotes`).
fn check_kustomization(
    root: &Path,
    dir: &str,
    seen: &mut Vec<String>,
    remotes: &mut Vec<(String, String)>,
) -> Result<(), AppFileError> {
    let bad = |e: String| in_config(KUSTOMIZE_FIELD, e);
    if seen.iter().any(|d| d == dir) {
        return Ok(());
    }
    if seen.len() > 100 {
        return Err(bad(
            "more than 100 kustomizations are named, one from another".into(),
        ));
    }
    seen.push(dir.to_owned());
    links_stay_inside(root, dir).map_err(bad)?;
    let Some(name) = KUSTOMIZATIONS
        .iter()
        .find(|n| root.join(dir).join(n).is_file())
    else {
        return Ok(());
    };
    let rel = join(dir, name);
    let text = tree::read(root, &rel, gannet_config::bounded::MAX_BYTES as u64)
        .map_err(|e| bad(format!("{rel} {e}")))?;
    let doc: Value =
        gannet_config::yaml::from_str(&text).map_err(|e| bad(format!("{rel}: {e}")))?;
    if doc.get("helmCharts").is_some() || doc.get("helmChartInflationGenerator").is_some() {
        return Err(unsupported(
            KUSTOMIZE_FIELD,
            &format!("{rel}: helmCharts runs Helm from kustomize, which gannet does not run; use spec.input.helmChart"),
        ));
    }
    for key in ["resources", "bases", "components"] {
        for entry in doc[key].as_array().into_iter().flatten() {
            let Some(entry) = entry.as_str() else {
                continue;
            };
            if is_remote(entry) {
                remotes.push((rel.clone(), entry.to_owned()));
                continue;
            }
            let target = tree::in_repo(dir, entry).ok_or_else(|| {
                bad(format!(
                    "{rel}: {key} names {entry}, which is outside the repository"
                ))
            })?;
            let found =
                tree::resolve(root, &target).map_err(|e| bad(format!("{rel}: {entry} {e}")))?;
            if found.is_dir {
                check_kustomization(root, &found.path, seen, remotes)?;
            }
        }
    }
    Ok(())
}

/// A kustomize resource that is fetched, not read from the repository.
fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("github.com/")
        || entry.starts_with("gitlab.com/")
        || entry.starts_with("bitbucket.org/")
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// `rel` (relative to the app's directory) as a directory inside the repository, its real
/// path relative to the root.
fn local_dir(files: &AppFiles, rel: &str, field: &str) -> Result<String, AppFileError> {
    let found = files
        .resolve(rel)
        .map_err(|e| in_config(field, format!("{rel} {e}")))?;
    if !found.is_dir {
        return Err(in_config(field, format!("{rel} is not a directory")));
    }
    Ok(found.path)
}

/// `rel` (relative to the app's directory) as a regular file inside the repository, read the
/// checked way; its real path relative to the repository root.
fn local_file(files: &AppFiles, rel: &str, field: &str) -> Result<String, AppFileError> {
    files
        .read(rel)
        .map_err(|e| in_config(field, format!("{rel} {e}")))?;
    let found = files
        .resolve(rel)
        .map_err(|e| in_config(field, format!("{rel} {e}")))?;
    Ok(found.path)
}

/// Every symbolic link under `dir` (relative to `root`) leads to a place inside `root`.
fn links_stay_inside(root: &Path, dir: &str) -> Result<(), String> {
    let mut todo = vec![dir.to_owned()];
    let mut entries = 0;
    while let Some(d) = todo.pop() {
        let listed =
            std::fs::read_dir(root.join(&d)).map_err(|e| format!("{d} cannot be listed: {e}"))?;
        for entry in listed.flatten() {
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(format!("{dir} holds more than {MAX_ENTRIES} files"));
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = join(&d, &name);
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                tree::resolve(root, &rel).map_err(|e| format!("{rel} {e}"))?;
            } else if kind.is_dir() {
                todo.push(rel);
            }
        }
    }
    Ok(())
}

/// The binary `name`: the file `env` names, or `name` looked up on `PATH`.
pub(crate) fn tool(name: &str, env: &str) -> PathBuf {
    std::env::var_os(env)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs `program` with `args` in a clean environment, bounded in time and output; its
/// standard output, or why it failed (its standard error's last lines, with the checkout's
/// place on the host, `root`, taken out).
fn run(program: &Path, args: &[String], root: &Path) -> Result<String, String> {
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let home = tempfile::tempdir().map_err(|e| format!("{name}: no temporary directory: {e}"))?;
    let mut env = BTreeMap::new();
    env.insert("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned());
    env.insert("HOME", home.path().display().to_string());
    for (var, sub) in [
        ("HELM_CACHE_HOME", "cache"),
        ("HELM_CONFIG_HOME", "config"),
        ("HELM_DATA_HOME", "data"),
        ("XDG_CONFIG_HOME", "xdg"),
    ] {
        env.insert(var, home.path().join(sub).display().to_string());
    }
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(&env)
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "{name} cannot be started ({e}): install it on gannet's PATH, or name it with GANNET_{}",
                name.to_uppercase()
            )
        })?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout)
            .take(OUTPUT_LIMIT as u64 + 1)
            .read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > TIME_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name} did not finish within {}s",
                    TIME_LIMIT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{name} could not be waited for: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if !status.success() {
        let said: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = said[said.len().saturating_sub(3)..].join("; ");
        let tail = tail.replace(&format!("{}/", root.display()), "");
        return Err(format!("{name} failed ({status}): {tail}"));
    }
    if out.len() > OUTPUT_LIMIT {
        return Err(format!(
            "{name} printed more than {} MiB",
            OUTPUT_LIMIT / (1024 * 1024)
        ));
    }
    String::from_utf8(out).map_err(|_| format!("{name} printed something that is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    //! Against the real helm and kustomize (`scripts/kube.sh ensure` builds them; `make test`
    //! runs it first).

    use super::*;
    use crate::manifest;

    /// Points the renderer at the binaries `scripts/kube.sh` built, unless the environment
    /// already names them.
    fn tools() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let dir = gannet_kube_fake::tools_dir();
            for (var, name) in [("GANNET_HELM", "helm"), ("GANNET_KUSTOMIZE", "kustomize")] {
                if std::env::var_os(var).is_none() {
                    std::env::set_var(var, dir.join(name));
                }
            }
        });
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn spec(yaml: &str) -> KubernetesSpec {
        gannet_config::yaml::from_str(yaml).unwrap()
    }

    const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
    const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: {{ .Values.image }}\n";

    /// A repository with a chart outside the app's directory, as PipeCD's helm-local-chart
    /// example has it.
    fn chart_repo() -> tempfile::TempDir {
        let repo = tempfile::tempdir().unwrap();
        write(repo.path(), "charts/web/Chart.yaml", CHART);
        write(
            repo.path(),
            "charts/web/values.yaml",
            "replicas: 1\nimage: web:1\n",
        );
        write(
            repo.path(),
            "charts/web/templates/deployment.yaml",
            TEMPLATE,
        );
        write(repo.path(), "apps/web/values.yaml", "image: web:2\n");
        repo
    }

    const HELM_SPEC: &str = "input:\n  helmChart: {path: ../../charts/web}\n  helmOptions:\n    releaseName: shop\n    valueFiles: [values.yaml]\n    setValues: {replicas: '3'}\n  namespace: prod\n";

    #[test]
    fn a_local_chart_renders_with_the_apps_values_and_options() {
        tools();
        let repo = chart_repo();
        let files = AppFiles::at(&repo.path().join("apps/web"), "apps/web");
        let got = manifest::read_all(&files, &spec(HELM_SPEC)).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        let d = &got[0];
        assert_eq!((d.kind.as_str(), d.name.as_str()), ("Deployment", "shop"));
        assert_eq!(d.body["metadata"]["namespace"], "prod");
        assert_eq!(d.body["spec"]["replicas"], 3);
        assert_eq!(
            d.body["spec"]["template"]["spec"]["containers"][0]["image"],
            "web:2"
        );
        assert!(
            d.file.starts_with("helm template (chart ../../charts/web)"),
            "{}",
            d.file
        );
    }

    #[test]
    fn a_chart_that_links_outside_the_repository_or_climbs_out_of_it_is_refused() {
        tools();
        let repo = chart_repo();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.yaml", "kind: Secret\n");
        std::os::unix::fs::symlink(
            outside.path().join("secret.yaml"),
            repo.path().join("charts/web/templates/leak.yaml"),
        )
        .unwrap();
        let files = AppFiles::at(&repo.path().join("apps/web"), "apps/web");
        let e = manifest::read_all(&files, &spec(HELM_SPEC)).unwrap_err();
        assert_eq!(e.named_by, "spec.input.helmChart.path", "{e}");
        assert!(
            e.to_string().contains("leads outside the repository"),
            "{e}"
        );
        assert!(
            !e.to_string()
                .contains(&outside.path().display().to_string()),
            "{e}"
        );

        let climbing = spec("input:\n  helmChart: {path: ../../../elsewhere}\n");
        let e = manifest::read_all(&files, &climbing).unwrap_err();
        assert_eq!(e.named_by, "spec.input.helmChart.path", "{e}");
    }

    #[test]
    fn a_chart_helm_cannot_render_fails_with_helms_words_and_no_host_path() {
        tools();
        let repo = chart_repo();
        write(
            repo.path(),
            "charts/web/templates/broken.yaml",
            "{{ .Values.nope.deeper }}\n",
        );
        let files = AppFiles::at(&repo.path().join("apps/web"), "apps/web");
        let e = manifest::read_all(&files, &spec(HELM_SPEC)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("helm failed"), "{text}");
        assert!(text.contains("broken.yaml"), "{text}");
        assert!(!text.contains(&repo.path().display().to_string()), "{text}");
    }

    /// PipeCD's kustomize-local-base example: an overlay in the app's directory on a base
    /// elsewhere in the repository.
    #[test]
    fn a_kustomization_on_a_local_base_renders_and_a_remote_base_is_named_unsupported() {
        tools();
        let repo = tempfile::tempdir().unwrap();
        write(
            repo.path(),
            "bases/web/kustomization.yaml",
            "resources: [deployment.yaml]\n",
        );
        write(
            repo.path(),
            "bases/web/deployment.yaml",
            &TEMPLATE
                .replace("{{ .Release.Name }}", "web")
                .replace("  namespace: {{ .Release.Namespace }}\n", "")
                .replace("{{ .Values.replicas }}", "1")
                .replace("{{ .Values.image }}", "web:1"),
        );
        write(
            repo.path(),
            "apps/web/kustomization.yaml",
            "resources: [../../bases/web]\nnamePrefix: prod-\nimages:\n  - {name: web, newTag: '2'}\n",
        );
        let files = AppFiles::at(&repo.path().join("apps/web"), "apps/web");
        let got = manifest::read_all(&files, &KubernetesSpec::default()).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].name, "prod-web");
        assert_eq!(
            got[0].body["spec"]["template"]["spec"]["containers"][0]["image"],
            "web:2"
        );

        write(
            repo.path(),
            "apps/web/kustomization.yaml",
            "resources: [https://github.com/example/base?ref=v1]\n",
        );
        let e = manifest::read_all(&files, &KubernetesSpec::default()).unwrap_err();
        assert!(e.to_string().contains("remote base"), "{e}");

        write(
            repo.path(),
            "apps/web/kustomization.yaml",
            "resources: [../../../../etc]\n",
        );
        let e = manifest::read_all(&files, &KubernetesSpec::default()).unwrap_err();
        assert!(e.to_string().contains("outside the repository"), "{e}");
    }
}
