<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * MethodNotAllowedException is 405 method_not_allowed: the route does not take this method.
 */
final class MethodNotAllowedException extends InvledgerException
{
}
