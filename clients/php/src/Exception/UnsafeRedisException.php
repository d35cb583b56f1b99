<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * UnsafeRedisException is 503 unsafe_redis: Redis's settings could lose purchases, so sales stopped until they are fixed. Retry after $retryAfter seconds with the same request id.
 */
final class UnsafeRedisException extends UnavailableException
{
}
