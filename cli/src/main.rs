//! The `gannet` binary: `gannet up` runs the embedded runtime; the other commands are clients
//! of a running gannet, plus `config check`, which needs no server.

mod apps;
mod apps_watch;
mod chains;
mod check;
mod client;
mod complete;
mod console;
mod deployments;
mod exit;
mod logs;
mod output;
mod plan_preview;
mod render;
mod suggest;
mod wait;
mod webhook;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use gannet_cli::{settings, up};

use crate::apps::AppsCommand;
use crate::client::Client;
use crate::deployments::DeploymentsCommand;
use crate::exit::Exit;
use crate::wait::{Display, WaitOptions};

#[derive(Parser)]
#[command(
    name = "gannet",
    version,
    about = "GitOps continuous delivery with no always-on server",
    after_help = exit::HELP
)]
struct Cli {
    #[command(flatten)]
    server: Server,
    #[command(subcommand)]
    command: Command,
}

/// The server and the caller, given before or after the subcommand.
#[derive(clap::Args)]
struct Server {
    /// The gannet server's URL, http:// or https:// [example: https://gannet.example.com]
    #[arg(
        long = "server",
        global = true,
        env = "GANNET_SERVER",
        default_value = "http://127.0.0.1:7070",
        value_name = "URL"
    )]
    url: String,
    /// Your API token. Prefer $GANNET_TOKEN, the file $GANNET_TOKEN_FILE or
    /// ~/.config/gannet/token (a flag shows in the process list) [example: --token "$(pass gannet)"]
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
}

