//! The `gannet` command's exit codes, the same for every command that waits for a deployment,
//! so a script can tell the outcomes apart.

use std::process::ExitCode;

use crate::client::Unreachable;

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; a deployment waited for ended SUCCESS.
    Success,
    /// 1: an error (a refused request, bad input); the message says which.
    Error,
    /// 3: the deployment ended FAILURE.
    Failure,
    /// 4: the deployment ended CANCELLED.
    Cancelled,
    /// 5: the deployment had not ended when the wait's --timeout passed.
    Timeout,
    /// 6: the server could not be reached (at all, or for longer than --retry-for).
    Unreachable,
    /// 2 from `apps diff --exit-code` (as `diff` does): the comparison could not be made. (A
    /// difference is 1, [`Exit::Error`]'s code.)
    NotCompared,
}

/// The exit codes, as `gannet --help` prints them.
pub const HELP: &str = "Exit codes:
  0  success (a deployment waited for ended SUCCESS)
  1  error: a refused request or bad input (the message says which)
  2  usage: a command or flag that does not parse
  3  the deployment ended FAILURE
  4  the deployment ended CANCELLED
  5  the wait timed out (--timeout) with the deployment still going
  6  the server could not be reached, or stayed unreachable longer than --retry-for
  apps diff --exit-code: 0 no difference, 1 a difference, 2 the comparison could not be made

Examples:
  gannet up                                 run gannet on this machine (reads gannet.yaml)
  gannet apps list                          applications and their sync status
  gannet sync web --wait                    deploy web's branch head and wait for the result
  gannet deployments watch <ID>             follow a deployment live
  gannet deployments logs <ID> stage-1 -f   follow a stage's log until it ends
  gannet apps list -o name                  the app names, one a line
  gannet --server https://gannet.example.com --token \"$T\" apps list";

impl Exit {
    pub fn code(self) -> ExitCode {
        ExitCode::from(match self {
            Self::Success => 0,
            Self::Error => 1,
            Self::Failure => 3,
            Self::Cancelled => 4,
            Self::Timeout => 5,
            Self::Unreachable => 6,
            Self::NotCompared => 2,
        })
    }

    /// The exit for a command that failed with `err`.
    pub fn for_error(err: &anyhow::Error) -> Self {
        if err.chain().any(|e| e.is::<Unreachable>()) {
            Self::Unreachable
        } else {
            Self::Error
        }
    }
}

impl From<bool> for Exit {
    /// Success when `ok`, otherwise an error.
    fn from(ok: bool) -> Self {
        if ok {
            Self::Success
        } else {
            Self::Error
        }
    }
}
