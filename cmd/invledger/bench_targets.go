package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// benchTarget is one way of selling: the library, the HTTP API, or the
// SQL-first baseline.
type benchTarget interface {
	name() string
	// prepare puts stock units of a new SKU on sale.
	prepare(ctx context.Context, sku string, stock int64) error
	deduct(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error)
	// catchUp waits until the ledger equals Redis and says how long that
	// took; has is false for a target without a ledger.
	catchUp(ctx context.Context, timeout time.Duration) (has, caughtUp bool, waited time.Duration, err error)
	// check reads what the target itself holds: units sold and units left.
	check(ctx context.Context) (sold, remaining int64, err error)
	close()
}

// runTarget runs one target through a sale and reports it.
// cpu, if not nil, measures the cores each process used during the run.
func runTarget(ctx context.Context, t benchTarget, sku string, spec loadSpec, stock int64, catchUp time.Duration, progress io.Writer, cpu *cpuSampler) (BenchReport, error) {
	if err := t.prepare(ctx, sku, stock); err != nil {
		return BenchReport{}, fmt.Errorf("%s: put %s on sale: %w", t.name(), sku, err)
	}
	live := &liveCounters{}
	stop := benchProgress(progress, t.name(), spec, stock, live)
	var before cpuSample
	if cpu != nil {
		before = cpu.sample()
	}
	run, err := runLoad(ctx, spec, t.deduct, live)
	var after cpuSample
	if cpu != nil {
		after = cpu.sample()
	}
	stop()
	if err != nil {
		return BenchReport{}, err
	}
	rep := summarize(t.name(), spec, stock, run)
	rep.SKU = sku
	if cpu != nil {
		rep.CPU = cpu.cores(before, after, false)
	}
	has, caughtUp, _, err := t.catchUp(ctx, catchUp)
	if err != nil {
		return rep, fmt.Errorf("%s: compare the ledger with Redis: %w", t.name(), err)
	}
	if has {
		rep.setLedger(caughtUp, time.Since(run.stop))
	}
	sold, remaining, err := t.check(ctx)
	if err != nil {
		return rep, fmt.Errorf("%s: read what was sold: %w", t.name(), err)
	}
	rep.applyCheck(sold, remaining)
	return rep, nil
}

// --- lib: the Go library in-process -------------------------------------

type libTarget struct {
	a          *app
	sku        string
	stock      int64
	stopProj   context.CancelFunc
	projDone   chan error
	projectors bool
}

// newLibTarget wraps an open app. With projector set it runs the projector
// in this process, as serve --components projector would.
func newLibTarget(ctx context.Context, cfg Config, a *app, projector bool) *libTarget {
	t := &libTarget{a: a}
	if projector {
		if cfg.LogLevel == "info" { // its start-up lines would interleave with the progress line
			cfg.LogLevel = "warn"
		}
		projCtx, cancel := context.WithCancel(ctx)
		t.stopProj, t.projDone, t.projectors = cancel, make(chan error, 1), true
		go func() {
			t.projDone <- serve(projCtx, cfg, ServeConfig{Components: []string{"projector"}, Subscribers: 4, BatchSize: 500,
				BatchWait: defaultBatchWait, StreamRetention: defaultRetention, ReconcileInterval: defaultReconcileInterval,
				ConsumerName: "invledger-bench", Durability: "everysec", AllowVolatileRedis: true}, nil)
		}()
	}
	return t
}

func (t *libTarget) name() string { return "lib" }

func (t *libTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku, t.stock = sku, stock
	if _, _, err := t.a.service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: stock, PerUserLimit: 1}); err != nil {
		return err
	}
	_, err := t.a.service.Warm(ctx, sku)
	return err
}

func (t *libTarget) deduct(ctx context.Context, _ *benchWorker, user, requestID string) (outcome, int64, error) {
	cmd, err := ledger.NewDeductCommand(t.sku, user, 1, requestID)
	if err != nil {
		return outInvalid, 0, err
	}
	rc, err := t.a.service.Deduct(ctx, cmd)
	if err == nil {
		return outOK, rc.Seq, nil
	}
	o := domainOutcome(err)
	if o.unexpected() {
		return o, 0, err
	}
	return o, 0, nil
}

// domainOutcome maps the library's errors by their domain code.
func domainOutcome(err error) outcome { return codeOutcome(domain.CodeOf(err)) }