impl Server {
    /// A client for this server with the caller's API token: `--token`, `$GANNET_TOKEN`, the
    /// file `$GANNET_TOKEN_FILE`, or `~/.config/gannet/token` (`$XDG_CONFIG_HOME/gannet/token`).
    fn client(&self) -> anyhow::Result<Client> {
        let token = match self.token.as_deref().map(str::trim) {
            Some("") => anyhow::bail!("--token is empty"),
            Some(token) => Some(token.to_owned()),
            None => client::token_from_env()?,
        };
        Client::new(&self.url, token)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run gannet in one process: webhook, JSON API, web console, workers and timers on a
    /// SQLite file.
    #[command(
        after_help = "Example:\n  gannet up --config gannet.yaml    then open http://127.0.0.1:7070/"
    )]
    Up {
        /// The controller's config file.
        #[arg(long, default_value = "gannet.yaml", value_name = "FILE")]
        config: PathBuf,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Applications: their sync status, history, drift, and pausing automatic deployments.
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
    },
    /// Deployments, their stages and logs; wait for one or watch it live.
    Deployments {
        #[command(subcommand)]
        command: DeploymentsCommand,
    },
    /// Deployment chains (an app's `spec.postSync.chain`): their blocks, apps and
    /// deployments; cancel one.
    Chains {
        #[command(subcommand)]
        command: chains::ChainsCommand,
    },
    /// Plan previews: what merging a commit into a repository's watched branch would change,
    /// app by app, as each platform says (what a pull request's check run shows).
    PlanPreview(plan_preview::PlanPreviewArgs),
    /// Deploy an application's branch head now.
    #[command(
        after_help = "Examples:\n  gannet sync web\n  gannet sync web --wait --timeout 15m    exit 0 on SUCCESS, 3 FAILURE, 4 CANCELLED, 5 timeout, 6 unreachable"
    )]
    Sync {
        /// The application's name (or id).
        app: String,
        /// Start a new deployment even when one of the branch head is already under way
        /// (without it, syncing a commit that is deploying answers with that deployment).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        start: StartArgs,
    },
    /// Deploy again the commit of an earlier successful deployment, and pause the app there.
    #[command(
        after_help = "Examples:\n  gannet rollback web                       the last successful deployment of another commit\n  gannet rollback web --to <DEPLOYMENT> --wait\nThe app stays paused at that commit (pushes and auto-sync do not undo it) until\n`gannet apps resume web`."
    )]
    Rollback {
        /// The application's name (or id).
        app: String,
        /// The earlier successful deployment to go back to (default: the newest successful
        /// deployment of a commit other than the running one).
        #[arg(long, value_name = "DEPLOYMENT")]
        to: Option<String>,
        #[command(flatten)]
        start: StartArgs,
    },
    /// Cancel a deployment; it rolls back unless --no-rollback.
    #[command(after_help = "Example:\n  gannet cancel <DEPLOYMENT> --no-rollback")]
    Cancel {
        /// The deployment's id (or a unique prefix of 8 characters or more).
        #[arg(required_unless_present = "app")]
        deployment: Option<String>,
        /// The app whose deployment under way to cancel, instead of an id.
        #[arg(long, value_name = "APP", conflicts_with = "deployment")]
        app: Option<String>,
        /// Stop where it is, without rolling back what was applied.
        #[arg(long)]
        no_rollback: bool,
        /// Print the deployment as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a stage that waits for approval.
    #[command(
        after_help = "Example:\n  gannet approve <DEPLOYMENT>                 the stage waiting now"
    )]
    Approve {
        /// The deployment's id (or a unique prefix of 8 characters or more).
        #[arg(required_unless_present = "app")]
        deployment: Option<String>,
        /// The app whose deployment under way (waiting for approval) to approve, instead of
        /// an id.
        #[arg(long, value_name = "APP", conflicts_with = "deployment")]
        app: Option<String>,
        /// The stage id; the stage waiting now by default.
        #[arg(long, value_name = "STAGE")]
        stage: Option<String>,
        /// Who you are, checked against your token (default: $GANNET_USER); the server
        /// records the name your token carries.
        #[arg(long = "as", value_name = "NAME")]
        user: Option<String>,
        /// Print the deployment as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Seal a secret for an app's spec.encryption.encryptedSecrets, as `pipectl encrypt`
    /// does: the text from stdin (or --input-file), for the server's public key (or
    /// --public-key).
    #[command(
        after_help = "Examples:\n  printf %s \"$DB_PASSWORD\" | gannet encrypt\n  gannet encrypt --input-file service-account.json --public-key gannet-public.pem\nPaste the output under spec.encryption.encryptedSecrets.<name>, and write\n{{ .encryptedSecrets.<name> }} where it goes in a file of spec.encryption.decryptionTargets."
    )]
    Encrypt {
        /// Read the secret from this file instead of stdin.
        #[arg(long, value_name = "FILE")]
        input_file: Option<PathBuf>,
        /// Seal for this public key (PEM) instead of asking the server for its own.
        #[arg(long, value_name = "FILE")]
        public_key: Option<PathBuf>,
    },
    /// Check PipeCD app configs and the manifests they reference (no server needed).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Send a GitHub-shaped, signed push webhook (to try an installation end to end).
    Webhook {
        #[command(subcommand)]
        command: WebhookCommand,
    },
    /// Open the web console of a gannet on AWS: serves it on loopback, forwarding every
    /// request to the API signed with your AWS credentials (`gannet up` serves its console
    /// itself).
    #[command(
        after_help = "Example:\n  gannet console --server https://abc123.execute-api.eu-west-1.amazonaws.com\n  then open http://127.0.0.1:7071/ and sign in with the key it prints"
    )]
    Console(console::ConsoleArgs),
    /// Print a shell completion script: commands, flags, and app names and deployment ids
    /// from the server (bash, zsh and fish).
    #[command(
        visible_alias = "completions",
        after_help = "Examples:\n  gannet completion bash > ~/.local/share/bash-completion/completions/gannet\n  gannet completion zsh > \"${fpath[1]}/_gannet\"\n  gannet completion fish > ~/.config/fish/completions/gannet.fish\nApp names and deployment ids come from the server of $GANNET_SERVER (or the --server\ntyped on the line), with your token, at each Tab."
    )]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// What the completion scripts run: app names or deployment ids from the server, one a
    /// line (not for typing).
    #[command(
        name = "__complete",
        hide = true,
        after_help = "Examples:\n  gannet __complete apps\n  gannet __complete next -- gannet apps show     the app names"
    )]
    Complete {
        /// What to list.
        #[arg(value_enum)]
        what: complete::Listed,
        /// For `next`: the command line so far, the program first.
        #[arg(last = true, value_name = "WORDS")]
        words: Vec<String>,
    },
}

/// How a sync or a rollback runs, and what it prints.
#[derive(clap::Args)]
struct StartArgs {
    /// Force a quick sync or the whole pipeline (default: as PipeCD decides). A quick sync
    /// of an app whose pipeline has an approval stage is an admin's alone, with --reason.
    #[arg(long, value_enum)]
    strategy: Option<Strategy>,
    /// Why you (an admin) skip the app's approval stage; recorded on the deployment.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    #[command(flatten)]
    wait: WaitArgs,
    /// Print the deployment as JSON.
    #[arg(long)]
    json: bool,
}

impl StartArgs {
    fn request(&self) -> client::Start<'_> {
        client::Start {
            strategy: self.strategy.map(Strategy::as_api),
            reason: self.reason.as_deref(),
        }
    }
}

