<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * NotWarmedException is 409 not_warmed: the SKU is defined but not loaded into Redis (an operator warms it); its sale has not started.
 */
final class NotWarmedException extends InvledgerException
{
}
