//! Runs one script with `sh -c` in its own process group, streams its output line by line
//! into the stage log, and kills the whole group when the time is up.
//!
//! The group is recorded in stage metadata before the script starts (see [`crate::orphan`]):
//! the shell first waits for one line on stdin, written once the record is saved. If gannet
//! dies before that, the shell reads end of file and exits without running the script.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gannet_core::plugin::{StepError, StepIo};
use gannet_core::ports::Metadata;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, timeout, Instant};

use crate::orphan::PGID;

/// A longer line is cut to this many bytes.
pub(crate) const MAX_LINE_BYTES: usize = 4096;
/// The stage log keeps this many lines of a script's output; the rest is counted, not kept.
pub(crate) const MAX_LINES: usize = 10_000;
/// After the script exits, how long output from processes it left behind is still read
/// (Go's `exec.Cmd.WaitDelay`, which PipeCD sets to 1s). They are killed after that.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// A bound on waiting for a killed process to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(5);
/// `sh -c GATE sh <script>`: waits for the go line, then becomes `sh -c <script>` (same
/// process, so the same group and environment) with stdin from /dev/null.
const GATE: &str = r#"IFS= read -r go || exit 125; exec sh -c "$1" </dev/null"#;

/// Where setsid(1) may be.
const SETSID: [&str; 2] = ["/usr/bin/setsid", "/bin/setsid"];

/// One script to run.
pub(crate) struct Script<'a> {
    pub(crate) run: &'a str,
    pub(crate) dir: &'a Path,
    /// The script's whole environment: the allow-listed part of gannet's, then the `SR_*`
    /// variables and `with.env`. Nothing else of gannet's environment reaches it.
    pub(crate) env: Vec<(String, String)>,
    /// How long the script may run.
    pub(crate) limit: Duration,
    pub(crate) on_drop: OnDrop,
}

/// What happens to a running script when its step is dropped before the script ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum OnDrop {
    /// The shell is killed; what it started in the background is left to the next attempt.
    #[default]
    KillShell,
    /// Everything keeps running, as when gannet itself is killed (tests make orphans so).
    #[cfg(test)]
    Leave,
}

/// How a script ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptEnd {
    Exited(i32),
    Signalled(i32),
    TimedOut,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("could not start `sh -c` in {dir}")]
    Spawn {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not record the script's process group")]
    RecordGroup {
        #[source]
        source: StepError,
    },
    #[error("could not let the script start")]
    Release {
        #[source]
        source: io::Error,
    },
    #[error("could not wait for the script")]
    Wait {
        #[source]
        source: io::Error,
    },
}

/// Runs `script`, logging its stdout and stderr through `io` as the lines arrive.
pub(crate) async fn run(script: Script<'_>, io: &dyn StepIo) -> Result<ScriptEnd, RunError> {
    let deadline = Instant::now() + script.limit;
    // The script leads a session of its own (setsid(1), from util-linux, where there is one:
    // std has no safe setsid), so it has no terminal and cannot signal gannet's group; where
    // there is none, it still leads a process group of its own.
    let mut command = match SETSID.iter().find(|p| Path::new(p).is_file()) {
        Some(setsid) => {
            let mut c = Command::new(setsid);
            c.arg("sh");
            c
        }
        None => {
            let mut c = Command::new("sh");
            c.process_group(0);
            c
        }
    };
    command.env_clear();
    let mut child = command
        .arg("-c")
        .arg(GATE)
        .arg("sh")
        .arg(script.run)
        .current_dir(script.dir)
        .envs(script.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(script.on_drop == OnDrop::KillShell)
        .spawn()
        .map_err(|source| RunError::Spawn {
            dir: script.dir.to_owned(),
            source,
        })?;
    // The shell leads its own session and process group, so the group id is its pid.
    let group = child.id();
    if let Err(err) = release(&mut child, group, io).await {
        kill_group(group, &mut child).await;
        let _ = timeout(REAP_LIMIT, child.wait()).await;
        return Err(err);
    }

    let (tx, mut lines) = mpsc::channel(64);
    let mut readers: Vec<JoinHandle<()>> = Vec::with_capacity(2);
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(read_lines(out, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(read_lines(err, tx.clone())));
    }
    drop(tx);

    let mut log = OutputLog {
        io,
        kept: 0,
        dropped: 0,
    };
    let mut pipes_open = true;
    let waited = loop {
        tokio::select! {
            line = lines.recv(), if pipes_open => match line {
                Some(line) => log.line(&line).await,
                None => pipes_open = false,
            },
            status = child.wait() => break Some(status),
            () = sleep_until(deadline) => break None,
        }
    };
    let end = match waited {
        Some(status) => {
            let status = status.map_err(|source| RunError::Wait { source })?;
            if pipes_open && !drain(&mut lines, &mut log, DRAIN_GRACE).await {
                // Something the script started in the background still holds its output.
                kill_group(group, &mut child).await;
                log.note("[the script exited; processes it left running were killed]")
                    .await;
                drain(&mut lines, &mut log, REAP_LIMIT).await;
            }
            match (status.code(), status.signal()) {
                (Some(code), _) => ScriptEnd::Exited(code),
                (None, Some(signal)) => ScriptEnd::Signalled(signal),
                (None, None) => ScriptEnd::Exited(-1),
            }
        }
        None => {
            kill_group(group, &mut child).await;
            let _ = timeout(REAP_LIMIT, child.wait()).await;
            drain(&mut lines, &mut log, DRAIN_GRACE).await;
            ScriptEnd::TimedOut
        }
    };
    for reader in readers {
        reader.abort();
    }
    log.finish().await;
    Ok(end)
}

/// Records the script's process group, then lets the gated shell run the script.
async fn release(child: &mut Child, group: Option<u32>, io: &dyn StepIo) -> Result<(), RunError> {
    if let Some(pgid) = group {
        io.save_metadata(Metadata::from([(PGID.to_owned(), pgid.to_string())]))
            .await
            .map_err(|source| RunError::RecordGroup { source })?;
    }
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(b"go\n")
            .await
            .map_err(|source| RunError::Release { source })?;
    }
    Ok(())
}

