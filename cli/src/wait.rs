//! Waiting for a deployment to end: `sync --wait`, `rollback --wait`, `deployments wait` and
//! `deployments watch`. The wait polls the API; when the server cannot be reached (a restart)
//! it retries with backoff for up to `--retry-for`, so a deployment outlives its server's
//! restart without failing the script that waits for it.

use std::collections::{HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant, SystemTime};

use gannet_controller::{DeploymentView, StageView};
use gannet_domain::deployment::{DeploymentStatus, StageStatus};

use crate::client::{Client, Unreachable};
use crate::exit::Exit;
use crate::render::{self, approve_hint, elapsed, stage_elapsed};

/// How often a deployment is looked at.
const POLL: Duration = Duration::from_millis(500);
/// The longest pause between retries while the server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How many of the running stage's log lines a terminal shows.
const TAIL: usize = 5;

/// How long a wait may last.
#[derive(Clone, Copy, Debug)]
pub struct WaitOptions {
    /// Give up (exit 5) when the deployment has not ended by then.
    pub timeout: Duration,
    /// Give up (exit 6) when the server stays unreachable this long.
    pub retry_for: Duration,
}

/// The bounds of one wait across its rounds: its timeout, counted from its start, and how
/// long the server has been unreachable in a row (`retry_for`). Every loop that polls the API
/// until something happens keeps one.
pub struct Patience {
    started: Instant,
    down_since: Option<Instant>,
    options: WaitOptions,
}

/// The server did not answer this round.
pub struct Unanswered {
    /// The first round in a row without an answer.
    pub first: bool,
    /// Set once it has been unreachable past `retry_for`: for how long.
    pub given_up_after: Option<Duration>,
}

impl Patience {
    pub fn new(options: &WaitOptions) -> Self {
        Self {
            started: Instant::now(),
            down_since: None,
            options: *options,
        }
    }

    /// True for an error that says the server was not reached (worth another round).
    pub fn is_unreachable(err: &anyhow::Error) -> bool {
        err.chain().any(|e| e.is::<Unreachable>())
    }

    /// The server answered; true when it had been unreachable until now.
    pub fn answered(&mut self) -> bool {
        self.down_since.take().is_some()
    }

    /// The server did not answer.
    pub fn unanswered(&mut self) -> Unanswered {
        let first = self.down_since.is_none();
        let since = *self.down_since.get_or_insert_with(Instant::now);
        let down = since.elapsed();
        Unanswered {
            first,
            given_up_after: (down >= self.options.retry_for).then_some(down),
        }
    }

    /// True while the server is unreachable.
    pub fn down(&self) -> bool {
        self.down_since.is_some()
    }

    /// What is left of the timeout; `None` once it is up.
    pub fn left(&self) -> Option<Duration> {
        self.options
            .timeout
            .checked_sub(self.started.elapsed())
            .filter(|d| !d.is_zero())
    }

    /// The bounds of a wait nested in this one: what is left of the timeout.
    pub fn rest(&self) -> WaitOptions {
        WaitOptions {
            timeout: self.left().unwrap_or_default(),
            retry_for: self.options.retry_for,
        }
    }

    pub fn timeout(&self) -> Duration {
        self.options.timeout
    }
}

/// What the wait shows while it waits.
pub enum Display {
    /// Nothing (`deployments wait`): the outcome line only.
    Quiet,
    /// A line per change (and per log line with `logs`), appended: for pipes and files.
    Lines { to_stderr: bool, logs: bool },
    /// The deployment redrawn in place: stages, elapsed times, the running stage's last log
    /// lines and how to approve a waiting stage. For a terminal.
    Board,
}

impl Display {
    /// The display for a command printing to stdout: redrawn on a terminal, appended lines
    /// otherwise; with `--json` (stdout holds the JSON alone) lines on stderr.
    pub fn for_stdout(json: bool, logs: bool) -> Self {
        if json {
            Self::Lines {
                to_stderr: true,
                logs,
            }
        } else if std::io::stdout().is_terminal() {
            Self::Board
        } else {
            Self::Lines {
                to_stderr: false,
                logs,
            }
        }
    }
}

/// How a wait ended.
pub struct Outcome {
    id: String,
    last: Option<DeploymentView>,
    end: End,
}

enum End {
    /// The deployment reached a terminal status.
    Ended,
    TimedOut(Duration),
    Unreachable(String),
}

impl Outcome {
    /// The deployment as last seen.
    pub fn last(&self) -> Option<&DeploymentView> {
        self.last.as_ref()
    }

