package egress

import (
	"fmt"
	"net/netip"
)

// verdict is what a range of the table says of the addresses in it.
type verdict int

const (
	// reachable is the registries' "Globally Reachable: True".
	reachable verdict = iota
	// refused is "False", or a terminated row with the column empty, or
	// a range beyond the registries that no webhook needs.
	refused
	// embeds is a range whose addresses carry IPv4 addresses (mapped,
	// NAT64, 6to4, Teredo): reachable exactly when every IPv4 address it
	// carries is. The registries mark 6to4 and Teredo "N/A" for that
	// reason, and the NAT64 prefix "True" although a translator in front
	// of a private network reaches its 169.254.169.254 by it.
	embeds
)

// special is one range of the table: the most specific range holding an
// address decides for it.
type special struct {
	prefix  netip.Prefix
	name    string
	verdict verdict
	// carried returns the IPv4 addresses an address of an embeds range
	// stands for.
	carried func(a [16]byte) []netip.Addr
}

// specials are the rows of the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (RFC 6890 and its updates; the IPv6 registry up to RFC
// 9780's 100:0:0:1::/64 of 2025-04), each with its Globally Reachable
// column, and after them the ranges beyond the registries that a server
// must not reach either. The registries nest rows: 192.0.0.0/24 and
// 2001::/23 are "not useable unless by virtue of a more specific
// reservation", so the most specific row decides (192.0.0.9 is
// reachable, 192.0.0.8 is not, Teredo is judged by what it carries).
// TestTableIsTheRegistries compares this table with the registries' rows
// in testdata, which the tests parse on their own.
var specials = []special{
	// IANA IPv4 Special-Purpose Address Registry.
	{prefix: pfx("0.0.0.0/8"), name: `"This network"`, verdict: refused},
	{prefix: pfx("0.0.0.0/32"), name: `"This host on this network"`, verdict: refused},
	{prefix: pfx("10.0.0.0/8"), name: "Private-Use", verdict: refused},
	{prefix: pfx("100.64.0.0/10"), name: "Shared Address Space", verdict: refused},
	{prefix: pfx("127.0.0.0/8"), name: "Loopback", verdict: refused},
	{prefix: pfx("169.254.0.0/16"), name: "Link Local", verdict: refused},
	{prefix: pfx("172.16.0.0/12"), name: "Private-Use", verdict: refused},
	{prefix: pfx("192.0.0.0/24"), name: "IETF Protocol Assignments", verdict: refused},
	{prefix: pfx("192.0.0.0/29"), name: "IPv4 Service Continuity Prefix", verdict: refused},
	{prefix: pfx("192.0.0.8/32"), name: "IPv4 dummy address", verdict: refused},
	{prefix: pfx("192.0.0.9/32"), name: "Port Control Protocol Anycast", verdict: reachable},
	{prefix: pfx("192.0.0.10/32"), name: "Traversal Using Relays around NAT Anycast", verdict: reachable},
	{prefix: pfx("192.0.0.170/32"), name: "NAT64/DNS64 Discovery", verdict: refused},
	{prefix: pfx("192.0.0.171/32"), name: "NAT64/DNS64 Discovery", verdict: refused},
	{prefix: pfx("192.0.2.0/24"), name: "Documentation (TEST-NET-1)", verdict: refused},
	{prefix: pfx("192.31.196.0/24"), name: "AS112-v4", verdict: reachable},
	{prefix: pfx("192.52.193.0/24"), name: "AMT", verdict: reachable},
	{prefix: pfx("192.88.99.0/24"), name: "Deprecated (6to4 Relay Anycast)", verdict: refused},
	{prefix: pfx("192.88.99.2/32"), name: "6a44-relay anycast address", verdict: refused},
	{prefix: pfx("192.168.0.0/16"), name: "Private-Use", verdict: refused},
	{prefix: pfx("192.175.48.0/24"), name: "Direct Delegation AS112 Service", verdict: reachable},
	{prefix: pfx("198.18.0.0/15"), name: "Benchmarking", verdict: refused},
	{prefix: pfx("198.51.100.0/24"), name: "Documentation (TEST-NET-2)", verdict: refused},
	{prefix: pfx("203.0.113.0/24"), name: "Documentation (TEST-NET-3)", verdict: refused},
	{prefix: pfx("240.0.0.0/4"), name: "Reserved", verdict: refused},
	{prefix: pfx("255.255.255.255/32"), name: "Limited Broadcast", verdict: refused},

	// IANA IPv6 Special-Purpose Address Registry.
	{prefix: pfx("::1/128"), name: "Loopback Address", verdict: refused},
	{prefix: pfx("::/128"), name: "Unspecified Address", verdict: refused},
	// A socket given a mapped address sends IPv4 to the address it maps
	// (Go's dialer hands the guard that IPv4 address), which is why the
	// registry calls the range itself unreachable.
	{prefix: pfx("::ffff:0:0/96"), name: "IPv4-mapped Address", verdict: embeds, carried: last32},
	{prefix: pfx("64:ff9b::/96"), name: "IPv4-IPv6 Translat.", verdict: embeds, carried: last32},
	// The local-use prefix carries the IPv4 address where the operator's
	// prefix length (/48 to /96, RFC 6052) puts it, which the guard
	// cannot know: refused, as the registry says.
	{prefix: pfx("64:ff9b:1::/48"), name: "IPv4-IPv6 Translat.", verdict: refused},
	{prefix: pfx("100::/64"), name: "Discard-Only Address Block", verdict: refused},
	{prefix: pfx("100:0:0:1::/64"), name: "Dummy IPv6 Prefix", verdict: refused},
	{prefix: pfx("2001::/23"), name: "IETF Protocol Assignments", verdict: refused},
	{prefix: pfx("2001::/32"), name: "TEREDO", verdict: embeds, carried: teredo},
	{prefix: pfx("2001:1::1/128"), name: "Port Control Protocol Anycast", verdict: reachable},
	{prefix: pfx("2001:1::2/128"), name: "Traversal Using Relays around NAT Anycast", verdict: reachable},
	{prefix: pfx("2001:1::3/128"), name: "DNS-SD Service Registration Protocol Anycast", verdict: reachable},
	{prefix: pfx("2001:2::/48"), name: "Benchmarking", verdict: refused},
	{prefix: pfx("2001:3::/32"), name: "AMT", verdict: reachable},
	{prefix: pfx("2001:4:112::/48"), name: "AS112-v6", verdict: reachable},
	{prefix: pfx("2001:10::/28"), name: "Deprecated (previously ORCHID)", verdict: refused},
	{prefix: pfx("2001:20::/28"), name: "ORCHIDv2", verdict: reachable},
	{prefix: pfx("2001:30::/28"), name: "Drone Remote ID Protocol Entity Tags (DETs) Prefix", verdict: reachable},
	{prefix: pfx("2001:db8::/32"), name: "Documentation", verdict: refused},
	{prefix: pfx("2002::/16"), name: "6to4", verdict: embeds, carried: sixToFour},
	{prefix: pfx("2620:4f:8000::/48"), name: "Direct Delegation AS112 Service", verdict: reachable},
	{prefix: pfx("3fff::/20"), name: "Documentation", verdict: refused},
	{prefix: pfx("5f00::/16"), name: "Segment Routing (SRv6) SIDs", verdict: refused},
	{prefix: pfx("fc00::/7"), name: "Unique-Local", verdict: refused},
	{prefix: pfx("fe80::/10"), name: "Link-Local Unicast", verdict: refused},

	// Beyond the special-purpose registries.
	{prefix: pfx("224.0.0.0/4"), name: "Multicast", verdict: refused},
	{prefix: pfx("ff00::/8"), name: "Multicast", verdict: refused},
	{prefix: pfx("fec0::/10"), name: "Site-Local, deprecated by RFC 3879", verdict: refused},
	// The two obsolete ways to carry an IPv4 address, which no current
	// translator uses, are refused whatever they carry.
	{prefix: pfx("::/96"), name: "IPv4-compatible, deprecated by RFC 4291", verdict: refused},
	{prefix: pfx("::ffff:0:0:0/96"), name: "IPv4-translated, obsoleted with RFC 2765", verdict: refused},
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// last32 is the IPv4 address in the last 32 bits: IPv4-mapped, and NAT64
// with a /96 prefix (RFC 6052).
func last32(a [16]byte) []netip.Addr {
	return []netip.Addr{netip.AddrFrom4([4]byte(a[12:16]))}
}

// sixToFour is the IPv4 address of the 6to4 router, bits 16-47 (RFC 3056).
func sixToFour(a [16]byte) []netip.Addr {
	return []netip.Addr{netip.AddrFrom4([4]byte(a[2:6]))}
}

// teredo is the Teredo server's IPv4 address (bits 32-63) and the
// client's (the last 32 bits, inverted), RFC 4380 section 4: a relay
// sends to the client's, and both must be reachable.
func teredo(a [16]byte) []netip.Addr {
	var client [4]byte
	for i := range client {
		client[i] = ^a[12+i]
	}
	return []netip.Addr{netip.AddrFrom4([4]byte(a[4:8])), netip.AddrFrom4(client)}
}

// lookup is the most specific range of specials holding ip (without a
// zone), or nil for an address no range names, which is reachable.
func lookup(ip netip.Addr) *special {
	var best *special
	for i := range specials {
		s := &specials[i]
		if s.prefix.Contains(ip) && (best == nil || s.prefix.Bits() > best.prefix.Bits()) {
			best = s
		}
	}
	return best
}

func (s *special) String() string { return fmt.Sprintf("%s (%s)", s.prefix, s.name) }
