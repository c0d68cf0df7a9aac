//! `gannet deployments logs`: a stage's log (or the log of every stage that ran), printed once
//! or followed (`-f`) until the stage or the deployment ends. `--timestamps` puts each line's
//! time before it; a line the job wrote to its standard error is marked `stderr| ` (and red on
//! a terminal).

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use gannet_controller::{DeploymentView, StageView};

use crate::client::{Client, LogLine};
use crate::exit::Exit;
use crate::render::elapsed;
use crate::suggest;
use crate::wait::{Patience, WaitOptions};

/// How often a followed log is looked at.
const POLL: Duration = Duration::from_millis(500);

/// What marks a line from standard error.
const STDERR_MARK: &str = "stderr| ";

/// How each line prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    /// Each line after its time: RFC 3339, UTC, to the millisecond.
    pub timestamps: bool,
    /// Lines from standard error in red (for a terminal).
    pub colour: bool,
}

/// The line's text, marked `stderr| ` when the job wrote it to its standard error.
pub fn marked(line: &LogLine) -> String {
    if line.stderr {
        format!("{STDERR_MARK}{}", line.text)
    } else {
        line.text.clone()
    }
}

/// The line as `deployments logs` prints it in `style`.
fn shown(line: &LogLine, style: Style) -> String {
    let mut text = marked(line);
    if style.colour && line.stderr {
        text = format!("\x1b[31m{text}\x1b[0m");
    }
    if style.timestamps {
        let at = UNIX_EPOCH + Duration::from_millis(line.at);
        text = format!("{} {text}", humantime::format_rfc3339_millis(at));
    }
    text
}

/// The stage of `d` that `id` names; when none does, an error naming the closest ids (or the
/// stages whose name it is, such as `SCRIPT_RUN`).
fn stage<'a>(d: &'a DeploymentView, id: &str) -> anyhow::Result<&'a StageView> {
    if let Some(s) = d.stages.iter().find(|s| s.id.as_str() == id) {
        return Ok(s);
    }
    let mut named: Vec<&str> = d
        .stages
        .iter()
        .filter(|s| s.name.eq_ignore_ascii_case(id))
        .map(|s| s.id.as_str())
        .collect();
    named.truncate(3);
    let close = if named.is_empty() {
        suggest::closest(id, d.stages.iter().map(|s| s.id.as_str()))
    } else {
        named
    };
    let hint = suggest::did_you_mean(&close)
        .map(|h| format!("; {h}"))
        .unwrap_or_default();
    anyhow::bail!("deployment {} has no stage {id}{hint}", d.id)
}

/// The header before a stage's lines.
fn header(s: &StageView) -> String {
    format!("== {} ({})", s.id, s.name)
}

/// Prints the log of stage `only` of deployment `id`, or of every stage that ran.
pub async fn print(
    client: &Client,
    id: &str,
    only: Option<&str>,
    style: Style,
) -> anyhow::Result<()> {
    let d = client.deployment(id).await?;
    let only = only.map(|s| stage(&d, s)).transpose()?;
    for s in &d.stages {
        match only {
            Some(o) if o.id != s.id => continue,
            None if s.started_at.is_none() => continue,
            _ => {}
        }
        println!("{} {}", header(s), s.status.as_str());
        for line in client.all_logs(d.id.as_str(), s.id.as_str()).await? {
            println!("{}", shown(&line, style));
        }
    }
    Ok(())
}

