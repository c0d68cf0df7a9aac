//! The HTTP server of `gannet up`, with the limits a server reachable from the internet needs
//! (GitHub must reach the webhook, so the port is often public):
//! - at most [`Limits::max_connections`] connections at once, and at most
//!   [`Limits::max_connections_per_peer`] from one client address (an IPv6 client's whole
//!   /64); one more is closed at once, so neither a flood of idle sockets nor one client
//!   holding its connections open can use up the slots the webhook needs;
//! - a connection that has not finished its TLS handshake, or sent a whole request head,
//!   within [`Limits::header_timeout`] is closed, whether it is new or idle between requests
//!   (hyper starts the timer each time it waits for a head);
//! - the router answers 408 to a request whose body has not arrived within its deadline.
//!
//! With `api.tls` it speaks HTTPS only: a plain HTTP request to the port fails its handshake.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::stopped;
use super::tls::ServerTls;

/// Connection limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    /// Connections one client address may hold at once. Behind a reverse proxy every
    /// connection comes from the proxy's address: raise this to `max_connections` there and
    /// let the proxy limit each client.
    pub max_connections_per_peer: usize,
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            max_connections_per_peer: 64,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// The connections each client address holds.
#[derive(Clone, Default)]
struct Peers(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection counted against its peer; uncounted when dropped.
struct PeerSlot {
    peers: Peers,
    key: IpAddr,
}

impl Peers {
    /// A slot for a connection from `ip`, or `None` when it already holds `max`.
    fn take(&self, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let key = peer_key(ip);
        let mut held = self.lock();
        let n = held.entry(key).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: self.clone(),
            key,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.peers.lock();
        if let Some(n) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// What counts as one client: an IPv4 address (also when mapped into IPv6), or an IPv6
/// address's /64, which one machine often holds whole.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// How often a kind of refusal has happened, logged at its 1st, 2nd, 4th, 8th… time.
#[derive(Default)]
struct Refusals(u64);

impl Refusals {
    fn count(&mut self) -> Option<u64> {
        self.0 += 1;
        self.0.is_power_of_two().then_some(self.0)
    }
}

/// Serves `app` on `listener` (over TLS when `tls`) until `stop`, then lets the connections
/// under way finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    tls: Option<ServerTls>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Peers::default();
    let (mut too_many, mut too_many_from_one) = (Refusals::default(), Refusals::default());
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
        // The peer's own cap first: a peer over it takes no slot from the others.
        let Some(peer_slot) = peers.take(peer.ip(), limits.max_connections_per_peer) else {
            if let Some(refused) = too_many_from_one.count() {
                tracing::warn!(
                    %peer,
                    refused,
                    max = limits.max_connections_per_peer,
                    "too many connections from one client; closing its new ones"
                );
            }
            drop(stream);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(refused) = too_many.count() {
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
        let app = app.clone();
        let tls = tls.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            match tls {
                None => connection(stream, app, limits, stop).await,
                Some(tls) => {
                    // A client that never finishes its handshake is closed like one that never
                    // sends a request head.
                    let handshake = tls.acceptor().accept(stream);
                    match tokio::time::timeout(limits.header_timeout, handshake).await {
                        Ok(Ok(stream)) => connection(stream, app, limits, stop).await,
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, error = %err, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
            drop(peer_slot);
        });
    }
}

/// Serves HTTP/1.1 on one connection until it ends, or until `stop` (then gracefully).
async fn connection<S>(stream: S, app: Router, limits: Limits, mut stop: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(64 * 1024);
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(error = %err, "connection ended");
            }
        }
        () = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_peer_is_capped_and_its_slots_come_back_when_its_connections_end() {
        let peers = Peers::default();
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let b: IpAddr = "192.0.2.2".parse().expect("ip");
        let held: Vec<PeerSlot> = (0..3).map(|_| peers.take(a, 3).expect("a slot")).collect();
        assert!(peers.take(a, 3).is_none(), "a fourth from the same peer");
        assert!(peers.take(b, 3).is_some(), "another peer is not affected");
        drop(held);
        assert!(peers.take(a, 3).is_some(), "slots come back");
        assert!(
            peers.lock().is_empty(),
            "a peer with no connection is forgotten"
        );
    }

    #[test]
    fn an_ipv6_clients_slash_64_and_a_mapped_ipv4_address_count_as_one_peer() {
        let cases = [
            ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::"),
            ("2001:db8:1:2:ffff:1:2:3", "2001:db8:1:2::"),
            ("::ffff:192.0.2.7", "192.0.2.7"),
            ("192.0.2.7", "192.0.2.7"),
            ("::1", "::"),
        ];
        for (ip, key) in cases {
            let ip: IpAddr = ip.parse().expect("ip");
            assert_eq!(peer_key(ip).to_string(), key, "{ip}");
        }
    }
}
