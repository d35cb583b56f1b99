#!/usr/bin/env bash
# install-deps.sh [demo|test] installs, from Debian's packages, what a
# command needs and the machine lacks, and nothing when all is present (no
# root needed then). Tests and the demo start private instances of their
# own; nothing here configures or relies on the machine's default services.
#
#   demo  what `make demo` and `make dev` use: redis-server, PostgreSQL,
#         ca-certificates (Go downloads modules over HTTPS), and the C
#         library's headers only when gcc is on PATH (cgo is then on and
#         the build compiles C against them).
#   test  (the default) what `make test` uses besides: gcc (the race
#         detector needs cgo), redis-benchmark, promtool (package
#         prometheus), chromium (the console's browser tests), nats-server
#         and rabbitmq-server (the broker export's tests, which also build
#         the nats-server go.mod requires, once), python3 and
#         nodejs (the check of the OpenAPI patterns in their regular
#         expressions), and PHP with Composer, PHPUnit, Guzzle and Laravel
#         (the PHP client's tests, clients/php).
set -euo pipefail

mode=${1:-test}
if [[ $mode != demo && $mode != test ]]; then
  echo "install-deps: unknown set \"$mode\": give demo (make demo, make dev) or test (make test)" >&2
  exit 64
fi

# install_missing installs the packages listed in missing, with sudo when
# not root; with none missing it does nothing and needs no privilege.
install_missing() {
  ((${#missing[@]})) || return 0
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "install-deps: missing ${missing[*]}; install them as root (apt-get install ${missing[*]}) and run this again" >&2
      exit 1
    fi
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]} from Debian's packages" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Only promtool was wanted: a Prometheus server that the package started
  # would scrape nothing of ours and hold port 9090.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null 2>&1 &&
    systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  # The same for the brokers: the tests start their own nodes on free
  # ports, and a broker this script did not install is never touched.
  if command -v systemctl >/dev/null 2>&1; then
    for pkg in nats-server rabbitmq-server; do
      if [[ " ${missing[*]} " == *" $pkg "* ]] && systemctl is-active --quiet "$pkg" 2>/dev/null; then
        $sudo systemctl disable --now "$pkg" >/dev/null 2>&1 || true
      fi
    done
    if [[ " ${missing[*]} " == *" rabbitmq-server "* && $had_erlang -eq 0 ]]; then
      $sudo systemctl disable --now epmd.service epmd.socket >/dev/null 2>&1 || true
    fi
  fi
}

# erlang-base before this run: epmd is stopped only if this run installs it.
had_erlang=1
missing=()
command -v go >/dev/null 2>&1 || { echo "install-deps: Go is not installed; install Go 1.26 from https://go.dev/dl/" >&2; exit 1; }
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && ! command -v postgres >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# Go downloads modules over HTTPS (minbase Debian has no CA certificates).
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if [[ $mode == test ]] && ! command -v gcc >/dev/null 2>&1; then
  missing+=(gcc) # go test -race needs cgo
fi
# With gcc on PATH cgo is on, and the build compiles C (runtime/cgo, net)
# against the C library's headers, which gcc only recommends: without them
# the first build stops at "stdlib.h: No such file or directory". Without
# gcc the demo builds with cgo off and needs neither.
if [[ $mode == test ]] || command -v gcc >/dev/null 2>&1; then
  [[ -e /usr/include/stdlib.h ]] || missing+=(libc6-dev)
fi
if [[ $mode == demo ]]; then
  install_missing
  exit 0
fi
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus) # promtool checks /metrics in the tests
# The console's end-to-end tests and `make screenshots` drive Debian's chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# docs/openapi.yaml's patterns are checked in Python's re and ECMA-262 as
# well as Go's regexp (adapters/internal/httpapi, TestSpecPatternsMeanTheSameInEveryEngine).
[[ -x /usr/bin/python3 ]] || command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 || missing+=(nodejs)
# The PHP client's suite (clients/php/php_test.go) runs on Debian's PHP
# packages, with no network: the PHP CLI and its curl (Guzzle's transport),
# mbstring, xml (PHPUnit) and zip (Composer's artifact repository, as
# docs/php.md installs the package) extensions, and the libraries under
# /usr/share/php.
command -v php >/dev/null 2>&1 || missing+=(php8.2-cli)
for ext in curl mbstring xml zip; do
  [[ -e /etc/php/8.2/mods-available/$ext.ini ]] || missing+=("php8.2-$ext")
done
command -v composer >/dev/null 2>&1 || missing+=(composer)
command -v phpunit >/dev/null 2>&1 || missing+=(phpunit)
[[ -e /usr/share/php/GuzzleHttp/autoload.php ]] || missing+=(php-guzzlehttp-guzzle)
[[ -e /usr/share/php/Illuminate/Foundation/Application.php ]] || missing+=(php-laravel-framework)
for psr in Psr/Http/Client/ClientInterface.php:php-psr-http-client Psr/Http/Message/RequestFactoryInterface.php:php-psr-http-factory \
  Psr/Http/Message/RequestInterface.php:php-psr-http-message Psr/Log/LoggerInterface.php:php-psr-log; do
  [[ -e /usr/share/php/${psr%%:*} ]] || missing+=("${psr##*:}")
done
# The broker export's tests start private brokers (adapters/testkit/brokertest).
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
[[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || missing+=(rabbitmq-server)
# epmd comes with Erlang; one that this script installs is stopped.
dpkg -s erlang-base >/dev/null 2>&1 || had_erlang=0

install_missing

# The broker export's tests also run a current nats-server, which takes
# atomic batches (Debian's 2.9.10 does not): the one go.mod requires,
# built once, where the test kit looks for it (brokertest's
# currentNATSServer), so that no test waits for the build.
if [[ $mode == test ]]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  version=$(cd "$root" && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
  bin="${XDG_CACHE_HOME:-$HOME/.cache}/invledger-brokertest/nats-server-$version"
  if [[ ! -x $bin ]]; then
    echo "install-deps: building nats-server $version for the broker export's tests (about 20 s, once)"
    mkdir -p "$(dirname "$bin")"
    (cd "$root" && CGO_ENABLED=0 GOFLAGS= go build -o "$bin.tmp.$$" github.com/nats-io/nats-server/v2)
    mv "$bin.tmp.$$" "$bin"
  fi
fi
