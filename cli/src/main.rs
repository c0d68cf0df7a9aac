//! The `gannet` binary: `gannet up` runs the embedded runtime; the other commands are clients
//! of a running gannet, plus `config check`, which needs no server.

mod check;
mod client;
mod render;
mod webhook;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use gannet_cli::{settings, up};

use crate::client::Client;

#[derive(Parser)]
#[command(
    name = "gannet",
    version,
    about = "GitOps continuous delivery with no always-on server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run gannet in one process: webhook, JSON API, workers and timers on a SQLite file.
    Up {
        #[arg(long, default_value = "gannet.yaml")]
        config: PathBuf,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Applications and their sync status.
    Apps {
        #[command(subcommand)]
        command: AppsCommand,
    },
    /// Deployments, their stages and logs.
    Deployments {
        #[command(subcommand)]
        command: DeploymentsCommand,
    },
    /// Deploy an application's branch head now.
    Sync {
        app: String,
        #[arg(long, value_enum)]
        strategy: Option<Strategy>,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a deployment; it rolls back unless --no-rollback.
    Cancel {
        deployment: String,
        #[arg(long)]
        no_rollback: bool,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    /// Approve a WAIT_APPROVAL stage.
    Approve {
        deployment: String,
        /// The stage id; the stage waiting now by default.
        #[arg(long)]
        stage: Option<String>,
        /// Who you are, checked against your token (default: $GANNET_USER); the server
        /// records the name your token (GANNET_TOKEN) carries.
        #[arg(long = "as")]
        user: Option<String>,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    /// Check PipeCD app configs and the manifests they reference.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Send a GitHub-shaped, signed push webhook (to try an installation end to end).
    Webhook {
        #[command(subcommand)]
        command: WebhookCommand,
    },
}

#[derive(clap::Args)]
struct Server {
    /// The gannet server.
    #[arg(
        long = "server",
        env = "GANNET_SERVER",
        default_value = "http://127.0.0.1:7070"
    )]
    url: String,
}

impl Server {
    /// A client for this server, with the caller's API token: `$GANNET_TOKEN`, or the file
    /// `$GANNET_TOKEN_FILE`, or `~/.config/gannet/token` (`$XDG_CONFIG_HOME/gannet/token`).
    fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(&self.url, client::token_from_env()?))
    }
}

