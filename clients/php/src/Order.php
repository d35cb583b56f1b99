<?php

declare(strict_types=1);

namespace Invledger;

/**
 * Order is holds of several SKUs placed, confirmed and cancelled together.
 * $status is derived from its lines: held, confirmed, cancelled, expired,
 * or partial. $created is true when a place reserved it now, false when it
 * answered an earlier place with the same order id (or for any other call).
 */
final class Order
{
    /**
     * @param list<OrderLine> $lines
     */
    public function __construct(
        public readonly string $orderId,
        public readonly string $userId,
        public readonly string $status,
        public readonly \DateTimeImmutable $expiresAt,
        public readonly array $lines,
        public readonly bool $created = false,
        public readonly ?string $traceId = null,
    ) {
    }

    /** @param array<string,mixed> $b */
    public static function fromArray(array $b, bool $created = false, ?string $traceId = null): self
    {
        $lines = [];
        foreach ($b['lines'] as $l) {
            $lines[] = new OrderLine((string) $l['sku'], (int) $l['qty'], (string) $l['hold_id'], (string) $l['status']);
        }
        return new self((string) $b['order_id'], (string) $b['user_id'], (string) $b['status'],
            new \DateTimeImmutable((string) $b['expires_at']), $lines, $created, $traceId);
    }
}
