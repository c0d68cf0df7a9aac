//! `check_app`: synthetic configs, one table, and every PipeCD example config.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gannet_config::is_app_config_path;
use gannet_domain::GoDuration;
use gannet_sdk::check::{check_app, AppCheck};
use gannet_sdk::plugin::{
    AppFileError, Faces, PlanContext, Plugin, Plugins, Presenter, StageConfigError,
};
use serde_json::Value;

/// A generic-stage plugin that accepts the options PipeCD documents for its stages.
struct Generic {
    name: &'static str,
    stages: &'static [&'static str],
    options: &'static [&'static str],
    /// An option that must hold a Go duration.
    duration: Option<&'static str>,
}

impl Plugin for Generic {
    fn name(&self) -> &'static str {
        self.name
    }

    fn stage_names(&self) -> &'static [&'static str] {
        self.stages
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        let Value::Object(fields) = with else {
            return Err(StageConfigError::new("with", "expected a map"));
        };
        if let Some(unknown) = fields.keys().find(|k| !self.options.contains(&k.as_str())) {
            return Err(StageConfigError::new(unknown.as_str(), "unknown option"));
        }
        if let Some(Value::String(d)) = self.duration.and_then(|f| fields.get(f)) {
            GoDuration::parse(d)
                .map_err(|e| StageConfigError::new(self.duration.unwrap_or(""), e.to_string()))?;
        }
        Ok(with.clone())
    }
}

impl Presenter for Generic {}

fn generic_plugins() -> Plugins {
    Plugins::new(vec![
        Faces::planning(Arc::new(Generic {
            name: "wait",
            stages: &["WAIT"],
            options: &["duration"],
            duration: Some("duration"),
        })),
        Faces::planning(Arc::new(Generic {
            name: "wait-approval",
            stages: &["WAIT_APPROVAL"],
            options: &["approvers", "minApproverNum", "timeout"],
            duration: Some("timeout"),
        })),
        Faces::planning(Arc::new(Generic {
            name: "script-run",
            stages: &["SCRIPT_RUN", "SCRIPT_RUN_ROLLBACK"],
            options: &["env", "run", "onRollback", "timeout"],
            duration: Some("timeout"),
        })),
    ])
}

/// Checks `yaml` with the files in `files` as the app directory.
fn check(yaml: &str, files: &[(&str, &str)]) -> AppCheck {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let read = move |p: &str| files.get(p).cloned();
    check_app("demo/app.pipecd.yaml", yaml, &generic_plugins(), &read)
}

/// `line:field:unsupported?` for each error, for compact table rows.
fn summary(issues: &[gannet_sdk::check::Issue]) -> Vec<String> {
    issues
        .iter()
        .map(|i| {
            let flag = if i.unsupported { " (unsupported)" } else { "" };
            format!("{}:{}{flag}", i.line.unwrap_or(0), i.field)
        })
        .collect()
}

const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\n";
const FUNCTION: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: f\n";

#[test]
fn check_table() {
    let app = |kind: &str, spec: &str| format!("{HEAD}kind: {kind}\nspec:\n  name: demo\n{spec}");
    // (case, config, files, errors, warnings)
    type Row<'a> = (
        &'a str,
        String,
        Vec<(&'a str, &'a str)>,
        Vec<&'a str>,
        Vec<&'a str>,
    );
    let cases: Vec<Row> = vec![
        ("generic pipeline, all fine", app("Application", "  pipeline:\n    stages:\n      - name: WAIT\n        with:\n          duration: 1m\n"), vec![], vec![], vec![]),
        ("parse error", format!("{HEAD}kind: LambdaApp\nspec:\n  name: x\n  timeout: never\n"), vec![], vec!["5:spec.timeout"], vec![]),
        (
            "every stage problem, not just the first",
            app("Application", "  pipeline:\n    stages:\n      - name: WAIT\n        with:\n          duration: soon\n      - name: ANALYSIS\n      - name: WAIT_APROVAL\n      - name: SCRIPT_RUN\n        with:\n          runn: x\n"),
            vec![],
            vec!["9:spec.pipeline.stages[0].with.duration", "10:spec.pipeline.stages[1].name (unsupported)", "11:spec.pipeline.stages[2].name", "14:spec.pipeline.stages[3].with.runn"],
            vec![],
        ),
        ("platform not compiled in, features unsupported", app("LambdaApp", "  eventWatcher:\n    - matcher: {name: image}\n"), vec![("function.yaml", FUNCTION)], vec!["5:spec.eventWatcher (unsupported)", "2:kind (unsupported)"], vec![]),
        ("nothing to deploy", app("Application", ""), vec![], vec!["3:spec"], vec![]),
    ];
    for (case, yaml, files, errors, warnings) in cases {
        let result = check(&yaml, &files);
        assert_eq!(
            summary(&result.errors),
            errors,
            "{case}: {:#?}",
            result.errors
        );
        assert_eq!(
            summary(&result.warnings),
            warnings,
            "{case}: {:#?}",
            result.warnings
        );
        assert_eq!(result.ok, errors.is_empty(), "{case}");
    }
}