#[derive(Subcommand)]
enum AppsCommand {
    List {
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    Show {
        app: String,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum DeploymentsCommand {
    List {
        #[arg(long)]
        app: Option<String>,
        /// Comma-separated statuses, such as RUNNING,PENDING.
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    Show {
        deployment: String,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
    /// Print a stage's log (every stage that ran, by default).
    Logs {
        deployment: String,
        #[arg(long)]
        stage: Option<String>,
        #[command(flatten)]
        server: Server,
    },
    /// Follow a deployment live until it ends; exits 0 on SUCCESS, 1 otherwise.
    Watch {
        deployment: String,
        /// Also print stage log lines as they arrive.
        #[arg(long)]
        logs: bool,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
        #[command(flatten)]
        server: Server,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate every *.pipecd.yaml under the given paths.
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum WebhookCommand {
    /// POST a signed push event for a commit.
    Push(webhook::PushArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Strategy {
    Quick,
    Pipeline,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The name the caller claims (`--as`, or `$GANNET_USER`), if any. The server records the
/// caller its token names, and refuses a claim of anyone else.
fn claimed(explicit: Option<String>) -> Option<String> {
    explicit
        .or_else(|| std::env::var("GANNET_USER").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Up { config, log_format } => {
            init_logs(log_format);
            let cfg = settings::UpConfig::load(&config, &gannet_plugins::registry())?;
            up::run(cfg).await?;
        }
        Command::Apps { command } => match command {
            AppsCommand::List { server, json } => {
                let apps = server.client()?.apps().await?;
                if json {
                    print_json(&serde_json::json!({"apps": apps}))?;
                } else {
                    render::apps(&apps);
                }
            }
            AppsCommand::Show { app, server, json } => {
                let app = server.client()?.app(&app).await?;
                if json {
                    print_json(&app)?;
                } else {
                    render::app(&app);
                }
            }
        },
        Command::Deployments { command } => return deployments(command).await,
        Command::Sync {
            app,
            strategy,
            server,
            json,
        } => {
            let strategy = strategy.map(|s| match s {
                Strategy::Quick => "QUICK_SYNC",
                Strategy::Pipeline => "PIPELINE",
            });
            let d = server
                .client()?
                .sync(&app, strategy, claimed(None).as_deref())
                .await?;
            if json {
                print_json(&d)?;
            } else {
                println!(
                    "deployment {} of {} at {} is {}",
                    d.id,
                    d.app,
                    &d.commit[..7.min(d.commit.len())],
                    d.status.as_str()
                );
            }
        }
        Command::Cancel {
            deployment,
            no_rollback,
            server,
            json,
        } => {
            let d = server
                .client()?
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
            stage,
            user: who,
            server,
            json,
        } => {
            let who = claimed(who);
            let d = server
                .client()?
                .approve(&deployment, stage.as_deref(), who.as_deref())
                .await?;
            if json {
                print_json(&d)?;
            } else {
                // The server records the caller (the token's name): say who that was.
                let by = d
                    .stages
                    .iter()
                    .filter_map(|s| s.metadata.get("approvedBy"))
                    .filter_map(|list| list.split(',').next_back())
                    .next_back()
                    .map_or("you", str::trim);
                println!("approved deployment {} as {by}", d.id);
            }
        }
        Command::Config {
            command: ConfigCommand::Check { paths, json },
        } => {
            return check::run(&paths, json);
        }
        Command::Webhook {
            command: WebhookCommand::Push(args),
        } => {
            webhook::push(args).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn deployments(command: DeploymentsCommand) -> anyhow::Result<ExitCode> {
    match command {
        DeploymentsCommand::List {
            app,
            status,
            limit,
            server,
            json,
        } => {
            let list = server
                .client()?
                .deployments(app.as_deref(), status.as_deref(), limit)
                .await?;
            if json {
                print_json(&serde_json::json!({"deployments": list}))?;
            } else {
                render::deployments(&list);
            }
        }
        DeploymentsCommand::Show {
            deployment,
            server,
            json,
        } => {
            let d = server.client()?.deployment(&deployment).await?;
            if json {
                print_json(&d)?;
            } else {
                render::deployment(&d);
            }
        }
        DeploymentsCommand::Logs {
            deployment,
            stage,
            server,
        } => {
            let client = server.client()?;
            let d = client.deployment(&deployment).await?;
            if let Some(id) = stage.as_deref() {
                if !d.stages.iter().any(|s| s.id.as_str() == id) {
                    anyhow::bail!("deployment {} has no stage {id}", d.id);
                }
            }
            for s in d
                .stages
                .iter()
                .filter(|s| stage.as_deref().is_none_or(|id| s.id.as_str() == id))
            {
                if s.started_at.is_none() && stage.is_none() {
                    continue;
                }
                println!("== {} ({}) {}", s.id, s.name, s.status.as_str());
                for line in client.logs(&deployment, s.id.as_str(), 0).await? {
                    println!("{}", line.text);
                }
            }
        }
        DeploymentsCommand::Watch {
            deployment,
            logs,
            timeout,
            server,
            json,
        } => {
            // With --json, stdout holds the JSON alone: progress goes to stderr.
            let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
            let progress: &mut dyn std::io::Write = if json { &mut stderr } else { &mut stdout };
            let d = server
                .client()?
                .watch(&deployment, logs, Duration::from_secs(timeout), progress)
                .await?;
            if json {
                print_json(&d)?;
            }
            let ok = d.status == gannet_core::deployment::DeploymentStatus::Success;
            return Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
    }
    Ok(ExitCode::SUCCESS)
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
