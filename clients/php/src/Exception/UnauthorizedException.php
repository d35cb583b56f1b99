<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * UnauthorizedException is 401 unauthorized: no token, or one the server does not know.
 */
final class UnauthorizedException extends InvledgerException
{
}
