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
            "run {}\"$TF\" init -input=false -no-color{} || exit 1\n",
            self.env(&self.input.command_envs.init),
            self.flags(&self.input.command_flags.init),
        ));
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
