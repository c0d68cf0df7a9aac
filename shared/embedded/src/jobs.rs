//! The embedded job runner: each job is a detached process tree that outlives `gannet up`.
//!
//! A job lives in its own directory under the runner's root, named by its key:
//!
//! | file         | written by | holds                                                      |
//! |--------------|------------|------------------------------------------------------------|
//! | `job.json`   | start      | when it was started, its timeout                           |
//! | `script`     | start      | the script                                                 |
//! | `work/`      | start      | a copy of the app's directory: the job's working directory |
//! | `claim`      | the job    | created (exclusively) by the process that runs the script  |
//! | `pid`        | the job    | that process's id, which leads the job's session and group |
//! | `output.log` | the job    | the script's stdout, and its stderr with each line marked (unmarked when it runs as another uid) |
//! | `rc`         | the job    | the script's exit code, written the moment it ends         |
//! | `exit`       | the job    | the same, once all of its stderr is in `output.log`        |
//! | `stopped`    | cancel     | why gannet stopped it (`cancelled`, `timeout`, `output`)   |
//! | `in/`        | start      | the files of earlier jobs it was given (`GANNET_JOB_IN`)   |
//! | `out/`       | the job    | the files it leaves (`GANNET_JOB_OUT`), read by `output`   |
//! | `tmp/`       | start      | the job's own `TMPDIR`, when sandboxed                     |
//! | `home/`      | start      | the job's own `HOME`, when sandboxed                       |
//! | `sandbox.json` | start    | how the job is confined ([`sandbox::Policy`])              |
//!
//! A job that names a cache ([`JobSpec::cache`]) gets `<root>/.cache/<name>/` in
//! [`CACHE_ENV`]: made by the first job of that name, kept across jobs and restarts, writable
//! by the job in its sandbox (and given to the `runAs` uid). Jobs of one cache may run at once;
//! the job locks what it shares there. Nothing prunes it: removing `<root>/.cache` (or one
//! name in it) while no job runs clears it.
//!
//! The directory is prepared aside and renamed into place, so a job either exists whole or
//! not at all. The process is started through `setsid -f`: it leads a session of its own, is
//! no child of gannet, and a SIGKILL of `gannet up` leaves it running. It runs the script only
//! after creating `claim` with `O_EXCL`, so however many times a start is retried, the script
//! runs once; a job that never claimed within [`LAUNCH_GRACE`] is claimed by the poll and
//! reported lost, so a late process cannot run it after that.
//!
//! Stopping a job (a cancel, its timeout) sends its group SIGTERM and kills what is left after
//! [`STOP_GRACE`]: a terraform apply stops gracefully and releases its state lock.
//!
//! With a [`Sandbox`] (`gannet up` always sets one), the script runs through the launcher
//! (`gannet __job-sandbox`), which confines it with Landlock and, when gannet runs as root and
//! `jobs.runAs` is set, drops it to another uid: it cannot read gannet's config, tokens or
//! state, nor write its own job's records (`claim`, `pid`, `exit`), which the wrapper keeps
//! outside the sandbox.
//!
//! A job is running while a live process of its group carries `GANNET_JOB=<key>` in its
//! environment (`/proc`): a reused process id never makes gannet wait for, or kill, a
//! process that is not the job's. Its processes gone and no `exit` written means lost.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use gannet_domain::duration::Millis;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{
    self, JobEnd, JobError, JobKey, JobPoll, JobRunner, JobSpec, CACHE_ENV, IN_ENV,
    MAX_OUTPUT_BYTES, OUT_ENV,
};
use serde::{Deserialize, Serialize};

pub mod sandbox;

pub use sandbox::{Landlock, RunAs, Sandbox};

/// A job that has not claimed its run this long after it was started never will.
pub const LAUNCH_GRACE: Duration = Duration::from_secs(30);
/// A job whose output passes this size is killed (the disk is not the job's to fill).
pub const OUTPUT_CAP: u64 = 256 * 1024 * 1024;
/// One poll reads at most this much output; the rest comes at the next.
const READ_CHUNK: usize = 1024 * 1024;
/// How long a killed job's processes may take to disappear.
const GONE_LIMIT: Duration = Duration::from_secs(5);
/// How long a stopped job has to end by itself after SIGTERM (terraform stops gracefully and
/// releases its state lock) before its processes are killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// The environment variable that marks a job's processes.
pub const MARKER: &str = "GANNET_JOB";

