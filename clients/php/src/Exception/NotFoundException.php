<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * NotFoundException is 404 not_found: the SKU was never defined, or the hold or order does not exist ($field names which).
 */
final class NotFoundException extends InvledgerException
{
}
