//! How a job is kept away from gannet's keys: a Landlock ruleset and, when gannet runs as
//! root, another uid.
//!
//! A job's first process (the wrapper, gannet's uid, outside the sandbox) records the job's
//! files; the script itself runs through a launcher, `gannet __job-sandbox <job dir> <cmd…>`,
//! which reads the job's [`Policy`] (`sandbox.json`, written by gannet), confines itself and
//! `exec`s the command. Everything here is safe code: the `landlock` crate wraps the system
//! calls, and `CommandExt::uid`/`gid`/`exec` drop the uid and replace the process.
//!
//! What a sandboxed job may reach (Landlock is an allow list, so "everything but" is built by
//! allowing the siblings of each protected path, down to it):
//!
//! | access        | paths                                                                 |
//! |---------------|-----------------------------------------------------------------------|
//! | read, execute | `/`, except `/dev` and the protected paths; `jobs.sandbox.allowRead`; each directory on the job's `PATH` (unless inside gannet's config or state) |
//! | read, write   | the job's `work/`, `out/`, `tmp/` (its `TMPDIR`), `home/` (its `HOME`) and output; `/tmp`, `/var/tmp`; `jobs.sandbox.allowWrite` |
//! | read          | the job's `in/` and script; `/dev/random`, `/dev/urandom`             |
//! | read, write   | `/dev/null`, `/dev/zero`, `/dev/full`                                 |
//! | nothing       | gannet's config directory, tokens file, state directory (every other job, the checked-out trees, the state file), the secret files gannet.yaml names, gannet's `HOME` |
//!
//! A sandboxed job also cannot signal a process outside its sandbox (Landlock's signal scope,
//! Linux 6.12 and later).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

/// The hidden command of the gannet binary that confines a job and runs it.
pub const LAUNCHER_COMMAND: &str = "__job-sandbox";
/// The file in a job's directory holding its [`Policy`].
pub const POLICY_FILE: &str = "sandbox.json";

/// The Landlock ABI whose file-system rights are asked for; an older kernel enforces what it
/// knows (best effort) and the job's log says so.
const FS_ABI: ABI = ABI::V5;

/// Devices a job may read and write.
const DEVICES_RW: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];
/// Devices a job may read.
const DEVICES_R: [&str; 2] = ["/dev/random", "/dev/urandom"];
/// Shared scratch directories every job may write (the job's own `TMPDIR` is private).
const SHARED_TMP: [&str; 2] = ["/tmp", "/var/tmp"];

/// Whether jobs are confined with Landlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Landlock {
    /// Confine every job (the kernel permitting; otherwise each job's log says it is not).
    On,
    /// The operator turned it off (`jobs.sandbox.landlock: false`).
    Off,
}

/// The uid and gid jobs run as (`jobs.runAs`) when gannet runs as root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

/// How every job of a runner is confined: set once by `gannet up`.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The gannet binary, which confines a job (`gannet __job-sandbox`) and then runs it.
    pub launcher: PathBuf,
    pub landlock: Landlock,
    pub run_as: Option<RunAs>,
    /// gannet's own files and directories: no job reaches them (its own directory aside).
    pub protect: Vec<PathBuf>,
    /// gannet's `HOME` (its AWS, git and kube credentials): no job reads it, but a directory
    /// on the job's `PATH` inside it (`~/.local/bin`) stays usable.
    pub home: Option<PathBuf>,
    /// More directories jobs may read (`jobs.sandbox.allowRead`).
    pub allow_read: Vec<PathBuf>,
    /// More directories jobs may write (`jobs.sandbox.allowWrite`).
    pub allow_write: Vec<PathBuf>,
}

/// One job's confinement, as written to its [`POLICY_FILE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub landlock: Landlock,
    pub run_as: Option<RunAs>,
    /// Readable, with the protected paths cut out.
    pub read: Vec<PathBuf>,
    /// Writable, with the protected paths cut out.
    pub write: Vec<PathBuf>,
    /// Never reachable (unless listed in `own_*`).
    pub protect: Vec<PathBuf>,
    /// The job's own paths, its `PATH`'s directories and the devices: allowed as they are,
    /// even inside a protected one.
    pub own_read: Vec<PathBuf>,
    pub own_write: Vec<PathBuf>,
}

