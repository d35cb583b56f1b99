<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * SoldOutException is 409 sold_out: the SKU has fewer units left than asked. Nothing was bought.
 */
final class SoldOutException extends InvledgerException
{
}
