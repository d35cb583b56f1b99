<?php

declare(strict_types=1);

namespace Invledger;

/**
 * OrderLine is one SKU of an order and the state of its hold: held,
 * confirmed, cancelled, expired, released, or none (a line a cut-short place
 * never reserved).
 */
final class OrderLine
{
    public function __construct(
        public readonly string $sku,
        public readonly int $qty,
        public readonly string $holdId,
        public readonly string $status,
    ) {
    }
}
