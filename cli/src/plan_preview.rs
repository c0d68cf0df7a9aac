//! `gannet plan-preview`: what merging a commit into a repository's watched branch would
//! change, app by app (the same preview a pull request's check run shows). Asks for one and,
//! with `--wait`, follows it to its end, exiting as `apps diff --exit-code` does; `show` and
//! `list` read the previews gannet keeps.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gannet_domain::duration::Millis;
use gannet_domain::preview::{Preview, PreviewResult, PreviewStatus};

use crate::client::Client;
use crate::exit::Exit;
use crate::output::{Output, OutputArgs, Shown};
use crate::render::{self, elapsed};
use crate::wait::{Patience, WaitOptions};
use crate::{parse_duration, Server};

mod text;

pub(crate) use text::{list_text, show_text};

/// How often a preview waited for is looked at.
const POLL: Duration = Duration::from_secs(1);
/// The longest pause between retries while the server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  gannet plan-preview --head \"$GITHUB_SHA\"                     prints the preview's id\n  gannet plan-preview --head \"$GITHUB_SHA\" --wait --timeout 10m --out preview.json\n  gannet plan-preview show <PREVIEW>\n  gannet plan-preview list --repo shop --pr 42\nWith --wait the exit code says what merging would do: 0 nothing changes, 1 something\nchanges, 2 the preview could not be made (an app's preview failed, the head could not be\nread, it was superseded, or the request was refused); 5 --timeout passed, 6 unreachable."
)]
pub(crate) struct PlanPreviewArgs {
    #[command(subcommand)]
    command: Option<PlanPreviewCommand>,
    #[command(flatten)]
    request: RequestArgs,
}

