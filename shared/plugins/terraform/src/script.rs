//! The shell scripts the jobs run. Every value from Git or gannet.yaml is single-quoted, so
//! nothing in an app config runs as shell; no secret is ever written into a script (the job's
//! environment carries those).
//!
//! Each script works in a copy of the app's directory and leaves its files in
//! `$GANNET_JOB_OUT`: `plan.tfplan` (the saved plan), `plan.json` (`terraform show -json`),
//! `plan-exitcode` (0: no changes, 2: changes), `applied` (written once an apply succeeded)
//! and `error.txt` (the standard error of the command that failed). Terraform's standard error
//! is kept aside while a command runs and copied to the log when it ends, so the stage's
//! failure can quote terraform's own message.

use crate::spec::TerraformInput;

/// Files a job leaves.
pub const PLAN_FILE: &str = "plan.tfplan";
pub const PLAN_JSON: &str = "plan.json";
pub const PLAN_EXIT: &str = "plan-exitcode";
pub const APPLIED: &str = "applied";
pub const ERROR: &str = "error.txt";

/// The parts of an app's config and deploy target the commands are built from.
pub struct Commands<'a> {
    /// The terraform binary.
    pub terraform: &'a str,
    pub input: &'a TerraformInput,
    /// The deploy target's `-var`s, before the app's.
    pub target_vars: &'a [String],
    /// The key `init`'s result is valid for ([`crate::cache::init_key`]) when the job may
    /// keep and reuse it in its cache; `None` runs `init` from nothing, using no cache.
    pub init_key: Option<String>,
}

/// Quotes `text` for `sh`.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn words(items: impl IntoIterator<Item = String>) -> String {
    items
        .into_iter()
        .map(|w| format!(" {w}"))
        .collect::<String>()
}

/// `init` through the job's cache ([`crate::cache`]), when the runner gave one
/// ([`gannet_sdk::jobs::CACHE_ENV`]), terraform keeps its data in `.terraform` (no
/// `TF_DATA_DIR`) and the app brings no `.terraform` of its own; plain `init` otherwise.
///
/// Under the cache's lock (`flock` when the job's machine has it; else a `lock.d` made with
/// `mkdir`, waited for at most 10 minutes and broken when 15 minutes old, as a job killed
/// while holding it leaves it), with `TF_PLUGIN_CACHE_DIR` the cache's `plugins/` unless the
/// target sets its own: a job whose key (the step's, and the size and time of the terraform
/// file) equals `init/key` copies `init/terraform` to `.terraform` and skips `init`;
/// otherwise it runs `init` and builds `init.tmp.<pid>/` (the `.terraform`, the lock file
/// `init` wrote if the app has none, and `key`, written last), then renames it to `init/`. A
/// job killed at any point leaves either the old `init/`, no `init/`, or the new one whole;
/// never a `.terraform` with a key that a later job trusts. The lock is released before
/// `plan`. If the lock cannot be had, the job runs `init` without the cache.
const INIT_CACHED: &str = r#"want={key}
cache="${GANNET_JOB_CACHE:-}"
locked=
lock_cache() {
  if command -v flock >/dev/null 2>&1; then
    exec 9>>"$cache/lock" && flock -w 600 9 && locked=flock && return 0
    exec 9>&-
    return 1
  fi
  n=0
  until mkdir "$cache/lock.d" 2>/dev/null; do
    if [ -n "$(find "$cache/lock.d" -maxdepth 0 -mmin +15 2>/dev/null)" ]; then
      rmdir "$cache/lock.d" 2>/dev/null
      continue
    fi
    n=$((n + 1))
    [ "$n" -lt 600 ] || return 1
    sleep 1
  done
  locked=dir
}
unlock_cache() {
  case $locked in
    flock) exec 9>&- ;;
    dir) rmdir "$cache/lock.d" 2>/dev/null ;;
  esac
  locked=
}
init_cached() {
  bin=$(command -v "$TF" 2>/dev/null) || return 2
  want="$want $(ls -lLn "$bin" 2>/dev/null)"
  mkdir -p "$cache/plugins" 2>/dev/null || return 2
  lock_cache || { echo "The cache of init's work stayed locked for 10 minutes: running init without it"; return 2; }
  export TF_PLUGIN_CACHE_DIR="${TF_PLUGIN_CACHE_DIR:-$cache/plugins}"
  if [ -f "$cache/init/key" ] && [ "$(cat "$cache/init/key")" = "$want" ] && cp -RP "$cache/init/terraform" .terraform; then
    if [ ! -e .terraform.lock.hcl ] && [ -f "$cache/init/lock.hcl" ]; then cp "$cache/init/lock.hcl" .terraform.lock.hcl; fi
    unlock_cache
    echo "init skipped: reusing the .terraform of an earlier job of this app and deploy target (same lock file, backend, module sources, terraform and init options)"
    return 0
  fi
  rm -rf .terraform
  had_lock=
  [ -e .terraform.lock.hcl ] && had_lock=1
  tf_init || { unlock_cache; return 1; }
  rm -rf "$cache"/init.tmp.*
  t="$cache/init.tmp.$$"
  if mkdir "$t" && cp -RP .terraform "$t/terraform" \
    && { [ -n "$had_lock" ] || [ ! -f .terraform.lock.hcl ] || cp .terraform.lock.hcl "$t/lock.hcl"; } \
    && printf '%s\n' "$want" >"$t/key" \
    && rm -rf "$cache/init.old" && { [ ! -e "$cache/init" ] || mv "$cache/init" "$cache/init.old"; } \
    && mv "$t" "$cache/init"; then
    echo "init ran; its .terraform is kept for the next jobs of this app and deploy target"
  fi
  rm -rf "$t" "$cache/init.old"
  unlock_cache
  return 0
}
if [ -n "$cache" ] && [ -z "${TF_DATA_DIR:-}" ] && [ ! -e .terraform ]; then
  init_cached
  c=$?
  case $c in 0) ;; 2) tf_init || exit 1 ;; *) exit 1 ;; esac
