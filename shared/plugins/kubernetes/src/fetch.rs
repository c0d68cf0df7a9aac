//! Rendering a remote source ([`crate::remote`]) as a job: the job fetches (`helm template`
//! of a repository's chart, `git clone` at the ref, `kustomize build` with its own fetching),
//! renders and writes the manifests to its output directory; a step reads them back (at most
//! [`gannet_sdk::jobs::MAX_OUTPUT_BYTES`]) and parses them under the same YAML limits as
//! plain manifests. A step returns `Continue` while the job runs; the job's key is derived
//! from the deployment, the stage and the commit rendered, so a step delivered twice finds
//! the job it started. A drift check renders the branch head the same way, once per
//! [`LIVE_WINDOW`], and is pending meanwhile.
//!
//! The job runs with the base environment only (no gannet credential), a chart repository's
//! password given in a variable read by `helm repo add --password-stdin`, never in an
//! argument or a log line.

use std::path::Path;

use gannet_domain::ids::AppId;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{self, JobEnd, JobKey, JobRunner, Once};
use gannet_sdk::plugin::{LiveContext, StageResult, StepContext, StepError, StepOutcome};
use gannet_sdk::tree::{load_app_config, AppFiles};

use crate::manifest::{self, Manifest};
use crate::remote::{ChartSource, Remotes, Source};
use crate::render;
use crate::spec::KubernetesSpec;

/// The file the job leaves the rendered manifests in.
pub(crate) const RENDERED: &str = "manifests.yaml";
/// The file the job leaves what failed in.
const ERROR: &str = "error.txt";
/// A render job is killed after this long.
const TIME_LIMIT: GoDuration = GoDuration::from_secs(600);
/// How often a drift check renders the branch head again (a chart's ref may move).
pub(crate) const LIVE_WINDOW: GoDuration = GoDuration::from_secs(600);
/// Stage metadata: the render job of a tree was logged.
const META_LOGGED: &str = "renderLogged";

/// Which commit's tree a step renders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tree {
    This,
    Running,
}

impl Tree {
    fn name(self) -> &'static str {
        match self {
            Self::This => "this",
            Self::Running => "running",
        }
    }
}

/// A tree's manifests as a job rendered them.
pub(crate) enum Render {
    /// Its manifests are in the repository: read them as ever.
    Local,
    /// The job runs: look again after this long.
    Running(GoDuration),
    Rendered(Vec<Manifest>),
    /// The fetch or the render failed, or the output was refused: why.
    Failed(String),
}

/// The app's spec and its remote source in `dir`, if it has one; why that source may not be
/// fetched. A config that does not load is left to the caller, which reports it.
fn source_at(
    dir: &Path,
    app: &AppId,
    remotes: &Remotes,
) -> Result<Option<(KubernetesSpec, AppFiles, Source)>, String> {
    let Ok(config) = load_app_config(dir, app) else {
        return Ok(None);
    };
    let Ok(spec) = manifest::spec_of(&config) else {
        return Ok(None);
    };
    let files = AppFiles::new(dir, app);
    let source = remotes
        .source(Some(&files), &spec)
        .map_err(|e| e.to_string())?;
    Ok(source.map(|s| (spec, files, s)))
}