// codeOutcome is the bench outcome of a domain code; codes the bench does
// not count on their own are outError.
func codeOutcome(c domain.Code) outcome {
	switch c {
	case domain.CodeSoldOut:
		return outSoldOut
	case domain.CodeAlreadyPurchased:
		return outAlready
	case domain.CodeNotWarmed:
		return outNotWarmed
	case domain.CodeClosed:
		return outClosed
	case domain.CodeConflict:
		return outConflict
	case domain.CodeRecovering:
		return outRecovering
	case domain.CodeInvalidInput:
		return outInvalid
	case domain.CodeUnavailable:
		return outTimeout
	}
	return outError
}

func (t *libTarget) catchUp(ctx context.Context, timeout time.Duration) (bool, bool, time.Duration, error) {
	ok, waited, err := waitLedgerEqualsRedis(ctx, t.a, t.sku, timeout)
	return true, ok, waited, err
}

func (t *libTarget) check(ctx context.Context) (int64, int64, error) {
	v, err := t.a.service.State(ctx, t.sku)
	if err != nil {
		return 0, 0, err
	}
	if v.RedisStock == nil {
		return 0, 0, fmt.Errorf("sku %s is no longer in Redis", t.sku)
	}
	return t.stock - *v.RedisStock, *v.RedisStock, nil
}

func (t *libTarget) close() {
	if t.projectors {
		t.stopProj()
		<-t.projDone
	}
}

// --- http: a running serve ----------------------------------------------

type httpTarget struct {
	base      string
	gateway   []string // Authorization header values
	operator  []string
	client    *http.Client
	sku       string
	deductURL string
	fast      *fastHTTP // purchases over plain http; nil for https
}

func newHTTPTarget(base, gatewayToken, operatorToken string, clients int, timeout time.Duration) *httpTarget {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        clients + 16,
		MaxIdleConnsPerHost: clients + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httpTarget{
		base:     strings.TrimRight(base, "/"),
		gateway:  []string{"Bearer " + gatewayToken},
		operator: []string{"Bearer " + operatorToken},
		client:   &http.Client{Transport: tr, Timeout: timeout},
	}
}

func (t *httpTarget) name() string { return "http" }

// call sends an operator request and decodes a JSON answer into dst.
func (t *httpTarget) call(ctx context.Context, auth []string, method, path, body string, dst any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header["Authorization"] = auth
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w (is `invledger serve` running at --url %s?)", method, path, err, t.base)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return resp.StatusCode, fmt.Errorf("%s %s: 401: the token was refused; check --token/--operator-token against the serve's INVLEDGER_TOKENS", method, path)
	case http.StatusForbidden:
		return resp.StatusCode, fmt.Errorf("%s %s: 403: %s (--token needs role gateway, --operator-token role operator)", method, path, bytes.TrimSpace(b))
	}
	if dst != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, dst); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

func (t *httpTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku = sku
	t.deductURL = t.base + "/v1/skus/" + url.PathEscape(sku) + "/deduct"
	if u, err := url.Parse(t.deductURL); err == nil && u.Scheme == "http" {
		t.fast = newFastHTTP(u.Host, u.EscapedPath(), t.gateway[0])
	}
	// Check both tokens before anything is written: reading an unknown SKU
	// is 404 for an operator, and a deduct body the API refuses before it
	// touches anything is 400 for a gateway.
	if code, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+sku, "", nil); code != http.StatusNotFound {
		return fmt.Errorf("checking --operator-token: %w", err)
	}
	if code, err := t.call(ctx, t.gateway, http.MethodPost, "/v1/skus/"+sku+"/deduct", `{}`, nil); code != http.StatusBadRequest {
		return fmt.Errorf("checking --token: %w", err)
	}
	if _, err := t.call(ctx, t.operator, http.MethodPut, "/v1/skus/"+sku, fmt.Sprintf(`{"stock":%d,"per_user_limit":1}`, stock), nil); err != nil {
		return err
	}
	_, err := t.call(ctx, t.operator, http.MethodPost, "/v1/skus/"+sku+"/warm", "", nil)
	return err
}

func (t *httpTarget) deduct(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error) {
	body := append(w.scratch[:0], `{"user_id":"`...)
	body = append(body, user...)
	body = append(body, `","qty":1,"request_id":"`...)
	body = append(body, requestID...)
	body = append(body, `"}`...)
	w.scratch = body
	if t.fast != nil {
		status, resp, err := t.fast.post(ctx, w, body)
		if err != nil {
			return httpErrorOutcome(err), 0, err
		}
		return deductOutcome(status, resp)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.deductURL, bytes.NewReader(body))
	if err != nil {
		return outError, 0, err
	}
	req.Header["Authorization"] = t.gateway
	req.Header["Content-Type"] = contentTypeJSONHeader
	resp, err := t.client.Do(req)
	if err != nil {
		return httpErrorOutcome(err), 0, err
	}
	var buf [512]byte
	n, _ := io.ReadFull(resp.Body, buf[:])
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return deductOutcome(resp.StatusCode, buf[:n])
}

