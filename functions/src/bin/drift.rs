//! The `drift` Lambda function (see the crate docs for what invokes it). A check may be a
//! command (a Terraform plan) run as a job, so it links the job runner's SDKs, as `stage` does.

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Drift,
        gannet_functions::Extras {
            jobs: Some(gannet_functions::codebuild_jobs),
            ..Default::default()
        },
    )
}
