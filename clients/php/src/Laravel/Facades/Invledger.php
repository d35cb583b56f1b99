<?php

declare(strict_types=1);

namespace Invledger\Laravel\Facades;

use Illuminate\Support\Facades\Facade;

/**
 * Invledger is the facade of the container's Invledger\Client.
 *
 * @method static \Invledger\DeductReceipt deduct(string $sku, string $userId, int $qty = 1, ?string $requestId = null)
 * @method static \Invledger\ReleaseReceipt release(string $sku, string $userId, string $requestId, ?string $reason = null)
 * @method static \Invledger\Hold reserve(string $sku, string $userId, int $qty = 1, ?string $requestId = null, ?int $ttlSeconds = null)
 * @method static \Invledger\Hold getHold(string $sku, string $holdId)
 * @method static \Invledger\Hold confirmHold(string $sku, string $holdId)
 * @method static \Invledger\Hold cancelHold(string $sku, string $holdId)
 * @method static \Invledger\Order placeOrder(string $orderId, string $userId, array $lines, ?int $ttlSeconds = null)
 * @method static \Invledger\Order getOrder(string $orderId)
 * @method static \Invledger\Order confirmOrder(string $orderId)
 * @method static \Invledger\Order cancelOrder(string $orderId)
 * @method static array call(string $method, string $path, ?array $body = null, ?string $idempotencyKey = null)
 *
 * @see \Invledger\Client
 */
final class Invledger extends Facade
{
    protected static function getFacadeAccessor(): string
    {
        return \Invledger\Client::class;
    }
}
