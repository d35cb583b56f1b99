<?php

declare(strict_types=1);

namespace Invledger;

/**
 * Hold is units reserved for a user until $expiresAt, in the state $status:
 * held, confirmed, cancelled, expired, or released (confirmed, and its sale
 * released since). $remaining (stock left after the reserve) and $requestId
 * come with a reserve's answer only; $replayed is true when a reserve
 * answered the hold an earlier call with the same request id made.
 */
final class Hold
{
    public function __construct(
        public readonly string $holdId,
        public readonly string $sku,
        public readonly string $userId,
        public readonly int $qty,
        public readonly string $status,
        public readonly \DateTimeImmutable $expiresAt,
        public readonly int $seq,
        public readonly ?int $remaining = null,
        public readonly ?string $orderId = null,
        public readonly ?string $requestId = null,
        public readonly bool $replayed = false,
        public readonly ?string $traceId = null,
    ) {
    }

    /** @param array<string,mixed> $b */
    public static function fromArray(array $b, ?string $requestId = null, bool $replayed = false, ?string $traceId = null): self
    {
        return new self(
            (string) $b['hold_id'],
            (string) $b['sku'],
            (string) $b['user_id'],
            (int) $b['qty'],
            (string) $b['status'],
            new \DateTimeImmutable((string) $b['expires_at']),
            (int) $b['seq'],
            isset($b['remaining']) ? (int) $b['remaining'] : null,
            isset($b['order_id']) ? (string) $b['order_id'] : null,
            $requestId,
            $replayed,
            $traceId,
        );
    }
}