else
  tf_init || exit 1
fi
"#;

/// What a drift check does with terraform's plan output: keeps it out of the log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PlanOutput {
    Logged,
    Aside,
}

impl Commands<'_> {
    /// `env 'K=V' …` for a command's `commandEnvs` (shared first), or nothing.
    fn env(&self, own: &[String]) -> String {
        let envs = &self.input.command_envs;
        let all: Vec<String> = envs.shared.iter().chain(own).map(|e| quote(e)).collect();
        if all.is_empty() {
            String::new()
        } else {
            format!("env{} ", words(all))
        }
    }

    fn flags(&self, own: &[String]) -> String {
        let flags = &self.input.command_flags;
        words(flags.shared.iter().chain(own).map(|f| quote(f)))
    }

    /// Setting up: the helpers, the version check, `init`, and the workspace.
    fn prelude(&self) -> String {
        let want = &self.input.terraform_version;
        let mut s = format!(
            r#"set -u
out="$GANNET_JOB_OUT"
TF={tf}
# Runs a command with its standard error kept aside, then shown; a failure keeps it as error.txt.
run() {{
  "$@" 2>"$out/stderr.txt"
  c=$?
  cat "$out/stderr.txt" >&2
  case $c in 0|2) ;; *) cp "$out/stderr.txt" "$out/{error}" ;; esac
  return $c
}}
fail() {{ printf 'Error: %s\n' "$1" | tee "$out/{error}" >&2; exit 1; }}
"#,
            tf = quote(self.terraform),
            error = ERROR,
        );
        // Only a pinned version is checked: `terraform version` costs a start of terraform.
        if !want.is_empty() {
            s.push_str(&format!(
                "version=$(\"$TF\" version 2>&1 | head -n 1) || fail \"cannot run terraform ($TF): $version\"\necho \"Using $version\"\n[ \"$version\" = {} ] || fail \"the app pins terraformVersion {want} but the deploy target's terraform is $version: name a binary for it in the target's versions\"\n",
                quote(&format!("Terraform v{want}")),
            ));
        }
        s.push_str(&format!(
            "tf_init() {{ run {}\"$TF\" init -input=false -no-color{}; }}\n",
            self.env(&self.input.command_envs.init),
            self.flags(&self.input.command_flags.init),
        ));
        match &self.init_key {
            None => s.push_str("tf_init || exit 1\n"),
            Some(key) => s.push_str(&INIT_CACHED.replace("{key}", &quote(key))),
        }
        if !self.input.workspace.is_empty() {
            s.push_str(&format!(
                "run \"$TF\" workspace select -or-create -no-color {} || exit 1\n",
                quote(&self.input.workspace)
            ));
        }
        s
    }

    /// `plan` into `$out/plan.tfplan`, then `show -json`; records the exit code (0: no
    /// changes, 2: changes) and stops the script on an error.
    fn plan(&self, output: PlanOutput, lock: bool) -> String {
        let vars = self
            .target_vars
            .iter()
            .chain(&self.input.vars)
            .map(|v| format!("-var {}", quote(v)));
        let files = self
            .input
            .var_files
            .iter()
            .map(|f| format!("-var-file={}", quote(f)));
        let lock = if lock { "" } else { " -lock=false" };
        let aside = match output {
            PlanOutput::Logged => "",
            PlanOutput::Aside => " >\"$out/plan.txt\"",
        };
        format!(
            r#"run {env}"$TF" plan -input=false -no-color -detailed-exitcode{lock} -out="$out/{plan}"{vars}{files}{flags}{aside}
code=$?
case $code in 0|2) ;; *) exit 1 ;; esac
echo "$code" >"$out/{exit}"
run "$TF" show -json "$out/{plan}" >"$out/{json}" || exit 1
"#,
            env = self.env(&self.input.command_envs.plan),
            plan = PLAN_FILE,
            vars = words(vars),
            files = words(files),
            flags = self.flags(&self.input.command_flags.plan),
            exit = PLAN_EXIT,
            json = PLAN_JSON,
        )
    }

    fn apply(&self, plan: &str) -> String {
        format!(
            "run {}\"$TF\" apply -input=false -no-color -auto-approve{} {plan} || exit 1\necho done >\"$out/{APPLIED}\"\n",
            self.env(&self.input.command_envs.apply),
            self.flags(&self.input.command_flags.apply),
        )
    }

    /// TERRAFORM_PLAN: init and plan; the plan stays with the job.
    pub fn plan_script(&self) -> String {
        self.prelude() + &self.plan(PlanOutput::Logged, true)
    }

    /// TERRAFORM_APPLY: init, then apply exactly the saved plan the job was given.
    pub fn apply_script(&self) -> String {
        self.prelude() + &self.apply(&format!("\"$GANNET_JOB_IN/{PLAN_FILE}\""))
    }

    /// TERRAFORM_SYNC and the rollback: plan, and apply that plan when it has changes.
    pub fn sync_script(&self) -> String {
        format!(
            "{}{}if [ \"$code\" = 2 ]; then\n{}else\n  echo 'No changes to apply.'\nfi\n",
            self.prelude(),
            self.plan(PlanOutput::Logged, true),
            self.apply(&format!("\"$out/{PLAN_FILE}\"")),
        )
    }

    /// A drift check: a plan that takes no lock (it changes nothing, and must not hold up a
    /// deployment), with terraform's output kept out of the way.
    pub fn drift_script(&self) -> String {
        self.prelude() + &self.plan(PlanOutput::Aside, false)
    }
}

/// Terraform's own words for a failure, from what it wrote to standard error: the first
/// `Error:` line and its paragraph, on one line (at most 600 characters).
pub fn error_summary(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    let start = lines.iter().position(|l| l.starts_with("Error: "));
    let picked: Vec<&str> = match start {
        Some(i) => {
            let mut out = vec![lines[i]];
            let mut seen_text = false;
            for line in &lines[i + 1..] {
                if line.is_empty() {
                    if seen_text {
                        break;
                    }
                    continue;
                }
                if line.starts_with("Error: ") {
                    break;
                }
                seen_text = true;
                out.push(line);
            }
            out
        }
        None => {
            let text: Vec<&str> = lines.iter().copied().filter(|l| !l.is_empty()).collect();
            text[text.len().saturating_sub(3)..].to_vec()
        }
    };
    let text = picked.join(" ");
    if text.is_empty() {
        return None;
    }
    Some(if text.chars().count() > 600 {
        let cut: String = text.chars().take(600).collect();
        format!("{cut}…")
    } else {
        text
    })
}
