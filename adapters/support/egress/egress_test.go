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

// FuzzCheckURL: CheckURL never accepts a URL whose host a resolver would
// take as an internal address without DNS, and the inet_aton parser agrees
// with netip on every dotted quad netip accepts.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1/", "http://0x7f.1/", "http://2130706433/", "http://[::ffff:10.0.0.1]/",
		"https://shop.example/", "http://localhost./", "http://017700000001/", "http://1.2.3.4.5/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := New(nil).CheckURL(raw)
		if err != nil && !errors.Is(err, ErrRefused) && !strings.HasPrefix(err.Error(), "not a URL") {
			t.Fatalf("CheckURL(%q): unexpected error %v", raw, err)
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			return
		}
		host := u.Hostname()
		if ip, ok := hostAddr(host); ok && err == nil && kind(ip) != "" {
			t.Fatalf("CheckURL(%q) accepted %s, a %s address", raw, ip, kind(ip))
		}
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
			if got, ok := parseInetAton(host); !ok || got != ip {
				t.Fatalf("parseInetAton(%q) = %v %v, netip says %v", host, got, ok, ip)
			}
		}
	})
}
