//! `gannet apps list --watch`: the apps list again each time it changes (the API is read every
//! 2 s), redrawn in place on a terminal and appended otherwise, until `--timeout` or Ctrl-C.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::output::Output;
use crate::render;

/// How often the list is read.
const POLL: Duration = Duration::from_secs(2);

/// Prints the apps list as `print` shows it, then again whenever what it prints changes, for
/// `timeout` (or until Ctrl-C). An error (the server gone) ends the watch with it.
pub async fn watch(
    client: &Client,
    output: Output,
    show: impl Fn(&[gannet_controller::AppView], Output) -> anyhow::Result<String>,
    timeout: Option<Duration>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let terminal = std::io::stdout().is_terminal() && output != Output::Json;
    let mut last: Option<String> = None;
    let mut drawn = 0;
    loop {
        let text = show(&client.apps().await?, output)?;
        if last.as_deref() != Some(text.as_str()) {
            if terminal {
                let lines: Vec<String> = text.lines().map(str::to_owned).collect();
                drawn = render::redraw(drawn, &lines);
            } else {
                if last.is_some() && output != Output::Json {
                    println!();
                }
                print!("{text}");
            }
            last = Some(text);
        }
        let pause = match timeout {
            Some(t) if started.elapsed() >= t => return Ok(()),
            Some(t) => POLL.min(t - started.elapsed()),
            None => POLL,
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}
