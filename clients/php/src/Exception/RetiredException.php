<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * RetiredException is 409 retired: the SKU was removed from Redis after its sale, so its purchases can no longer be released.
 */
final class RetiredException extends InvledgerException
{
}