/// Where setsid(1) may be.
const SETSID: [&str; 2] = ["/usr/bin/setsid", "/bin/setsid"];

/// The job's first process: claims the run, records itself, then runs the script (through the
/// launcher that follows the job's directory in its arguments, if any) as [`RUN_MARKED`] or
/// [`RUN_PLAIN`] says, and records its exit code. Shell builtins only (the job's PATH is the
/// user's to set) and `/bin/sh`.
const WRAPPER: &str = r#"d=$1
shift
set -C
{ : >"$d/claim"; } 2>/dev/null || exit 0
set +C
echo $$ >"$d/pid"
cd "$d/work" || { echo 126 >"$d/exit"; exit 126; }
"#;

/// Standard output goes to `output.log` as it is; each line of standard error goes there after
/// [`gannet_domain::ports::STDERR_MARK`] (`\036`), through a loop that ends when the last
/// holder of the script's stderr closes it; then `rc` (written when the script ended) becomes
/// `exit`. A background process that keeps stderr open is waited for [`RC_GRACE`]
/// ([`recorded_end`]). The loop ignores SIGTERM: a stop signals the whole group, and a script
/// cleaning up on SIGTERM (terraform releasing its state lock) must still have its stderr read,
/// or its next line there (the shell's own `Terminated`) kills it with SIGPIPE; the loop ends
/// when the last writer has, or with the group's SIGKILL after the grace.
const RUN_MARKED: &str = r#"{ "$@" /bin/sh "$d/script" </dev/null 2>&1 >&3 3>&-; echo $? >"$d/rc"; } 3>>"$d/output.log" | { trap '' TERM; while IFS= read -r l || [ -n "$l" ]; do printf '\036%s\n' "$l"; done; } >>"$d/output.log"
read c <"$d/rc" && echo "$c" >"$d/exit"
"#;

/// For a job that runs as another uid: stdout and stderr both to `output.log`, unmarked. The
/// pipe [`RUN_MARKED`] reads would be gannet's, and a script that reopens `/dev/stderr` (as
/// `echo x >> /dev/stderr` does) could not; `output.log` is the job's own.
const RUN_PLAIN: &str = r#""$@" /bin/sh "$d/script" </dev/null >>"$d/output.log" 2>&1
echo $? >"$d/exit"
"#;
/// How long after its script ended a job waits for what it left in the background to close
/// its standard error, before the script's exit code counts without it.
const RC_GRACE: Duration = Duration::from_secs(2);

/// `job.json`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    started_at: Millis,
    timeout: GoDuration,
}

/// Runs jobs as detached processes under `root` (`gannet up` uses `<state dir>/jobs`).
#[derive(Clone, Debug)]
pub struct ProcessJobs {
    root: PathBuf,
    /// How each job is confined; `None` runs jobs as gannet's user, unconfined (tests of the
    /// plugins, benchmarks).
    sandbox: Option<Arc<Sandbox>>,
}

