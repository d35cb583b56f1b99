<?php

declare(strict_types=1);

namespace Invledger\Tests;

use Invledger\Client;
use Invledger\Options;

/**
 * Stack is the private stack php_test.go started: serve's address, its
 * tokens, and the control endpoint that kills -9 serve.
 */
final class Stack
{
    public static function url(): string
    {
        return self::env('INVLEDGER_TEST_URL');
    }

    public static function gatewayToken(): string
    {
        return self::env('INVLEDGER_TEST_GATEWAY_TOKEN');
    }

    public static function gateway(?Options $options = null): Client
    {
        return Client::create(self::url(), self::gatewayToken(), $options ?? new Options(deadline: 5.0));
    }

    public static function operator(): Client
    {
        return Client::create(self::url(), self::env('INVLEDGER_TEST_OPERATOR_TOKEN'), new Options(deadline: 5.0));
    }

    /** sku defines a SKU of a unique name starting with $prefix, warms it unless told not to, and returns its name. */
    public static function sku(string $prefix, int $stock, int $perUserLimit = 1, bool $warm = true): string
    {
        $sku = $prefix . '-' . bin2hex(random_bytes(4));
        self::define($sku, $stock, $perUserLimit, $warm);
        return $sku;
    }

    /** define defines $sku (anew, or as it is) and warms it unless told not to. */
    public static function define(string $sku, int $stock, int $perUserLimit = 1, bool $warm = true): void
    {
        $op = self::operator();
        $op->call('PUT', '/v1/skus/' . rawurlencode($sku), ['stock' => $stock, 'per_user_limit' => $perUserLimit], Client::newRequestId());
        if ($warm) {
            $op->call('POST', '/v1/skus/' . rawurlencode($sku) . '/warm');
        }
    }

    /** @return array<string,mixed> the SKU's two views, Redis's and the ledger's */
    public static function view(string $sku): array
    {
        return self::operator()->call('GET', '/v1/skus/' . rawurlencode($sku));
    }

    /**
     * projected waits until the ledger in PostgreSQL has every event Redis
     * has of $sku, and returns the SKU's view then.
     *
     * @return array<string,mixed>
     */
    public static function projected(string $sku, float $timeout = 20.0): array
    {
        $v = [];
        self::waitFor("the ledger to catch up with Redis on $sku", static function () use ($sku, &$v): bool {
            $v = self::view($sku);
            return $v['ledger_seq'] !== null && $v['ledger_seq'] === $v['redis_seq'];
        }, $timeout);
        return $v;
    }

    /** waitFor polls $cond every 50 ms until it holds, and throws once $timeout seconds passed. */
    public static function waitFor(string $what, \Closure $cond, float $timeout = 20.0): void
    {
        $deadline = microtime(true) + $timeout;
        while (!$cond()) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException(sprintf('timed out after %.0fs waiting for %s', $timeout, $what));
            }
            usleep(50_000);
        }
    }

    /** waitListening waits until a server (php -S) accepts connections on $addr, host:port, for 10 s at most. */
    public static function waitListening(string $addr): void
    {
        self::waitFor('a server to listen on ' . $addr, static function () use ($addr): bool {
            $c = @stream_socket_client('tcp://' . $addr, $errno, $errstr, 1.0);
            if ($c === false) {
                return false;
            }
            fclose($c);
            return true;
        }, 10.0);
    }

    /** killServe has php_test.go kill -9 serve now and start it again on the same address after $down seconds; it returns the pid killed. */
    public static function killServe(float $down): int
    {
        $ctx = stream_context_create(['http' => ['method' => 'POST', 'timeout' => 10]]);
        $out = file_get_contents(self::env('INVLEDGER_TEST_CONTROL') . '/kill-serve?down=' . $down . 's', false, $ctx);
        if ($out === false) {
            throw new \RuntimeException('the control endpoint did not answer');
        }
        return (int) json_decode($out, true)['killed'];
    }

    /** pauseRedis has php_test.go freeze Redis for $seconds, so that serve answers 503 meanwhile. */
    public static function pauseRedis(float $seconds): void
    {
        $ctx = stream_context_create(['http' => ['method' => 'POST', 'timeout' => 10]]);
        if (file_get_contents(self::env('INVLEDGER_TEST_CONTROL') . '/pause-redis?for=' . $seconds . 's', false, $ctx) === false) {
            throw new \RuntimeException('the control endpoint did not answer');
        }
    }

    /** servePid is the pid of the serve process of the moment. */
    public static function servePid(): int
    {
        return (int) json_decode((string) file_get_contents(self::env('INVLEDGER_TEST_CONTROL') . '/serve-pid'), true)['pid'];
    }

    /**
     * php runs the PHP script $script with $args in a new process each,
     * all at once, calls $whileRunning once they are started, and returns
     * each one's standard output, in order; it throws when one fails.
     *
     * @param list<list<string>> $argsPerProcess
     * @return list<string>
     */
    public static function php(string $script, array $argsPerProcess, ?\Closure $whileRunning = null): array
    {
        $procs = [];
        foreach ($argsPerProcess as $i => $args) {
            $cmd = array_merge([PHP_BINARY, $script], $args);
            $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
            if ($p === false) {
                throw new \RuntimeException("cannot start $script");
            }
            $procs[$i] = [$p, $pipes];
        }
        if ($whileRunning !== null) {
            $whileRunning();
        }
        $outs = [];
        foreach ($procs as $i => [$p, $pipes]) {
            $out = stream_get_contents($pipes[1]);
            $err = stream_get_contents($pipes[2]);
            fclose($pipes[1]);
            fclose($pipes[2]);
            $code = proc_close($p);
            if ($code !== 0) {
                throw new \RuntimeException("$script #$i exited $code: $err");
            }
            $outs[$i] = (string) $out;
        }
        return $outs;
    }

    private static function env(string $name): string
    {
        $v = getenv($name);
        if ($v === false || $v === '') {
            throw new \RuntimeException("$name is not set: the suite runs from clients/php/php_test.go (go test ./clients/php/)");
        }
        return $v;
    }
}
