//! The `stage` Lambda function (see the crate docs for what invokes it). It and `drift` run
//! jobs, so they alone link the job runner's SDKs (CodeBuild, S3, CloudWatch Logs).

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Stage,
        gannet_functions::Extras {
            jobs: Some(gannet_functions::codebuild_jobs),
            ..Default::default()
        },
    )
}
