//! The `api` Lambda function (see the crate docs for what invokes it). It checks configs and
//! plans with the plugins' planning faces: it links none of their steps or platform SDKs, and
//! asks the drift function for `apps diff` (the Lambda SDK's invoke is all it links for that).
//! It serves the web console too: the only function linking gannet-console, whose bundle
//! `make console` builds (this binary does not compile without a current one).

/// The web console's bundle, embedded.
const CONSOLE: gannet_controller::Console = gannet_console::bundle();

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Api,
        gannet_functions::Extras {
            plugins: Some(gannet_plugins::planning),
            diff: Some(gannet_functions::lambda_diff),
            console: Some(CONSOLE),
            ..Default::default()
        },
    )
}
