<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * ClosedException is 409 closed: the SKU's sale was closed (or retired); a retry of an earlier purchase still gets its receipt.
 */
final class ClosedException extends InvledgerException
{
}
