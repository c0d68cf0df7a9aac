//! The `poll` Lambda function (see the crate docs for what invokes it). It builds no plugins.

fn main() -> std::process::ExitCode {
    gannet_functions::start(gannet_functions::Function::Poll)
}
