<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * InvalidRequestException is 400 invalid_request: an input breaks its schema; $field names it. Nothing was stored; fix the input rather than retry.
 */
final class InvalidRequestException extends InvledgerException
{
}