impl Sandbox {
    /// The policy of the job whose directory is `dir`, with environment `env` (its `PATH`'s
    /// directories are readable, so the programs it names can run).
    pub fn policy(&self, dir: &Path, env: &[(String, String)]) -> Policy {
        let strict: Vec<PathBuf> = self.protect.iter().map(|p| resolved(p)).collect();
        let path_dirs: Vec<PathBuf> = env
            .iter()
            .filter(|(k, _)| k == "PATH")
            .flat_map(|(_, v)| v.split(':'))
            .filter(|p| p.starts_with('/'))
            .map(|p| resolved(Path::new(p)))
            .filter(|p| !strict.iter().any(|s| p.starts_with(s) || s.starts_with(p)))
            .collect();
        let mut protect = self.protect.clone();
        protect.extend(self.home.iter().cloned());
        protect.push(PathBuf::from("/dev"));
        Policy {
            landlock: self.landlock,
            run_as: self.run_as,
            read: std::iter::once(PathBuf::from("/"))
                .chain(self.allow_read.iter().cloned())
                .collect(),
            write: SHARED_TMP
                .iter()
                .map(PathBuf::from)
                .chain(self.allow_write.iter().cloned())
                .collect(),
            protect,
            own_read: [dir.join("in"), dir.join("script")]
                .into_iter()
                .chain(path_dirs)
                .chain(DEVICES_R.iter().map(PathBuf::from))
                .collect(),
            own_write: ["work", "out", "tmp", "home", "output.log"]
                .iter()
                .map(|p| dir.join(p))
                .chain(DEVICES_RW.iter().map(PathBuf::from))
                .collect(),
        }
    }

    /// The launcher's command line before the job's command.
    pub(super) fn launcher_args(&self, dir: &Path) -> Vec<OsString> {
        vec![
            self.launcher.clone().into_os_string(),
            LAUNCHER_COMMAND.into(),
            dir.as_os_str().to_owned(),
        ]
    }
}

/// The paths a rule list gives, each of `roots` with the `protect`ed paths cut out: a root
/// that holds a protected path is replaced by its entries (recursively, down to the protected
/// path), and a protected root is dropped. Paths are taken as they resolve (symlinks followed).
pub fn carve(roots: &[PathBuf], protect: &[PathBuf]) -> Vec<PathBuf> {
    let protect: Vec<PathBuf> = protect.iter().map(|p| resolved(p)).collect();
    let mut out = Vec::new();
    for root in roots {
        carve_into(&resolved(root), &protect, &mut out, 0);
    }
    out.sort();
    out.dedup();
    out
}

/// Deeper than this, a directory holding a protected path is dropped whole.
const MAX_CARVE_DEPTH: usize = 32;

fn carve_into(root: &Path, protect: &[PathBuf], out: &mut Vec<PathBuf>, depth: usize) {
    if protect.iter().any(|p| root.starts_with(p)) {
        return;
    }
    if !protect.iter().any(|p| p.starts_with(root)) {
        out.push(root.to_owned());
        return;
    }
    if depth >= MAX_CARVE_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = root.join(entry.file_name());
        // A link inside is taken as it is: allowing it allows only what it names, checked
        // where it leads.
        let path = if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            resolved(&path)
        } else {
            path
        };
        carve_into(&path, protect, out, depth + 1);
    }
}

/// `path` made absolute and resolved when it exists; as written (normalised) otherwise.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        path.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect()
    })
}

/// What confining the calling thread achieved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confined {
    /// Every right asked for is enforced.
    Fully,
    /// The kernel enforces part of the rights (an older Landlock ABI).
    Partly(String),
    /// Not confined, and why.
    Not(String),
}

/// Confines the calling thread (and what it `exec`s) to `policy`.
pub fn confine(policy: &Policy) -> Result<Confined, landlock::RulesetError> {
    if policy.landlock == Landlock::Off {
        return Ok(Confined::Not(
            "Landlock is turned off (jobs.sandbox.landlock: false)".into(),
        ));
    }
    let read = carve(&policy.read, &policy.protect);
    let write = carve(&policy.write, &policy.protect);
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))?
        .scope(Scope::Signal)?
        .create()?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(FS_ABI)))?
        .add_rules(path_beneath_rules(
            &policy.own_read,
            AccessFs::from_read(FS_ABI),
        ))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(FS_ABI)))?
        .add_rules(path_beneath_rules(
            &policy.own_write,
            AccessFs::from_all(FS_ABI),
        ))?
        .restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Confined::Fully,
        RulesetStatus::PartiallyEnforced => Confined::Partly(format!(
            "this kernel enforces only part of Landlock's rights ({})",
            describe(status.landlock)
        )),
        RulesetStatus::NotEnforced => Confined::Not(describe(status.landlock)),
    })
}

