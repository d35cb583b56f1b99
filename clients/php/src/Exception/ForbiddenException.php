<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * ForbiddenException is 403 forbidden: the token's role may not call this route (a gateway token calls purchases, holds and orders).
 */
final class ForbiddenException extends InvledgerException
{
}
