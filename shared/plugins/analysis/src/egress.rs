//! Where an `https` check may connect. Its URL is written by whoever can push to the
//! repository, but the request leaves from gannet (on AWS, from inside the stage function, next
//! to the Lambda runtime API on loopback), so it is held to a deny list: loopback, link-local
//! (where cloud metadata services answer), private, shared (CGNAT), unique-local, unspecified,
//! multicast, broadcast and other reserved addresses, in every IPv6 form that embeds an IPv4
//! address, are refused unless the operator lists their network in
//! `plugins.analysis.http.allowPrivateNetworks`.
//!
//! A name is resolved once, by [`CheckedResolver`]: every address it answers is checked, and the
//! connection is made to exactly those addresses (reqwest's connector asks no one else), so a
//! second DNS answer cannot rebind the check to another address. Redirects are never followed,
//! and no proxy is used (a proxy would resolve the name itself). The providers' addresses come
//! from the operator and are not held to this rule.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use gannet_config::typed::FieldError;
use gannet_sdk::registry::PluginSettings;
use serde::Deserialize;

/// The setting that lets a check reach a network the deny list holds.
pub(crate) const ALLOW_SETTING: &str = "plugins.analysis.http.allowPrivateNetworks";

/// `plugins.analysis` as the egress rule reads it (the providers are read elsewhere).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Settings {
    #[serde(default, rename = "providers")]
    _providers: serde::de::IgnoredAny,
    #[serde(default)]
    http: HttpSettings,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpSettings {
    #[serde(default)]
    allow_private_networks: Vec<String>,
}

/// A network: an address and how many of its leading bits are fixed (`10.0.0.0/8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// `10.0.0.0/8`, `fd00::/8`, or one address (`10.1.2.3`, as `/32`).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let usage = "a network such as 10.0.0.0/8 or fd00::/8, or one address";
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not {usage}"))?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {bits}"))?,
        };
        let network = Self { addr, prefix };
        if bits_of(addr) & !mask(prefix, bits) != 0 {
            let base = from_bits(bits_of(addr) & mask(prefix, bits), addr.is_ipv4());
            return Err(format!(
                "{text:?} has bits set past its /{prefix}: write {base}/{prefix}"
            ));
        }
        Ok(network)
    }

    fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        bits_of(ip) & mask(self.prefix, bits) == bits_of(self.addr)
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn bits_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_bits(bits: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(bits as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(bits))
    }
}

/// The `prefix` leading bits of a `bits`-bit address set.
fn mask(prefix: u8, bits: u8) -> u128 {
    let all = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    // A shift by the whole width (a /128) leaves no bit unfixed.
    all & !all.checked_shr(u32::from(prefix)).unwrap_or(0)
}

/// Why an address is held back: what kind of address it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    Unspecified,
    Loopback,
    LinkLocal,
    Private,
    Shared,
    UniqueLocal,
    Multicast,
    Reserved,
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Unspecified => "an unspecified (this host) address",
            Self::Loopback => "a loopback address",
            Self::LinkLocal => "a link-local address (where cloud metadata services answer)",
            Self::Private => "a private address",
            Self::Shared => "a shared (carrier-grade NAT) address",
            Self::UniqueLocal => "a unique-local IPv6 address",
            Self::Multicast => "a multicast address",
            Self::Reserved => "a reserved or broadcast address",
        })
    }
}

/// What kind of held-back address `ip` is, if it is one; an IPv6 address that carries an IPv4
/// address (mapped, compatible, NAT64, 6to4) is judged by the IPv4 address it carries.
pub(crate) fn held(ip: IpAddr) -> Option<Held> {
    match ip {
        IpAddr::V4(v4) => held_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => held_v4(v4),
            None => held_v6(v6),
        },
    }
}

fn held_v4(ip: Ipv4Addr) -> Option<Held> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => Held::Unspecified,
        (127, ..) => Held::Loopback,
        (169, 254, _) => Held::LinkLocal,
        (10, ..) | (192, 168, _) => Held::Private,
        (172, 16..=31, _) => Held::Private,
        (100, 64..=127, _) => Held::Shared,
        // IETF protocol assignments and benchmarking networks.
        (192, 0, 0) | (198, 18..=19, _) => Held::Reserved,
        (224..=239, ..) => Held::Multicast,
        // Class E and the broadcast address.
        (240..=255, ..) => Held::Reserved,
        _ => return None,
    })
}

