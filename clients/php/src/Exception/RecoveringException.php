<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * RecoveringException is 503 recovering: the SKU is being checked after a Redis restart. Retry after $retryAfter seconds with the same request id.
 */
final class RecoveringException extends UnavailableException
{
}
