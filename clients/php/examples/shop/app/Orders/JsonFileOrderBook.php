<?php

declare(strict_types=1);

namespace App\Orders;

use Invledger\DeductReceipt;

/**
 * JsonFileOrderBook is the example's order table: a JSON file under the
 * storage path, written under a lock, one entry per request id, so a job
 * run twice writes one order. A shop's is a table with a unique index on
 * the request id.
 */
final class JsonFileOrderBook implements OrderBook
{
    public function __construct(private readonly string $path)
    {
    }

    public function record(string $requestId, string $sku, string $userId, int $qty, DeductReceipt $receipt): void
    {
        $this->update(static function (array $orders) use ($requestId, $sku, $userId, $qty, $receipt): array {
            $orders[$requestId] ??= ['status' => 'ordered', 'sku' => $sku, 'user_id' => $userId, 'qty' => $qty, 'seq' => $receipt->seq];
            return $orders;
        });
    }

    public function refuse(string $requestId, string $sku, string $userId, string $reason): void
    {
        $this->update(static function (array $orders) use ($requestId, $sku, $userId, $reason): array {
            $orders[$requestId] ??= ['status' => $reason, 'sku' => $sku, 'user_id' => $userId];
            return $orders;
        });
    }

    /** @return array<string,array<string,mixed>> every order by request id */
    public function all(): array
    {
        return $this->update(static fn (array $orders): array => $orders);
    }

    /** update applies $change to the orders under an exclusive lock and returns them. */
    private function update(\Closure $change): array
    {
        $f = fopen($this->path, 'c+');
        if ($f === false || !flock($f, LOCK_EX)) {
            throw new \RuntimeException("cannot open the order book {$this->path}");
        }
        try {
            $orders = json_decode((string) stream_get_contents($f), true) ?: [];
            $changed = $change($orders);
            if ($changed !== $orders) {
                ftruncate($f, 0);
                rewind($f);
                fwrite($f, json_encode($changed, JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR));
            }
            return $changed;
        } finally {
            flock($f, LOCK_UN);
            fclose($f);
        }
    }
}
