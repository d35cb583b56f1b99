.PHONY: all build install check test demo dev deps deps-test screenshots bench fresh-check image php-package

all: build

# VERSION is stamped into the binary (--version, go_build_info).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)

LDFLAGS = -X github.com/invledger/invledger/adapters/app.version=$(VERSION)

build:
	go build -ldflags "$(LDFLAGS)" -o bin/invledger ./cmd/invledger

# make install: the invledger CLI, stamped like build's, into Go's bin
# directory (go env GOBIN, else $(go env GOPATH)/bin); it says where, and
# the line that puts that directory on PATH when it is not.
install:
	go install -ldflags "$(LDFLAGS)" ./cmd/invledger
	@dir=$$(go env GOBIN); dir=$${dir:-$$(go env GOPATH)/bin}; echo "installed $$dir/invledger"; \
	case ":$$PATH:" in *":$$dir:"*) ;; *) echo "$$dir is not on PATH; add it: export PATH=\"$$dir:\$$PATH\"";; esac

# make image: the container image, with no base image, registry or daemon
# (scripts/mkimage): a static binary stamped like build's, the build
# machine's CA bundle, numeric non-root user 65532, as an OCI layout in
# bin/image/oci and a docker-archive, bin/image/invledger.tar (docker load
# -i, podman load -i). It prints the image's size and build time.
image:
	go run ./scripts/mkimage -version "$(VERSION)" -out bin/image

# make deps installs what demo and dev use (Redis, PostgreSQL, the
# certificates Go downloads with), make deps-test what the tests use
# besides; each installs nothing, and needs no root, when all is present
# (scripts/install-deps.sh).
deps:
	scripts/install-deps.sh demo

deps-test:
	scripts/install-deps.sh test

# make php-package: the PHP client (clients/php) as a Composer package zip,
# bin/php/invledger-client-$(PHP_PACKAGE_VERSION).zip, for an artifact
# repository (docs/php.md, Installing).
PHP_PACKAGE_VERSION ?= 0.1.0
php-package:
	PHP_PACKAGE_VERSION=$(PHP_PACKAGE_VERSION) scripts/php-package.sh bin/php

# make check: vet and the tests that need no server (-short): 23 s on a
# 2-core machine with a warm build cache (most of it linking the test
# binaries; no package's tests take 2 s), 5 min on a first build. Under
# -short no test starts a server: localstack panics if one does.
check:
	go vet ./...
	go test -short -count=1 ./...

# make test: vet, all tests with -race against private servers, short
# benchmark and fuzz runs.
test: deps-test
	scripts/test.sh

# make demo: a simulated flash sale against private servers.
demo: deps
	go run ./cmd/invledger demo

# make fresh-check (as root, not part of make test): make demo from a clone
# of the current commit, in a chroot, on a bare Debian 12 root filesystem
# (debootstrap minbase) with only Go (and make, to type the command) added,
# then, as a user without root, on one that also has Redis, PostgreSQL and
# ca-certificates: there it must install nothing.
fresh-check:
	scripts/fresh-check.sh

# make dev: a private stack under ./.invledger serving the API.
dev: deps
	go run ./cmd/invledger dev

# make screenshots: the console's pages, taken by its browser test into
# docs/console/ (make test runs the same test and writes nothing).
screenshots: deps-test
	INVLEDGER_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console go test -count=1 -run '^TestConsoleInABrowser$$' ./adapters/server

# make bench: the figures of BENCHMARKS.md from one run (about 4 minutes on
# 2 cores), written into its table with the commit and the date.
bench: deps-test
	scripts/bench.sh