/// Renders `tree` (its app directory `dir`) for a step: starts its job (once) and reads what
/// it left when it ended.
pub(crate) async fn for_step(
    ctx: &StepContext<'_>,
    remotes: &Remotes,
    tree: Tree,
    dir: &Path,
) -> Result<Render, StepError> {
    let d = ctx.deployment;
    let (spec, files, source) = match source_at(dir, &d.app, remotes) {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(Render::Local),
        Err(why) => return Ok(Render::Failed(why)),
    };
    let commit = match tree {
        Tree::This => Some(&d.commit.sha),
        Tree::Running => d.running_commit.as_ref(),
    };
    let key = JobKey::of(&[
        (d.id.as_str(), 36),
        (ctx.stage.id.as_str(), 16),
        (tree.name(), 7),
        (commit.map_or("", |c| c.as_str()), 8),
    ]);
    let render = run(ctx.jobs, &key, &spec, &files, &source).await?;
    let logged = format!("{META_LOGGED}.{}", tree.name());
    let ended = matches!(render, Render::Rendered(_) | Render::Failed(_));
    if ended && !ctx.stage.metadata.contains_key(&logged) {
        let what = if tree == Tree::This {
            "this commit's"
        } else {
            "the running commit's"
        };
        let line = match &render {
            Render::Rendered(m) => {
                format!("Rendered {what} {source} in job {key}: {} objects", m.len())
            }
            Render::Failed(why) => format!("Rendering {what} {source} failed (job {key}): {why}"),
            _ => String::new(),
        };
        ctx.io.log(&line).await;
        ctx.io
            .save_metadata([(logged, key.to_string())].into())
            .await?;
    }
    Ok(match render {
        Render::Failed(why) => Render::Failed(format!("{source}: {why}")),
        other => other,
    })
}

/// Renders the branch head for a drift check: the job of this window, or while it runs the
/// one of the window before.
pub(crate) async fn for_live(
    ctx: &LiveContext<'_>,
    remotes: &Remotes,
) -> Result<Render, StepError> {
    let (spec, files, source) = match source_at(ctx.app_dir, ctx.app_id, remotes) {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(Render::Local),
        Err(why) => return Err(StepError::permanent(why)),
    };
    let window = ctx.now.0 / LIVE_WINDOW.as_millis().max(1);
    let key_of = |w: u64| {
        JobKey::of(&[
            ("render", 6),
            (ctx.app_id.as_str(), 30),
            (ctx.head.as_str(), 12),
            (&w.to_string(), 10),
        ])
    };
    let now = run(ctx.jobs, &key_of(window), &spec, &files, &source).await?;
    if !matches!(now, Render::Running(_)) || window == 0 {
        return Ok(now);
    }
    let before = key_of(window - 1);
    match ctx.jobs.poll(&before, "").await {
        Ok(poll) if poll.end.is_some() => read(ctx.jobs, &before, poll.end).await,
        _ => Ok(now),
    }
}

/// Starts the job `key` (nothing when it was started before) and reads it if it ended.
async fn run(
    jobs: &dyn JobRunner,
    key: &JobKey,
    spec: &KubernetesSpec,
    files: &AppFiles,
    source: &Source,
) -> Result<Render, StepError> {
    let make = || script(spec, files, source);
    match jobs::start_once(jobs, key, files.root(), TIME_LIMIT, make).await? {
        Once::Running(after) => Ok(Render::Running(after)),
        Once::Refused(why) => Ok(Render::Failed(why)),
        Once::Ended(end) => read(jobs, key, Some(end)).await,
    }
}

/// What the ended job `key` left.
async fn read(
    jobs: &dyn JobRunner,
    key: &JobKey,
    end: Option<JobEnd>,
) -> Result<Render, StepError> {
    match end {
        Some(JobEnd::Exited(0)) => {}
        Some(end) => return Ok(Render::Failed(jobs::failure(jobs, key, &end, ERROR).await)),
        None => return Ok(Render::Failed("the render job ended".into())),
    }
    let text = match jobs.output(key, RENDERED).await {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(Render::Failed("the render job left no manifests".into())),
        Err(jobs::JobError::Refused(why)) => return Ok(Render::Failed(why)),
        Err(e) => return Err(e.into()),
    };
    let Ok(text) = String::from_utf8(text) else {
        return Ok(Render::Failed(
            "the rendered manifests are not UTF-8 text".into(),
        ));
    };
    Ok(
        match manifest::parse_rendered(&format!("rendered ({RENDERED})"), &text) {
            Ok(m) if m.is_empty() => Render::Failed("the render left no Kubernetes objects".into()),
            Ok(m) => Render::Rendered(m),
            Err(e) => Render::Failed(e.to_string()),
        },
    )
}

use jobs::shell_quote as quote;

