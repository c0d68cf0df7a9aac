//! One run of the git CLI: a clean environment, a time limit, and stderr kept for errors.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use gannet_domain::report::redact_urls;

use tokio::process::Command;

/// How long a git command that only reads local objects may take.
pub(crate) const LOCAL_LIMIT: Duration = Duration::from_secs(120);
/// How long a fetch from a remote may take.
pub(crate) const NETWORK_LIMIT: Duration = Duration::from_secs(600);

/// Variables that would point git at another repository, index or work tree than the one we
/// name. They are dropped from the inherited environment; credentials settings are kept.
const LOCATION_VARS: [&str; 11] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_LITERAL_PATHSPECS",
];

/// Why a git command (or the file work around it) failed. Kept as the source of
/// [`gannet_domain::ports::GitError::Failed`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandError {
    #[error("could not start `git {args}`")]
    Spawn {
        args: String,
        #[source]
        source: io::Error,
    },
    #[error("`git {args}` exited with {status}: {stderr}")]
    Exit {
        args: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("`git {args}` did not finish within {limit:?}")]
    TimedOut { args: String, limit: Duration },
    #[error("could not write the checkout")]
    Checkout(#[source] Box<super::read::TreeFilesError>),
    #[error("could not {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl CommandError {
    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        Self::Io {
            action,
            path: path.to_owned(),
            source,
        }
    }
}

/// What a finished git command left behind.
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    pub(crate) args: String,
}

impl Output {
    /// The stdout of a successful run, or the failure with its stderr.
    pub(crate) fn ok(self) -> Result<Vec<u8>, CommandError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(self.failure())
        }
    }

    pub(crate) fn failure(self) -> CommandError {
        CommandError::Exit {
            args: self.args,
            status: self.status,
            stderr: self.stderr.trim().to_owned(),
        }
    }
}

/// A git command being put together.
pub(crate) struct Git {
    args: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(&'static str, OsString)>,
    limit: Duration,
}

impl Git {
    /// A command on the repository whose git directory is `git_dir`. It runs inside that
    /// directory, so no work tree is ever implied.
    pub(crate) fn on(git_dir: &Path) -> Self {
        let mut git = Self::in_dir(git_dir);
        git.args.push(prefixed("--git-dir=", git_dir));
        git
    }

    /// A command that finds its repository itself (or needs none), run in `cwd`.
    pub(crate) fn in_dir(cwd: &Path) -> Self {
        Self {
            args: vec!["--no-pager".into(), "--literal-pathspecs".into()],
            cwd: cwd.to_owned(),
            env: Vec::new(),
            limit: LOCAL_LIMIT,
        }
    }

    pub(crate) fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub(crate) fn env(mut self, key: &'static str, value: impl Into<OsString>) -> Self {
        self.env.push((key, value.into()));
        self
    }

    pub(crate) fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// Runs the command to completion, whatever its exit status.
    pub(crate) async fn run(self) -> Result<Output, CommandError> {
        // As errors and logs show them: a remote URL's credentials hidden.
        let args = redact_urls(
            &self
                .args
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let mut command = Command::new("git");
        command
            .args(&self.args)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0");
        for var in LOCATION_VARS {
            command.env_remove(var);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = command.spawn().map_err(|source| CommandError::Spawn {
            args: args.clone(),
            source,
        })?;
        let finished = tokio::time::timeout(self.limit, child.wait_with_output()).await;
        let output = match finished {
            Err(_elapsed) => {
                return Err(CommandError::TimedOut {
                    args,
                    limit: self.limit,
                })
            }
            Ok(Err(source)) => return Err(CommandError::Spawn { args, source }),
            Ok(Ok(output)) => output,
        };
        Ok(Output {
            status: output.status,
            stdout: output.stdout,
            stderr: redact_urls(&String::from_utf8_lossy(&output.stderr)),
            args,
        })
    }

    /// Runs the command and returns its stdout, or fails unless it exited with 0.
    pub(crate) async fn stdout(self) -> Result<Vec<u8>, CommandError> {
        self.run().await?.ok()
    }
}

/// `--flag=path` without a lossy conversion of the path.
fn prefixed(flag: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(flag);
    arg.push(path.as_os_str());
    arg
}
