package localstack_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestPostgresKeepsCommittedDataAcrossKillAndStops(t *testing.T) {
	t.Parallel()
	srv := localstacktest.PrivatePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	u, err := url.Parse(srv.URL("app"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "postgres" || u.User.Username() != "postgres" || u.Hostname() != "127.0.0.1" ||
		u.Path != "/app" || u.Query().Get("sslmode") != "disable" {
		t.Fatalf("URL(app) = %q, want postgres://postgres@127.0.0.1:<port>/app?sslmode=disable", srv.URL("app"))
	}
	if srv.Port() == 0 || srv.Port() == localstack.DefaultPostgresPort {
		t.Fatalf("Port() = %d, want a free non-default port", srv.Port())
	}

	if err := srv.CreateDatabase(ctx, "app"); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, srv.URL("app"))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows := func() []string {
		t.Helper()
		conn, err := pgx.Connect(ctx, srv.URL("app"))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(ctx)
		r, _ := conn.Query(ctx, "SELECT v FROM t ORDER BY v")
		got, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("select: %v", err)
		}
		return got
	}
	want := func(vs ...string) {
		t.Helper()
		if got := rows(); strings.Join(got, ",") != strings.Join(vs, ",") {
			t.Fatalf("rows = %v, want %v", got, vs)
		}
	}

	exec("CREATE TABLE t (v text PRIMARY KEY)")
	exec("INSERT INTO t VALUES ('a')")

	// An open connection sees the crash.
	held, err := pgx.Connect(ctx, srv.URL("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)

	if err := srv.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := held.Ping(ctx); err == nil {
		t.Fatal("ping on an open connection succeeded after Kill, want it broken")
	}
	if _, err := pgx.Connect(ctx, srv.URL("app")); err == nil {
		t.Fatal("connect succeeded after Kill, want the server gone")
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start after Kill: %v", err)
	}
	want("a")

	exec("INSERT INTO t VALUES ('b')")
	if err := srv.StopImmediate(ctx); err != nil {
		t.Fatalf("StopImmediate: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start after StopImmediate: %v", err)
	}
	want("a", "b")

	exec("INSERT INTO t VALUES ('c')")
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v, want nil", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start of a running server: %v, want nil", err)
	}
	want("a", "b", "c")

	if err := srv.CreateDatabase(ctx, "app"); err == nil {
		t.Error("CreateDatabase of an existing database succeeded, want an error")
	}
	if err := srv.DropDatabase(ctx, "app"); err != nil {
		t.Errorf("DropDatabase: %v", err)
	}
}

func TestStartPostgresAsRootNeedsReachableDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root drops to the postgres user")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// t.TempDir() sits in a root-owned 0700 directory.
	srv, err := localstack.StartPostgres(ctx, localstack.PostgresConfig{Dir: t.TempDir() + "/pg"})
	if err == nil {
		_ = srv.Kill()
		t.Fatal("StartPostgres under t.TempDir() as root succeeded, want an error naming the blocking directory")
	}
	for _, want := range []string{"cannot reach", "os.MkdirTemp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestPostgresConfigValidate(t *testing.T) {
	_, err := localstack.StartPostgres(context.Background(), localstack.PostgresConfig{
		Port:     localstack.DefaultPostgresPort,
		BinDir:   "/nonexistent",
		Settings: map[string]string{"a=b": "c"},
	})
	if err == nil {
		t.Fatal("StartPostgres with a bad config succeeded")
	}
	for _, want := range []string{"Dir is required", "5432", "/nonexistent", `"a=b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}