impl ProcessJobs {
    /// A runner keeping its jobs under `root`, created (mode 0700) if missing.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        set_mode(&root, 0o700)?;
        Ok(Self {
            root,
            sandbox: None,
        })
    }

    /// The same runner, confining every job it starts from now on with `sandbox`. With
    /// `run_as`, the jobs directory lets other users through (mode 0711, not listable) so the
    /// job's uid reaches its own directory.
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> io::Result<Self> {
        if sandbox.run_as.is_some() {
            set_mode(&self.root, 0o711)?;
        }
        self.sandbox = Some(Arc::new(sandbox));
        Ok(self)
    }

    fn dir(&self, key: &JobKey) -> PathBuf {
        self.root.join(key.as_str())
    }

    /// Where the cache `name` lives ([`JobSpec::cache`]).
    pub fn cache_dir(&self, name: &str) -> PathBuf {
        self.root.join(CACHES).join(name)
    }

    /// The job's cache directory, made if missing (and given to the job's uid); `None` when
    /// the job names none.
    fn cache_for(&self, spec: &Owned) -> Result<Option<PathBuf>, JobError> {
        let Some(name) = &spec.cache else {
            return Ok(None);
        };
        if !jobs::valid_cache_name(name) {
            return Err(JobError::Refused(format!(
                "{name:?} is not a job cache's name"
            )));
        }
        let dir = self.cache_dir(name);
        if dir.is_dir() {
            return Ok(Some(dir));
        }
        let made = (|| {
            let caches = self.root.join(CACHES);
            fs::create_dir_all(&caches)?;
            let run_as = self.sandbox.as_ref().and_then(|s| s.run_as);
            // The job's uid passes through to its own cache, and lists no other.
            set_mode(&caches, if run_as.is_some() { 0o711 } else { 0o700 })?;
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
                Err(err) => return Err(err),
            }
            set_mode(&dir, 0o700)?;
            if let Some(RunAs { uid, gid }) = run_as {
                std::os::unix::fs::lchown(&dir, Some(uid), Some(gid))?;
            }
            Ok(())
        })();
        made.map_err(|source: io::Error| JobError::Unavailable {
            operation: "making the job's cache",
            source: source.into(),
        })?;
        Ok(Some(dir))
    }

    /// Removes the directories of jobs that ended (or were lost) and started more than
    /// `older_than` ago; returns how many. Running jobs are kept whatever their age.
    pub fn prune(&self, older_than: Duration) -> io::Result<usize> {
        let now = now_ms();
        let mut removed = 0;
        for entry in fs::read_dir(&self.root)?.flatten() {
            let dir = entry.path();
            let name = entry.file_name();
            let Some(key) = name.to_str().and_then(JobKey::parse) else {
                // A start that crashed mid-way leaves `.tmp-*`; an hour later it is junk.
                if name.to_string_lossy().starts_with(".tmp-") && age(&dir) > HOUR {
                    fs::remove_dir_all(&dir)?;
                }
                continue;
            };
            let Ok(record) = read_record(&dir) else {
                continue;
            };
            let old = now.since(record.started_at).get() > older_than;
            if old && !group_alive(&dir, &key) {
                fs::remove_dir_all(&dir)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn start_blocking(&self, spec: &Owned) -> Result<(), JobError> {
        let dir = self.dir(&spec.key);
        let cache = self.cache_for(spec)?;
        if !dir.join("job.json").is_file() {
            self.prepare(spec, &dir, cache.as_deref())?;
        }
        if !dir.join("claim").exists() {
            let job = Launch {
                dir: &dir,
                key: &spec.key,
                env: &spec.env,
                cache: cache.as_deref(),
            };
            launch(&job, self.sandbox.as_deref()).map_err(|source| JobError::Unavailable {
                operation: "starting the job's process",
                source: source.into(),
            })?;
        }
        Ok(())
    }

    /// Builds the job's directory aside and renames it into place.
    fn prepare(&self, spec: &Owned, dir: &Path, cache: Option<&Path>) -> Result<(), JobError> {
        let unavailable = |operation| {
            move |source: io::Error| JobError::Unavailable {
                operation,
                source: source.into(),
            }
        };
        // Unique to this start: others of the same key may prepare theirs at the same time.
        static STARTS: AtomicU64 = AtomicU64::new(0);
        let n = STARTS.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .root
            .join(format!(".tmp-{}-{}-{n}", spec.key, std::process::id()));
        fs::create_dir(&tmp).map_err(unavailable("creating the job's directory"))?;
        copy_tree(&spec.dir, &tmp.join("work")).map_err(|source| {
            let _ = fs::remove_dir_all(&tmp);
            JobError::Refused(format!(
                "cannot copy {} for the job: {source}",
                spec.dir.display()
            ))
        })?;
        if let Err(err) = self.give_inputs(spec, &tmp) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(err);
        }
        let record = Record {
            started_at: now_ms(),
            timeout: spec.timeout,
        };
        let written = fs::write(tmp.join("script"), &spec.script)
            .and_then(|()| self.confine(spec, &tmp, dir, cache))
            .and_then(|()| {
                let json = serde_json::to_vec(&record).map_err(io::Error::other)?;
                fs::write(tmp.join("job.json"), json)
            });
        if let Err(err) = written.and_then(|()| fs::rename(&tmp, dir)) {
            let _ = fs::remove_dir_all(&tmp);
            // Another start of the same key got there first.
            if !dir.join("job.json").is_file() {
                return Err(unavailable("writing the job's directory")(err));
            }
        }
        Ok(())
    }

    /// Writes the job's sandbox policy and gives it its own `tmp/` and `home/`, in `tmp` (to be
    /// renamed `dir`). With `run_as`, what the job writes or reads is handed to its uid.
    fn confine(
        &self,
        spec: &Owned,
        tmp: &Path,
        dir: &Path,
        cache: Option<&Path>,
    ) -> io::Result<()> {
        // Its output is for gannet to read (and the job to append to), no one else.
        OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(tmp.join("output.log"))?;
        set_mode(&tmp.join("output.log"), 0o600)?;
        let Some(sandbox) = &self.sandbox else {
            return Ok(());
        };
        for own in ["tmp", "home"] {
            fs::create_dir(tmp.join(own))?;
            set_mode(&tmp.join(own), 0o700)?;
        }
        let mut policy = sandbox.policy(dir, &spec.env);
        policy.own_write.extend(cache.map(Path::to_owned));
        sandbox::write_policy(tmp, &policy)?;
        set_mode(&tmp.join(sandbox::POLICY_FILE), 0o600)?;
        if let Some(RunAs { uid, gid }) = sandbox.run_as {
            for own in ["work", "out", "in", "tmp", "home", "output.log"] {
                chown_tree(&tmp.join(own), uid, gid)?;
            }
            // Its uid reads the script, and passes through its directory to its own.
            set_mode(&tmp.join("script"), 0o644)?;
            set_mode(tmp, 0o711)?;
        }
        Ok(())
    }

    /// Creates the job's `out/`, and its `in/` with a copy of each file it is given.
    fn give_inputs(&self, spec: &Owned, tmp: &Path) -> Result<(), JobError> {
        let unavailable = |source: io::Error| JobError::Unavailable {
            operation: "giving the job its files",
            source: source.into(),
        };
        fs::create_dir(tmp.join("out")).map_err(unavailable)?;
        fs::create_dir(tmp.join("in")).map_err(unavailable)?;
        for (job, file) in &spec.inputs {
            if !jobs::valid_file_name(file) {
                return Err(JobError::Refused(format!(
                    "{file:?} is not a job file's name"
                )));
            }
            let from = self.dir(job).join("out").join(file);
            match fs::copy(&from, tmp.join("in").join(file)) {
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(JobError::Refused(format!(
                        "job {job} left no file {file} (it failed before writing it, or it was \
                         removed: ended jobs are kept for 7 days)"
                    )))
                }
                Err(err) => return Err(unavailable(err)),
            }
        }
        Ok(())
    }

    fn output_blocking(&self, key: &JobKey, name: &str) -> Result<Option<Vec<u8>>, JobError> {
        if !jobs::valid_file_name(name) {
            return Err(JobError::Refused(format!(
                "{name:?} is not a job file's name"
            )));
        }
        let dir = self.dir(key);
        if !dir.join("job.json").is_file() {
            return Err(JobError::Unknown(key.clone()));
        }
        let path = dir.join("out").join(name);
        // Not a link: the job wrote the directory, and may have put anything there.
        match fs::symlink_metadata(&path) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(JobError::Unavailable {
                    operation: "reading a file the job left",
                    source: source.into(),
                })
            }
            Ok(meta) if !meta.is_file() => {
                return Err(JobError::Refused(format!(
                    "the job's {name} is not a plain file"
                )))
            }
            Ok(meta) if meta.len() > MAX_OUTPUT_BYTES => {
                return Err(JobError::Refused(format!(
                    "the job's {name} has {} bytes, over the {MAX_OUTPUT_BYTES} read back",
                    meta.len()
                )))
            }
            Ok(_) => {}
        }
        fs::read(&path)
            .map(Some)
            .map_err(|source| JobError::Unavailable {
                operation: "reading a file the job left",
                source: source.into(),
            })
    }

    fn poll_blocking(&self, key: &JobKey, cursor: &str) -> Result<JobPoll, JobError> {
        let dir = self.dir(key);
        let record = read_record(&dir).map_err(|_| JobError::Unknown(key.clone()))?;
        let end = self.state(&dir, key, &record);
        let (lines, cursor, rest) = read_output(&dir.join("output.log"), cursor, end.is_some())
            .map_err(|source| JobError::Unavailable {
                operation: "reading the job's output",
                source: source.into(),
            })?;
        // Ended with output still unread: report the end once all of it has been read.
        let end = if rest { None } else { end };
        Ok(JobPoll { lines, cursor, end })
    }

    /// The job's end, `None` while it runs. Kills it when its time or output is up.
    fn state(&self, dir: &Path, key: &JobKey, record: &Record) -> Option<JobEnd> {
        if let Some(end) = recorded_end(dir, record) {
            // What the script left running in the background goes with it.
            kill_group(dir, key);
            return Some(end);
        }
        let age = now_ms().since(record.started_at).get();
        if !dir.join("claim").exists() {
            if age < LAUNCH_GRACE {
                return None;
            }
            // Claim it, so that a process that starts late cannot run the script.
            if create_new(&dir.join("claim")).is_ok() {
                return Some(JobEnd::Lost {
                    reason: format!(
                        "its process never started within {}s",
                        LAUNCH_GRACE.as_secs()
                    ),
                });
            }
            return None;
        }
        if group_alive(dir, key) {
            if age > record.timeout.get() {
                self.stop(dir, key, "timeout");
                return Some(JobEnd::TimedOut {
                    after: record.timeout,
                });
            }
            let size = fs::metadata(dir.join("output.log")).map_or(0, |m| m.len());
            if size > OUTPUT_CAP {
                self.stop(dir, key, "output");
                return recorded_end(dir, record);
            }
            return None;
        }
        // It may have ended between the two looks.
        recorded_end(dir, record).or_else(|| {
            let pid = fs::read_to_string(dir.join("pid")).unwrap_or_default();
            if pid.trim().is_empty() && age < LAUNCH_GRACE {
                // Claimed a moment ago, pid not written yet.
                return None;
            }
            Some(JobEnd::Lost {
                reason: "its processes are gone and it recorded no exit code (killed outside \
                         gannet, or the machine restarted)"
                    .into(),
            })
        })
    }

    /// Records why the job is stopped, then kills its group and waits (bounded) for it.
    fn stop(&self, dir: &Path, key: &JobKey, why: &str) {
        let _ = create_new(&dir.join("stopped")).and_then(|mut f| f.write_all(why.as_bytes()));
        // A job not yet claimed never runs.
        let _ = create_new(&dir.join("claim"));
        terminate_group(dir, key);
    }

    fn cancel_blocking(&self, key: &JobKey) -> Result<(), JobError> {
        let dir = self.dir(key);
        let Ok(record) = read_record(&dir) else {
            return Ok(());
        };
        if recorded_end(&dir, &record).is_none() {
            self.stop(&dir, key, "cancelled");
        }
        Ok(())
    }
}

