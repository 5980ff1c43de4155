//! The one host and port a request names, read from its absolute-form URL, CONNECT target or
//! `Host` header, and the refusal when it names none, several, or a port that is not one.

use std::sync::Arc;

use af_policy::error::codes;
use http::uri::Authority;
use http::{Request, StatusCode, header};
use http_body_util::Either;
use hyper::body::Incoming;

use crate::answer::body::ProxyBody;
use crate::answer::refusal::Refusal;
use crate::answer::request::Origin;
use crate::decide::tripwire;
use crate::decide::{Ask, refuse_undecided};
use crate::state::State;

/// Why a request names no single usable host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostProblem {
    /// It names none or several (how, as a phrase: "has more than one Host header").
    NotOne(&'static str),
    /// Its port is not a number from 1 to 65535.
    BadPort(BadPort),
}

/// A port that is not plain digits from 1 to 65535 (`:65536`, `:+8080`, `:0x50`, `:0`), as
/// written, and the host it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadPort {
    /// The host, IPv6 brackets included.
    pub host: String,
    /// The port as written.
    pub port: String,
}

impl BadPort {
    /// `host:port` as written.
    pub(crate) fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The 400 for `what` (the request as written), which names this port in its `place`.
    pub(crate) fn refusal(&self, what: &str, place: &str) -> Refusal {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_PORT,
            "bad_port",
            format!(
                "{what}: the port {:?} in its {place} is not a number from 1 to 65535, so it cannot be decided",
                self.port
            ),
        )
    }
}

/// The port `authority` names: `None` when it names none (the scheme's default applies).
/// `http`'s own reading is not used: it takes `:+8080` for 8080 and `:65536` for no port at
/// all, so such a request would be decided, and forwarded, on another port than it named.
pub(crate) fn authority_port(authority: &Authority) -> Result<Option<u16>, BadPort> {
    let full = authority.as_str();
    let host_port = full.rsplit_once('@').map_or(full, |(_, h)| h);
    // `host()` is the start of `host_port`, IPv6 brackets included.
    let written = match host_port.get(authority.host().len()..) {
        None | Some("" | ":") => return Ok(None),
        Some(rest) => rest.strip_prefix(':').unwrap_or(rest),
    };
    written
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| written.parse::<u16>().ok())
        .flatten()
        .filter(|p| *p != 0)
        .map(Some)
        .ok_or_else(|| BadPort {
            host: authority.host().to_owned(),
            port: written.to_owned(),
        })
}

/// The one host a request names: its absolute-form (or HTTP/2) authority or its single `Host`
/// header; `None` when it names none. Two `Host` headers, or an authority and a `Host` that
/// disagree, are refused: an upstream might serve the one that was not decided. So is a port
/// that is not one, although these listeners decide on their own port: the upstream gets the
/// `Host` as written.
pub(crate) fn request_authority(req: &Request<Incoming>) -> Result<Option<Authority>, HostProblem> {
    let not_one = HostProblem::NotOne;
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let header_host = hosts
        .next()
        .map(|h| {
            h.to_str()
                .map_err(|_| not_one("has a Host header that is not text"))
        })
        .transpose()?;
    if hosts.next().is_some() {
        return Err(not_one("has more than one Host header"));
    }
    let named = match (req.uri().authority(), header_host) {
        (Some(uri), Some(host)) if !uri.as_str().eq_ignore_ascii_case(host) => {
            return Err(not_one(
                "names one host in its URL and another in its Host header",
            ));
        }
        (Some(uri), _) => uri.as_str(),
        (None, Some(host)) => host,
        (None, None) => return Ok(None),
    };
    if named.contains('@') {
        // The upstream would get `user@host` as its Host although `host` was decided.
        return Err(not_one("names a host with user information (user@host)"));
    }
    let authority = named
        .parse::<Authority>()
        .ok()
        .filter(|a| !a.host().is_empty())
        .ok_or(not_one("has no usable Host header"))?;
    authority_port(&authority).map_err(HostProblem::BadPort)?;
    Ok(Some(authority))
}

/// A request that names no single usable host: journal it and answer 400.
pub(crate) fn no_single_host(
    state: &Arc<State>,
    origin: Origin,
    host: &str,
    req: &Request<Incoming>,
    problem: &HostProblem,
) -> http::Response<ProxyBody> {
    let path = tripwire::redact_path(host, req.uri().path_and_query().map_or("/", |p| p.as_str()));
    let ask = Ask {
        via: origin.via,
        arrived: origin.arrived,
        client: origin.client,
        method: req.method().as_str(),
        host,
        port: origin.port,
        path: &path,
        tunnel: false,
    };
    let refusal = match problem {
        HostProblem::NotOne(how) => Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_request",
            format!("{} {path} {how}, so it cannot be decided", ask.method),
        )
        .with_next("Send exactly one Host header naming the server."),
        HostProblem::BadPort(bad) => {
            let what = format!("{} {path} with Host {}", ask.method, bad.authority());
            let refusal = bad.refusal(&what, "Host header");
            return bad_request(
                state,
                &Ask {
                    host: &bad.host,
                    ..ask
                },
                refusal,
            );
        }
    };
    bad_request(state, &ask, refusal)
}

/// A request the sidecar cannot use: journal it and answer 400.
pub(crate) fn bad_request(
    state: &Arc<State>,
    ask: &Ask<'_>,
    refusal: Refusal,
) -> http::Response<ProxyBody> {
    refuse_undecided(state, ask, &refusal);
    refusal.response().map(Either::Left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(authority: &str) -> Result<Option<u16>, BadPort> {
        authority_port(&authority.parse().expect("an authority"))
    }

    #[test]
    fn a_port_is_plain_digits_from_1_to_65535() {
        assert_eq!(port("x.test"), Ok(None));
        assert_eq!(port("x.test:"), Ok(None));
        assert_eq!(port("x.test:8080"), Ok(Some(8080)));
        assert_eq!(port("x.test:65535"), Ok(Some(65535)));
        assert_eq!(port("[::1]"), Ok(None));
        assert_eq!(port("[::1]:443"), Ok(Some(443)));
        assert_eq!(port("user:pw@x.test:81"), Ok(Some(81)));
        assert_eq!(port("user:pw@x.test"), Ok(None));
        let bad = |host: &str, port: &str| {
            Err(BadPort {
                host: host.to_owned(),
                port: port.to_owned(),
            })
        };
        for written in ["65536", "+8080", "0", "99999999999", "08a"] {
            assert_eq!(port(&format!("x.test:{written}")), bad("x.test", written));
        }
        assert_eq!(port("[::1]:+443"), bad("[::1]", "+443"));
        assert_eq!(bad("[::1]", "+443").unwrap_err().authority(), "[::1]:+443");
    }
}