/// `gannet plan-preview --head SHA ...`: ask for a preview.
#[derive(clap::Args)]
struct RequestArgs {
    /// The commit to preview: a pull request's head, or any commit gannet can fetch (40 or
    /// 64 hex digits).
    #[arg(long, value_name = "SHA", required = true)]
    head: Option<String>,
    /// The repository's id in gannet.yaml (needed when gannet watches several).
    #[arg(long, value_name = "REPO")]
    repo: Option<String>,
    /// The branch the commit would merge into. gannet previews against the repository's
    /// watched branch only: another is refused, and nothing is queued.
    #[arg(long, value_name = "BRANCH")]
    base: Option<String>,
    /// Wait until the preview ends; the exit code says what merging would change.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this long (exit 5) [example: 10m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m", requires = "wait")]
    timeout: Duration,
    /// With --wait: how long the server may stay unreachable before the wait gives up
    /// (exit 6) [example: 5m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2m", requires = "wait")]
    retry_for: Duration,
    #[command(flatten)]
    output: OutputArgs,
    /// Also write the preview as JSON to this file (the one the wait ended on).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum PlanPreviewCommand {
    /// One preview: its apps (kind, result, summary, pipeline), then each app's details.
    #[command(
        after_help = "Examples:\n  gannet plan-preview show <PREVIEW>\n  gannet plan-preview show <PREVIEW> -o json"
    )]
    Show {
        /// The preview's id (p-…).
        preview: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Previews, newest first.
    #[command(
        after_help = "Examples:\n  gannet plan-preview list\n  gannet plan-preview list --repo shop --pr 42 -o wide"
    )]
    List {
        /// Only this repository's (its id in gannet.yaml).
        #[arg(long, value_name = "REPO")]
        repo: Option<String>,
        /// Only this pull request's (needs --repo).
        #[arg(long, value_name = "NUMBER", requires = "repo")]
        pr: Option<u64>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// Runs `gannet plan-preview ...`.
pub(crate) async fn run(server: &Server, args: PlanPreviewArgs) -> anyhow::Result<Exit> {
    let client = server.client()?;
    match args.command {
        Some(PlanPreviewCommand::Show { preview, output }) => {
            let p = client.preview(&preview).await?;
            print_preview(&p, output.output())?;
        }
        Some(PlanPreviewCommand::List {
            repo,
            pr,
            limit,
            output,
        }) => {
            let list = client.previews(repo.as_deref(), pr, limit).await?;
            let now = now();
            output.output().print(&Shown {
                json: &serde_json::json!({ "previews": list }),
                names: list.iter().map(|p| p.id.to_string()).collect(),
                table: &|columns| list_text(&list, columns, now),
            })?;
        }
        None => return request(&client, args.request).await,
    }
    Ok(Exit::Success)
}

async fn request(client: &Client, args: RequestArgs) -> anyhow::Result<Exit> {
    let head = args.head.as_deref().unwrap_or_default();
    let output = args.output.output();
    let asked = client
        .request_preview(head, args.repo.as_deref(), args.base.as_deref())
        .await;
    let preview = match asked {
        Ok(p) => p,
        // As `apps diff --exit-code`: a refusal is "could not be made" (2).
        Err(err) if args.wait => {
            eprintln!("error: {err:#}");
            return Ok(match Exit::for_error(&err) {
                Exit::Unreachable => Exit::Unreachable,
                _ => Exit::NotCompared,
            });
        }
        Err(err) => return Err(err),
    };
    if !args.wait {
        write_out(args.out.as_ref(), &preview)?;
        match output {
            Output::Json => print_preview(&preview, output)?,
            _ => println!("{}", preview.id),
        }
        eprintln!(
            "plan preview {} of {} at {} into {} is {}; `gannet plan-preview show {}`",
            preview.id,
            preview.repo,
            preview.head.short(),
            preview.base_ref,
            preview.status.as_str(),
            preview.id
        );
        return Ok(Exit::Success);
    }
    let options = WaitOptions {
        timeout: args.timeout,
        retry_for: args.retry_for,
    };
    let progress = if output != Output::Json && std::io::stdout().is_terminal() {
        Progress::Line { drawn: 0 }
    } else {
        Progress::Changes { last: None }
    };
    let (last, end) = wait(client, preview, &options, progress).await;
    write_out(args.out.as_ref(), &last)?;
    if end == Exit::Timeout || end == Exit::Unreachable {
        // What was seen so far, for a script that reads the JSON anyway.
        if output == Output::Json {
            print_preview(&last, output)?;
        }
        return Ok(end);
    }
    print_preview(&last, output)?;
    eprintln!("{}", outcome_line(&last));
    Ok(end)
}

/// How the wait shows that it is waiting.
enum Progress {
    /// One line on the terminal, redrawn each poll.
    Line { drawn: usize },
    /// A line on stderr when the status or the apps done change (a pipe, a CI log).
    Changes { last: Option<String> },
}

impl Progress {
    fn show(&mut self, p: &Preview, took: Duration) {
        match self {
            Self::Line { drawn } => {
                *drawn = render::redraw(*drawn, &[format!("{} · {}", progress(p), elapsed(took))]);
            }
            Self::Changes { last } => {
                let line = progress(p);
                if last.as_deref() != Some(line.as_str()) {
                    eprintln!("{line}");
                    *last = Some(line);
                }
            }
        }
    }

    fn note(&mut self, text: &str) {
        self.clear();
        eprintln!("{text}");
    }

    fn clear(&mut self) {
        if let Self::Line { drawn } = self {
            *drawn = render::redraw(*drawn, &[]);
        }
    }
}

/// `plan preview p-… · shop at 1a2b3c4 · RUNNING · 1/3 apps read`.
fn progress(p: &Preview) -> String {
    let read = p
        .apps
        .iter()
        .filter(|a| a.result != PreviewResult::Pending)
        .count();
    let apps = match (p.status, p.apps.len()) {
        (PreviewStatus::Queued, _) => String::new(),
        (_, 0) => " · no app touched".to_owned(),
        (_, n) => format!(" · {read}/{n} apps read"),
    };
    format!(
        "plan preview {} · {} at {} · {}{apps}",
        p.id,
        p.repo,
        p.head.short(),
        p.status.as_str()
    )
}

/// Follows `preview` until it ends, the timeout passes or the server stays unreachable past
/// `retry_for`: the preview as last seen, and the exit that says so. Another error (the
/// preview gone, the token refused) ends the wait as "could not be made".
async fn wait(
    client: &Client,
    mut preview: Preview,
    options: &WaitOptions,
    mut progress: Progress,
) -> (Preview, Exit) {
    let mut patience = Patience::new(options);
    let started = std::time::Instant::now();
    let mut backoff = POLL;
    loop {
        if preview.status.is_terminal() {
            progress.clear();
            let exit = exit_for(&preview);
            return (preview, exit);
        }
        progress.show(&preview, started.elapsed());
        let Some(left) = patience.left() else {
            progress.note(&format!(
                "gave up after {}: plan preview {} is still {} (it goes on; `gannet plan-preview show {}`)",
                elapsed(patience.timeout()),
                preview.id,
                preview.status.as_str(),
                preview.id
            ));
            return (preview, Exit::Timeout);
        };
        let pause = if patience.down() { backoff } else { POLL };
        tokio::time::sleep(pause.min(left)).await;
        match client.preview(preview.id.as_str()).await {
            Ok(p) => {
                if patience.answered() {
                    progress.note("the server answers again");
                }
                backoff = POLL;
                preview = p;
            }
            Err(err) if Patience::is_unreachable(&err) => {
                let down = patience.unanswered();
                if down.first {
                    progress.note(&format!("{err:#}; retrying"));
                }
                if let Some(down_for) = down.given_up_after {
                    progress.note(&format!(
                        "gave up waiting for plan preview {}: the server was unreachable for {} ({err:#})",
                        preview.id,
                        elapsed(down_for)
                    ));
                    return (preview, Exit::Unreachable);
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(err) => {
                progress.note(&format!("error: {err:#}"));
                return (preview, Exit::NotCompared);
            }
        }
    }
}

/// The exit for a preview that ended, as `apps diff --exit-code`'s: 0 merging changes
/// nothing, 1 it changes something, 2 the preview could not be made (an app's failed, the
/// head could not be read, a newer head superseded it).
pub(crate) fn exit_for(p: &Preview) -> Exit {
    match (p.status, p.result) {
        (PreviewStatus::Done, PreviewResult::NoChanges) => Exit::Success,
        (PreviewStatus::Done, PreviewResult::Changes) => Exit::Error,
        _ => Exit::NotCompared,
    }
}

/// The line on stderr that says how a waited-for preview ended.
fn outcome_line(p: &Preview) -> String {
    let changed = p
        .apps
        .iter()
        .filter(|a| a.result == PreviewResult::Changes)
        .count();
    let failed = p
        .apps
        .iter()
        .filter(|a| a.result == PreviewResult::Error)
        .count();
    let what = match (p.status, p.result) {
        (PreviewStatus::Done, PreviewResult::NoChanges) => "merging changes nothing".to_owned(),
        (PreviewStatus::Done, PreviewResult::Changes) => {
            format!("merging changes {changed} of {} apps", p.apps.len())
        }
        (PreviewStatus::Done, _) => {
            format!("{failed} of {} apps could not be previewed", p.apps.len())
        }
        (status, _) => status.as_str().to_owned(),
    };
    match p.reason.as_str() {
        "" => format!("plan preview {} ended {}: {what}", p.id, p.status.as_str()),
        reason => format!(
            "plan preview {} ended {}: {what} ({reason})",
            p.id,
            p.status.as_str()
        ),
    }
}

fn write_out(out: Option<&PathBuf>, p: &Preview) -> anyhow::Result<()> {
    let Some(path) = out else {
        return Ok(());
    };
    let text = format!("{}\n", serde_json::to_string_pretty(p)?);
    std::fs::write(path, text)
        .map_err(|e| anyhow::anyhow!("cannot write the preview to {}: {e}", path.display()))
}

fn print_preview(p: &Preview, output: Output) -> anyhow::Result<()> {
    let now = now();
    output.print(&Shown {
        json: p,
        names: vec![p.id.to_string()],
        table: &|columns| show_text(p, columns, now),
    })
}

fn now() -> Millis {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