/// Prints the log of stage `only` of deployment `id` (or of every stage) as it is written,
/// until the stage (or the deployment) ends: exit 0, whatever the outcome. Gives up after
/// `options.timeout` (5), or when the server stays unreachable past `options.retry_for` (6).
pub async fn follow(
    client: &Client,
    id: &str,
    only: Option<&str>,
    style: Style,
    options: &WaitOptions,
) -> anyhow::Result<Exit> {
    let mut patience = Patience::new(options);
    let mut follower = Follower {
        client,
        style,
        after: HashMap::new(),
    };
    let mut last_seen = String::new();
    loop {
        match follower.round(id, only).await {
            Ok(Round::Ended(how)) => {
                eprintln!("{how}");
                return Ok(Exit::Success);
            }
            Ok(Round::Going(what)) => {
                patience.answered();
                last_seen = what;
            }
            Err(err) if Patience::is_unreachable(&err) => {
                let down = patience.unanswered();
                if down.first {
                    eprintln!("{err:#}; retrying");
                }
                if let Some(down_for) = down.given_up_after {
                    eprintln!(
                        "gave up following the log of deployment {id}: the server was unreachable for {}",
                        elapsed(down_for)
                    );
                    return Ok(Exit::Unreachable);
                }
            }
            Err(err) => return Err(err),
        }
        let Some(left) = patience.left() else {
            eprintln!(
                "gave up after {}: {last_seen} (it goes on)",
                elapsed(options.timeout)
            );
            return Ok(Exit::Timeout);
        };
        tokio::time::sleep(POLL.min(left)).await;
    }
}

/// What one look at a followed log found.
enum Round {
    /// It goes on: what is still running, as the timeout's message says it.
    Going(String),
    /// The stage (or the deployment) ended: how.
    Ended(String),
}

/// A followed log: per stage, the last line printed.
struct Follower<'c> {
    client: &'c Client,
    style: Style,
    after: HashMap<String, u64>,
}

impl Follower<'_> {
    /// Prints the lines written since the last round. Whether it ended is read before the
    /// lines, so the lines written before the end are all printed.
    async fn round(&mut self, id: &str, only: Option<&str>) -> anyhow::Result<Round> {
        let d = self.client.deployment(id).await?;
        let only = only.map(|s| stage(&d, s)).transpose()?;
        let end = match only {
            Some(s) if s.status.is_finished() => Some(format!(
                "stage {} of deployment {} ended {}",
                s.id,
                d.id,
                s.status.as_str()
            )),
            _ if d.status.is_terminal() => {
                Some(format!("deployment {} ended {}", d.id, d.status.as_str()))
            }
            _ => None,
        };
        for s in &d.stages {
            if only.is_none_or(|o| o.id == s.id) {
                self.print_new(&d, s).await?;
            }
        }
        Ok(match (end, only) {
            (Some(how), _) => Round::Ended(how),
            (None, Some(s)) => Round::Going(format!(
                "stage {} of deployment {} is still {}",
                s.id,
                d.id,
                s.status.as_str()
            )),
            (None, None) => Round::Going(format!(
                "deployment {} is still {}",
                d.id,
                d.status.as_str()
            )),
        })
    }

    /// Prints the lines of stage `s` not printed yet (after its header, the first time).
    async fn print_new(&mut self, d: &DeploymentView, s: &StageView) -> anyhow::Result<()> {
        if s.started_at.is_none() {
            return Ok(());
        }
        let after = match self.after.get(s.id.as_str()) {
            Some(seq) => *seq,
            None => {
                println!("{}", header(s));
                self.after.insert(s.id.to_string(), 0);
                0
            }
        };
        let mut after = after;
        loop {
            let page = self
                .client
                .logs(d.id.as_str(), s.id.as_str(), after)
                .await?;
            let Some(last) = page.last() else {
                break;
            };
            after = last.seq;
            for line in &page {
                println!("{}", shown(line, self.style));
            }
            self.after.insert(s.id.to_string(), after);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, stderr: bool) -> LogLine {
        LogLine {
            seq: 1,
            at: 1_764_300_000_123,
            text: text.to_owned(),
            stderr,
        }
    }

    #[test]
    fn a_line_shows_its_time_and_whether_it_came_from_stderr() {
        let cases = [
            (line("built", false), Style::default(), "built"),
            (line("oops", true), Style::default(), "stderr| oops"),
            (
                line("built", false),
                Style {
                    timestamps: true,
                    colour: false,
                },
                "2025-11-28T03:20:00.123Z built",
            ),
            (
                line("oops", true),
                Style {
                    timestamps: true,
                    colour: true,
                },
                "2025-11-28T03:20:00.123Z \x1b[31mstderr| oops\x1b[0m",
            ),
            (
                line("built", false),
                Style {
                    timestamps: false,
                    colour: true,
                },
                "built",
            ),
        ];
        for (line, style, expected) in cases {
            assert_eq!(shown(&line, style), expected, "{style:?}");
        }
    }
}
