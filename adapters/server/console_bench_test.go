package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPurchaseWithConsoleWatchers measures purchase latency over
// HTTP while 0 or 20 browsers watch the SKU's live feed, and reports the
// p50 and p99 of each run. The two cases alternate over benchRounds
// rounds on one serve, so machine noise hits both alike:
//
//	go test -run '^$' -bench PurchaseWithConsoleWatchers -benchtime 4000x ./server
func BenchmarkPurchaseWithConsoleWatchers(b *testing.B) {
	_, base := startConsoleServe(b)
	// The console caps feeds at 4 a session and 8 a principal, so the 20
	// watchers are 5 signed-in browsers of 4 principals, 4 feeds each.
	var browsers []*http.Client
	for _, token := range []string{conAu, conOp, conOA, conAp, conAu} {
		jar, _ := cookiejar.New(nil)
		resp, err := (&http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
			PostForm(base+"/console/signin", url.Values{"token": {token}})
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("sign-in: %v %v", err, resp)
		}
		resp.Body.Close()
		browsers = append(browsers, &http.Client{Jar: jar})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for round := range benchRounds {
		for _, watchers := range []int{0, 20} {
			benchWatched(b, base, browsers, client, round, watchers)
		}
	}
}

// benchRounds is how many times each case of
// BenchmarkPurchaseWithConsoleWatchers runs, alternating.
const benchRounds = 4

func benchWatched(b *testing.B, base string, browsers []*http.Client, client *http.Client, round, watchers int) {
	b.Run(fmt.Sprintf("round=%d/watchers=%d", round+1, watchers), func(b *testing.B) {
		sku := fmt.Sprintf("bw-%d-%d", watchers, time.Now().UnixNano())
		createWarm(b, base, sku, `{"stock":1000000000,"per_user_limit":1000000000}`)
		var received atomic.Int64
		var wg sync.WaitGroup
		var feeds []io.Closer
		defer func() {
			for _, f := range feeds {
				f.Close()
			}
			wg.Wait()
		}()
		for i := range watchers {
			resp, err := browsers[i%len(browsers)].Get(base + "/console/skus/" + sku + "/feed")
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("feed: %v %v", err, resp)
			}
			wg.Go(func() {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "event: event") {
						received.Add(1)
					}
				}
			})
			feeds = append(feeds, resp.Body)
		}
		lat := make([]time.Duration, b.N)
		var next atomic.Int64
		b.ResetTimer()
		var clients sync.WaitGroup
		for range 16 {
			clients.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					body := fmt.Sprintf(`{"user_id":"u%d","qty":1,"request_id":"r%d"}`, i, i)
					req, _ := http.NewRequest("POST", base+"/v1/skus/"+sku+"/deduct", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+conGW)
					req.Header.Set("Content-Type", "application/json")
					start := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat[i] = time.Since(start)
					if resp.StatusCode != 200 {
						b.Errorf("deduct: %d", resp.StatusCode)
						return
					}
				}
			})
		}
		clients.Wait()
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		if watchers > 0 {
			// Wait a moment for the feed to deliver, then report what
			// share of the events each watcher saw.
			time.Sleep(500 * time.Millisecond)
			b.ReportMetric(float64(received.Load())/float64(watchers*b.N), "events-seen/watcher")
		}
	})
}