/// How to wait for the deployment a command starts.
#[derive(clap::Args)]
struct WaitArgs {
    /// Wait until the deployment ends; the exit code says how it ended.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    limits: Limits,
}

/// How long a wait may last.
#[derive(clap::Args)]
struct Limits {
    /// Give up waiting after this long (exit 5) [example: 15m, 1h30m, 900]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1h")]
    timeout: Duration,
    /// How long the server may stay unreachable (a restart, a network blip) before the wait
    /// gives up (exit 6); requests are retried with backoff meanwhile [example: 5m]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2m")]
    retry_for: Duration,
}

impl Limits {
    fn options(&self) -> WaitOptions {
        WaitOptions {
            timeout: self.timeout,
            retry_for: self.retry_for,
        }
    }
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate every *.pipecd.yaml under the given paths.
    #[command(after_help = "Example:\n  gannet config check apps/")]
    Check {
        /// Files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum WebhookCommand {
    /// POST a signed push event for a commit; with --wait, wait for what it deploys.
    #[command(
        after_help = "Examples:\n  GANNET_WEBHOOK_SECRET=... gannet webhook push --repo org/repo --after $(git rev-parse HEAD)\n  gannet webhook push --repo org/repo --after HEAD --wait --timeout 20m\nWith --wait, each app of the repository is waited for as `apps wait APP --commit SHA` does;\nthe exit code is the first app's that did not end SUCCESS (as `sync --wait`'s), 0 when all did\nor the commit deploys none of them."
    )]
    Push {
        #[command(flatten)]
        push: webhook::PushArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Strategy {
    /// Apply everything at once (PipeCD's QUICK_SYNC).
    Quick,
    /// Run the app's pipeline.
    Pipeline,
}

impl Strategy {
    fn as_api(self) -> &'static str {
        match self {
            Self::Quick => "QUICK_SYNC",
            Self::Pipeline => "PIPELINE",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// A duration in Go syntax (`90s`, `15m`, `1h30m`) or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    if let Ok(secs) = text.trim().parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    gannet_domain::GoDuration::parse(text)
        .map(|d| d.get())
        .map_err(|e| e.to_string())
}

/// The most threads the runtime's blocking pool runs at once (tokio's default is 512). Only
/// short calls run there: SQLite (one writer and four readers, so a sixth concurrent query
/// waits on a lock anyway), in-process git reads (CPU-bound, on a machine of a few cores) and
/// file-system calls; further calls wait in the pool's queue. Each thread costs a stack and,
/// up to glibc's limit of 8 per core, a malloc arena of its own that keeps what it freed:
/// with the default, `gannet up` ran 68 threads and held 37 MB in 15 arenas at its peak in
/// the webhook benchmark (BENCHMARKS.md, "Memory").
const BLOCKING_THREADS: usize = 8;

fn main() -> ExitCode {
    if let Some(code) = job_sandbox() {
        return code;
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.server, cli.command)) {
        Ok(exit) => exit.code(),
        Err(err) => {
            eprintln!("error: {err:#}");
            Exit::for_error(&err).code()
        }
    }
}

/// `gannet __job-sandbox <job dir> <command…>`, the launcher `gannet up` runs each job's
/// script through (it confines itself, then becomes the script), or `--probe`. Handled before
/// anything else starts: no thread, no runtime, no logging. Not a subcommand: no one types it.
fn job_sandbox() -> Option<ExitCode> {
    use gannet_embedded::sandbox;
    let mut args = std::env::args_os().skip(1);
    if args.next()? != sandbox::LAUNCHER_COMMAND {
        return None;
    }
    let rest: Vec<std::ffi::OsString> = args.collect();
    let code = if rest.first().is_some_and(|a| a == "--probe") {
        sandbox::probe()
    } else {
        sandbox::launch(&rest)
    };
    Some(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints `value` as JSON with `--json`, otherwise as `render` shows it.
fn show<T: serde::Serialize>(json: bool, value: &T, render: impl FnOnce()) -> anyhow::Result<()> {
    if json {
        print_json(value)
    } else {
        render();
        Ok(())
    }
}

/// The deployment a command names: its id as given, or the deployment under way of `app`.
async fn under_way(
    client: &client::Client,
    deployment: Option<String>,
    app: Option<&str>,
) -> anyhow::Result<String> {
    match (deployment, app) {
        (Some(id), _) => Ok(id),
        (None, Some(app)) => {
            let view = client.app(app).await?;
            view.active_deployment
                .map(|id| id.to_string())
                .ok_or_else(|| {
                    anyhow::anyhow!("application {} has no deployment under way", view.name)
                })
        }
        (None, None) => anyhow::bail!("name a deployment, or an app with --app"),
    }
}

/// The name the caller claims (`--as`, or `$GANNET_USER`), if any. The server records the
/// caller its token names, and refuses a claim of anyone else.
fn claimed(explicit: Option<String>) -> Option<String> {
    explicit
        .or_else(|| std::env::var("GANNET_USER").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
}

async fn run(server: Server, command: Command) -> anyhow::Result<Exit> {
    match command {
        Command::Up { config, log_format } => {
            init_logs(log_format);
            let cfg = settings::UpConfig::load(&config, &gannet_plugins::registry())?;
            up::run(cfg).await?;
        }
        Command::Apps { command } => return apps::run(&server, command).await,
        Command::Deployments { command } => return deployments::run(&server, command).await,
        Command::Chains { command } => return chains::run(&server, command).await,
        Command::PlanPreview(args) => return plan_preview::run(&server, args).await,
        Command::Sync { app, force, start } => {
            let client = server.client()?;
            let d = client
                .sync(&app, start.request(), force, claimed(None).as_deref())
                .await?;
            return started(&client, d, &start, "deployment").await;
        }
        Command::Rollback { app, to, start } => {
            let client = server.client()?;
            let d = client
                .rollback(&app, to.as_deref(), start.request())
                .await?;
            return started(&client, d, &start, "rollback").await;
        }
        Command::Encrypt {
            input_file,
            public_key,
        } => {
            let text = match &input_file {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
                None => {
                    let mut text = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                        .map_err(|e| anyhow::anyhow!("cannot read the secret from stdin: {e}"))?;
                    text
                }
            };
            anyhow::ensure!(
                !text.is_empty(),
                "the secret is empty: give it on stdin or with --input-file"
            );
            let key = match &public_key {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
                None => server.client()?.public_key().await?,
            };
            let sealed = gannet_sdk::sealed::seal(&key, &text)
                .map_err(|e| anyhow::anyhow!("the public key {e}"))?;
            println!("{sealed}");
        }
        Command::Cancel {
            deployment,
            app,
            no_rollback,
            json,
        } => {
            let client = server.client()?;
            let deployment = under_way(&client, deployment, app.as_deref()).await?;
            let d = client
                .cancel(&deployment, no_rollback, claimed(None).as_deref())
                .await?;
            if json {
                print_json(&d)?;
            } else {
                let how = if no_rollback {
                    "without rollback"
                } else {
                    "with rollback"
                };
                println!(
                    "cancelling deployment {} {how}; it is {}",
                    d.id,
                    d.status.as_str()
                );
            }
        }
        Command::Approve {
            deployment,
            app,
            stage,
            user: who,
            json,
        } => {
            let who = claimed(who);
            let client = server.client()?;
            let deployment = under_way(&client, deployment, app.as_deref()).await?;
            let d = client
                .approve(&deployment, stage.as_deref(), who.as_deref())
                .await?;
            if json {
                print_json(&d)?;
            } else {
                // The server records the caller (the token's name): say who that was.
                let by = d
                    .stages
                    .iter()
                    .filter_map(|s| s.presentation.approved_by.last())
                    .next_back()
                    .map_or("you", String::as_str);
                println!("approved deployment {} as {by}", d.id);
            }
        }
        Command::Config {
            command: ConfigCommand::Check { paths, json },
        } => {
            return check::run(&paths, json).map(Exit::from);
        }
        Command::Webhook {
            command: WebhookCommand::Push { push, wait },
        } => {
            // The wait reads the API: a token that cannot is refused before the push.
            let client = if wait.wait {
                Some(server.client()?)
            } else {
                None
            };
            let pushed = webhook::push(push, &server.url).await?;
            if let Some(client) = client {
                return webhook::wait(&client, &pushed, &wait.limits.options()).await;
            }
        }
        Command::Console(args) => console::run(&server.url, args).await?,
        Command::Completion { shell } => {
            print!("{}", complete::script(shell, &Cli::command()));
        }
        Command::Complete { what, words } => return complete::list(&server, what, &words).await,
    }
    Ok(Exit::Success)
}

/// Prints the deployment a sync or a rollback started, then waits for it with `--wait`.
async fn started(
    client: &Client,
    d: gannet_controller::DeploymentView,
    start: &StartArgs,
    what: &str,
) -> anyhow::Result<Exit> {
    let (wait, json) = (&start.wait, start.json);
    if !wait.wait {
        if json {
            print_json(&d)?;
        } else {
            println!(
                "{what} {} of {} at {} is {}",
                d.id,
                d.app,
                &d.commit[..7.min(d.commit.len())],
                d.status.as_str()
            );
        }
        return Ok(Exit::Success);
    }
    if !json {
        println!(
            "{what} {} of {} at {} started",
            d.id,
            d.app,
            &d.commit[..7.min(d.commit.len())]
        );
    }
    let id = d.id.to_string();
    follow(
        client,
        &id,
        wait.limits.options(),
        Display::for_stdout(json, false),
        json,
    )
    .await
}

/// Follows deployment `id` until it ends (or the wait gives up), showing it on `display`.
async fn follow(
    client: &Client,
    id: &str,
    options: WaitOptions,
    display: Display,
    json: bool,
) -> anyhow::Result<Exit> {
    let outcome = wait::follow(client, id, &options, display).await?;
    if json {
        if let Some(d) = outcome.last() {
            print_json(d)?;
        }
    }
    outcome.report();
    Ok(outcome.exit())
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GANNET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: a log file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if format == LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command says what it does and shows an example; every flag and argument says
    /// what it is.
    #[test]
    fn every_command_and_flag_has_help_and_every_command_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name()).trim().to_owned();
            if cmd.get_about().is_none() && path != "gannet" {
                missing.push(format!("{path}: no about"));
            }
            let has_subcommands = cmd.get_subcommands().next().is_some();
            let example = cmd
                .get_after_help()
                .is_some_and(|h| h.to_string().contains("Example"));
            if !has_subcommands && !example {
                missing.push(format!("{path}: no example"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() {
                    missing.push(format!("{path} {id}: no help"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");
        Cli::command().debug_assert();
    }

    #[test]
    fn completion_knows_which_words_name_apps_and_deployments() {
        use complete::Listed::{Apps, Deployments, Previews};
        let mut cli = Cli::command();
        cli.build();
        let cases = [
            ("gannet sync", Some(Apps)),
            ("gannet --server http://x:7070 sync", Some(Apps)),
            ("gannet sync web", None),
            ("gannet sync --strategy", None),
            ("gannet sync --strategy quick", Some(Apps)),
            ("gannet rollback web --to", Some(Deployments)),
            ("gannet apps", None),
            ("gannet apps show", Some(Apps)),
            ("gannet apps show web", None),
            ("gannet apps wait --timeout 5m", Some(Apps)),
            ("gannet apps list -o", None),
            ("gannet deployments list --app", Some(Apps)),
            ("gannet deployments list --app=web", None),
            ("gannet deployments logs", Some(Deployments)),
            ("gannet deployments logs -f", Some(Deployments)),
            ("gannet deployments logs d-1234567890", None),
            ("gannet deployments watch --token t", Some(Deployments)),
            ("gannet deployments watch --app", Some(Apps)),
            ("gannet cancel", Some(Deployments)),
            ("gannet approve --app", Some(Apps)),
            ("gannet approve d-1234567890 --stage", None),
            ("gannet config check", None),
            ("gannet plan-preview show", Some(Previews)),
            ("gannet plan-preview show p-1", None),
            ("gannet plan-preview --head", None),
            ("gannet plan-preview list --repo", None),
            ("gannet", None),
        ];
        for (line, expected) in cases {
            let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            assert_eq!(complete::next(&cli, &words), expected, "{line}");
        }
        let words: Vec<String> = ["gannet", "--server", "http://a", "x", "--server=http://b"]
            .map(str::to_owned)
            .into();
        assert_eq!(complete::flag_value(&words, "server"), Some("http://b"));
        assert_eq!(
            complete::flag_value(&words[..3], "server"),
            Some("http://a")
        );
        assert_eq!(complete::flag_value(&words, "token"), None);
    }

    #[test]
    fn every_completion_script_asks_gannet_for_names() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let script = complete::script(shell, &Cli::command());
            assert!(script.contains("__complete next --"), "{shell}: {script}");
            // The hidden command is not offered; its name appears in the hook alone.
            assert_eq!(script.matches("__complete").count(), 2, "{shell}: {script}");
        }
        // zsh: the hook is `_gannet`, clap's function renamed under it, registered once.
        let zsh = complete::script(clap_complete::Shell::Zsh, &Cli::command());
        assert_eq!(zsh.matches("\n_gannet() {\n").count(), 1, "{zsh}");
        assert_eq!(
            zsh.matches("\n_gannet_commands_and_flags() {\n").count(),
            1,
            "{zsh}"
        );
        assert!(zsh.starts_with("#compdef gannet"), "{zsh}");
        assert!(
            zsh.trim_end().ends_with("compdef _gannet gannet\nfi"),
            "{zsh}"
        );
    }

    #[test]
    fn durations_are_go_style_or_seconds() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("invalid duration"));
    }
}