#[test]
fn issues_carry_messages_and_kind() {
    let result = check(
        &format!(
            "{HEAD}kind: ECSApp\nspec:\n  name: x\n  input:\n    taskDefinitionFile: task.json\n"
        ),
        &[("task.json", "{\"family\": ")],
    );
    assert_eq!(result.kind.as_deref(), Some("ECSApp"));
    let broken = check(&format!("{HEAD}kind: LambdaApp\nspec:\n  nam: x\n"), &[]);
    assert_eq!(broken.kind.as_deref(), Some("LambdaApp"));
    assert_eq!(
        broken.errors[0].message,
        "unknown field `nam`; did you mean `name`?"
    );
    let json = serde_json::to_value(&broken).unwrap();
    assert_eq!(json["errors"][0]["line"], 4);
    assert_eq!(json["ok"], false);
}

/// A platform plugin that reads its manifest as the planner would: `function.yaml` (or the
/// file `spec.plugins.lambda.input.functionManifestFile` names) must not say `memory: 0`.
struct Lambda;

impl Plugin for Lambda {
    fn name(&self) -> &'static str {
        "lambda"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["LAMBDA_SYNC"]
    }

    fn deploys(&self, app: &gannet_config::AppConfig) -> bool {
        app.platform() == Some("lambda")
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        Ok(with.clone())
    }

    /// As the real plugin answers for a LambdaApp: the default manifest; an Application's
    /// is left to `check_app`.
    fn app_files(
        &self,
        app: &gannet_config::AppConfig,
    ) -> Result<Vec<gannet_sdk::check::AppFile>, AppFileError> {
        if app.kind == gannet_config::AppKind::Application {
            return Ok(Vec::new());
        }
        let (file, field) = ("function.yaml", "spec.input.functionManifestFile");
        Ok(vec![gannet_sdk::check::AppFile::document(
            field, file, file,
        )])
    }

    fn check_app(
        &self,
        _: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let error = |field: &str, message: &str| AppFileError {
            named_by: "spec.input.functionManifestFile".into(),
            file: "function.yaml".into(),
            line: (!field.is_empty()).then_some(4),
            field: field.into(),
            message: message.into(),
            unsupported: field == "spec.source",
        };
        match read("function.yaml") {
            None => Err(error("", "does not exist")),
            Some(text) if text.contains("memory: 0") => Err(error("spec.memory", "too small")),
            Some(text) if text.contains("source:") => Err(error("spec.source", "not built")),
            Some(_) => Ok(()),
        }
    }
}

impl Presenter for Lambda {}