fn command(program: &Path, args: &[String]) -> String {
    std::iter::once(quote(&program.display().to_string()))
        .chain(args.iter().map(|a| quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The job's script and environment for `source`: each command's error output kept, and on a
/// failure what failed written to [`ERROR`] with the tool's last lines.
fn script(
    spec: &KubernetesSpec,
    files: &AppFiles,
    source: &Source,
) -> Result<(String, Vec<(String, String)>), String> {
    let app_dir = files.in_repo(".").unwrap_or_default();
    let app_dir = if app_dir.is_empty() {
        ".".to_owned()
    } else {
        app_dir
    };
    let helm = render::tool("helm", "GANNET_HELM");
    let kustomize = render::tool("kustomize", "GANNET_KUSTOMIZE");
    let mut env = jobs::inherited_env(&[]);
    // The tools' directories go first on the job's PATH (a sandboxed job may read those).
    let dirs: Vec<String> = [&helm, &kustomize]
        .iter()
        .filter_map(|t| Some(t.parent()?.display().to_string()))
        .filter(|d| !d.is_empty())
        .collect();
    if let Some((_, path)) = env.iter_mut().find(|(k, _)| k == "PATH") {
        *path = dirs
            .iter()
            .map(String::as_str)
            .chain([path.as_str()])
            .collect::<Vec<_>>()
            .join(":");
    }
    env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    env.push(("GIT_SSH_COMMAND".into(), "ssh -o BatchMode=yes".into()));
    let mut s = String::from(
        r#"set -u
w="$(mktemp -d)"
export HELM_CACHE_HOME="$w/helm/cache" HELM_CONFIG_HOME="$w/helm/config" HELM_DATA_HOME="$w/helm/data"
fail() { { printf '%s\n' "$1"; tail -n 5 "$w/err"; } > "$GANNET_JOB_OUT/error.txt"; cat "$w/err" >&2; exit 1; }
"#,
    );
    let out = r#" > "$GANNET_JOB_OUT/manifests.yaml" 2> "$w/err""#;
    let values = |rel: &str| rel.to_owned();
    let bad = |e: gannet_sdk::plugin::AppFileError| e.to_string();
    match source {
        Source::Chart {
            from,
            name,
            version,
        } => {
            let chart = match from {
                ChartSource::Repository(repo) => {
                    let mut add = vec![
                        "repo".to_owned(),
                        "add".into(),
                        repo.name.clone(),
                        repo.address.clone(),
                    ];
                    if repo.insecure {
                        add.push("--insecure-skip-tls-verify".into());
                    }
                    if !repo.username.is_empty() {
                        add.push("--username".into());
                        add.push(repo.username.clone());
                    }
                    let password = repo.password()?;
                    let pipe = if let Some(password) = password {
                        env.push(("CHART_REPOSITORY_PASSWORD".into(), password));
                        add.push("--password-stdin".into());
                        r#"printf '%s' "$CHART_REPOSITORY_PASSWORD" | "#
                    } else {
                        ""
                    };
                    s.push_str(&format!(
                        "{pipe}{} > /dev/null 2> \"$w/err\" || fail {}\n",
                        command(&helm, &add),
                        quote(&format!("adding chart repository {} failed:", repo.name))
                    ));
                    format!("{}/{name}", repo.name)
                }
                ChartSource::Oci(registry) => format!("{registry}/{name}"),
                ChartSource::Unchecked(repo) => {
                    return Err(format!("chart repository {repo:?} is not configured: add it to gannet.yaml under plugins.kubernetes.chartRepositories"));
                }
            };
            let mut args = vec!["template".to_owned()];
            args.extend(render::helm_args(files, spec, chart, values).map_err(bad)?);
            args.push("--version".into());
            args.push(version.clone());
            if let ChartSource::Repository(repo) = from {
                if repo.insecure {
                    args.push("--insecure-skip-tls-verify".into());
                }
            }
            s.push_str(&format!(
                "{}{out} || fail {}\n",
                command(&helm, &args),
                quote(&format!(
                    "helm could not fetch or render chart {name} version {version}:"
                ))
            ));
        }
        Source::GitChart {
            remote,
            git_ref,
            path,
        } => {
            s.push_str(&format!(
                "git clone -q --no-checkout -- {} \"$w/src\" 2> \"$w/err\" || fail {}\n",
                quote(remote),
                quote(&format!("cloning {remote} failed:"))
            ));
            let at = if git_ref.is_empty() { "HEAD" } else { git_ref };
            s.push_str(&format!(
                "git -C \"$w/src\" -c advice.detachedHead=false checkout -q {} -- 2> \"$w/err\" || fail {}\n",
                quote(at),
                quote(&format!("{remote} has no ref {at}:"))
            ));
            // Helm follows links when it loads a chart: none may leave the clone.
            s.push_str(&format!(
                "c=\"$w/src/\"{}\n[ -d \"$c\" ] || {{ : > \"$w/err\"; fail {}; }}\nfind \"$c\" -type l | while read -r l; do case \"$(realpath -m \"$l\")\" in \"$w/src\"/*) ;; *) echo \"$l\";; esac; done > \"$w/links\"\n[ -s \"$w/links\" ] && {{ : > \"$w/err\"; fail {}; }}\n",
                quote(path),
                quote(&format!("{remote} at {at} has no directory {path}")),
                quote(&format!("the chart {path} in {remote} has a link that leads outside the clone")),
            ));
            let mut args = vec!["template".to_owned()];
            args.extend(render::helm_args(files, spec, "CHART_DIR".into(), values).map_err(bad)?);
            let cmd = command(&helm, &args).replace("'CHART_DIR'", "\"$c\"");
            s.push_str(&format!(
                "{cmd}{out} || fail {}\n",
                quote(&format!(
                    "helm could not render chart {path} from {remote} at {at}:"
                ))
            ));
        }
        Source::Kustomize { .. } => {
            let args = render::kustomize_args(spec, app_dir.clone());
            s.push_str(&format!(
                "{}{out} || fail {}\n",
                command(&kustomize, &args),
                quote(&format!("kustomize build of {app_dir} failed:"))
            ));
        }
    }
    Ok((s, env))
}

/// The manifests jobs rendered for a step, of this commit and of the running one; `None`
/// where the tree's manifests are read from the repository.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    this: Option<Result<Vec<Manifest>, String>>,
    running: Option<Result<Vec<Manifest>, String>>,
}

impl Rendered {
    pub(crate) fn of(&self, tree: Tree) -> Option<&Result<Vec<Manifest>, String>> {
        match tree {
            Tree::This => self.this.as_ref(),
            Tree::Running => self.running.as_ref(),
        }
    }
}

/// Renders what the step needs (this commit's tree, unless it rolls back, and the running
/// commit's): the manifests, or the step's outcome while a job runs or when this commit's
/// render failed (then nothing is applied).
pub(crate) async fn trees(
    ctx: &StepContext<'_>,
    remotes: &Remotes,
) -> Result<Result<Rendered, StepOutcome>, StepError> {
    let rolling_back = crate::base_name(&ctx.stage.name) == crate::STAGE_ROLLBACK;
    let mut rendered = Rendered::default();
    let this = Some(ctx.app_dir).filter(|_| !rolling_back);
    for (tree, dir) in [(Tree::This, this), (Tree::Running, ctx.running_app_dir)] {
        let Some(dir) = dir else { continue };
        let got = match for_step(ctx, remotes, tree, dir).await? {
            Render::Local => continue,
            Render::Running(after) => return Ok(Err(StepOutcome::Continue { after })),
            Render::Failed(why) if tree == Tree::This => {
                let reason = format!("{why}; nothing was applied");
                return Ok(Err(StepOutcome::Done(StageResult::Failure { reason })));
            }
            Render::Failed(why) => Err(why),
            Render::Rendered(m) => Ok(m),
        };
        match tree {
            Tree::This => rendered.this = Some(got),
            Tree::Running => rendered.running = Some(got),
        }
    }
    Ok(Ok(rendered))
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
