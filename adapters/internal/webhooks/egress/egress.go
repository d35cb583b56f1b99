// Package egress guards the requests invledger sends to addresses that
// someone else chose: the business-event webhooks operators subscribe and
// the alert webhook. Without it an operator token could make the server
// POST to its own loopback services, the cloud metadata address or the
// private network behind it.
//
// A Guard refuses every address that is not globally reachable by the
// IANA IPv4 and IPv6 Special-Purpose Address Registries (loopback,
// link-local, private, shared, benchmarking, documentation, reserved and
// the rest), multicast, and every IPv6 address that carries such an IPv4
// address (NAT64, 6to4, Teredo, IPv4-mapped), unless its allow-list names
// the address. It checks the same way twice: CheckURL when a URL is
// configured (IP literals in every spelling, and localhost), for an
// early, clear refusal; and the dialer of Client, which sees the address
// each connection really goes to after DNS, so a name that resolves (or
// later re-resolves) to an internal address is refused too. Client never
// follows redirects and ignores HTTP(S)_PROXY, either of which would let a
// request reach an address the dialer never saw.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is the error of a destination the guard refuses.
var ErrRefused = errors.New("destination refused")

// Guard decides which addresses outgoing webhook requests may reach. The
// zero value allows only globally reachable addresses.
type Guard struct {
	allow []netip.Prefix
}

// New returns a guard that also allows the internal addresses in allow.
func New(allow []netip.Prefix) *Guard {
	return &Guard{allow: allow}
}

// ParseNets parses CIDRs (10.0.0.0/8, fd00::/8) for New. Its error names
// the first entry that is not one.
func ParseNets(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", c)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Nets returns the allow-list, for a log line.
func (g *Guard) Nets() []netip.Prefix { return g.allow }

// CheckAddr refuses ip when it is not globally reachable and the
// allow-list does not name it. The most specific range of the IANA
// special-purpose registries holding ip decides, and multicast, site-local
// and the obsolete IPv4-compatible and IPv4-translated forms are refused
// too. An address that carries IPv4 addresses (IPv4-mapped, NAT64
// 64:ff9b::/96, 6to4, Teredo) is judged by each address it carries, as if
// it were that address: 64:ff9b::a9fe:a9fe is refused like
// 169.254.169.254, 64:ff9b::808:808 passes like 8.8.8.8.
func (g *Guard) CheckAddr(ip netip.Addr) error {
	if why := g.refusal(ip.WithZone("")); why != "" {
		return fmt.Errorf("%w: %s is %s; webhooks may not reach it unless --webhook-allow-nets names it", ErrRefused, ip, why)
	}
	return nil
}

// refusal says which range refuses ip, or "" if the guard allows it.
func (g *Guard) refusal(ip netip.Addr) string {
	for _, p := range g.allow {
		if p.Contains(ip) {
			return ""
		}
	}
	s := lookup(ip)
	switch {
	case s == nil || s.verdict == reachable:
		return ""
	case s.verdict == embeds:
		for _, v4 := range s.carried(ip.As16()) {
			if why := g.refusal(v4); why != "" {
				return fmt.Sprintf("in %s, which carries %s, %s", s, v4, why)
			}
		}
		return ""
	}
	return "in " + s.String()
}

// CheckURL refuses rawURL when its host is an internal address in any
// spelling (127.0.0.1, [::1], [::ffff:127.0.0.1], 127.1, 2130706433,
// 0x7f000001, 0177.0.0.1) or localhost, unless the allow-list names it
// (localhost counts as 127.0.0.1). A host name that needs DNS passes: the
// dialer checks where it resolves on every connection.
func (g *Guard) CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	ip, ok := hostAddr(u.Hostname())
	if !ok {
		return nil
	}
	return g.CheckAddr(ip)
}

// hostAddr is the address host stands for without DNS: an IP literal in
// any form a resolver would take, or localhost and its subdomains, which
// resolvers answer locally (RFC 6761).
func hostAddr(host string) (netip.Addr, bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, true
	}
	return parseInetAton(host)
}

// parseInetAton parses the IPv4 spellings inet_aton accepts, which the
// system resolver passes to connect without asking DNS: one to four parts
// separated by dots, each decimal, octal (leading 0) or hex (0x), the last
// filling the bytes that remain (127.1 is 127.0.0.1, 2130706433 and
// 0x7f000001 are too).
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseAtonPart parses one part of parseInetAton, at most 32 bits.
func parseAtonPart(p string) (uint64, bool) {
	base := uint64(10)
	switch {
	case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if p == "" {
		return 0, false
	}
	var n uint64
	for _, c := range p {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n = n*base + d; n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}

// control is the dialer's Control hook: it runs after DNS, for the very
// address the socket is about to connect to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot tell where %q is", ErrRefused, address)
	}
	return g.CheckAddr(ap.Addr())
}

// Client returns an HTTP client whose every connection the guard checks.
// It returns a 3xx as the answer instead of following it (the callers
// count anything but 2xx as a failed attempt), and it uses no proxy from
// the environment, which would connect to the destination on its behalf.
func (g *Guard) Client() *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
