//! The `drift` Lambda function (see the crate docs for what invokes it). It reads live state
//! through the plugins whole, and a check may be a command (a Terraform plan) run as a job, so
//! it links the platforms' SDKs and the job runner's, as `stage` does.

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Drift,
        gannet_functions::Extras {
            plugins: Some(gannet_plugins::registry),
            jobs: Some(gannet_functions::codebuild_jobs),
            ..Default::default()
        },
    )
}