fn held_v6(ip: Ipv6Addr) -> Option<Held> {
    let s = ip.segments();
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => Held::Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => Held::Loopback,
        _ if s[0] & 0xffc0 == 0xfe80 => Held::LinkLocal,
        // Site-local, deprecated but still routed by some.
        _ if s[0] & 0xffc0 == 0xfec0 => Held::Private,
        _ if s[0] & 0xfe00 == 0xfc00 => Held::UniqueLocal,
        _ if s[0] & 0xff00 == 0xff00 => Held::Multicast,
        // Local-use NAT64 (64:ff9b:1::/48), discard-only (100::/64), Teredo (2001::/32).
        [0x64, 0xff9b, 1, ..] | [0x100, 0, 0, 0, ..] | [0x2001, 0, ..] => Held::Reserved,
        // The rest of ::/96 (IPv4-compatible) is read as IPv4 before we get here.
        _ => return None,
    })
}

/// The IPv4 address an IPv6 address carries: `::ffff:a.b.c.d` (mapped), `::ffff:0:a.b.c.d`
/// (translated), `::a.b.c.d` (compatible, `::` and `::1` aside), `64:ff9b::a.b.c.d` (NAT64) and
/// `2002:AABB:CCDD::` (6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => Some(low),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, ..] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// An address an `https` check may not reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The name that resolved to it, when the URL has a name.
    pub(crate) name: Option<String>,
    pub(crate) address: IpAddr,
    pub(crate) held: Held,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (address, held) = (self.address, self.held);
        match &self.name {
            Some(name) => write!(f, "{name} resolves to {address}, {held}")?,
            None => write!(f, "{address} is {held}")?,
        }
        write!(
            f,
            ": an ANALYSIS https check may reach it only when {ALLOW_SETTING} lists its network"
        )
    }
}

impl std::error::Error for Refused {}

/// The rule: the deny list, less the networks the operator allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Egress {
    allowed: Vec<Network>,
}

impl Egress {
    /// Reads `plugins.analysis.http`.
    pub(crate) fn from_settings(settings: &PluginSettings<'_>) -> Result<Self, FieldError> {
        let written: Settings = settings.parse()?;
        let at = format!("{}.http.allowPrivateNetworks", settings.at());
        let allowed = written
            .http
            .allow_private_networks
            .iter()
            .enumerate()
            .map(|(i, text)| {
                Network::parse(text).map_err(|message| FieldError {
                    path: format!("{at}[{i}]"),
                    message,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed })
    }

    /// The rule with these networks allowed.
    #[cfg(test)]
    pub(crate) fn allowing(networks: &[&str]) -> Self {
        Self {
            allowed: networks
                .iter()
                .map(|n| Network::parse(n).expect("a network"))
                .collect(),
        }
    }

    /// Whether a check may connect to `ip`.
    pub(crate) fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let Some(held) = held(ip) else {
            return Ok(());
        };
        let carried = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let allowed = |ip: IpAddr| self.allowed.iter().any(|n| n.contains(ip));
        if allowed(ip) || carried.is_some_and(allowed) {
            return Ok(());
        }
        Err(Refused {
            name: None,
            address: ip,
            held,
        })
    }

    /// The check a URL's host gets before any lookup: an IP literal is checked, and a name
    /// reserved for loopback (`localhost`, `*.localhost`) is checked as `127.0.0.1`. Other
    /// names are checked when they are resolved, at each request.
    pub(crate) fn check_host(&self, url: &reqwest::Url) -> Result<(), Refused> {
        // The URL parser has already read every IPv4 spelling (`2130706433`, `0x7f.1`).
        let Some(host) = url.host_str() else {
            return Ok(());
        };
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return self.check(ip);
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") {
            return self
                .check(IpAddr::V4(Ipv4Addr::LOCALHOST))
                .map_err(|r| Refused {
                    name: Some(name),
                    ..r
                });
        }
        Ok(())
    }
}

/// What the resolver's lookup answers: every address of a name.
pub(crate) type Answer = std::io::Result<Vec<IpAddr>>;

/// Looks a name up; the system's resolver outside tests.
pub(crate) trait Lookup: Send + Sync {
    fn lookup(&self, name: &str) -> Pin<Box<dyn Future<Output = Answer> + Send>>;
}

