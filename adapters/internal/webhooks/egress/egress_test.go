package egress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func TestCheckURLRefusesEveryInternalSpelling(t *testing.T) {
	for _, u := range []string{
		"http://127.0.0.1/", "http://127.0.0.1:8080/x", "http://localhost:9/", "http://LOCALHOST./", "http://api.localhost/",
		"http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[::]/", "http://0.0.0.0/", "http://0/",
		"http://127.1/", "http://127.0.1/", "http://2130706433/", "http://0x7f000001/", "http://0x7F.1/", "http://0177.0.0.1/",
		"http://169.254.169.254/latest/meta-data", "http://[fe80::1%25eth0]/", "http://10.0.0.1/", "http://172.16.0.1/",
		"http://192.168.1.1/", "http://100.100.100.200/", "http://[fd00::1]/", "http://224.0.0.1/", "http://[ff02::1]/",
		"http://255.255.255.255/", "https://[::127.0.0.1]/",
	} {
		if err := New(nil).CheckURL(u); !errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%q) = %v, want ErrRefused", u, err)
		}
	}
	for _, u := range []string{"https://shop.example/hooks", "http://93.184.215.14/", "http://[2606:4700::1111]/", "http://1e100.net/",
		"http://0x7f000001.example/", "http://256.0.0.1/"} {
		if err := New(nil).CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
	allowed := New(loopback)
	for _, u := range []string{"http://127.0.0.1:9/", "http://localhost/", "http://127.1/", "http://[::ffff:127.0.0.2]/"} {
		if err := allowed.CheckURL(u); err != nil {
			t.Errorf("with 127.0.0.0/8 allowed, CheckURL(%q) = %v", u, err)
		}
	}
	if err := allowed.CheckURL("http://[::1]/"); !errors.Is(err, ErrRefused) {
		t.Errorf("127.0.0.0/8 allows ::1: %v", err)
	}
}

// embeddedAndSpecialUse are destinations that reached internal or
// special-use addresses through 4ec0d7f's guard: IPv6 forms carrying an
// IPv4 address that is not globally reachable, and the special-use IPv4
// ranges beyond loopback, link-local and private.
var embeddedAndSpecialUse = []string{
	"http://[64:ff9b::a9fe:a9fe]/latest/meta-data",        // the metadata service through NAT64
	"http://[64:ff9b::169.254.169.254]/",                  // the same, dotted
	"http://[64:ff9b::a00:1]/",                            // NAT64 of 10.0.0.1
	"http://[64:ff9b:1::a9fe:a9fe]/",                      // the local-use NAT64 prefix
	"http://[2002:7f00:1::1]/",                            // 6to4 of 127.0.0.1
	"http://[2002:a9fe:a9fe::]/",                          // 6to4 of 169.254.169.254
	"http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]:8080/", // Teredo, client 10.0.0.1
	"http://[2001:0:a00:1:8000:63bf:f7f7:f7f7]/",          // Teredo, server 10.0.0.1
	"http://[::ffff:0:a9fe:a9fe]/",                        // IPv4-translated
	"http://[::8.8.8.8]/",                                 // IPv4-compatible, refused whatever it carries
	"http://198.18.0.1/", "http://198.19.255.254/", "http://240.0.0.1/", "http://192.0.0.8/", "http://192.0.0.170/",
	"http://192.0.2.1/", "http://198.51.100.7/", "http://203.0.113.9/", "http://192.88.99.1/",
	"http://[2001:db8::1]/", "http://[3fff::1]/", "http://[100::1]/", "http://[5f00::1]/", "http://[2001:2::1]/",
}

// globallyReachable are destinations the guard must still let through:
// IPv6 forms carrying a public IPv4 address, and registry rows marked
// globally reachable.
var globallyReachable = []string{
	"http://[64:ff9b::8.8.8.8]/", "http://[64:ff9b::808:808]/", "http://[2002:0808:0808::1]/",
	"http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/", "http://[::ffff:8.8.8.8]/",
	"http://192.0.0.9/", "http://192.31.196.1/", "http://[2001:1::1]/", "http://[2620:4f:8000::1]/",
	"http://8.8.8.8/", "http://[2606:4700::1111]/",
}

