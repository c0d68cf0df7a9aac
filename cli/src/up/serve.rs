//! The HTTP server of `gannet up`, with the limits a server reachable from the internet needs
//! (GitHub must reach the webhook, so the port is often public):
//! - at most [`Limits::max_connections`] connections at once; one more is closed at once, so
//!   a flood of idle sockets cannot use up the process's file descriptors;
//! - a connection that has not sent a whole request head within [`Limits::header_timeout`]
//!   is closed, whether it is new or idle between requests (hyper starts the timer each time
//!   it waits for a head);
//! - the router answers 408 to a request whose body has not arrived within its deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::stopped;

/// Connection limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `app` on `listener` until `stop`, then lets the connections under way finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut refused: u64 = 0;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    %peer,
                    refused,
                    max = limits.max_connections,
                    "too many connections; closing new ones"
                );
            }
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(64 * 1024);
            let conn = http.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(err) = result {
                        tracing::debug!(%peer, error = %err, "connection ended");
                    }
                }
                () = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(slot);
        });
    }
}
