//! The `trigger` Lambda function (see the crate docs for what invokes it). It checks configs and
//! plans with the plugins' planning faces: it links none of their steps or platform SDKs.

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Trigger,
        gannet_functions::Extras {
            plugins: Some(gannet_plugins::planning),
            ..Default::default()
        },
    )
}
