//! The `jobs:` section of gannet.yaml, and how `gannet up` confines every job it runs
//! (SCRIPT_RUN, TERRAFORM plan and apply, lifecycle commands, drift plans): Landlock keeps a job
//! away from gannet's config, tokens and state, and `runAs` (when gannet runs as root) runs it
//! as another uid.
//!
//! ```yaml
//! jobs:
//!   runAs: nobody              # a user name, or uid:gid; only when gannet runs as root
//!   sandbox:
//!     landlock: true           # false turns it off (loudly)
//!     allowRead: [/opt/tools]  # beside / (minus gannet's own), for every job
//!     allowWrite: [/var/cache/terraform]
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use gannet_embedded::sandbox::{self, Confined};
use gannet_embedded::{Landlock, ProcessJobs, RunAs, Sandbox};
use serde::Deserialize;

/// `jobs` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawJobs {
    #[serde(default)]
    run_as: Option<String>,
    #[serde(default)]
    sandbox: RawSandbox,
}

/// `jobs.sandbox` as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSandbox {
    #[serde(default = "yes")]
    landlock: bool,
    #[serde(default)]
    allow_read: Vec<PathBuf>,
    #[serde(default)]
    allow_write: Vec<PathBuf>,
}

impl Default for RawSandbox {
    fn default() -> Self {
        Self {
            landlock: true,
            allow_read: Vec::new(),
            allow_write: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}

/// How `gannet up` confines jobs, validated.
#[derive(Clone, Debug)]
pub struct JobsConfig {
    pub run_as: Option<RunAs>,
    pub landlock: Landlock,
    pub allow_read: Vec<PathBuf>,
    pub allow_write: Vec<PathBuf>,
    /// gannet's config directory, state directory and every file gannet.yaml names (the
    /// tokens file, secret files, TLS key): no job reaches them.
    pub protect: Vec<PathBuf>,
}

impl JobsConfig {
    /// Checks `raw`; `base` is the config file's directory, `state` the state file, `doc` the
    /// whole config (every `*File` it names is protected). `passwd` is /etc/passwd's text, for
    /// a `runAs` user name.
    pub(crate) fn parse(
        raw: &RawJobs,
        base: &Path,
        state: &Path,
        doc: &serde_json::Value,
        passwd: &dyn Fn() -> Option<String>,
    ) -> Result<Self, String> {
        let mut protect = vec![base.to_owned(), state.parent().unwrap_or(base).to_owned()];
        protect.extend(named_in(doc, "File").into_iter().map(|f| base.join(f)));
        let run_as = match &raw.run_as {
            None => None,
            Some(written) => {
                Some(run_as(written.trim(), passwd).map_err(|m| format!("jobs.runAs: {m}"))?)
            }
        };
        let paths = |field: &str, list: &[PathBuf]| -> Result<Vec<PathBuf>, String> {
            let mut out = Vec::with_capacity(list.len());
            for (i, p) in list.iter().enumerate() {
                let at = format!("jobs.sandbox.{field}[{i}]");
                if !p.is_absolute() {
                    return Err(format!("{at}: {} is not an absolute path", p.display()));
                }
                if let Some(own) = protect.iter().find(|own| p.starts_with(own)) {
                    return Err(format!(
                        "{at}: {} is inside {}, which is gannet's own (config, state or a \
                         secret file): jobs never reach it",
                        p.display(),
                        own.display()
                    ));
                }
                out.push(p.clone());
            }
            Ok(out)
        };
        Ok(Self {
            run_as,
            landlock: if raw.sandbox.landlock {
                Landlock::On
            } else {
                Landlock::Off
            },
            allow_read: paths("allowRead", &raw.sandbox.allow_read)?,
            allow_write: paths("allowWrite", &raw.sandbox.allow_write)?,
            protect,
        })
    }
}

/// Every string value of a key ending in `suffix` (such as `secretEnv`, `apiKeyFile`), or
/// that is `suffix` in lower case (`api.tokens.file`), anywhere in `doc`: by gannet.yaml's convention, the variables and files holding its secrets.
/// In the order of `doc`'s maps (keys sorted), not the text's.
pub(crate) fn named_in(doc: &serde_json::Value, suffix: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, suffix: &str, out: &mut Vec<String>, depth: usize) {
        if depth > 64 {
            return;
        }
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match v.as_str() {
                        Some(s)
                            if (k.ends_with(suffix) || k.eq_ignore_ascii_case(suffix))
                                && !s.is_empty() =>
                        {
                            out.push(s.to_owned())
                        }
                        _ => walk(v, suffix, out, depth + 1),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for v in items {
                    walk(v, suffix, out, depth + 1);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, suffix, &mut out, 0);
    out
}

/// `runAs`: `uid:gid`, or a user name of /etc/passwd. Never root.
fn run_as(written: &str, passwd: &dyn Fn() -> Option<String>) -> Result<RunAs, String> {
    let ids = if let Some((uid, gid)) = written.split_once(':') {
        match (uid.parse(), gid.parse()) {
            (Ok(uid), Ok(gid)) => RunAs { uid, gid },
            _ => {
                return Err(format!(
                    "{written:?} is not uid:gid (numbers) nor a user name"
                ))
            }
        }
    } else {
        let text = passwd().ok_or("cannot read /etc/passwd to find the user; give uid:gid")?;
        text.lines()
            .filter_map(|line| {
                let mut f = line.split(':');
                let (name, _, uid, gid) = (f.next()?, f.next()?, f.next()?, f.next()?);
                (name == written).then(|| {
                    Some(RunAs {
                        uid: uid.parse().ok()?,
                        gid: gid.parse().ok()?,
                    })
                })?
            })
            .next()
            .ok_or_else(|| {
                format!("no user {written:?} in /etc/passwd; create it, or give uid:gid")
            })?
    };
    if ids.uid == 0 || ids.gid == 0 {
        return Err(format!(
            "{written} is root (uid or gid 0): jobs must run as an unprivileged user, such as nobody"
        ));
    }
    Ok(ids)
}

/// Confines every job of `jobs` as `cfg` says, and says loudly what is not protected: gannet
/// running as root with no `runAs`, or Landlock unavailable or turned off. With `runAs`, the
/// state directory lets other users through (0711: not listable; the state file, the git
/// cache and each other job stay the owner's), and every directory above it must too.
pub fn confine(
    jobs: ProcessJobs,
    cfg: &JobsConfig,
    state_dir: &Path,
) -> anyhow::Result<ProcessJobs> {
    let launcher = std::env::current_exe()
        .context("cannot find the gannet binary, which launches every job in its sandbox")?;
    let root = rustix::process::geteuid().is_root();
    if cfg.run_as.is_some() && !root {
        anyhow::bail!(
            "jobs.runAs: gannet runs as uid {}, not root, so it cannot run jobs as another user; \
             remove runAs (Landlock keeps jobs from gannet's files) or start gannet as root",
            rustix::process::geteuid().as_raw()
        );
    }
    if root && cfg.run_as.is_none() {
        tracing::warn!(
            "gannet runs as root and jobs.runAs is not set: every job (scripts, terraform) runs \
             as root; set jobs.runAs to an unprivileged user (such as nobody), or run gannet as \
             a user of its own"
        );
    }
    let confined = match cfg.landlock {
        Landlock::Off => {
            Confined::Not("Landlock is turned off (jobs.sandbox.landlock: false)".into())
        }
        Landlock::On => sandbox::probe_with(&launcher),
    };
    match &confined {
        Confined::Fully => tracing::info!("jobs are sandboxed with Landlock"),
        Confined::Partly(why) => tracing::warn!(reason = %why, "jobs are only partly sandboxed"),
        Confined::Not(why) => tracing::warn!("{}", sandbox::not_sandboxed(why, cfg.run_as)),
    }
    if let Some(run_as) = cfg.run_as {
        open_to(state_dir, run_as)?;
        tracing::info!(
            uid = run_as.uid,
            gid = run_as.gid,
            "jobs run as another user"
        );
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"));
    Ok(jobs.with_sandbox(Sandbox {
        launcher,
        landlock: cfg.landlock,
        run_as: cfg.run_as,
        protect: cfg.protect.clone(),
        home,
        allow_read: cfg.allow_read.clone(),
        allow_write: cfg.allow_write.clone(),
    })?)
}

/// Lets `run_as` pass through `state_dir` to its jobs: the state directory becomes 0711, the
/// git cache 0700; every directory above must already let others through.
fn open_to(state_dir: &Path, run_as: RunAs) -> anyhow::Result<()> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let state_dir = std::path::absolute(state_dir)?;
    for dir in state_dir.ancestors().skip(1) {
        let meta = std::fs::metadata(dir)?;
        let passes = meta.mode() & 0o001 != 0
            || (meta.uid() == run_as.uid && meta.mode() & 0o100 != 0)
            || (meta.gid() == run_as.gid && meta.mode() & 0o010 != 0);
        if !passes {
            anyhow::bail!(
                "jobs.runAs: uid {} cannot reach the jobs directory under {}: {} (mode {:o}) \
                 does not let other users through; chmod o+x it, or keep the state elsewhere",
                run_as.uid,
                state_dir.display(),
                dir.display(),
                meta.mode() & 0o7777
            );
        }
    }
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set {} to mode {mode:o}", path.display()))
    };
    // The checked-out trees (created on the first fetch) stay the owner's.
    let git = state_dir.join("git");
    std::fs::create_dir_all(&git).with_context(|| format!("cannot create {}", git.display()))?;
    set(&git, 0o700)?;
    set(&state_dir, 0o711)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nci:x:1001:100::/home/ci:/bin/sh\n";

    fn parse(yaml: &str) -> Result<JobsConfig, String> {
        let doc: serde_json::Value = gannet_config::yaml::from_str(yaml).unwrap();
        let raw: RawJobs =
            serde_json::from_value(doc["jobs"].clone()).map_err(|e| e.to_string())?;
        JobsConfig::parse(
            &raw,
            Path::new("/etc/gannet"),
            Path::new("/var/lib/gannet/gannet.db"),
            &doc,
            &|| Some(PASSWD.to_owned()),
        )
    }

    #[test]
    fn run_as_takes_a_user_or_ids_and_never_root() {
        let ok = |y: &str| parse(y).unwrap().run_as;
        assert_eq!(ok("jobs: {}"), None);
        assert_eq!(
            ok("jobs: {runAs: nobody}"),
            Some(RunAs {
                uid: 65534,
                gid: 65534
            })
        );
        assert_eq!(
            ok("jobs: {runAs: ci}"),
            Some(RunAs {
                uid: 1001,
                gid: 100
            })
        );
        assert_eq!(ok("jobs: {runAs: '7:8'}"), Some(RunAs { uid: 7, gid: 8 }));
        for (bad, says) in [
            ("jobs: {runAs: root}", "jobs.runAs: root is root"),
            ("jobs: {runAs: '0:0'}", "jobs.runAs: 0:0 is root"),
            ("jobs: {runAs: '1000:0'}", "is root"),
            (
                "jobs: {runAs: ghost}",
                "jobs.runAs: no user \"ghost\" in /etc/passwd",
            ),
            ("jobs: {runAs: 'a:b'}", "jobs.runAs: \"a:b\" is not uid:gid"),
            ("jobs: {runsAs: nobody}", "unknown field `runsAs`"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn gannets_own_paths_are_protected_and_never_allowed() {
        let cfg = parse(
            "api: {tokens: {file: tokens.yaml}, tls: {certFile: /srv/tls/cert.pem, keyFile: /srv/tls/key.pem}}\nplugins: {analysis: {providers: [{name: dd, config: {apiKeyFile: keys/dd}}]}}\njobs: {sandbox: {allowRead: [/opt/tools], allowWrite: [/var/cache/tf]}}",
        )
        .unwrap();
        for own in [
            "/etc/gannet",
            "/var/lib/gannet",
            "/etc/gannet/tokens.yaml",
            "/srv/tls/key.pem",
            "/etc/gannet/keys/dd",
        ] {
            assert!(
                cfg.protect.contains(&PathBuf::from(own)),
                "{own}: {:?}",
                cfg.protect
            );
        }
        assert_eq!(cfg.allow_read, [PathBuf::from("/opt/tools")]);
        assert_eq!(cfg.landlock, Landlock::On);
        assert_eq!(
            parse("jobs: {sandbox: {landlock: false}}")
                .unwrap()
                .landlock,
            Landlock::Off
        );
        for (bad, says) in [
            (
                "jobs: {sandbox: {allowRead: [/etc/gannet]}}",
                "jobs.sandbox.allowRead[0]: /etc/gannet is inside /etc/gannet, which is gannet's own",
            ),
            (
                "jobs: {sandbox: {allowWrite: [/tmp, /var/lib/gannet/jobs]}}",
                "jobs.sandbox.allowWrite[1]: /var/lib/gannet/jobs is inside /var/lib/gannet",
            ),
            ("jobs: {sandbox: {allowRead: [tools]}}", "jobs.sandbox.allowRead[0]: tools is not an absolute path"),
            ("jobs: {sandbox: {alowRead: []}}", "unknown field `alowRead`"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn secrets_are_found_by_the_field_that_names_them() {
        let doc: serde_json::Value = gannet_config::yaml::from_str(
            "webhook: {secretEnv: HOOK}\napi: {tokens: {env: TOKS}}\nplugins: {analysis: {providers: [{config: {apiKeyEnv: DD, applicationKeyEnv: DDAPP, passwordFile: /p}}]}}\nnotifications: {receivers: [{slack: {urlEnv: SLACK}}]}",
        )
        .unwrap();
        // In the order of a JSON map's keys (sorted), not the text's.
        let mut env = named_in(&doc, "Env");
        env.sort();
        assert_eq!(env, ["DD", "DDAPP", "HOOK", "SLACK", "TOKS"]);
        assert_eq!(named_in(&doc, "File"), ["/p"]);
    }
}
