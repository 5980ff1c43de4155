//! The routes the containment probe tries, and where each is aimed. Every target is set by an
//! environment variable; the defaults are public addresses, for a real cluster only. Tests
//! set every one to a host of their own, and `AF_PROBE_DEFAULTS=forbid` makes a route left at
//! its public default a refusal instead. No route can be switched off: containment is not
//! something a variable declares away.

use std::fmt;
use std::net::SocketAddr;

use crate::runtime::RuntimeError;

/// How one route is tried, as arguments to the probe binary (`af-probe tcp|dns ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A TCP connection; it got out if the connection completed.
    Tcp(SocketAddr),
    /// One UDP question for `name`; it got out if any answer came back.
    Dns {
        /// The resolver asked.
        server: SocketAddr,
        /// The name asked for.
        name: String,
    },
}

/// One way out the probe tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Its id, also the probe container's name.
    pub id: &'static str,
    /// What it is, for a person ("direct TCP to a public address").
    pub what: &'static str,
    /// How it is tried.
    pub attempt: Attempt,
}

impl Route {
    /// The probe binary's arguments.
    pub fn args(&self) -> Vec<String> {
        match &self.attempt {
            Attempt::Tcp(addr) => vec!["tcp".to_owned(), addr.to_string()],
            Attempt::Dns { server, name } => {
                vec!["dns".to_owned(), server.to_string(), name.clone()]
            }
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.attempt {
            Attempt::Tcp(addr) => write!(f, "{} ({addr})", self.what),
            Attempt::Dns { server, .. } => write!(f, "{} ({server})", self.what),
        }
    }
}

#[derive(Clone, Copy)]
enum Shape {
    Tcp,
    Dns,
}

/// A route set by one variable.
struct Knob {
    id: &'static str,
    what: &'static str,
    var: &'static str,
    default: &'static str,
    shape: Shape,
}

/// The public routes, IPv4 and IPv6. The IPv6 ones fail at once on a cluster without IPv6,
/// which is the truth about that cluster.
const KNOBS: [Knob; 6] = [
    Knob {
        id: "tcp",
        what: "direct TCP to a public address",
        var: "AF_PROBE_TCP",
        default: "1.1.1.1:443",
        shape: Shape::Tcp,
    },
    Knob {
        id: "dns",
        what: "UDP DNS straight to a public resolver",
        var: "AF_PROBE_DNS",
        default: "1.1.1.1:53",
        shape: Shape::Dns,
    },
    Knob {
        id: "metadata",
        what: "the metadata endpoint",
        var: "AF_PROBE_METADATA",
        default: "169.254.169.254:80",
        shape: Shape::Tcp,
    },
    Knob {
        id: "tcp6",
        what: "direct TCP to a public address over IPv6",
        var: "AF_PROBE_TCP6",
        default: "[2606:4700:4700::1111]:443",
        shape: Shape::Tcp,
    },
    Knob {
        id: "dns6",
        what: "UDP DNS straight to a public resolver over IPv6",
        var: "AF_PROBE_DNS6",
        default: "[2606:4700:4700::1111]:53",
        shape: Shape::Dns,
    },
    Knob {
        id: "metadata6",
        what: "the metadata endpoint over IPv6",
        var: "AF_PROBE_METADATA6",
        default: "[fd00:ec2::254]:80",
        shape: Shape::Tcp,
    },
];

/// The name the DNS routes ask for, unless `AF_PROBE_DNS_NAME` says otherwise.
const DEFAULT_DNS_NAME: &str = "example.com";
/// The variable naming the API server's addresses (`ADDR:PORT`, comma separated, at most one
/// per family); unset, they are read from the cluster's `default/kubernetes` Service.
const API_SERVER_VAR: &str = "AF_PROBE_API_SERVER";

/// Where the probe aims, read once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTargets {
    public: Vec<Route>,
    api_server: Option<Vec<SocketAddr>>,
}

impl ProbeTargets {
    /// Read the targets through `var` (the process environment in `af`).
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<Self, RuntimeError> {
        let forbid = match var("AF_PROBE_DEFAULTS").as_deref() {
            None | Some("allow") => false,
            Some("forbid") => true,
            Some(other) => {
                return Err(RuntimeError::Unsupported(format!(
                    "AF_PROBE_DEFAULTS {other:?} is neither allow nor forbid."
                )));
            }
        };
        let name = var("AF_PROBE_DNS_NAME").unwrap_or_else(|| DEFAULT_DNS_NAME.to_owned());
        let mut public = Vec::with_capacity(KNOBS.len());
        for knob in &KNOBS {
            let text = match var(knob.var) {
                Some(text) => text,
                None if forbid => {
                    return Err(RuntimeError::Unsupported(format!(
                        "AF_PROBE_DEFAULTS=forbid and {} is not set, so the probe would aim {} at its public default {}; nothing was created.",
                        knob.var, knob.what, knob.default
                    )));
                }
                None => knob.default.to_owned(),
            };
            let addr = parse(knob.var, &text)?;
            let attempt = match knob.shape {
                Shape::Tcp => Attempt::Tcp(addr),
                Shape::Dns => Attempt::Dns {
                    server: addr,
                    name: name.clone(),
                },
            };
            public.push(Route {
                id: knob.id,
                what: knob.what,
                attempt,
            });
        }
        let api_server = var(API_SERVER_VAR)
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(|a| parse(API_SERVER_VAR, a))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(Self { public, api_server })
    }

