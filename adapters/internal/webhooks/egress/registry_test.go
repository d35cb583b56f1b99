package egress

import (
	"encoding/binary"
	"encoding/csv"
	"errors"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// registryRow is one row of an IANA special-purpose address registry as
// testdata holds it: a block (one row may name several) and its
// "Globally Reachable" cell without footnote markers: True, False, N/A, or
// empty for a terminated row.
type registryRow struct {
	prefixes []netip.Prefix
	name     string
	global   string
}

var footnote = regexp.MustCompile(`\s*\[\d+\]`)

// readRegistry parses an IANA registry CSV of testdata.
func readRegistry(t testing.TB, path string) []registryRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(recs) < 2 || recs[0][0] != "Address Block" || recs[0][8] != "Globally Reachable" {
		t.Fatalf("%s: not an IANA special-purpose registry: header %q", path, recs[0])
	}
	var rows []registryRow
	for _, rec := range recs[1:] {
		row := registryRow{name: rec[1], global: footnote.ReplaceAllString(rec[8], "")}
		for _, b := range strings.Split(footnote.ReplaceAllString(rec[0], ""), ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(b))
			if err != nil {
				t.Fatalf("%s: row %q: %v", path, rec, err)
			}
			row.prefixes = append(row.prefixes, p)
		}
		switch row.global {
		case "True", "False", "N/A", "":
		default:
			t.Fatalf("%s: row %q: Globally Reachable %q", path, rec, row.global)
		}
		rows = append(rows, row)
	}
	return rows
}

// beyondRegistries are the ranges the guard refuses although no
// special-purpose registry names them: multicast (its own registries),
// site-local (RFC 3879), and the obsolete IPv4-compatible (RFC 4291
// 2.5.5.1) and IPv4-translated (RFC 2765) forms, refused whatever they
// carry.
var beyondRegistries = []registryRow{
	{prefixes: []netip.Prefix{netip.MustParsePrefix("224.0.0.0/4")}, global: "False"},
	{prefixes: []netip.Prefix{netip.MustParsePrefix("ff00::/8")}, global: "False"},
	{prefixes: []netip.Prefix{netip.MustParsePrefix("fec0::/10")}, global: "False"},
	{prefixes: []netip.Prefix{netip.MustParsePrefix("::/96")}, global: "False"},
	{prefixes: []netip.Prefix{netip.MustParsePrefix("::ffff:0:0:0/96")}, global: "False"},
}

// carriers are the oracle's own reading of the IPv6 forms that carry IPv4
// addresses, by registry block: such an address is reachable exactly when
// every IPv4 address it carries is.
var carriers = map[netip.Prefix]func(hi, lo uint64) []netip.Addr{
	// IPv4-mapped (RFC 4291 2.5.5.2): the low 32 bits; a socket sends IPv4.
	netip.MustParsePrefix("::ffff:0:0/96"): func(_, lo uint64) []netip.Addr { return []netip.Addr{v4of(uint32(lo))} },
	// NAT64 well-known prefix, always /96 (RFC 6052 2.1).
	netip.MustParsePrefix("64:ff9b::/96"): func(_, lo uint64) []netip.Addr { return []netip.Addr{v4of(uint32(lo))} },
	// 6to4 (RFC 3056 2): 2002:V4ADDR::/48.
	netip.MustParsePrefix("2002::/16"): func(hi, _ uint64) []netip.Addr { return []netip.Addr{v4of(uint32(hi >> 16))} },
	// Teredo (RFC 4380 4): the server in bits 32-63, the client's
	// external address inverted in the last 32.
	netip.MustParsePrefix("2001::/32"): func(hi, lo uint64) []netip.Addr {
		return []netip.Addr{v4of(uint32(hi)), v4of(^uint32(lo))}
	},
}

func v4of(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

var (
	oracleOnce sync.Once
	oracleRows []registryRow
)

// registries are the rows of both registries in testdata, then
// beyondRegistries.
func registries(t testing.TB) []registryRow {
	oracleOnce.Do(func() {
		oracleRows = append(readRegistry(t, "testdata/iana-ipv4-special-registry.csv"),
			readRegistry(t, "testdata/iana-ipv6-special-registry.csv")...)
		oracleRows = append(oracleRows, beyondRegistries...)
	})
	return oracleRows
}

// oracleRefuses is whether a guard without an allow-list must refuse ip,
// from the registry rows alone: the most specific block holding ip decides
// ("not useable unless by virtue of a more specific reservation"); a
// carrying form is judged by what it carries; True passes, and False, N/A
// and a terminated row's empty cell refuse; a block no row names passes.
func oracleRefuses(t testing.TB, ip netip.Addr) bool {
	ip = ip.WithZone("")
	var (
		best  netip.Prefix
		glob  string
		found bool
	)
	for _, row := range registries(t) {
		for _, p := range row.prefixes {
			if p.Contains(ip) && (!found || p.Bits() > best.Bits()) {
				best, glob, found = p, row.global, true
			}
		}
	}
	if !found {
		return false
	}
	if carry, ok := carriers[best]; ok {
		b := ip.As16()
		for _, v4 := range carry(binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])) {
			if oracleRefuses(t, v4) {
				return true
			}
		}
		return false
	}
	return glob != "True"
}