/// Logs what is left in `lines`; false if the pipes stayed open for `limit`.
async fn drain(
    lines: &mut mpsc::Receiver<String>,
    log: &mut OutputLog<'_>,
    limit: Duration,
) -> bool {
    let all = async {
        while let Some(line) = lines.recv().await {
            log.line(&line).await;
        }
    };
    timeout(limit, all).await.is_ok()
}

/// Kills every process in the script's group (the shell and whatever it started).
async fn kill_group(group: Option<u32>, child: &mut Child) {
    if let Some(pgid) = group {
        kill_group_id(pgid).await;
    }
    // If the group kill could not run, at least the shell dies.
    let _ = child.start_kill();
}

/// Sends SIGKILL to every process in group `pgid` (which must be above 1).
pub(crate) async fn kill_group_id(pgid: u32) {
    if pgid <= 1 {
        return;
    }
    // std offers no killpg without unsafe code; the shell's `kill` builtin does it.
    let killer = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -s KILL -- -{pgid} 2>/dev/null"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let _ = timeout(REAP_LIMIT, killer).await;
}

/// Sends each line of `pipe` (cut to [`MAX_LINE_BYTES`]) until end of file.
async fn read_lines<R: AsyncRead + Unpin>(pipe: R, tx: mpsc::Sender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok(buf) if !buf.is_empty() => buf,
            _ => break,
        };
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        cut |= chunk.len() > room;
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() && tx.send(finish_line(&mut line, &mut cut)).await.is_err() {
            return;
        }
    }
    if !line.is_empty() || cut {
        let _ = tx.send(finish_line(&mut line, &mut cut)).await;
    }
}

fn finish_line(line: &mut Vec<u8>, cut: &mut bool) -> String {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let mut text = String::from_utf8_lossy(line).into_owned();
    if text.len() > MAX_LINE_BYTES {
        // A character cut in half became U+FFFD, which is wider; keep to the byte cap.
        let end = (0..=MAX_LINE_BYTES)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(end);
    }
    if *cut {
        text.push_str(&format!(" [line cut at {MAX_LINE_BYTES} bytes]"));
    }
    line.clear();
    *cut = false;
    text
}

/// The stage log of one script's output, capped at [`MAX_LINES`].
struct OutputLog<'a> {
    io: &'a dyn StepIo,
    kept: usize,
    dropped: usize,
}

impl OutputLog<'_> {
    async fn line(&mut self, line: &str) {
        if self.kept < MAX_LINES {
            self.kept += 1;
            self.io.log(line).await;
        } else {
            self.dropped += 1;
        }
    }

    async fn note(&self, note: &str) {
        self.io.log(note).await;
    }

    async fn finish(&self) {
        if self.dropped > 0 {
            self.io
                .log(&format!(
                    "[{} more lines of output not shown: the log keeps the first {MAX_LINES}]",
                    self.dropped
                ))
                .await;
        }
    }
}
