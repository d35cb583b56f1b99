<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * InvalidRequestException is invalid_request: 400 when an input breaks its schema, 422 when an idempotency key was used for another request; $field names it. Nothing was stored; fix the input rather than retry.
 */
final class InvalidRequestException extends InvledgerException
{
}