    pub fn exit(&self) -> Exit {
        match (&self.end, self.last.as_ref().map(|d| d.status)) {
            (End::Ended, Some(DeploymentStatus::Success)) => Exit::Success,
            (End::Ended, Some(DeploymentStatus::Cancelled)) => Exit::Cancelled,
            (End::Ended, _) => Exit::Failure,
            (End::TimedOut(_), _) => Exit::Timeout,
            (End::Unreachable(_), _) => Exit::Unreachable,
        }
    }

    /// Says how the wait ended: the outcome on stderr (stdout may hold JSON).
    pub fn report(&self) {
        let status = |d: &DeploymentView| {
            let reason = if d.status_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.status_reason)
            };
            format!("{}{reason}", d.status.as_str())
        };
        let line = match (&self.end, &self.last) {
            (End::Ended, Some(d)) => format!("deployment {} ended {}", self.id, status(d)),
            (End::Ended, None) => format!("deployment {} ended", self.id),
            (End::TimedOut(after), Some(d)) => format!(
                "gave up after {}: deployment {} is still {} (it goes on; `gannet deployments watch {}` to follow it)",
                elapsed(*after),
                self.id,
                status(d),
                self.id
            ),
            (End::TimedOut(after), None) => {
                format!("gave up after {}: deployment {} not seen", elapsed(*after), self.id)
            }
            (End::Unreachable(why), _) => format!(
                "gave up waiting for deployment {}: {why}",
                self.id
            ),
        };
        eprintln!("{line}");
    }
}