    /// Every route, the API server's aimed at `discovered` unless configured. With no address
    /// for it at all, the API server route cannot be tried: that is returned as unanswered.
    pub fn routes(&self, discovered: &[SocketAddr]) -> (Vec<Route>, Option<String>) {
        let mut routes = self.public.clone();
        let api = self.api_server.as_deref().unwrap_or(discovered);
        let v4 = api.iter().find(|a| a.is_ipv4());
        let v6 = api.iter().find(|a| a.is_ipv6());
        for (id, what, addr) in [
            ("api-server", "the cluster's API server", v4),
            ("api-server6", "the cluster's API server over IPv6", v6),
        ] {
            if let Some(addr) = addr {
                routes.push(Route {
                    id,
                    what,
                    attempt: Attempt::Tcp(*addr),
                });
            }
        }
        let unknown = (v4.is_none() && v6.is_none()).then(|| {
            format!("the cluster's API server (its address inside the cluster could not be read; set {API_SERVER_VAR})")
        });
        (routes, unknown)
    }
}

fn parse(var: &str, text: &str) -> Result<SocketAddr, RuntimeError> {
    text.trim().parse().map_err(|_| {
        RuntimeError::Unsupported(format!(
            "{var} {text:?} is not an ADDR:PORT such as 198.51.100.10:443 or [2001:db8::10]:443."
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn targets(vars: &[(&str, &str)]) -> Result<ProbeTargets, RuntimeError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ProbeTargets::from_vars(&|k: &str| vars.get(k).cloned())
    }

    fn all_set() -> Vec<(&'static str, &'static str)> {
        vec![
            ("AF_PROBE_TCP", "198.51.100.10:8443"),
            ("AF_PROBE_DNS", "198.51.100.10:5353"),
            ("AF_PROBE_METADATA", "169.254.44.10:8080"),
            ("AF_PROBE_TCP6", "[2001:db8:4b::10]:8443"),
            ("AF_PROBE_DNS6", "[2001:db8:4b::10]:5353"),
            ("AF_PROBE_METADATA6", "[2001:db8:4b::11]:8080"),
            ("AF_PROBE_DNS_NAME", "probe.test"),
        ]
    }

    #[test]
    fn every_route_is_aimed_where_its_variable_says() {
        let t = targets(&all_set()).expect("targets");
        let api: SocketAddr = "10.96.0.1:443".parse().expect("addr");
        let (routes, unknown) = t.routes(&[api]);
        assert_eq!(unknown, None);
        let args: Vec<(&str, Vec<String>)> = routes.iter().map(|r| (r.id, r.args())).collect();
        let expect =
            |id: &'static str, a: &[&str]| (id, a.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(
            args,
            vec![
                expect("tcp", &["tcp", "198.51.100.10:8443"]),
                expect("dns", &["dns", "198.51.100.10:5353", "probe.test"]),
                expect("metadata", &["tcp", "169.254.44.10:8080"]),
                expect("tcp6", &["tcp", "[2001:db8:4b::10]:8443"]),
                expect("dns6", &["dns", "[2001:db8:4b::10]:5353", "probe.test"]),
                expect("metadata6", &["tcp", "[2001:db8:4b::11]:8080"]),
                expect("api-server", &["tcp", "10.96.0.1:443"]),
            ]
        );
    }

    #[test]
    fn the_defaults_are_public_and_forbid_refuses_any_left_at_them() {
        let t = targets(&[]).expect("defaults");
        let (routes, _) = t.routes(&[]);
        assert_eq!(routes[0].args(), ["tcp", "1.1.1.1:443"]);
        assert_eq!(routes[2].args(), ["tcp", "169.254.169.254:80"]);
        let mut vars = all_set();
        vars.retain(|(k, _)| *k != "AF_PROBE_METADATA6");
        vars.push(("AF_PROBE_DEFAULTS", "forbid"));
        let refused = targets(&vars).expect_err("refused");
        assert!(
            refused
                .to_string()
                .contains("AF_PROBE_METADATA6 is not set"),
            "{refused}"
        );
        let mut vars = all_set();
        vars.push(("AF_PROBE_DEFAULTS", "forbid"));
        assert!(targets(&vars).is_ok());
    }

    #[test]
    fn the_api_server_is_configured_or_discovered_and_unknown_is_unanswered() {
        let mut vars = all_set();
        vars.push(("AF_PROBE_API_SERVER", "10.250.0.1:6443, [fd00::1]:6443"));
        let (routes, unknown) = targets(&vars).expect("targets").routes(&[]);
        assert_eq!(unknown, None);
        let api: Vec<String> = routes[6..].iter().map(ToString::to_string).collect();
        assert_eq!(
            api,
            [
                "the cluster's API server (10.250.0.1:6443)",
                "the cluster's API server over IPv6 ([fd00::1]:6443)"
            ]
        );
        let (routes, unknown) = targets(&all_set()).expect("targets").routes(&[]);
        assert_eq!(routes.len(), 6);
        assert!(unknown.expect("unanswered").contains("AF_PROBE_API_SERVER"));
    }

    #[test]
    fn a_target_that_is_not_an_address_is_refused() {
        let mut vars = all_set();
        vars[0] = ("AF_PROBE_TCP", "example.com:443");
        let refused = targets(&vars).expect_err("refused");
        assert!(refused.to_string().contains("AF_PROBE_TCP"), "{refused}");
    }
}
