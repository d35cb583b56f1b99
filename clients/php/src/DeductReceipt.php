<?php

declare(strict_types=1);

namespace Invledger;

/**
 * DeductReceipt is a purchase made: $remaining units were left after it, at
 * the SKU's event number $seq. $replayed is true when it is the original
 * receipt of an earlier call with the same $requestId (nothing was bought
 * again), and $released when its units were released since.
 */
final class DeductReceipt
{
    public function __construct(
        public readonly string $requestId,
        public readonly int $seq,
        public readonly int $remaining,
        public readonly string $eventId,
        public readonly bool $replayed,
        public readonly bool $released,
        public readonly ?string $traceId,
    ) {
    }
}
