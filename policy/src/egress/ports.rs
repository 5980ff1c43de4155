//! Which ports a rule covers.
//!
//! A rule that names a port (`host:8443`) covers that port alone. One that names none means
//! the web's ports, 80 and 443, when it lets requests through or answers them; a `block`
//! rule that names none blocks every port. So `allow: api.example.com` never opens
//! `api.example.com:22`, and `block: api.example.com` closes all of it.

use super::Mode;

/// The web's ports: what a rule that names no port lets through.
pub const WEB_PORTS: [u16; 2] = [80, 443];

/// The ports a rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ports {
    /// The port the rule names.
    One(u16),
    /// 80 and 443: a rule that names no port and does not block.
    Web,
    /// Every port: a `block` rule that names no port.
    Every,
}

impl Ports {
    /// The ports a rule in `mode` covers when it names `port` (or none).
    pub fn of(port: Option<u16>, mode: Mode) -> Ports {
        match (port, mode) {
            (Some(port), _) => Ports::One(port),
            (None, Mode::Block) => Ports::Every,
            (None, _) => Ports::Web,
        }
    }

    /// Whether a request to `port` is covered.
    #[inline(always)]
    pub fn covers(self, port: u16) -> bool {
        match self {
            Ports::One(own) => own == port,
            Ports::Web => port == 80 || port == 443,
            Ports::Every => true,
        }
    }

    /// Whether the rule names its port.
    pub fn named(self) -> bool {
        matches!(self, Ports::One(_))
    }
}

impl std::fmt::Display for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ports::One(port) => write!(f, "port {port}"),
            Ports::Web => f.write_str("ports 80 and 443"),
            Ports::Every => f.write_str("every port"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_without_a_port_lets_the_web_through_and_blocks_everything() {
        let allow = Ports::of(None, Mode::Allow);
        assert!(allow.covers(80) && allow.covers(443));
        assert!(!allow.covers(22) && !allow.covers(8443));
        let block = Ports::of(None, Mode::Block);
        assert!([22, 80, 443, 8443, 65535].iter().all(|&p| block.covers(p)));
        let named = Ports::of(Some(22), Mode::Allow);
        assert!(named.covers(22) && !named.covers(443) && named.named());
        for mode in [Mode::Mock, Mode::Capture, Mode::Synth, Mode::Sandbox] {
            assert_eq!(Ports::of(None, mode), Ports::Web, "{mode}");
        }
    }
}
