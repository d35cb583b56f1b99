<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * HoldCancelledException is 409 hold_cancelled: the hold was cancelled, so it cannot be confirmed.
 */
final class HoldCancelledException extends InvledgerException
{
}
