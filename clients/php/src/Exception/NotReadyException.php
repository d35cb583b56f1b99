<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * NotReadyException is 503 not_ready: the server cannot serve yet (its Redis or PostgreSQL is unreachable). Retry after $retryAfter seconds.
 */
final class NotReadyException extends UnavailableException
{
}
