<?php

declare(strict_types=1);

namespace Invledger;

/**
 * ReleaseReceipt is a purchase's units given back, at event $seq;
 * $alreadyReleased is true when an earlier release did it.
 */
final class ReleaseReceipt
{
    public function __construct(
        public readonly string $requestId,
        public readonly int $seq,
        public readonly string $eventId,
        public readonly bool $alreadyReleased,
        public readonly ?string $traceId,
    ) {
    }
}
