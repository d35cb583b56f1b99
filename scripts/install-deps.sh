#!/usr/bin/env bash
# install-deps.sh installs what invledger's demo and tests need and the
# machine lacks: redis-server, PostgreSQL, gcc and the C headers (cgo),
# promtool (package prometheus), chromium (the console's browser tests),
# nats-server and rabbitmq-server (the broker export's tests),
# python3 and nodejs (the check of the OpenAPI patterns in their regular
# expressions), and PHP with Composer, PHPUnit, Guzzle and Laravel (the PHP
# client's tests, clients/php) from Debian's packages. Tests and the demo start private
# instances of their own; nothing here configures or relies on the
# machine's default services.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && ! command -v postgres >/dev/null 2>&1; then
  missing+=(postgresql)
fi
command -v go >/dev/null 2>&1 || { echo "install-deps: Go is not installed; install Go 1.26 from https://go.dev/dl/" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || missing+=(gcc) # go test -race needs cgo
# With gcc on PATH cgo is on, and the build compiles C (runtime/cgo, net)
# against the C library's headers, which gcc only recommends: without them
# the first build stops at "stdlib.h: No such file or directory".
[[ -e /usr/include/stdlib.h ]] || missing+=(libc6-dev)
# Go downloads modules over HTTPS (minbase Debian has no CA certificates).
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
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
# epmd comes with Erlang; one that this script installs is stopped below.
had_erlang=1
dpkg -s erlang-base >/dev/null 2>&1 || had_erlang=0

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]} from Debian's packages" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
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
fi