/// Follows deployment `id` until it ends, the wait times out, or the server stays unreachable
/// past `options.retry_for`. Errors other than an unreachable server (no such deployment, a
/// refused token) end the wait at once.
pub async fn follow(
    client: &Client,
    id: &str,
    options: &WaitOptions,
    display: Display,
) -> anyhow::Result<Outcome> {
    let mut patience = Patience::new(options);
    let mut screen = Screen::new(display);
    let mut last: Option<DeploymentView> = None;
    let mut backoff = POLL;
    loop {
        match client.deployment(id).await {
            Ok(d) => {
                if patience.answered() {
                    screen.note("the server answers again");
                }
                backoff = POLL;
                screen.show(client, last.as_ref(), &d).await;
                let ended = d.status.is_terminal();
                last = Some(d);
                if ended {
                    screen.finish();
                    return Ok(Outcome {
                        id: id.to_owned(),
                        last,
                        end: End::Ended,
                    });
                }
            }
            Err(err) if Patience::is_unreachable(&err) => {
                let down = patience.unanswered();
                if down.first {
                    screen.note(&format!("{err:#}; retrying"));
                }
                if let Some(down_for) = down.given_up_after {
                    screen.finish();
                    return Ok(Outcome {
                        id: id.to_owned(),
                        last,
                        end: End::Unreachable(format!(
                            "the server was unreachable for {} ({err:#})",
                            elapsed(down_for)
                        )),
                    });
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(err) => {
                screen.finish();
                return Err(err);
            }
        }
        let Some(left) = patience.left() else {
            screen.finish();
            return Ok(Outcome {
                id: id.to_owned(),
                last,
                end: End::TimedOut(options.timeout),
            });
        };
        let pause = if patience.down() { backoff } else { POLL };
        tokio::time::sleep(pause.min(left)).await;
    }
}

/// Where the wait shows its progress.
struct Screen {
    display: Display,
    /// Per stage: the last log line seen, and the tail kept for the board.
    logs: HashMap<String, (u64, VecDeque<String>)>,
    /// Lines the board drew last time (to draw over them).
    drawn: usize,
    /// A note for the board's last line (the server is unreachable…).
    note: Option<String>,
}

impl Screen {
    fn new(display: Display) -> Self {
        Self {
            display,
            logs: HashMap::new(),
            drawn: 0,
            note: None,
        }
    }

    fn out(&self) -> Box<dyn Write> {
        match self.display {
            Display::Lines {
                to_stderr: true, ..
            } => Box::new(std::io::stderr()),
            _ => Box::new(std::io::stdout()),
        }
    }

    /// A passing remark: its own line, or the board's last line.
    fn note(&mut self, text: &str) {
        match self.display {
            Display::Quiet => eprintln!("{text}"),
            Display::Lines { .. } => {
                let _ = writeln!(self.out(), "{text}");
            }
            Display::Board => self.note = Some(text.to_owned()),
        }
    }

    async fn show(&mut self, client: &Client, before: Option<&DeploymentView>, d: &DeploymentView) {
        match self.display {
            Display::Quiet => {}
            Display::Lines { logs, .. } => {
                let mut out = self.out();
                let _ = render::print_changes(&mut out, before, d);
                for s in d.stages.iter().filter(|s| waits_for_approval(s)) {
                    let was_waiting = before
                        .and_then(|b| b.stages.iter().find(|o| o.id == s.id))
                        .is_some_and(waits_for_approval);
                    if !was_waiting {
                        let _ = writeln!(out, "  {}", approve_hint(d, s));
                    }
                }
                if logs {
                    for s in d.stages.iter().filter(|s| s.started_at.is_some()) {
                        for line in self.new_lines(client, d, s).await {
                            let _ = writeln!(out, "    {} | {line}", s.id);
                        }
                    }
                }
            }
            Display::Board => {
                let current = d
                    .stages
                    .iter()
                    .filter(|s| s.started_at.is_some())
                    .max_by_key(|s| (s.status == StageStatus::Running, s.started_at.clone()));
                if let Some(s) = current {
                    self.new_lines(client, d, s).await;
                }
                let board = self.board(d, current.map(|s| s.id.as_str()));
                self.draw(&board);
            }
        }
    }

    /// The log lines of stage `s` not seen yet (kept as the stage's tail for the board).
    async fn new_lines(
        &mut self,
        client: &Client,
        d: &DeploymentView,
        s: &StageView,
    ) -> Vec<String> {
        let (after, tail) = self.logs.entry(s.id.to_string()).or_default();
        // An unreachable server shows up on the next poll of the deployment.
        let Ok(lines) = client.logs(d.id.as_str(), s.id.as_str(), *after).await else {
            return Vec::new();
        };
        if let Some(l) = lines.last() {
            *after = l.seq;
        }
        let texts: Vec<String> = lines.iter().map(crate::logs::marked).collect();
        for t in texts.iter().rev().take(TAIL).rev() {
            tail.push_back(t.clone());
            if tail.len() > TAIL {
                tail.pop_front();
            }
        }
        texts
    }

    fn board(&self, d: &DeploymentView, current: Option<&str>) -> Vec<String> {
        let now = SystemTime::now();
        let mut lines = vec![format!(
            "deployment {} · {} at {} · {}{}",
            d.id,
            d.app,
            &d.commit[..7.min(d.commit.len())],
            d.status.as_str(),
            if d.status_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.status_reason)
            }
        )];
        let width = d
            .stages
            .iter()
            .map(|s| s.id.as_str().len())
            .max()
            .unwrap_or(0);
        let name_width = d.stages.iter().map(|s| s.name.len()).max().unwrap_or(0);
        for s in d
            .stages
            .iter()
            .filter(|s| s.visible || s.started_at.is_some())
        {
            let took = stage_elapsed(s, now).map(elapsed).unwrap_or_default();
            lines.push(format!(
                "  {} {:<width$}  {:<name_width$}  {:<15} {took}",
                mark(s.status),
                s.id.as_str(),
                s.name,
                s.status.as_str(),
            ));
            if waits_for_approval(s) {
                lines.push(format!("      {}", approve_hint(d, s)));
            }
        }
        if let Some(id) = current {
            if let Some((_, tail)) = self.logs.get(id).filter(|(_, t)| !t.is_empty()) {
                lines.push(format!("  {id} log:"));
                lines.extend(tail.iter().map(|l| format!("    {l}")));
            }
        }
        if let Some(note) = &self.note {
            lines.push(note.clone());
        }
        lines
    }

    /// Draws `lines` over what was drawn last.
    fn draw(&mut self, lines: &[String]) {
        self.drawn = render::redraw(self.drawn, lines);
    }

    fn finish(&mut self) {
        let _ = self.out().flush();
    }
}

fn waits_for_approval(s: &StageView) -> bool {
    s.presentation.approvable
}

fn mark(status: StageStatus) -> &'static str {
    match status {
        StageStatus::Success => "✓",
        StageStatus::Failure => "✗",
        StageStatus::Running => "▸",
        StageStatus::Cancelled | StageStatus::Exited => "■",
        StageStatus::Skipped => "-",
        StageStatus::NotStartedYet => "·",
    }
}