#[test]
fn the_platform_plugin_checks_its_manifest_once_it_parses() {
    let mut list: Vec<Faces> = generic_plugins().iter().cloned().collect();
    list.push(Faces::planning(Arc::new(Lambda)));
    let plugins = Plugins::new(list);
    let lambda_app = format!("{HEAD}kind: LambdaApp\nspec:\n  name: x\n");
    let application =
        format!("{HEAD}kind: Application\nspec:\n  name: x\n  plugins:\n    lambda: {{}}\n");
    let bad = format!("{FUNCTION}  memory: 0\n");
    let git = format!("{FUNCTION}  source: {{git: x}}\n");
    // (case, config, function.yaml, errors as `line:field message`, warnings)
    type Row<'a> = (&'a str, &'a str, Option<&'a str>, Vec<String>, Vec<&'a str>);
    let cases: Vec<Row> = vec![
        ("a valid manifest", &lambda_app, Some(FUNCTION), vec![], vec![]),
        (
            "a field the plugin refuses, named with its file",
            &lambda_app,
            Some(&bad),
            vec!["3:spec.input.functionManifestFile function.yaml:4: spec.memory: too small".into()],
            vec![],
        ),
        (
            "what gannet lacks is unsupported, not invalid",
            &lambda_app,
            Some(&git),
            vec!["3:spec.input.functionManifestFile (unsupported) function.yaml:4: spec.source: not built".into()],
            vec![],
        ),
        (
            "a missing default manifest stays one warning",
            &lambda_app,
            None,
            vec![],
            vec!["3:spec.input.functionManifestFile"],
        ),
        (
            "an unparsable manifest is reported once",
            &lambda_app,
            Some("a: [b\n"),
            vec!["3:spec.input.functionManifestFile function.yaml: line 1: unclosed bracket '['".into()],
            vec![],
        ),
        (
            "an Application's plugin checks what gannet cannot",
            &application,
            None,
            vec!["3:spec.input.functionManifestFile function.yaml: does not exist".into()],
            vec![],
        ),
    ];
    for (case, yaml, manifest, errors, warnings) in cases {
        let manifest = manifest.map(str::to_owned);
        let read = move |p: &str| manifest.clone().filter(|_| p == "function.yaml");
        let result = check_app("demo/app.pipecd.yaml", yaml, &plugins, &read);
        let got: Vec<String> = result
            .errors
            .iter()
            .map(|i| {
                let flag = if i.unsupported { " (unsupported)" } else { "" };
                format!("{}:{}{flag} {}", i.line.unwrap_or(0), i.field, i.message)
            })
            .collect();
        assert_eq!(got, errors, "{case}");
        assert_eq!(summary(&result.warnings), warnings, "{case}");
    }
}

// ------------------------------------------------------------------ PipeCD's examples

fn app_configs(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    assert!(depth < 20, "{} is nested too deeply", dir.display());
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            app_configs(&path, out, depth + 1);
        } else if is_app_config_path(&path.to_string_lossy()) {
            out.push(path);
        }
    }
}

#[test]
fn every_pipecd_example_is_ok_or_only_unsupported() {
    // Skipped on a fresh clone without the corpus; `make test` says so in one line.
    let Some(root) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let mut configs = Vec::new();
    app_configs(&root, &mut configs, 0);
    assert!(
        configs.len() >= 50,
        "only {} app configs under {}",
        configs.len(),
        root.display()
    );
    let plugins = generic_plugins();
    let mut unsupported: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut ok = 0;
    for config in &configs {
        let rel = config
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(config).unwrap();
        let dir = config.parent().unwrap().to_path_buf();
        let read = move |p: &str| std::fs::read_to_string(dir.join(p)).ok();
        let result = check_app(&rel, &text, &plugins, &read);
        for issue in &result.errors {
            if issue.unsupported {
                let at = format!("{rel}:{}: {}", issue.line.unwrap_or(0), issue.field);
                unsupported
                    .entry(issue.message.clone())
                    .or_default()
                    .push(at);
            } else {
                failures.push(format!(
                    "{rel}:{}: {}: {}",
                    issue.line.unwrap_or(0),
                    issue.field,
                    issue.message
                ));
            }
        }
        for w in &result.warnings {
            println!(
                "warning {rel}:{}: {}: {}",
                w.line.unwrap_or(0),
                w.field,
                w.message
            );
        }
        ok += usize::from(result.ok);
    }
    println!(
        "{} app configs, {ok} fully supported; unsupported features found:",
        configs.len()
    );
    for (what, apps) in &unsupported {
        println!("  {what} ({} times, e.g. {})", apps.len(), apps[0]);
    }
    assert!(
        failures.is_empty(),
        "errors other than unsupported features:\n{}",
        failures.join("\n")
    );
}