func httpErrorOutcome(err error) outcome {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return outTimeout
	}
	return outError
}

// deductOutcome reads a deduct answer: 200 with the receipt's seq, or the
// contract's error codes.
func deductOutcome(status int, b []byte) (outcome, int64, error) {
	switch status {
	case http.StatusOK:
		seq, ok := jsonInt(b, `"seq":`)
		if !ok {
			return outError, 0, fmt.Errorf("200 without a seq: %s", b)
		}
		return outOK, seq, nil
	case http.StatusConflict, http.StatusServiceUnavailable, http.StatusBadRequest:
		switch jsonString(b, `"error":"`) {
		case "sold_out":
			return outSoldOut, 0, nil
		case "already_purchased":
			return outAlready, 0, nil
		case "not_warmed":
			return outNotWarmed, 0, fmt.Errorf("409 %s", b)
		case "closed":
			return outClosed, 0, fmt.Errorf("409 %s", b)
		case "conflict":
			return outConflict, 0, fmt.Errorf("409 %s", b)
		case "recovering":
			return outRecovering, 0, fmt.Errorf("503 %s", b)
		case "invalid_request":
			return outInvalid, 0, fmt.Errorf("400 %s", b)
		}
	}
	return outError, 0, fmt.Errorf("%d %s", status, b)
}

var contentTypeJSONHeader = []string{"application/json"}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// jsonInt reads the integer after key in a flat JSON object.
func jsonInt(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] == '-' || b[j] >= '0' && b[j] <= '9') {
		j++
	}
	n, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return n, err == nil
}

// jsonString reads the string after key (which ends with the opening quote).
func jsonString(b []byte, key string) string {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	b = b[i+len(key):]
	if j := bytes.IndexByte(b, '"'); j >= 0 {
		return string(b[:j])
	}
	return ""
}

type httpSKUView struct {
	RedisStock  *int64 `json:"redis_stock"`
	RedisSeq    *int64 `json:"redis_seq"`
	LedgerStock *int64 `json:"ledger_stock"`
	LedgerSeq   *int64 `json:"ledger_seq"`
}

func (t *httpTarget) view(ctx context.Context) (httpSKUView, error) {
	var v httpSKUView
	_, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+t.sku, "", &v)
	if err == nil && v.RedisStock == nil {
		err = fmt.Errorf("sku %s is no longer in Redis", t.sku)
	}
	return v, err
}