const HOUR: Duration = Duration::from_secs(3600);

/// A [`JobSpec`] that can cross into a blocking task.
struct Owned {
    key: JobKey,
    script: String,
    dir: PathBuf,
    env: Vec<(String, String)>,
    timeout: GoDuration,
    /// (job, file) of each input.
    inputs: Vec<(JobKey, String)>,
    cache: Option<String>,
}

/// Where the caches of jobs ([`JobSpec::cache`]) live, under the runner's root: not a job's
/// key, so [`ProcessJobs::prune`] passes it by.
const CACHES: &str = ".cache";

#[async_trait]
impl JobRunner for ProcessJobs {
    /// A job that names a role of its own is refused: a local process runs with gannet's
    /// sandbox, never as an IAM role (`gannet up` checks its settings for this at start).
    async fn start(&self, spec: JobSpec<'_>) -> Result<(), JobError> {
        if let Some(role) = spec.role {
            return Err(JobError::Refused(format!(
                "job {} is to run as IAM role {role} (a deploy target's jobRoleArn): {}",
                spec.key,
                jobs::JOB_ROLE_IS_FOR_AWS
            )));
        }
        let owned = Owned {
            key: spec.key.clone(),
            script: spec.script.to_owned(),
            dir: spec.dir.to_owned(),
            env: spec.env.to_vec(),
            timeout: spec.timeout,
            inputs: spec
                .inputs
                .iter()
                .map(|i| (i.job.clone(), i.file.to_owned()))
                .collect(),
            cache: spec.cache.map(str::to_owned),
        };
        let me = self.clone();
        blocking(move || me.start_blocking(&owned)).await
    }

