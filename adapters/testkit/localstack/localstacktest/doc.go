// Package localstacktest gives tests private Redis and PostgreSQL servers
// started with package localstack.
//
// Postgres hands out a fresh database on one PostgreSQL shared by the whole
// test binary, started lazily on first use (about 1-3s, once). That server
// lives in a directory from os.MkdirTemp("", "localstacktest-*") (mode
// 0755, so the postgres OS user can reach it when tests run as root) and
// dies with the test binary through Pdeathsig. Its directory is removed by
// StopShared, which TestMain should call (Main does); directories left by
// test binaries that died without it are removed by the next test binary
// that starts a PostgreSQL here, once their owner process is gone.
//
// WaitFor and WaitProgress wait for what those servers do on their own:
// WaitProgress fails on a figure that stopped moving, not at a deadline
// sized for an idle machine.
package localstacktest