fn describe(status: LandlockStatus) -> String {
    match status {
        LandlockStatus::NotEnabled => {
            "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot \
             parameter)"
                .into()
        }
        LandlockStatus::NotImplemented => {
            "this kernel has no Landlock (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)"
                .into()
        }
        LandlockStatus::Available { effective_abi, .. } => {
            format!("Landlock ABI {effective_abi:?}")
        }
    }
}

/// The warning a job's log and gannet's start carry when jobs are not confined by Landlock.
pub fn not_sandboxed(reason: &str, run_as: Option<RunAs>) -> String {
    match run_as {
        Some(RunAs { uid, gid }) => format!(
            "jobs are not sandboxed by Landlock: {reason}; they run as uid {uid} gid {gid}, so \
             file permissions alone keep them from gannet's files"
        ),
        None => format!(
            "jobs are not sandboxed: {reason}; a job can read and write everything gannet's user \
             can, gannet's tokens file and state included"
        ),
    }
}

/// `gannet __job-sandbox <job dir> <command…>`: confines this process to the job's policy,
/// drops to its uid, and becomes the command. Returns only on failure, with the exit code
/// (126, as a shell does when it cannot run a command); what went wrong is on stderr, which
/// is the job's output.
pub fn launch(args: &[OsString]) -> i32 {
    let (Some(dir), Some(program)) = (args.first(), args.get(1)) else {
        eprintln!("usage: gannet {LAUNCHER_COMMAND} <job dir> <command> [args...]");
        return 2;
    };
    let dir = Path::new(dir);
    let policy = match read_policy(dir) {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!(
                "gannet: cannot read the job's sandbox policy {}: {err}",
                dir.join(POLICY_FILE).display()
            );
            return 126;
        }
    };
    match confine(&policy) {
        Ok(Confined::Fully) => {}
        Ok(Confined::Partly(why)) => eprintln!("gannet: this job is partly sandboxed: {why}"),
        Ok(Confined::Not(why)) => eprintln!("gannet: {}", not_sandboxed(&why, policy.run_as)),
        Err(err) => {
            // Confining was asked for and failed: running unconfined is not an option.
            eprintln!("gannet: cannot sandbox the job, so it does not run: {err}");
            return 126;
        }
    }
    let mut command = Command::new(program);
    command.args(&args[2..]);
    if let Some(RunAs { uid, gid }) = policy.run_as {
        // std clears the supplementary groups when root drops to another uid.
        command.uid(uid).gid(gid);
    }
    let err = command.exec();
    eprintln!("gannet: cannot run {}: {err}", Path::new(program).display());
    126
}

/// `gannet __job-sandbox --probe`: confines itself with an empty policy and says how that
/// went: `fully`, `partly: <why>` or `not: <why>` on stdout.
pub fn probe() -> i32 {
    let policy = Policy {
        landlock: Landlock::On,
        run_as: None,
        read: Vec::new(),
        write: Vec::new(),
        protect: Vec::new(),
        own_read: Vec::new(),
        own_write: Vec::new(),
    };
    match confine(&policy) {
        Ok(Confined::Fully) => println!("fully"),
        Ok(Confined::Partly(why)) => println!("partly: {why}"),
        Ok(Confined::Not(why)) => println!("not: {why}"),
        Err(err) => {
            println!("not: {err}");
            return 1;
        }
    }
    0
}

/// What the probe found: how jobs of this machine are confined.
pub fn probe_with(launcher: &Path) -> Confined {
    let out = Command::new(launcher)
        .args([LAUNCHER_COMMAND, "--probe"])
        .env_clear()
        .output();
    match out {
        Err(err) => Confined::Not(format!(
            "cannot run the launcher {}: {err}",
            launcher.display()
        )),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if text == "fully" {
                Confined::Fully
            } else if let Some(why) = text.strip_prefix("partly: ") {
                Confined::Partly(why.to_owned())
            } else {
                Confined::Not(text.strip_prefix("not: ").unwrap_or(&text).to_owned())
            }
        }
    }
}

fn read_policy(dir: &Path) -> io::Result<Policy> {
    let bytes = std::fs::read(dir.join(POLICY_FILE))?;
    serde_json::from_slice(&bytes).map_err(io::Error::other)
}

pub(super) fn write_policy(dir: &Path, policy: &Policy) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(policy).map_err(io::Error::other)?;
    std::fs::write(dir.join(POLICY_FILE), json)
}

#[cfg(test)]
mod tests;
