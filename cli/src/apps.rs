//! `gannet apps`: list (or watch) the applications, show one, its history, its diff, wait for
//! what a push does to it, pause and resume it.

use std::time::Duration;

use gannet_controller::AppView;

use crate::deployments::deployments_text;
use crate::exit::Exit;
use crate::output::{Output, OutputArgs, Shown};
use crate::wait::{self, Display};
use crate::{apps_watch, parse_duration, print_json, render, show, Limits, Server};

#[derive(clap::Subcommand)]
pub(crate) enum AppsCommand {
    /// Every application with its kind, sync status, health and whether it is paused.
    #[command(
        after_help = "Examples:\n  gannet apps list -o wide\n  gannet apps list -o name | xargs -n1 gannet apps wait\n  gannet apps list --watch --timeout 10m     printed again when it changes"
    )]
    List {
        #[command(flatten)]
        output: OutputArgs,
        /// Print the list again each time it changes (read every 2 s; redrawn in place on a
        /// terminal) until --timeout or Ctrl-C.
        #[arg(long, short = 'w')]
        watch: bool,
        /// With --watch: stop after this long (default: until Ctrl-C) [example: 10m]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "watch")]
        timeout: Option<Duration>,
    },
    /// One application: sync status, drift (each field's Git and live value), live resources.
    #[command(after_help = "Examples:\n  gannet apps show web\n  gannet apps show web -o json")]
    Show {
        /// The application's name (or id).
        app: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// An application's deployments, newest first.
    #[command(
        after_help = "Examples:\n  gannet apps history web --limit 50\n  gannet apps history web -o wide"
    )]
    History {
        /// The application's name (or id).
        app: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// What deploying a commit would change on the platform, field by field (nothing is
    /// changed).
    #[command(
        after_help = "Examples:\n  gannet apps diff web                        against the branch head\n  gannet apps diff web --commit $(git rev-parse HEAD~1)"
    )]
    Diff {
        /// The application's name (or id).
        app: String,
        /// The commit (40 hex digits; default: the branch head).
        #[arg(long, value_name = "SHA")]
        commit: Option<String>,
        /// Exit 1 when something would change, 2 when nothing could be compared (like
        /// `diff`).
        #[arg(long)]
        exit_code: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait for what a push does to an application: its deployment of a commit, or (without
    /// --commit) the app idle and SYNCED. Exit codes as `sync --wait`.
    #[command(
        after_help = "Examples:\n  gannet apps wait web --commit \"$GITHUB_SHA\" --timeout 20m   in CI, after the push\n  gannet apps wait web                                        until nothing is under way\nA commit the trigger judged without deploying the app (it changes none of its files) exits 0."
    )]
    Wait {
        /// The application's name (or id).
        app: String,
        /// The commit whose deployment to wait for (a SHA or a prefix of at least 7).
        #[arg(long, value_name = "SHA")]
        commit: Option<String>,
        #[command(flatten)]
        limits: Limits,
        /// Print the deployment's progress as lines on stderr, not redrawn.
        #[arg(long)]
        lines: bool,
    },
    /// Turn an application's automatic deployments off (pushes and auto-sync); syncs,
    /// cancels and rollbacks still work.
    #[command(
        after_help = "Example:\n  gannet apps pause web --reason \"freeze for the release\""
    )]
    Pause {
        /// The application's name (or id).
        app: String,
        /// Why, shown wherever the app is.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Print the app as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Turn an application's automatic deployments back on; what was pushed meanwhile is
    /// judged now.
    #[command(after_help = "Example:\n  gannet apps resume web")]
    Resume {
        /// The application's name (or id).
        app: String,
        /// Print the app as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The apps list as `output` prints it.
fn apps_text(apps: &[AppView], output: Output) -> anyhow::Result<String> {
    output.text(&Shown {
        json: &serde_json::json!({ "apps": apps }),
        names: apps.iter().map(|a| a.name.clone()).collect(),
        table: &|columns| render::apps(apps, columns),
    })
}

/// Runs `gannet apps COMMAND`.
pub(crate) async fn run(server: &Server, command: AppsCommand) -> anyhow::Result<Exit> {
    let client = server.client()?;
    match command {
        AppsCommand::List {
            output,
            watch,
            timeout,
        } => {
            if watch {
                apps_watch::watch(&client, output.output(), apps_text, timeout).await?;
            } else {
                print!("{}", apps_text(&client.apps().await?, output.output())?);
            }
        }
        AppsCommand::Wait {
            app,
            commit,
            limits,
            lines,
        } => {
            if let Some(sha) = &commit {
                if sha.len() < 7 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    anyhow::bail!(
                        "--commit {sha:?}: give a commit SHA, or a prefix of at least 7 hex digits"
                    );
                }
            }
            let goal = match commit.as_deref() {
                Some(sha) => wait::AppGoal::Commit(sha),
                None => wait::AppGoal::Idle,
            };
            let display = if lines {
                Display::Lines {
                    to_stderr: true,
                    logs: false,
                }
            } else {
                Display::for_stdout(false, false)
            };
            return wait::app(&client, &app, goal, &limits.options(), display).await;
        }
        AppsCommand::Show { app, output } => {
            let app = client.app(&app).await?;
            output.output().print(&Shown {
                json: &app,
                names: vec![app.name.clone()],
                table: &|columns| render::app(&app, columns),
            })?;
        }
        AppsCommand::History { app, limit, output } => {
            let app = client.app(&app).await?;
            let list = client
                .deployments(Some(app.id.as_str()), &[], limit)
                .await?;
            let table = |columns| render::history(&app, &list, columns);
            print!("{}", deployments_text(&list, output.output(), &table)?);
        }
        AppsCommand::Diff {
            app,
            commit,
            exit_code,
            json,
        } => {
            let diff = match client.diff(&app, commit.as_deref()).await {
                Ok(diff) => diff,
                // As `diff --exit-code`: 2 when nothing could be compared, 1 for a difference.
                Err(err) if exit_code => {
                    eprintln!("error: {err:#}");
                    return Ok(match Exit::for_error(&err) {
                        Exit::Unreachable => Exit::Unreachable,
                        _ => Exit::NotCompared,
                    });
                }
                Err(err) => return Err(err),
            };
            show(json, &diff, || render::diff(&diff))?;
            if exit_code && !diff.drift.is_empty() {
                return Ok(Exit::Error);
            }
        }
        AppsCommand::Pause { app, reason, json } => {
            let app = client.pause(&app, reason.as_deref()).await?;
            if json {
                print_json(&app)?;
            } else {
                println!(
                    "{} is paused: {}",
                    app.name,
                    app.paused.as_ref().map_or("", |p| p.reason.as_str())
                );
            }
        }
        AppsCommand::Resume { app, json } => {
            let app = client.resume(&app).await?;
            show(json, &app, || {
                println!("{} deploys automatically again", app.name)
            })?;
        }
    }
    Ok(Exit::Success)
}