// TestTableIsTheRegistries compares the guard's table with the registries'
// rows: every row is in it under its block and name, True rows reachable,
// the carrying forms judged by what they carry, every other row refused,
// and nothing else in it but beyondRegistries.
func TestTableIsTheRegistries(t *testing.T) {
	want := map[netip.Prefix]special{}
	for _, row := range registries(t) {
		for _, p := range row.prefixes {
			s := special{prefix: p, name: row.name, verdict: refused}
			switch _, carries := carriers[p]; {
			case carries:
				s.verdict = embeds
			case row.global == "True":
				s.verdict = reachable
			case row.global == "N/A":
				t.Errorf("%s (%s) is N/A, reachable or not by what it carries, and the oracle has no reading of it", p, row.name)
			}
			want[p] = s
		}
	}
	if len(want) != len(specials) {
		t.Errorf("the registries and beyondRegistries have %d blocks, the guard's table %d", len(want), len(specials))
	}
	for _, s := range specials {
		w, ok := want[s.prefix]
		switch {
		case !ok:
			t.Errorf("the guard's table has %s (%s), which no registry row names", s.prefix, s.name)
		case w.verdict != s.verdict || (w.name != "" && w.name != s.name):
			t.Errorf("the guard's table has %s as %q, verdict %d; the registry row: %q, verdict %d", s.prefix, s.name, s.verdict, w.name, w.verdict)
		case (s.verdict == embeds) != (s.carried != nil):
			t.Errorf("%s: verdict %d with carried %v", s.prefix, s.verdict, s.carried != nil)
		}
		delete(want, s.prefix)
	}
	for p, w := range want {
		t.Errorf("the guard's table lacks %s (%s)", p, w.name)
	}
}

// samples are addresses around every block of the registries: its first
// and last address, those just outside, and a few inside at random.
func samples(t testing.TB, rng *rand.Rand) (v4, v6 []netip.Addr) {
	for _, row := range registries(t) {
		for _, p := range row.prefixes {
			first := p.Masked().Addr()
			last := lastAddr(p)
			set := []netip.Addr{first, last, first.Prev(), last.Next()}
			for range 3 {
				set = append(set, randomIn(rng, p))
			}
			for _, a := range set {
				switch {
				case !a.IsValid():
				case a.Is4():
					v4 = append(v4, a)
				default:
					v6 = append(v6, a)
				}
			}
		}
	}
	return v4, v6
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if rng.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// carrying spells v4 in every IPv6 form that carries an IPv4 address,
// in the registries or not, with the rest of the address at random.
func carrying(rng *rand.Rand, v4 netip.Addr) []netip.Addr {
	v := uint64(binary.BigEndian.Uint32(v4.AsSlice()))
	public := uint64(0x4136e378) // 65.54.227.120, a Teredo server's
	mk := func(hi, lo uint64) netip.Addr {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], hi)
		binary.BigEndian.PutUint64(b[8:], lo)
		return netip.AddrFrom16(b)
	}
	r := rng.Uint64()
	return []netip.Addr{
		mk(0, 0xffff<<32|v),                                        // IPv4-mapped
		mk(0x0064ff9b<<32, v),                                      // NAT64 well-known
		mk(0x0064ff9b0001<<16|r>>48, v),                            // NAT64 local-use, /96 spelling
		mk(0x0064ff9b0001<<16|v>>16, (v&0xffff)<<40),               // NAT64 local-use, /48 spelling
		mk(0x2002<<48|v<<16|r&0xffff, r),                           // 6to4
		mk(0x20010000<<32|public, r&^0xffffffff|^v&0xffffffff),     // Teredo client
		mk(0x20010000<<32|v, r&^0xffffffff|^0x08080808&0xffffffff), // Teredo server
		mk(0, 0xffff<<48|v),                                        // IPv4-translated
		mk(0, v),                                                   // IPv4-compatible
	}
}

