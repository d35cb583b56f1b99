<?php

declare(strict_types=1);

namespace App\Orders;

use Invledger\DeductReceipt;

/**
 * OrderBook is the shop's own order table: what DeductStockJob writes once
 * invledger has sold the units. Your implementation is an Eloquent model or
 * a query; it must be idempotent by request id (a unique index on it),
 * because a queued job may run more than once.
 */
interface OrderBook
{
    /** record creates the order of a purchase, or does nothing when the request id has one. */
    public function record(string $requestId, string $sku, string $userId, int $qty, DeductReceipt $receipt): void;

    /** refuse marks the purchase $requestId as not made, with invledger's error code (sold_out, ...). */
    public function refuse(string $requestId, string $sku, string $userId, string $reason): void;
}
