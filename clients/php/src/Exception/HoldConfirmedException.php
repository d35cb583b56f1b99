<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * HoldConfirmedException is 409 hold_confirmed: the hold was confirmed, so it cannot be cancelled (release the purchase instead).
 */
final class HoldConfirmedException extends InvledgerException
{
}
