<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * ConflictException is 409 conflict: the request id (or order id) was used before with another user, quantity or body ($field names the member), or the request conflicts with the SKU's state.
 */
final class ConflictException extends InvledgerException
{
}