/// The system's resolver, through Tokio.
pub(crate) struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, name: &str) -> Pin<Box<dyn Future<Output = Answer> + Send>> {
        let name = name.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((name.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// reqwest's resolver for checks: looks a name up once, refuses it when any of its addresses is
/// held back, and hands the connector exactly the addresses it checked.
pub(crate) struct CheckedResolver {
    egress: Arc<Egress>,
    lookup: Arc<dyn Lookup>,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_owned();
        let (egress, lookup) = (self.egress.clone(), self.lookup.clone());
        Box::pin(async move {
            let ips = lookup.lookup(&name).await?;
            if ips.is_empty() {
                return Err(format!("{name} has no address").into());
            }
            for ip in &ips {
                egress.check(*ip).map_err(|r| Refused {
                    name: Some(name.clone()),
                    ..r
                })?;
            }
            // Port 0: the connector puts the URL's port in.
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The client `https` checks are sent with: names resolved by a [`CheckedResolver`], no
/// redirect followed, no proxy, and no connection kept for the next check (each check looks
/// its name up and is checked again).
pub(crate) fn client(egress: Arc<Egress>, lookup: Arc<dyn Lookup>) -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(concat!("gannet/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(0)
        .dns_resolver(Arc::new(CheckedResolver { egress, lookup }))
        .build()
        .unwrap_or_default()
}

/// The refusal behind a request's error, when the resolver refused its name.
pub(crate) fn refusal(error: &reqwest::Error) -> Option<Refused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    // Bounded: an error chain is a few links long.
    for _ in 0..16 {
        let e = source?;
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn every_held_back_kind_and_its_ipv6_disguises_are_held() {
        let cases = [
            ("0.0.0.0", Some(Held::Unspecified)),
            ("0.1.2.3", Some(Held::Unspecified)),
            ("127.0.0.1", Some(Held::Loopback)),
            ("127.255.255.254", Some(Held::Loopback)),
            ("169.254.169.254", Some(Held::LinkLocal)),
            ("169.254.170.2", Some(Held::LinkLocal)),
            ("10.0.0.1", Some(Held::Private)),
            ("172.16.0.1", Some(Held::Private)),
            ("172.31.255.255", Some(Held::Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(Held::Private)),
            ("100.64.0.1", Some(Held::Shared)),
            ("100.100.100.200", Some(Held::Shared)),
            ("100.128.0.1", None),
            ("224.0.0.1", Some(Held::Multicast)),
            ("255.255.255.255", Some(Held::Reserved)),
            ("240.0.0.1", Some(Held::Reserved)),
            ("198.18.0.1", Some(Held::Reserved)),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            ("::", Some(Held::Unspecified)),
            ("::1", Some(Held::Loopback)),
            ("fe80::1", Some(Held::LinkLocal)),
            ("fec0::1", Some(Held::Private)),
            ("fd00::1", Some(Held::UniqueLocal)),
            ("fc00::1", Some(Held::UniqueLocal)),
            ("fd00:ec2::254", Some(Held::UniqueLocal)),
            ("ff02::1", Some(Held::Multicast)),
            ("::ffff:127.0.0.1", Some(Held::Loopback)),
            ("::ffff:169.254.169.254", Some(Held::LinkLocal)),
            ("::ffff:a9fe:a9fe", Some(Held::LinkLocal)),
            ("::ffff:0:10.0.0.1", Some(Held::Private)),
            ("::127.0.0.1", Some(Held::Loopback)),
            ("::10.1.2.3", Some(Held::Private)),
            ("64:ff9b::169.254.169.254", Some(Held::LinkLocal)),
            ("64:ff9b:1::1", Some(Held::Reserved)),
            ("2002:7f00:1::", Some(Held::Loopback)),
            ("2002:a9fe:a9fe::1", Some(Held::LinkLocal)),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(Held::Reserved)),
            ("::ffff:8.8.8.8", None),
            ("2606:4700:4700::1111", None),
            ("2002:0808:0808::", None),
        ];
        for (text, want) in cases {
            assert_eq!(held(ip(text)), want, "{text}");
        }
    }

    #[test]
    fn an_allowed_network_lets_its_addresses_and_their_disguises_through() {
        let none = Egress::default();
        let err = none.check(ip("127.0.0.1")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "127.0.0.1 is a loopback address: an ANALYSIS https check may reach it only when plugins.analysis.http.allowPrivateNetworks lists its network"
        );
        assert!(none.check(ip("8.8.8.8")).is_ok());

        let loopback = Egress::allowing(&["127.0.0.0/8", "fd12:3456::/32", "10.9.8.7", "fd00::1"]);
        for allowed in [
            "fd00::1",
            "127.0.0.1",
            "127.4.5.6",
            "::ffff:127.0.0.1",
            "fd12:3456::9",
            "10.9.8.7",
        ] {
            assert!(loopback.check(ip(allowed)).is_ok(), "{allowed}");
        }
        for refused in [
            "fd00::2",
            "::1",
            "169.254.169.254",
            "10.9.8.6",
            "fd12:3457::1",
            "0.0.0.0",
        ] {
            assert!(loopback.check(ip(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn networks_read_as_written_or_are_refused_saying_why() {
        assert_eq!(
            Network::parse("10.0.0.0/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            Network::parse("10.1.2.3").unwrap().to_string(),
            "10.1.2.3/32"
        );
        assert_eq!(Network::parse("fd00::/8").unwrap().to_string(), "fd00::/8");
        assert_eq!(
            Network::parse("0.0.0.0/0").unwrap().to_string(),
            "0.0.0.0/0"
        );
        assert_eq!(
            Network::parse("fd00::1").unwrap().to_string(),
            "fd00::1/128"
        );
        assert_eq!(Network::parse("::/0").unwrap().to_string(), "::/0");
        let cases = [
            ("10.0.0.1/8", "has bits set past its /8: write 10.0.0.0/8"),
            ("10.0.0.0/33", "the prefix length must be 0 to 32"),
            ("fd00::/129", "the prefix length must be 0 to 128"),
            ("intranet", "is not a network such as 10.0.0.0/8"),
        ];
        for (text, want) in cases {
            let got = Network::parse(text).unwrap_err();
            assert!(got.contains(want), "{text}: {got}");
        }
    }

    #[test]
    fn settings_name_the_bad_entry() {
        let runtime = gannet_sdk::registry::RuntimeInfo::default();
        let read = |v: serde_json::Value| {
            Egress::from_settings(&PluginSettings::new("plugins.analysis", &v, &runtime))
                .map_err(|e| e.to_string())
        };
        assert_eq!(read(serde_json::Value::Null), Ok(Egress::default()));
        assert_eq!(
            read(
                serde_json::json!({"providers": [], "http": {"allowPrivateNetworks": ["127.0.0.0/8"]}})
            ),
            Ok(Egress::allowing(&["127.0.0.0/8"]))
        );
        let bad = read(
            serde_json::json!({"http": {"allowPrivateNetworks": ["10.0.0.0/8", "10.0.0.1/8"]}}),
        )
        .unwrap_err();
        assert!(
            bad.starts_with(
                "plugins.analysis.http.allowPrivateNetworks[1]: \"10.0.0.1/8\" has bits set"
            ),
            "{bad}"
        );
        let typo = read(serde_json::json!({"http": {"allowPrivateNetwork": []}})).unwrap_err();
        assert!(
            typo.starts_with("plugins.analysis.http.allowPrivateNetwork"),
            "{typo}"
        );
    }

    #[test]
    fn a_url_host_is_checked_before_any_lookup_when_it_says_where_it_goes() {
        let rule = Egress::default();
        let refused = |u: &str| rule.check_host(&reqwest::Url::parse(u).unwrap()).is_err();
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1:8080/admin",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[fd00:ec2::254]/",
            "http://0.0.0.0/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://10.1.2.3/",
            "http://localhost:9001/2018-06-01/runtime/invocation/next",
            "http://api.localhost./",
        ] {
            assert!(refused(url), "{url}");
        }
        for url in ["https://canary.example.com/health", "http://8.8.8.8/"] {
            assert!(!refused(url), "{url}");
        }
        let named = rule
            .check_host(&reqwest::Url::parse("http://LocalHost/").unwrap())
            .unwrap_err();
        assert!(
            named
                .to_string()
                .starts_with("localhost resolves to 127.0.0.1, a loopback address: "),
            "{named}"
        );
    }
}
