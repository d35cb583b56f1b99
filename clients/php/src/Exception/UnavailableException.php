<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * UnavailableException is a 503 (unavailable: Redis or PostgreSQL down,
 * slow or failing over), or no answer at all (ConnectionException), that
 * outlasted the client's deadline. The outcome of a purchase is unknown:
 * retry after $retryAfter seconds with the same $requestId, which buys at
 * most once and answers the original receipt.
 */
class UnavailableException extends InvledgerException
{
    /**
     * @param int $retryAfter seconds to wait before retrying (the answer's Retry-After)
     */
    public function __construct(
        string $errorCode,
        string $detail,
        ?string $field = null,
        ?string $traceId = null,
        int $status = 0,
        ?string $requestId = null,
        public readonly int $retryAfter = 1,
        ?\Throwable $previous = null,
    ) {
        parent::__construct($errorCode, $detail, $field, $traceId, $status, $requestId, $previous);
    }
}
