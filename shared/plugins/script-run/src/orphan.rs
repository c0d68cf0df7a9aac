//! The script an interrupted attempt left running: its process group is recorded in stage
//! metadata, and the next attempt kills it, if it still runs this deployment's script, before
//! starting the script again, so two copies never run at once.
//!
//! A process id may have been reused since, so a group is killed only when `/proc` shows one
//! of its live processes carrying `SR_DEPLOYMENT_ID=<this deployment>` in its environment. The
//! shell that led the group may be gone while what it started still runs, so every member is
//! looked at, not only the leader. When `/proc` cannot be read, nothing is killed.

use std::fs;
use std::time::Duration;

use gannet_core::plugin::StepIo;
use gannet_core::ports::Metadata;
use tokio::time::{sleep, Instant};

use crate::runner::kill_group_id;

/// Stage metadata key: the process group of the script the latest attempt started.
pub(crate) const PGID: &str = "pgid";
/// How long a killed group may take to disappear.
const GONE_LIMIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub(crate) enum OrphanError {
    #[error("the previous attempt's script (process group {pgid}) still runs after SIGKILL")]
    StillRunning { pgid: u32 },
}

/// Kills the process group recorded in `metadata` if it still runs a script of the deployment
/// `deployment_id`, and waits (bounded) until it is gone.
pub(crate) async fn kill_previous(
    metadata: &Metadata,
    deployment_id: &str,
    io: &dyn StepIo,
) -> Result<(), OrphanError> {
    // 0 and 1 name no script's group, and `kill -- -1` would signal every process.
    let Some(pgid) = metadata
        .get(PGID)
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&id| id > 1)
    else {
        return Ok(());
    };
    let marker = format!("SR_DEPLOYMENT_ID={deployment_id}");
    let group = scan(pgid, Some(marker)).await;
    if !group.carries_marker || own_group() == Some(pgid) {
        return Ok(());
    }
    kill_group_id(pgid).await;
    let deadline = Instant::now() + GONE_LIMIT;
    while scan(pgid, None).await.members > 0 {
        if Instant::now() >= deadline {
            return Err(OrphanError::StillRunning { pgid });
        }
        sleep(POLL).await;
    }
    io.log(&format!(
        "killed the previous attempt's script (process group {pgid}) before running again"
    ))
    .await;
    Ok(())
}

/// The live (not zombie) processes of one group, as `/proc` shows them.
#[derive(Debug, Default)]
struct Group {
    members: usize,
    /// Whether a member's environment holds the marker looked for.
    carries_marker: bool,
}

async fn scan(pgid: u32, marker: Option<String>) -> Group {
    tokio::task::spawn_blocking(move || scan_proc(pgid, marker.as_deref()))
        .await
        .unwrap_or_default()
}

fn scan_proc(pgid: u32, marker: Option<&str>) -> Group {
    let mut group = Group::default();
    let Ok(entries) = fs::read_dir("/proc") else {
        return group;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if process_group(pid) != Some(pgid) {
            continue;
        }
        group.members += 1;
        if let Some(marker) = marker {
            group.carries_marker |= environ_has(pid, marker);
        }
    }
    group
}

/// The group of a live process; `None` if it is gone, a zombie, or unreadable.
fn process_group(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces and ')': the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let _parent = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    (state != "Z" && state != "X").then_some(pgrp)
}

/// Whether `/proc/<pid>/environ` holds the variable `marker` (`NAME=value`) exactly.
fn environ_has(pid: u32, marker: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|var| var == marker.as_bytes()))
        .unwrap_or(false)
}

/// gannet's own process group, which is never killed.
fn own_group() -> Option<u32> {
    process_group(std::process::id())
}