// TestCheckURLJudgesEmbeddedIPv4AndSpecialUse: the subscription check
// refuses every destination of embeddedAndSpecialUse, naming the range,
// and lets every one of globallyReachable through.
func TestCheckURLJudgesEmbeddedIPv4AndSpecialUse(t *testing.T) {
	for _, u := range append([]string{"http://0xc6120001/", "http://3221225480/"}, embeddedAndSpecialUse...) {
		err := New(nil).CheckURL(u)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--webhook-allow-nets") {
			t.Errorf("CheckURL(%q) = %v, want ErrRefused", u, err)
		}
	}
	for _, u := range globallyReachable {
		if err := New(nil).CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
	const metadata = "http://[64:ff9b::a9fe:a9fe]/"
	want := "64:ff9b::a9fe:a9fe is in 64:ff9b::/96 (IPv4-IPv6 Translat.), which carries 169.254.169.254, in 169.254.0.0/16 (Link Local)"
	if err := New(nil).CheckURL(metadata); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckURL(%q) = %v, want it to say %q", metadata, err, want)
	}
	// The allow-list names an address, or the IPv4 address it carries.
	allowed := New([]netip.Prefix{netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("10.0.0.0/8")})
	for _, u := range []string{"http://198.18.0.1/", "http://[64:ff9b::a00:1]/", "http://[2002:a00:1::1]/"} {
		if err := allowed.CheckURL(u); err != nil {
			t.Errorf("with 198.18.0.0/15 and 10.0.0.0/8 allowed, CheckURL(%q) = %v", u, err)
		}
	}
	if err := allowed.CheckURL("http://[64:ff9b::a9fe:a9fe]/"); !errors.Is(err, ErrRefused) {
		t.Errorf("10.0.0.0/8 allows NAT64 of 169.254.169.254: %v", err)
	}
}

// TestClientRefusesEmbeddedIPv4AndSpecialUse: the dialer, which judges
// the address each connection goes to, refuses every destination of
// embeddedAndSpecialUse before connecting; and it judges every one of
// globallyReachable as CheckURL does (asked directly: this test sends
// nothing to the internet).
func TestClientRefusesEmbeddedIPv4AndSpecialUse(t *testing.T) {
	c := New(nil).Client()
	c.Timeout = 3 * time.Second // 4ec0d7f's guard lets the connection attempt go
	for _, u := range embeddedAndSpecialUse {
		resp, err := c.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("POST %s: %v, want ErrRefused from the dialer", u, err)
		}
	}
	g := New(nil)
	for _, raw := range globallyReachable {
		u, _ := url.Parse(raw)
		ip, _ := hostAddr(u.Hostname())
		if err := g.control("tcp", netip.AddrPortFrom(ip, 80).String(), nil); err != nil {
			t.Errorf("the dialer on %s: %v, want nil", ip, err)
		}
	}
}

func TestParseNetsNamesTheBadEntry(t *testing.T) {
	nets, err := ParseNets([]string{"10.1.2.3/8", " fd00::/8"})
	if err != nil || nets[0] != netip.MustParsePrefix("10.0.0.0/8") || len(nets) != 2 {
		t.Fatalf("ParseNets = %v, %v", nets, err)
	}
	if _, err := ParseNets([]string{"10.0.0.0/8", "localhost"}); err == nil || !strings.Contains(err.Error(), `"localhost"`) {
		t.Fatalf("ParseNets of a host name: %v", err)
	}
}

// counting is a real HTTP receiver that counts its requests.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); h(w, r) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestClientRefusesInTheDialer reaches a receiver on 127.0.0.1 by the name
// localhost, which only the resolver turns into an address: the dialer
// refuses it, and the receiver sees nothing, until the allow-list names it.
func TestClientRefusesInTheDialer(t *testing.T) {
	srv, hits := counting(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	u, _ := url.Parse(srv.URL)
	byName := "http://localhost:" + u.Port() + "/hooks"
	resp, err := New(nil).Client().Post(byName, "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRefused) || hits.Load() != 0 {
		t.Fatalf("POST %s = %v, receiver saw %d requests; want ErrRefused and none", byName, err, hits.Load())
	}
	resp, err = New(loopback).Client().Post(byName, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("with 127.0.0.0/8 allowed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || hits.Load() != 1 {
		t.Fatalf("with 127.0.0.0/8 allowed: %s, %d requests", resp.Status, hits.Load())
	}
}

// TestClientFollowsNoRedirect: a 307 is the answer, and its target never
// gets the body.
func TestClientFollowsNoRedirect(t *testing.T) {
	target, targetHits := counting(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	first, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen", http.StatusTemporaryRedirect)
	})
	resp, err := New(loopback).Client().Post(first.URL, "application/json", strings.NewReader(`{"signed":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || targetHits.Load() != 0 {
		t.Fatalf("answer %s, the redirect's target saw %d requests; want the 307 itself and none", resp.Status, targetHits.Load())
	}
}
