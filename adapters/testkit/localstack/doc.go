// Package localstack starts private redis-server and PostgreSQL processes from
// the binaries installed on the machine, on free loopback ports, in
// directories the caller chooses.
//
// It serves two callers: the `invledger dev` command, which needs a Redis and
// a PostgreSQL that keep their data across runs, and integration tests, which
// need throwaway servers they can kill -9 and start again to prove that no
// acknowledged write is lost.
//
// Guarantees:
//
//   - The machine's default instances are never touched: servers listen on
//     127.0.0.1 only, on a port picked with net.Listen("tcp", "127.0.0.1:0")
//     (or one the caller gives), and the default ports 6379 and 5432 are
//     refused by Validate. PostgreSQL gets its own Unix socket directory.
//   - Every server is a direct child of the calling process, started with
//     SysProcAttr.Pdeathsig = SIGKILL from an OS thread that never exits, so
//     it dies when the test binary or `invledger dev` dies, however it dies.
//   - Server output goes to a log file in the server's directory; a failed
//     start returns an error that ends with the tail of that log.
//
// Running as root: PostgreSQL refuses to run as root. When os.Geteuid() is 0,
// initdb and postgres run as the `postgres` OS user (uid/gid looked up with
// os/user, dropped with SysProcAttr.Credential). PostgresConfig.Dir is then
// chowned to that user, and every ancestor of Dir must be traversable by it
// (o+x, or owned by it or its group). t.TempDir() is NOT: its parents are
// root-owned 0700 directories. Use a directory made with os.MkdirTemp("", ...)
// and chmod 0755, as localstacktest does. StartPostgres checks this up front
// and says which directory blocks the postgres user.
//
// Package localstacktest wraps this package for tests.
package localstack