// TestCheckAddrAgreesWithTheRegistries asks the guard, and its dialer
// hook, about every sample address, and every sample IPv4 address in
// every carrying form, and compares with oracleRefuses.
func TestCheckAddrAgreesWithTheRegistries(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 3))
	v4, v6 := samples(t, rng)
	v4 = append(v4, netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("93.184.215.14"))
	all := append([]netip.Addr(nil), v6...)
	for _, a := range v4 {
		all = append(all, a)
		all = append(all, carrying(rng, a)...)
	}
	g := New(nil)
	var refusedN, passedN int
	for _, a := range all {
		want := oracleRefuses(t, a)
		err := g.CheckAddr(a)
		if got := errors.Is(err, ErrRefused); got != want {
			t.Errorf("CheckAddr(%s) = %v; the registries say refused=%v", a, err, want)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("CheckAddr(%s): %v is not ErrRefused", a, err)
		}
		if cerr := g.control("tcp", netip.AddrPortFrom(a, 443).String(), nil); errors.Is(cerr, ErrRefused) != want {
			t.Errorf("the dialer on %s: %v; the registries say refused=%v", a, cerr, want)
		}
		if want {
			refusedN++
		} else {
			passedN++
		}
	}
	if refusedN < 100 || passedN < 100 {
		t.Fatalf("the samples are one-sided: %d refused, %d passed", refusedN, passedN)
	}
}

var (
	atonHex     = regexp.MustCompile(`^0[xX][0-9a-fA-F]+$`)
	atonOctal   = regexp.MustCompile(`^0[0-7]*$`)
	atonDecimal = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// inetAton is the oracle's reading of the IPv4 spellings the system
// resolver takes without DNS (inet_aton(3)): one to four parts, decimal,
// octal with a leading 0, hex with 0x, the last filling what remains.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		var n uint64
		var err error
		switch {
		case atonHex.MatchString(p):
			n, err = strconv.ParseUint(p[2:], 16, 64)
		case atonOctal.MatchString(p):
			n, err = strconv.ParseUint(p, 8, 64)
		case atonDecimal.MatchString(p):
			n, err = strconv.ParseUint(p, 10, 64)
		default:
			return netip.Addr{}, false
		}
		room := uint64(1) << (8 * (4 - i))
		if i < len(parts)-1 {
			room = 256
		}
		if err != nil || n >= room {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			v |= n << (8 * (3 - i))
		} else {
			v |= n
		}
	}
	return v4of(uint32(v)), true
}

// FuzzCheckURL: CheckURL refuses a URL exactly when its host is, without
// DNS, an address the registries in testdata say a guard must refuse (an
// IP literal in any spelling netip or inet_aton takes, or localhost); a
// host that needs DNS passes (the dialer judges where it resolves, and
// must judge alike).
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1/", "http://0x7f.1/", "http://2130706433/", "http://017700000001/", "http://0177.0.0.01/",
		"http://0xA9.0376.43518/", "http://[::ffff:10.0.0.1]/", "http://[::ffff:a9fe:a9fe]:8080/",
		"http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b::169.254.169.254]/latest", "http://[64:ff9b::8.8.8.8]/",
		"http://[64:ff9b:1::a9fe:a9fe]/", "http://[64:ff9b:1:a9fe:a9:fe00::]/", "http://[2002:7f00:1::1]/",
		"http://[2002:0808:0808::1]/", "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "http://[2001:0:a00:1::f7f7:f7f7]/",
		"http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/", "http://[::ffff:0:a9fe:a9fe]/", "http://[::169.254.169.254]/",
		"http://[fe80::1%25eth0]/", "http://198.18.0.1/", "http://240.0.0.1/", "http://192.0.0.8/", "http://192.0.0.9/",
		"http://192.0.2.1/", "http://[3fff::1]/", "http://[2001:1::1]/", "http://[100:0:0:1::1]/",
		"https://shop.example/", "http://localhost./", "http://1.2.3.4.5/", "http://0x/", "http://09.1/",
	} {
		f.Add(s)
	}
	g := New(nil)
	f.Fuzz(func(t *testing.T, raw string) {
		err := g.CheckURL(raw)
		u, perr := url.Parse(raw)
		if perr != nil {
			if err == nil || !strings.HasPrefix(err.Error(), "not a URL") {
				t.Fatalf("CheckURL(%q) = %v for what url.Parse refuses", raw, err)
			}
			return
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Fatalf("CheckURL(%q): unexpected error %v", raw, err)
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		ip, lit := netip.Addr{}, true
		switch p, perr := netip.ParseAddr(host); {
		case perr == nil:
			ip = p
		case host == "localhost" || strings.HasSuffix(host, ".localhost"):
			ip = netip.MustParseAddr("127.0.0.1")
		default:
			ip, lit = inetAton(host)
		}
		want := lit && oracleRefuses(t, ip)
		if errors.Is(err, ErrRefused) != want {
			t.Fatalf("CheckURL(%q) = %v; host %q is %v (an address: %v), which the registries say refused=%v", raw, err, host, ip, lit, want)
		}
	})
}