/// What `apps wait` waits for.
pub enum AppGoal<'a> {
    /// The app's deployment of the commit (a full SHA or a prefix of one).
    Commit(&'a str),
    /// The app idle (no deployment under way or pending) and SYNCED.
    Idle,
}

/// Waits for app `app` to reach `goal`: the deployment of a commit, followed to its end (or
/// the commit judged and not deploying the app: success), or the app idle and SYNCED. Exit
/// codes as for a deployment's wait; an idle app that is not SYNCED is a failure (3).
pub async fn app(
    client: &Client,
    app: &str,
    goal: AppGoal<'_>,
    options: &WaitOptions,
    display: Display,
) -> anyhow::Result<Exit> {
    let mut patience = Patience::new(options);
    let mut display = Some(display);
    loop {
        let seen = async {
            let view = client.app(app).await?;
            let recent = client.deployments(Some(view.id.as_str()), &[], 50).await?;
            anyhow::Ok((view, recent))
        }
        .await;
        match seen {
            Ok((view, recent)) => {
                patience.answered();
                let left = patience.rest();
                match goal {
                    AppGoal::Commit(sha) => {
                        if let Some(d) = recent.iter().find(|d| d.commit.starts_with(sha)) {
                            let show = display.take().unwrap_or(Display::Quiet);
                            let outcome = follow(client, d.id.as_str(), &left, show).await?;
                            outcome.report();
                            return Ok(outcome.exit());
                        }
                        if view
                            .checked_commit
                            .as_deref()
                            .is_some_and(|c| c.starts_with(sha))
                        {
                            eprintln!(
                                "commit {sha} does not deploy {}: the trigger judged it and started nothing",
                                view.name
                            );
                            return Ok(Exit::Success);
                        }
                    }
                    AppGoal::Idle => {
                        let under_way = view
                            .active_deployment
                            .as_ref()
                            .map(|id| id.to_string())
                            .or_else(|| {
                                recent
                                    .iter()
                                    .find(|d| d.status == DeploymentStatus::Pending)
                                    .map(|d| d.id.to_string())
                            });
                        if let Some(id) = under_way {
                            let show = display.take().unwrap_or(Display::Quiet);
                            let outcome = follow(client, &id, &left, show).await?;
                            if outcome.exit() != Exit::Success {
                                outcome.report();
                                return Ok(outcome.exit());
                            }
                            continue;
                        }
                        let status = view.sync_status.as_str();
                        eprintln!("{} is idle and {status}: {}", view.name, view.sync_reason);
                        return Ok(
                            if view.sync_status == gannet_domain::app::SyncStatus::Synced {
                                Exit::Success
                            } else {
                                Exit::Failure
                            },
                        );
                    }
                }
            }
            Err(err) if Patience::is_unreachable(&err) => {
                if let Some(down_for) = patience.unanswered().given_up_after {
                    eprintln!(
                        "gave up waiting for {app}: the server was unreachable for {} ({err:#})",
                        elapsed(down_for)
                    );
                    return Ok(Exit::Unreachable);
                }
            }
            Err(err) => return Err(err),
        }
        let Some(left) = patience.left() else {
            let what = match goal {
                AppGoal::Commit(sha) => format!("no deployment of commit {sha} for {app} yet"),
                AppGoal::Idle => format!("{app} is not idle yet"),
            };
            eprintln!("gave up after {}: {what}", elapsed(patience.timeout()));
            return Ok(Exit::Timeout);
        };
        tokio::time::sleep(POLL.min(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patience_counts_an_outage_from_its_first_miss_and_the_timeout_from_the_start() {
        let options = WaitOptions {
            timeout: Duration::from_secs(60),
            retry_for: Duration::from_secs(60),
        };
        let mut p = Patience::new(&options);
        assert!(!p.answered(), "nothing was down");
        let miss = p.unanswered();
        assert!(miss.first && miss.given_up_after.is_none());
        assert!(p.down());
        let again = p.unanswered();
        assert!(!again.first && again.given_up_after.is_none());
        assert!(p.answered(), "it had been down");
        assert!(
            !p.down() && p.unanswered().first,
            "a new outage starts anew"
        );
        assert!(p.left().is_some_and(|l| l <= options.timeout));

        let impatient = WaitOptions {
            timeout: Duration::ZERO,
            retry_for: Duration::ZERO,
        };
        let mut p = Patience::new(&impatient);
        assert!(p.unanswered().given_up_after.is_some());
        assert_eq!(p.left(), None);
        assert_eq!(p.rest().timeout, Duration::ZERO);
    }
}
