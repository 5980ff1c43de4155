//! Which addresses an egress rule may never be suggested for, and the address guard never
//! dials without an exact rule: loopback, link-local (the cloud metadata endpoint), private,
//! shared (CGNAT), multicast, reserved ranges and IPv6 forms that embed such an IPv4 address;
//! and the names that only ever mean such an address (`localhost`, the metadata service's).
//! One classification for the sidecar's guard and for the rules `af net suggest` proposes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not on the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0, ::, and 0.0.0.0/8 ("this network").
    Unspecified,
    /// 169.254.0.0/16 (the cloud metadata endpoint), fe80::/10.
    LinkLocal,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// Carrier-grade NAT, 100.64.0.0/10.
    SharedCgnat,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// Reserved or special-purpose: 240/4, 192.0.0/24, 198.18/15, 100::/64, 64:ff9b:1::/48,
    /// fec0::/10, IPv4-compatible `::a.b.c.d`.
    Reserved,
    /// fc00::/7.
    UniqueLocal,
    /// An IPv6 form (mapped, 6to4, Teredo, NAT64) embedding a refused IPv4 address.
    EmbedsRefusedIpv4,
}

impl AddressClass {
    /// Short name for journals, metrics and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Unspecified => "unspecified",
            AddressClass::LinkLocal => "link_local",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "shared_cgnat",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
            AddressClass::UniqueLocal => "unique_local",
            AddressClass::EmbedsRefusedIpv4 => "embeds_refused_ipv4",
        }
    }
}

/// Classify one address on its own: `Ok(())` for an address on the public internet.
pub fn classify(ip: IpAddr) -> Result<(), AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Names that only ever mean an address [`classify`] refuses: `localhost` and every name
/// under it (RFC 6761), and the cloud metadata services' names.
pub fn internal_name(host: &str) -> Option<AddressClass> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return Some(AddressClass::Loopback);
    }
    const METADATA: [&str; 4] = [
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data.ec2.internal",
    ];
    METADATA
        .contains(&host.as_str())
        .then_some(AddressClass::LinkLocal)
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), AddressClass> {
    let [a, b, c, _] = ip.octets();
    let refusal = if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if a == 0 {
        AddressClass::Unspecified
    } else if a == 127 {
        AddressClass::Loopback
    } else if a == 169 && b == 254 {
        AddressClass::LinkLocal
    } else if a == 10 || (a == 172 && (16..=31).contains(&b)) || (a == 192 && b == 168) {
        AddressClass::Private
    } else if a == 100 && (64..=127).contains(&b) {
        AddressClass::SharedCgnat
    } else if (224..=239).contains(&a) {
        AddressClass::Multicast
    } else if a >= 240 || (a == 192 && b == 0 && c == 0) || (a == 198 && (b == 18 || b == 19)) {
        AddressClass::Reserved
    } else {
        // Documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24) stay dialable on
        // purpose: tests simulate the internet with them.
        return Ok(());
    };
    Err(refusal)
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), AddressClass> {
    let seg = ip.segments();
    let embedded = |v4: Ipv4Addr| classify_v4(v4).map_err(|_| AddressClass::EmbedsRefusedIpv4);
    if ip.is_unspecified() {
        return Err(AddressClass::Unspecified);
    }
    if ip.is_loopback() {
        return Err(AddressClass::Loopback);
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return embedded(v4);
    }
    // IPv4-compatible ::a.b.c.d (deprecated): never dialled.
    if seg[..6] == [0; 6] {
        return Err(AddressClass::Reserved);
    }
    match seg[0] {
        0x2002 => return embedded(v4_from(seg[1], seg[2])),
        0x2001 if seg[1] == 0 => {
            // Teredo: server in bits 32..64, client (inverted) in the last 32 bits.
            embedded(v4_from(seg[2], seg[3]))?;
            return embedded(v4_from(!seg[6], !seg[7]));
        }
        0x0064 if seg[1] == 0xff9b => {
            if seg[2] == 1 {
                return Err(AddressClass::Reserved); // 64:ff9b:1::/48, local-use NAT64
            }
            if seg[2..6] == [0; 4] {
                return embedded(v4_from(seg[6], seg[7]));
            }
        }
        0x0100 if seg[1..4] == [0; 3] => return Err(AddressClass::Reserved),
        _ => {}
    }
    if seg[0] & 0xff00 == 0xff00 {
        Err(AddressClass::Multicast)
    } else if seg[0] & 0xfe00 == 0xfc00 {
        Err(AddressClass::UniqueLocal)
    } else if seg[0] & 0xffc0 == 0xfe80 {
        Err(AddressClass::LinkLocal)
    } else if seg[0] & 0xffc0 == 0xfec0 {
        Err(AddressClass::Reserved)
    } else {
        Ok(())
    }
}

fn v4_from(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}
