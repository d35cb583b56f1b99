<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * HoldReleasedException is 409 hold_released: the hold was confirmed and its sale released since.
 */
final class HoldReleasedException extends InvledgerException
{
}
