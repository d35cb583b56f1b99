<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * HoldExpiredException is 409 hold_expired: the hold's deadline passed; its units went back to the sale.
 */
final class HoldExpiredException extends InvledgerException
{
}
