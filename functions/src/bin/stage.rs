//! The `stage` Lambda function (see the crate docs for what invokes it). It and `drift` run
//! the plugins whole and run jobs, so they alone link the platforms' SDKs and the job runner's
//! (CodeBuild, S3, CloudWatch Logs).

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Stage,
        gannet_functions::Extras {
            plugins: Some(gannet_plugins::registry),
            jobs: Some(gannet_functions::codebuild_jobs),
            ..Default::default()
        },
    )
}