    async fn poll(&self, key: &JobKey, cursor: &str) -> Result<JobPoll, JobError> {
        let (me, key, cursor) = (self.clone(), key.clone(), cursor.to_owned());
        blocking(move || me.poll_blocking(&key, &cursor)).await
    }

    async fn cancel(&self, key: &JobKey) -> Result<(), JobError> {
        let (me, key) = (self.clone(), key.clone());
        blocking(move || me.cancel_blocking(&key)).await
    }

    async fn output(&self, key: &JobKey, name: &str) -> Result<Option<Vec<u8>>, JobError> {
        let (me, key, name) = (self.clone(), key.clone(), name.to_owned());
        blocking(move || me.output_blocking(&key, &name)).await
    }

    /// Often at first, so a short job (a script, a small terraform apply) ends its stage
    /// within about 100 ms of its end; then every 500 ms, and every 2 s after a minute.
    fn poll_interval(&self, running_for: GoDuration) -> GoDuration {
        match running_for.as_millis() {
            0..5_000 => GoDuration::from_millis(100),
            5_000..60_000 => GoDuration::from_millis(500),
            _ => GoDuration::from_secs(2),
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, JobError> + Send + 'static,
) -> Result<T, JobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|err| JobError::Unavailable {
            operation: "the job runner's worker",
            source: err.into(),
        })?
}

