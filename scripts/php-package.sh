#!/usr/bin/env bash
# php-package.sh writes the PHP client (clients/php) as a Composer package
# zip, invledger-client-<version>.zip, into the directory it is given
# (default bin/php), for a Composer artifact repository: Packagist cannot
# publish a package from a subfolder. The version is PHP_PACKAGE_VERSION,
# default 0.1.0; the zip's composer.json carries it, as an artifact
# repository needs. Composer runs offline.
set -euo pipefail

out=${1:-bin/php}
version=${PHP_PACKAGE_VERSION:-0.1.0}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v composer >/dev/null 2>&1 || { echo "php-package: composer is not installed; run scripts/install-deps.sh" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -R "$root/clients/php" "$tmp/pkg"
rm -rf "$tmp/pkg/vendor"
export COMPOSER_HOME="$tmp/home" COMPOSER_ALLOW_SUPERUSER=1 COMPOSER_DISABLE_NETWORK=1 COMPOSER_NO_INTERACTION=1
(cd "$tmp/pkg" && composer config version "$version" && composer archive --quiet --format=zip --dir="$out" --file="invledger-client-$version")
echo "$out/invledger-client-$version.zip"
