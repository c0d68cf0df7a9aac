//! A function's `main`: JSON logs, the config read once, the runtime built once, the shutdown
//! hook registered, then the Lambda Runtime API loop with the function's handler.

use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::process::ExitCode;

use aws_lambda_events::sqs::SqsEvent;
use gannet_controller::error_chain;
use gannet_domain::ports::QueueName;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;

use crate::runtime::Extras;
use crate::{http, schedule, sqs, Function, FunctionConfig, InvokedBy, Job, Runtime};

/// Runs `function` under the Lambda Runtime API until Lambda stops it. Start-up failures are
/// logged (naming what is wrong) and end the process with a failure code, which Lambda
/// reports as an init error.
#[inline(always)]
pub fn start(function: Function) -> ExitCode {
    start_with(function, Extras::default())
}

/// [`start`] for a function that builds what only it needs ([`Extras`]).
///
/// Inlined into each function's `main`, where `function` is a constant, so the adapter for
/// what invokes the function is chosen at compile time and a binary links only its own: the
/// webhook links neither the API's router nor the queue consumer and the handlers behind it.
#[inline(always)]
pub fn start_with(function: Function, extras: Extras) -> ExitCode {
    match function.invoked_by() {
        InvokedBy::FunctionUrl => start_serving(function, extras, serve_webhook),
        InvokedBy::HttpApi => start_serving(function, extras, serve_api),
        InvokedBy::Queue(queue) => {
            start_serving(function, extras, move |runtime| serve_queue(runtime, queue))
        }
        InvokedBy::Schedule(job) => {
            start_serving(function, extras, move |runtime| serve_timer(runtime, job))
        }
        InvokedBy::ScheduleOrQueue(job, queue) => start_serving(function, extras, move |runtime| {
            serve_timer_or_queue(runtime, job, queue)
        }),
    }
}

/// Starts the async runtime, then the function ([`run`]) with its Runtime API loop, `serve`.
fn start_serving<S, F>(function: Function, extras: Extras, serve: S) -> ExitCode
where
    S: FnOnce(Runtime) -> F,
    F: Future<Output = Result<(), lambda_runtime::Error>>,
{
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
    tokio.block_on(run(function, extras, serve))
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

async fn run<S, F>(function: Function, extras: Extras, serve: S) -> ExitCode
where
    S: FnOnce(Runtime) -> F,
    F: Future<Output = Result<(), lambda_runtime::Error>>,
{
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

async fn serve_webhook(runtime: Runtime) -> Result<(), lambda_runtime::Error> {
    let handler = service_fn(move |request| {
        let runtime = runtime.clone();
        async move { Ok::<_, Infallible>(http::webhook(&runtime, request).await) }
    });
    lambda_http::run(handler).await
}

async fn serve_api(runtime: Runtime) -> Result<(), lambda_runtime::Error> {
    lambda_http::run(http::api(&runtime)).await
}

async fn serve_queue(runtime: Runtime, queue: QueueName) -> Result<(), lambda_runtime::Error> {
    let handler = service_fn(move |event: LambdaEvent<SqsEvent>| {
        let runtime = runtime.clone();
        async move { Ok::<_, Infallible>(sqs::handle_batch(&runtime, queue, event).await) }
    });
    lambda_runtime::run(handler).await
}

async fn serve_timer(runtime: Runtime, job: Job) -> Result<(), lambda_runtime::Error> {
    let handler = service_fn(move |event: LambdaEvent<Value>| {
        let runtime = runtime.clone();
        async move { timer(&runtime, job, event).await }
    });
    lambda_runtime::run(handler).await
}

/// The drift function: its timer's input, an SQS event (told apart by its `Records`), or the
/// api function's diff request (`{"diff": ...}`, [`crate::diff`]).
async fn serve_timer_or_queue(
    runtime: Runtime,
    job: Job,
    queue: QueueName,
) -> Result<(), lambda_runtime::Error> {
    let handler = service_fn(move |event: LambdaEvent<Value>| {
        let runtime = runtime.clone();
        async move {
            if let Some(request) = event.payload.get("diff") {
                return Ok(gannet_controller::answer_diff(runtime.controller(), request).await);
            }
            if event.payload.get("Records").is_none() {
                return timer(&runtime, job, event).await;
            }
            let (payload, context) = event.into_parts();
            let records: SqsEvent = serde_json::from_value(payload)?;
            let response =
                sqs::handle_batch(&runtime, queue, LambdaEvent::new(records, context)).await;
            Ok(serde_json::to_value(response)?)
        }
    });
    lambda_runtime::run(handler).await
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
