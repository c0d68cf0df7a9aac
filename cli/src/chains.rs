//! `gannet chains`: deployment chains (PipeCD's `postSync.chain`), listed, shown block by
//! block, and cancelled.

use gannet_controller::ChainView;
use gannet_domain::chain::{BlockStatus, ChainStatus};

use crate::exit::Exit;
use crate::output::{OutputArgs, Shown};
use crate::render::{table_text, Columns};
use crate::{claimed, suggest, Server};

#[derive(clap::Subcommand)]
pub(crate) enum ChainsCommand {
    /// Chains, newest first.
    #[command(after_help = "Example:\n  gannet chains list --status RUNNING")]
    List {
        /// Comma-separated statuses, any case: RUNNING, SUCCESS, FAILURE, CANCELLED
        #[arg(long, value_name = "STATUSES", value_delimiter = ',', value_parser = parse_status)]
        status: Vec<ChainStatus>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One chain, block by block: each app, its deployment and how it ended.
    #[command(
        after_help = "Examples:\n  gannet chains show <CHAIN>\n  gannet chains show <DEPLOYMENT>    the chain that deployment started or belongs to"
    )]
    Show {
        /// The chain's id, or the id of a deployment that started it or belongs to it.
        chain: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Cancel a running chain: no further block starts, and its deployments under way are
    /// cancelled (and roll back).
    #[command(after_help = "Example:\n  gannet chains cancel <CHAIN>")]
    Cancel {
        /// The chain's id, or the id of a deployment of it.
        chain: String,
        /// Print the chain as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A chain status, any case; an unknown one names the closest.
fn parse_status(text: &str) -> Result<ChainStatus, String> {
    suggest::status(text, &ChainStatus::ALL, |s| s.as_str())
}

/// `2/3`: the blocks that have succeeded, of all (block 0 included).
fn progress(c: &ChainView) -> String {
    let done = c
        .blocks
        .iter()
        .filter(|b| b.status == BlockStatus::Success)
        .count();
    format!("{done}/{}", c.blocks.len())
}

pub(crate) fn list(chains: &[ChainView], columns: Columns) -> String {
    let rows: Vec<Vec<String>> = chains
        .iter()
        .map(|c| {
            vec![
                c.id.to_string(),
                c.app.clone(),
                c.status.as_str().to_owned(),
                progress(c),
                c.created_at.clone(),
                columns.fit(&c.status_reason, 70),
            ]
        })
        .collect();
    table_text(
        &["ID", "STARTED BY", "STATUS", "BLOCKS", "CREATED", "REASON"],
        &rows,
    )
}

pub(crate) fn show(c: &ChainView, columns: Columns) -> String {
    let mut out = format!(
        "Chain:      {}\nStarted by: {} (deployment {})\nStatus:     {} ({} blocks done): {}\nCreated:    {}\n",
        c.id,
        c.app,
        c.first,
        c.status.as_str(),
        progress(c),
        c.status_reason,
        c.created_at,
    );
    if let Some(at) = &c.completed_at {
        out.push_str(&format!("Ended:      {at}\n"));
    }
    for (i, block) in c.blocks.iter().enumerate() {
        let what = if block.matcher.is_empty() {
            "the deployment that started the chain".to_owned()
        } else {
            block.matcher.clone()
        };
        out.push_str(&format!("\nBlock {i}: {what}  {}\n", block.status.as_str()));
        let rows: Vec<Vec<String>> = block
            .nodes
            .iter()
            .map(|n| {
                vec![
                    format!("  {}", n.app_name),
                    n.status.as_str().to_owned(),
                    n.deployment
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), ToString::to_string),
                    columns.fit(&n.reason, 70),
                ]
            })
            .collect();
        if rows.is_empty() {
            out.push_str("  (no application)\n");
        } else {
            out.push_str(&table_text(
                &["  APP", "STATUS", "DEPLOYMENT", "REASON"],
                &rows,
            ));
        }
    }
    out
}

/// Runs `gannet chains COMMAND`.
pub(crate) async fn run(server: &Server, command: ChainsCommand) -> anyhow::Result<Exit> {
    let client = server.client()?;
    match command {
        ChainsCommand::List {
            status,
            limit,
            output,
        } => {
            let chains = client.chains(&status, limit).await?;
            output.output().print(&Shown {
                json: &serde_json::json!({ "chains": chains }),
                names: chains.iter().map(|c| c.id.to_string()).collect(),
                table: &|columns| list(&chains, columns),
            })?;
        }
        ChainsCommand::Show { chain, output } => {
            let c = client.chain(&chain).await?;
            output.output().print(&Shown {
                json: &c,
                names: vec![c.id.to_string()],
                table: &|columns| show(&c, columns),
            })?;
        }
        ChainsCommand::Cancel { chain, json } => {
            let c = client
                .cancel_chain(&chain, claimed(None).as_deref())
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&c)?);
            } else {
                println!("chain {} cancelled: {}", c.id, c.status_reason);
            }
        }
    }
    Ok(Exit::Success)
}
