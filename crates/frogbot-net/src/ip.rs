//! Which addresses a server-side download never reaches by default.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is one the guarded client refuses unless private addresses are allowed: anything
/// but a public unicast address. Addresses that carry an IPv4 address inside an IPv6 one are
/// judged by the IPv4 address where it can be read, and refused outright where it cannot.
///
/// | Range | What it is | Refused |
/// |---|---|---|
/// | `0.0.0.0/8` | "this network", unspecified | yes |
/// | `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` | private (RFC 1918) | yes |
/// | `100.64.0.0/10` | carrier-grade NAT | yes |
/// | `127.0.0.0/8` | loopback | yes |
/// | `169.254.0.0/16` | link-local (cloud metadata endpoints) | yes |
/// | `192.0.0.0/24` | IETF protocol assignments | yes |
/// | `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` | documentation | yes |
/// | `198.18.0.0/15` | benchmarking | yes |
/// | `224.0.0.0/4` | multicast | yes |
/// | `240.0.0.0/4`, `255.255.255.255` | reserved, broadcast | yes |
/// | `::`, `::1` | unspecified, loopback | yes |
/// | `::/96` | IPv4-compatible (deprecated; `::127.0.0.1`) | yes, all |
/// | `::ffff:0:0/96` | IPv4-mapped | as its IPv4 address |
/// | `64:ff9b::/96` | NAT64 (well-known prefix) | as its IPv4 address |
/// | `64:ff9b:1::/48` | NAT64, local use | yes, all |
/// | `100::/64` | discard | yes |
/// | `2001::/32` | Teredo (its client address is obfuscated) | yes, all |
/// | `2001:db8::/32`, `3fff::/20` | documentation | yes |
/// | `2002::/16` | 6to4 | as its IPv4 address (bits 16–47) |
/// | `fc00::/7` | unique-local | yes |
/// | `fe80::/10` | link-local | yes |
/// | `fec0::/10` | site-local (deprecated) | yes |
/// | `ff00::/8` | multicast | yes |
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_forbidden(v4),
        IpAddr::V6(v6) => v6_forbidden(v6),
    }
}

fn v4_forbidden(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || (a == 198 && (b == 18 || b == 19))
        // Multicast 224/4, reserved 240/4 (the broadcast address among them).
        || a >= 224
}

/// The IPv4 address in the low 32 bits of `ip`.
fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let s = ip.segments();
    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8)
}

fn v6_forbidden(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // ::/96 (unspecified, loopback, IPv4-compatible) and ::ffff:0:0/96 (IPv4-mapped).
    if s[..5] == [0; 5] {
        return match s[5] {
            0 => true,
            0xffff => v4_forbidden(low_v4(ip)),
            _ => false,
        };
    }
    match s[0] {
        // NAT64: the well-known prefix carries a routable IPv4 address; the local-use one
        // (64:ff9b:1::/48) is a network's own.
        0x64 if s[1] == 0xff9b => {
            if s[2..6] == [0; 4] {
                return v4_forbidden(low_v4(ip));
            }
            return s[2] == 1;
        }
        // Discard-only 100::/64.
        0x100 if s[1..4] == [0; 3] => return true,
        // Teredo 2001::/32 and documentation 2001:db8::/32.
        0x2001 if s[1] == 0 || s[1] == 0xdb8 => return true,
        // 6to4: the IPv4 address is bits 16–47.
        0x2002 => {
            let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
            return v4_forbidden(v4);
        }
        _ => {}
    }
    // Documentation 3fff::/20, unique-local fc00::/7, link-local fe80::/10, site-local
    // fec0::/10, multicast ff00::/8.
    (s[0] == 0x3fff && s[1] < 0x1000)
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] & 0xff00) == 0xff00
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_table() {
        let refused = [
            // IPv4
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.255.255",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            // IPv6
            "::",
            "::1",
            "::127.0.0.1",
            "::8.8.8.8",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::808:808",
            "100::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::",
            "2002:a00:1::1",
            "2002:c0a8:101::1",
            "3fff::1",
            "fc00::1",
            "fd00::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ];
        for ip in refused {
            assert!(is_forbidden(ip.parse().unwrap()), "{ip} should be refused");
        }
        let allowed = [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.0.1",
            "172.32.0.1",
            "192.0.1.1",
            "198.17.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
            "3fff:1000::1",
        ];
        for ip in allowed {
            assert!(!is_forbidden(ip.parse().unwrap()), "{ip} should be allowed");
        }
    }

    fn embeddings(v4: Ipv4Addr) -> [Ipv6Addr; 3] {
        let [a, b, c, d] = v4.octets();
        let hi = u16::from_be_bytes([a, b]);
        let lo = u16::from_be_bytes([c, d]);
        [
            v4.to_ipv6_mapped(),
            Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo),
            Ipv6Addr::new(0x2002, hi, lo, 0, 0, 0, 0, 1),
        ]
    }

    proptest! {
        #[test]
        fn a_private_v4_inside_v6_is_refused(bits in any::<u32>()) {
            let v4 = Ipv4Addr::from(bits);
            for v6 in embeddings(v4) {
                // Every embedding is judged as its IPv4 address.
                prop_assert_eq!(is_forbidden(IpAddr::V6(v6)), is_forbidden(IpAddr::V4(v4)), "{} in {}", v4, v6);
            }
        }

        #[test]
        fn private_ranges_embedded_are_refused(host in any::<u32>(), which in 0usize..6) {
            // A random address inside one of the private IPv4 ranges.
            let (net, len): (u32, u32) = [
                (0x0a00_0000, 8), (0x7f00_0000, 8), (0xac10_0000, 12),
                (0xc0a8_0000, 16), (0xa9fe_0000, 16), (0x6440_0000, 10),
            ][which];
            let v4 = Ipv4Addr::from(net | (host >> len));
            prop_assert!(is_forbidden(IpAddr::V4(v4)));
            for v6 in embeddings(v4) {
                prop_assert!(is_forbidden(IpAddr::V6(v6)), "{} in {}", v4, v6);
            }
            let compat = Ipv6Addr::from(u128::from(u32::from(v4)));
            prop_assert!(is_forbidden(IpAddr::V6(compat)));
        }
    }
}
