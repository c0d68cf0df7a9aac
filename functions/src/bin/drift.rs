//! The `drift` Lambda function (see the crate docs for what invokes it).

fn main() -> std::process::ExitCode {
    gannet_functions::start(gannet_functions::Function::Drift)
}
