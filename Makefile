.PHONY: all build test demo dev deps

all: build

build:
	go build -o bin/invledger ./cmd/invledger

deps:
	scripts/install-deps.sh

# make test: vet, all tests with -race against private servers, short
# benchmark and fuzz runs.
test:
	scripts/test.sh

# make demo: a simulated flash sale against private servers.
demo: deps
	go run ./cmd/invledger demo

# make dev: a private stack under ./.invledger serving the API.
dev: deps
	go run ./cmd/invledger dev
