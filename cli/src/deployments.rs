//! `gannet deployments`: list them, show one, print or follow its logs, wait for it or watch
//! it.

use gannet_controller::DeploymentView;
use gannet_domain::deployment::DeploymentStatus;

use crate::exit::Exit;
use crate::output::{Output, OutputArgs, Shown};
use crate::render::{self, Columns};
use crate::wait::Display;
use crate::{follow, logs, suggest, under_way, Limits, Server};

#[derive(clap::Subcommand)]
pub(crate) enum DeploymentsCommand {
    /// Deployments, newest first.
    #[command(
        after_help = "Examples:\n  gannet deployments list --app web --status RUNNING,PENDING\n  gannet deployments list --status failure -o name"
    )]
    List {
        /// Only this application's.
        #[arg(long, value_name = "APP")]
        app: Option<String>,
        /// Comma-separated statuses, any case: PENDING, PLANNED, RUNNING, ROLLING_BACK,
        /// SUCCESS, FAILURE, CANCELLED [example: RUNNING,PENDING]
        #[arg(long, value_name = "STATUSES", value_delimiter = ',', value_parser = parse_status)]
        status: Vec<DeploymentStatus>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One deployment: its commit (author, message, link), who triggered it, each stage with
    /// its start, duration and key option, how to approve a waiting stage, plan changes,
    /// lifecycle items and measurements.
    #[command(
        after_help = "Examples:\n  gannet deployments show <DEPLOYMENT>\n  gannet deployments show <DEPLOYMENT> -o wide     hidden stages too, reasons whole"
    )]
    Show {
        /// The deployment's id (or a unique prefix of 8 characters or more).
        deployment: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print a stage's log (every stage that ran, by default), or follow it as it is
    /// written with -f. Lines from a job's standard error are marked `stderr| ` (red on a
    /// terminal).
    #[command(
        after_help = "Examples:\n  gannet deployments logs <DEPLOYMENT> stage-1\n  gannet deployments logs <DEPLOYMENT> stage-1 -f --timestamps    until the stage ends\n  gannet deployments logs <DEPLOYMENT> -f                         every stage, until the deployment ends\nWith -f it exits 0 when the stage (or the deployment) ends, whatever its outcome (`deployments wait`\nexits by it), 5 after --timeout, 6 when the server stays unreachable."
    )]
    Logs {
        /// The deployment's id (or a unique prefix of 8 characters or more).
        deployment: String,
        /// Only this stage's log [example: stage-1]
        #[arg(value_name = "STAGE")]
        stage: Option<String>,
        /// The same as STAGE (the flag older scripts use).
        #[arg(long = "stage", value_name = "STAGE", conflicts_with = "stage")]
        stage_flag: Option<String>,
        /// Follow the log as it is written, until the stage (or, with no STAGE, the
        /// deployment) ends.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Put each line's time first (RFC 3339, UTC, to the millisecond).
        #[arg(long)]
        timestamps: bool,
        #[command(flatten)]
        limits: Limits,
    },
    /// Wait until a deployment ends; the exit code says how (0 SUCCESS, 3 FAILURE,
    /// 4 CANCELLED, 5 timeout, 6 unreachable).
    #[command(
        after_help = "Example:\n  gannet deployments wait <DEPLOYMENT> --timeout 30m && echo deployed"
    )]
    Wait {
        /// The deployment's id.
        deployment: String,
        #[command(flatten)]
        limits: Limits,
        /// Print the final deployment as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Follow a deployment live until it ends: redrawn in place on a terminal, appended
    /// lines otherwise. Exit codes as `deployments wait`.
    #[command(after_help = "Example:\n  gannet deployments watch <DEPLOYMENT> --logs")]
    Watch {
        /// The deployment's id (or a unique prefix of 8 characters or more).
        #[arg(required_unless_present = "app")]
        deployment: Option<String>,
        /// The app whose deployment under way to watch, instead of an id.
        #[arg(long, value_name = "APP", conflicts_with = "deployment")]
        app: Option<String>,
        /// Also print every stage log line as it arrives (on a terminal, the running stage's
        /// last lines are always shown).
        #[arg(long)]
        logs: bool,
        #[command(flatten)]
        limits: Limits,
        /// Print the final deployment as JSON (progress goes to stderr).
        #[arg(long)]
        json: bool,
    },
}

/// A deployment status, any case; an unknown one names the closest.
fn parse_status(text: &str) -> Result<DeploymentStatus, String> {
    suggest::status(text, &DeploymentStatus::ALL, |s| s.as_str())
}

/// A list of deployments as `output` prints it, `table` for the table.
pub(crate) fn deployments_text(
    list: &[DeploymentView],
    output: Output,
    table: &dyn Fn(Columns) -> String,
) -> anyhow::Result<String> {
    output.text(&Shown {
        json: &serde_json::json!({ "deployments": list }),
        names: list.iter().map(|d| d.id.to_string()).collect(),
        table,
    })
}

/// Runs `gannet deployments COMMAND`.
pub(crate) async fn run(server: &Server, command: DeploymentsCommand) -> anyhow::Result<Exit> {
    let client = server.client()?;
    match command {
        DeploymentsCommand::List {
            app,
            status,
            limit,
            output,
        } => {
            let list = client.deployments(app.as_deref(), &status, limit).await?;
            let table = |columns| render::deployments(&list, columns);
            print!("{}", deployments_text(&list, output.output(), &table)?);
        }
        DeploymentsCommand::Show { deployment, output } => {
            let d = client.deployment(&deployment).await?;
            output.output().print(&Shown {
                json: &d,
                names: vec![d.id.to_string()],
                table: &|columns| render::deployment(&d, columns),
            })?;
        }
        DeploymentsCommand::Logs {
            deployment,
            stage,
            stage_flag,
            follow,
            timestamps,
            limits,
        } => {
            let stage = stage.or(stage_flag);
            let style = logs::Style {
                timestamps,
                colour: std::io::IsTerminal::is_terminal(&std::io::stdout())
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            };
            if follow {
                let options = limits.options();
                return logs::follow(&client, &deployment, stage.as_deref(), style, &options).await;
            }
            logs::print(&client, &deployment, stage.as_deref(), style).await?;
        }
        DeploymentsCommand::Wait {
            deployment,
            limits,
            json,
        } => {
            return follow(&client, &deployment, limits.options(), Display::Quiet, json).await;
        }
        DeploymentsCommand::Watch {
            deployment,
            app,
            logs,
            limits,
            json,
        } => {
            let deployment = under_way(&client, deployment, app.as_deref()).await?;
            return follow(
                &client,
                &deployment,
                limits.options(),
                Display::for_stdout(json, logs),
                json,
            )
            .await;
        }
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_status_names_the_closest_or_all() {
        assert_eq!(parse_status("running"), Ok(DeploymentStatus::Running));
        assert_eq!(
            parse_status(" Rolling_Back"),
            Ok(DeploymentStatus::RollingBack)
        );
        assert_eq!(
            parse_status("RUNING"),
            Err("unknown status RUNING; did you mean RUNNING?".to_owned())
        );
        assert_eq!(
            parse_status("BOGUS"),
            Err("unknown status BOGUS; one of PENDING, PLANNED, RUNNING, ROLLING_BACK, SUCCESS, FAILURE, CANCELLED".to_owned())
        );
    }
}