/// Starts the job's first process in a session of its own, detached from gannet. With a
/// sandbox, the script runs through its launcher, with the job's own `HOME` and `TMPDIR`.
/// What [`launch`] starts.
struct Launch<'a> {
    dir: &'a Path,
    key: &'a JobKey,
    env: &'a [(String, String)],
    /// The job's cache directory, given in [`CACHE_ENV`].
    cache: Option<&'a Path>,
}

fn launch(job: &Launch<'_>, sandbox: Option<&Sandbox>) -> io::Result<()> {
    let Launch { dir, key, env, .. } = *job;
    let run = if sandbox.is_some_and(|s| s.run_as.is_some()) {
        RUN_PLAIN
    } else {
        RUN_MARKED
    };
    let wrapper = format!("{WRAPPER}{run}");
    let mut command = match SETSID.iter().find(|p| Path::new(p).is_file()) {
        // `-f`: always fork, so the session leader is a new process that init adopts.
        Some(setsid) => {
            let mut c = Command::new(setsid);
            c.arg("-f").arg("/bin/sh");
            c
        }
        None => {
            let mut c = Command::new("/bin/sh");
            c.process_group(0);
            c
        }
    };
    command
        .arg("-c")
        .arg(wrapper)
        .arg("gannet-job")
        .arg(dir)
        .args(sandbox.map(|s| s.launcher_args(dir)).unwrap_or_default())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    if sandbox.is_some() {
        command
            .env("HOME", dir.join("home"))
            .env("TMPDIR", dir.join("tmp"));
    }
    if let Some(cache) = job.cache {
        command.env(CACHE_ENV, cache);
    }
    let mut child = command
        .env(MARKER, key.as_str())
        .env(OUT_ENV, dir.join("out"))
        .env(IN_ENV, dir.join("in"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    // setsid returns at once; without it, the shell is ours to reap when it ends.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// The end the job's files record, if they record one.
fn recorded_end(dir: &Path, record: &Record) -> Option<JobEnd> {
    if let Ok(why) = fs::read_to_string(dir.join("stopped")) {
        return Some(match why.as_str() {
            "timeout" => JobEnd::TimedOut {
                after: record.timeout,
            },
            "output" => JobEnd::Lost {
                reason: format!(
                    "its output passed {} MiB, so it was killed",
                    OUTPUT_CAP / (1024 * 1024)
                ),
            },
            _ => JobEnd::Cancelled,
        });
    }
    let code = match fs::read_to_string(dir.join("exit")) {
        Ok(code) => code,
        // The script ended, but something it started still holds its stderr (the wrapper's
        // loop waits for it): after a grace, the script's code is the end, and the group goes.
        Err(_) => {
            let rc = dir.join("rc");
            let ended = fs::metadata(&rc).and_then(|m| m.modified()).ok()?;
            if ended.elapsed().unwrap_or_default() < RC_GRACE {
                return None;
            }
            fs::read_to_string(rc).ok()?
        }
    };
    code.trim().parse().ok().map(JobEnd::Exited)
}

fn read_record(dir: &Path) -> io::Result<Record> {
    let bytes = fs::read(dir.join("job.json"))?;
    serde_json::from_slice(&bytes).map_err(io::Error::other)
}

/// Output lines after `cursor` (a byte offset), the new cursor, and whether more is left.
/// A last line without its newline is returned only when `ended`.
fn read_output(path: &Path, cursor: &str, ended: bool) -> io::Result<(Vec<String>, String, bool)> {
    let offset: u64 = cursor.parse().unwrap_or(0);
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Ok((Vec::new(), offset.to_string(), false))
        }
        Err(err) => return Err(err),
    };
    let size = file.metadata()?.len();
    file.seek(SeekFrom::Start(offset.min(size)))?;
    let mut buf = Vec::new();
    file.take(READ_CHUNK as u64).read_to_end(&mut buf)?;
    let rest = offset + (buf.len() as u64) < size;
    let mut used = 0;
    let mut lines = Vec::new();
    while let Some(newline) = buf[used..].iter().position(|&b| b == b'\n') {
        lines.push(text(&buf[used..used + newline]));
        used += newline + 1;
    }
    // A line longer than a whole chunk is cut where the chunk ends.
    if (used == 0 && buf.len() == READ_CHUNK) || (ended && !rest && used < buf.len()) {
        lines.push(text(&buf[used..]));
        used = buf.len();
    }
    Ok((lines, (offset + used as u64).to_string(), rest))
}

fn text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// Gives `path` and everything under it (links themselves, not what they name) to `uid`.
fn chown_tree(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if fs::symlink_metadata(path)?.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Copies a directory tree: files with their permissions, symlinks as symlinks (a checkout
/// holds no link that leaves it), directories writable by the owner.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

fn now_ms() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    Millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

fn age(path: &Path) -> Duration {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .unwrap_or_default()
}

/// The job's process group (its first process's id), when recorded and above 1.
fn recorded_group(dir: &Path) -> Option<u32> {
    fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&pgid| pgid > 1)
}

/// True while a live process of the job's group carries the job's marker.
fn group_alive(dir: &Path, key: &JobKey) -> bool {
    recorded_group(dir).is_some_and(|pgid| proc::scan(pgid, Some(&marker(key))).carries_marker)
}

fn marker(key: &JobKey) -> String {
    format!("{MARKER}={key}")
}

/// Kills the job's group if it still holds the job's processes, and waits (bounded) until
/// they are gone. Never gannet's own group, never a group that is not the job's.
fn kill_group(dir: &Path, key: &JobKey) {
    signal_group(dir, key, rustix::process::Signal::KILL, GONE_LIMIT);
}

/// Asks the job's processes to stop (SIGTERM), gives them [`STOP_GRACE`], then kills what is
/// left.
fn terminate_group(dir: &Path, key: &JobKey) {
    if signal_group(dir, key, rustix::process::Signal::TERM, STOP_GRACE) {
        kill_group(dir, key);
    }
}

/// Sends `signal` to the job's group, if it is still the job's, and waits (bounded by `wait`)
/// for its processes to end; true when some are left.
fn signal_group(dir: &Path, key: &JobKey, signal: rustix::process::Signal, wait: Duration) -> bool {
    let Some(pgid) = recorded_group(dir) else {
        return false;
    };
    if !proc::scan(pgid, Some(&marker(key))).carries_marker || proc::own_group() == Some(pgid) {
        return false;
    }
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let _ = rustix::process::kill_process_group(pid, signal);
    let deadline = std::time::Instant::now() + wait;
    loop {
        let left = proc::scan(pgid, None).members > 0;
        if !left || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `/proc` shows of a process group.
mod proc {
    use std::fs;

    #[derive(Debug, Default)]
    pub(super) struct Group {
        /// Live (not zombie) processes in the group.
        pub(super) members: usize,
        /// Whether one of them has the marker (`NAME=value`) in its environment.
        pub(super) carries_marker: bool,
    }

    pub(super) fn scan(pgid: u32, marker: Option<&str>) -> Group {
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
        // The command name, in parentheses, may hold spaces and ')': fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let state = fields.next()?;
        let _parent = fields.next()?;
        let pgrp = fields.next()?.parse().ok()?;
        (state != "Z" && state != "X").then_some(pgrp)
    }

    fn environ_has(pid: u32, marker: &str) -> bool {
        fs::read(format!("/proc/{pid}/environ"))
            .map(|env| env.split(|&b| b == 0).any(|var| var == marker.as_bytes()))
            .unwrap_or(false)
    }

    pub(super) fn own_group() -> Option<u32> {
        process_group(std::process::id())
    }
}

#[cfg(test)]
mod tests;
