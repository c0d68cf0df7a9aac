//! A function's `main`: JSON logs, the config read once, the runtime built once, the shutdown
//! hook registered, then the Lambda Runtime API loop with the function's handler.

use std::convert::Infallible;
use std::io::Write;
use std::process::ExitCode;

use aws_lambda_events::sqs::SqsEvent;
use gannet_controller::error_chain;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;

use crate::runtime::Extras;
use crate::{http, schedule, sqs, Function, FunctionConfig, InvokedBy, Job, Runtime};

/// Runs `function` under the Lambda Runtime API until Lambda stops it. Start-up failures are
/// logged (naming what is wrong) and end the process with a failure code, which Lambda
/// reports as an init error.
pub fn start(function: Function) -> ExitCode {
    start_with(function, Extras::default())
}

/// [`start`] for a function that builds what only it needs ([`Extras`]).
pub fn start_with(function: Function, extras: Extras) -> ExitCode {
    init_tracing();
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(tokio) => tokio,
        Err(err) => {
            tracing::error!(function = function.name(), error = %err, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    tokio.block_on(run(function, extras))
}

/// JSON logs to stdout, filtered by `RUST_LOG` (default `info`). Calling it again does nothing.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_current_span(true)
        .with_span_list(false)
        .try_init();
}

async fn run(function: Function, extras: Extras) -> ExitCode {
    let plugins = extras.plugins.map(|registry| registry());
    let config = match FunctionConfig::from_env(plugins.as_ref()) {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(function = function.name(), error = %err, "bad configuration");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match Runtime::start(function, &config, extras).await {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(function = function.name(), error = %error_chain(&err), "cannot start");
            return ExitCode::FAILURE;
        }
    };
    on_shutdown(function).await;
    tracing::info!(function = function.name(), "started");
    match serve(runtime).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(function = function.name(), error = %err, "the Lambda runtime loop ended");
            ExitCode::FAILURE
        }
    }
}

async fn serve(runtime: Runtime) -> Result<(), lambda_runtime::Error> {
    match runtime.function().invoked_by() {
        InvokedBy::FunctionUrl => {
            let handler = service_fn(move |request| {
                let runtime = runtime.clone();
                async move { Ok::<_, Infallible>(http::webhook(&runtime, request).await) }
            });
            lambda_http::run(handler).await
        }
        InvokedBy::HttpApi => lambda_http::run(http::api(&runtime)).await,
        InvokedBy::Queue(queue) => {
            let handler = service_fn(move |event: LambdaEvent<SqsEvent>| {
                let runtime = runtime.clone();
                async move { Ok::<_, Infallible>(sqs::handle_batch(&runtime, queue, event).await) }
            });
            lambda_runtime::run(handler).await
        }
        InvokedBy::Schedule(job) => {
            let handler = service_fn(move |event: LambdaEvent<Value>| {
                let runtime = runtime.clone();
                async move { timer(&runtime, job, event).await }
            });
            lambda_runtime::run(handler).await
        }
        InvokedBy::ScheduleOrQueue(job, queue) => {
            let handler = service_fn(move |event: LambdaEvent<Value>| {
                let runtime = runtime.clone();
                async move {
                    if event.payload.get("Records").is_none() {
                        return timer(&runtime, job, event).await;
                    }
                    let (payload, context) = event.into_parts();
                    let records: SqsEvent = serde_json::from_value(payload)?;
                    let response =
                        sqs::handle_batch(&runtime, queue, LambdaEvent::new(records, context))
                            .await;
                    Ok(serde_json::to_value(response)?)
                }
            });
            lambda_runtime::run(handler).await
        }
    }
}

/// Runs a timer's sweep.
async fn timer(
    runtime: &Runtime,
    job: Job,
    event: LambdaEvent<Value>,
) -> Result<Value, lambda_runtime::Error> {
    let result = match job {
        Job::Poll => schedule::poll(runtime, event).await,
        Job::Resume => schedule::resume(runtime, event).await,
        Job::Drift => schedule::drift(runtime, event).await,
    };
    result.map_err(lambda_runtime::Error::from)
}

/// Registers for Lambda's SIGTERM (through an internal no-op extension): the function logs
/// that it stops and flushes stdout. Off Lambda (no Runtime API) there is nothing to register.
async fn on_shutdown(function: Function) {
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_none() {
        return;
    }
    let hook = move || async move {
        tracing::info!(function = function.name(), "shutting down");
        let _ = std::io::stdout().flush();
    };
    // Registration panics when the extensions API refuses it; run it as a task so that only
    // costs the shutdown hook, not the function.
    if let Err(err) = tokio::spawn(lambda_runtime::spawn_graceful_shutdown_handler(hook)).await {
        tracing::warn!(function = function.name(), error = %err, "no graceful shutdown: the extension did not register");
    }
}