func (t *httpTarget) catchUp(ctx context.Context, timeout time.Duration) (bool, bool, time.Duration, error) {
	start := time.Now()
	for {
		v, err := t.view(ctx)
		if err != nil {
			return true, false, time.Since(start), err
		}
		if v.LedgerStock != nil && v.LedgerSeq != nil && *v.LedgerStock == *v.RedisStock && *v.LedgerSeq == *v.RedisSeq {
			return true, true, time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return true, false, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return true, false, time.Since(start), ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (t *httpTarget) check(ctx context.Context) (int64, int64, error) {
	var v struct {
		httpSKUView
		InitialStock int64 `json:"initial_stock"`
	}
	if _, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+t.sku, "", &v); err != nil {
		return 0, 0, err
	}
	if v.RedisStock == nil {
		return 0, 0, fmt.Errorf("sku %s is no longer in Redis", t.sku)
	}
	return v.InitialStock - *v.RedisStock, *v.RedisStock, nil
}

func (t *httpTarget) close() { t.client.CloseIdleConnections() }

// --- pg-direct: the SQL-first design ------------------------------------

// pgTarget deducts in PostgreSQL first: per attempt one transaction with a
// hot-row UPDATE guarded by num >= qty and an order insert guarded by
// UNIQUE (sku, user_id). It uses its own tables, never the ledger's.
type pgTarget struct {
	pool  *pgxpool.Pool
	sku   string
	stock int64
	conns int32
}

const pgBenchSchema = `
CREATE TABLE IF NOT EXISTS bench_stock (
  sku text PRIMARY KEY,
  num bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS bench_orders (
  id bigserial PRIMARY KEY,
  sku text NOT NULL,
  user_id text NOT NULL,
  request_id text NOT NULL,
  qty bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (sku, user_id)
)`

// newPGTarget opens a pool of maxConns connections (0: one per client, as
// far as the server's max_connections allows) and creates the bench tables.
func newPGTarget(ctx context.Context, databaseURL string, clients, maxConns int) (*pgTarget, error) {
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url (INVLEDGER_DATABASE_URL): %w", err)
	}
	probe, err := pgx.ConnectConfig(ctx, poolCfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s:%d: %w (check --database-url / INVLEDGER_DATABASE_URL)", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, err)
	}
	defer probe.Close(ctx)
	if _, err := probe.Exec(ctx, pgBenchSchema); err != nil {
		return nil, fmt.Errorf("create bench_stock and bench_orders: %w", err)
	}
	if maxConns == 0 {
		var free int
		err := probe.QueryRow(ctx, `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
			- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).Scan(&free)
		if err != nil {
			return nil, fmt.Errorf("read max_connections: %w", err)
		}
		maxConns = max(1, min(clients, free-5))
	}
	poolCfg.MaxConns = int32(maxConns)
	poolCfg.MinConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// Open every connection now, so the run does not measure connecting.
	var wg sync.WaitGroup
	errs := make([]error, maxConns)
	conns := make([]*pgxpool.Conn, maxConns)
	for i := range maxConns {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	if err := errors.Join(errs...); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %d PostgreSQL connections: %w (lower --pg-max-conns or raise max_connections)", maxConns, err)
	}
	return &pgTarget{pool: pool, conns: int32(maxConns)}, nil
}

func (t *pgTarget) name() string { return "pg-direct" }

func (t *pgTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku, t.stock = sku, stock
	_, err := t.pool.Exec(ctx, `INSERT INTO bench_stock (sku, num) VALUES ($1, $2)`, sku, stock)
	return err
}

func (t *pgTarget) deduct(ctx context.Context, _ *benchWorker, user, requestID string) (o outcome, _ int64, err error) {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return pgOutcome(err), 0, err
	}
	defer func() {
		if o != outSold {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	tag, err := tx.Exec(ctx, `UPDATE bench_stock SET num = num - $1 WHERE sku = $2 AND num >= $1`, int64(1), t.sku)
	if err != nil {
		return pgOutcome(err), 0, err
	}
	if tag.RowsAffected() == 0 {
		return outSoldOut, 0, nil
	}
	tag, err = tx.Exec(ctx, `INSERT INTO bench_orders (sku, user_id, request_id, qty) VALUES ($1, $2, $3, $4) ON CONFLICT (sku, user_id) DO NOTHING`,
		t.sku, user, requestID, int64(1))
	if err != nil {
		return pgOutcome(err), 0, err
	}
	if tag.RowsAffected() == 0 {
		// The user has an order: the same request (a retry) or another one.
		_ = tx.Rollback(ctx)
		var prior string
		if err := t.pool.QueryRow(ctx, `SELECT request_id FROM bench_orders WHERE sku = $1 AND user_id = $2`, t.sku, user).Scan(&prior); err != nil {
			return pgOutcome(err), 0, err
		}
		if prior == requestID {
			return outReplayed, 0, nil
		}
		return outAlready, 0, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return pgOutcome(err), 0, err
	}
	return outSold, 0, nil
}

func pgOutcome(err error) outcome {
	var pgErr *pgconn.PgError
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return outTimeout
	}
	return outError
}

func (t *pgTarget) catchUp(context.Context, time.Duration) (bool, bool, time.Duration, error) {
	return false, false, 0, nil
}

func (t *pgTarget) check(ctx context.Context) (int64, int64, error) {
	var num, orders, units int64
	err := t.pool.QueryRow(ctx, `SELECT s.num, (SELECT count(*) FROM bench_orders o WHERE o.sku = s.sku),
		(SELECT COALESCE(sum(qty), 0) FROM bench_orders o WHERE o.sku = s.sku)::bigint FROM bench_stock s WHERE s.sku = $1`, t.sku).Scan(&num, &orders, &units)
	if err != nil {
		return 0, 0, err
	}
	if t.stock-num != units {
		return units, num, fmt.Errorf("bench_stock says %d sold but bench_orders holds %d units", t.stock-num, units)
	}
	return units, num, nil
}

// close removes the run's rows, so repeated runs do not grow the tables.
func (t *pgTarget) close() {
	if t.sku != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.pool.Exec(ctx, `DELETE FROM bench_orders WHERE sku = $1`, t.sku)
		_, _ = t.pool.Exec(ctx, `DELETE FROM bench_stock WHERE sku = $1`, t.sku)
	}
	t.pool.Close()
}
