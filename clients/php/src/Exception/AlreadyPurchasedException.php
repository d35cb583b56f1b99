<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * AlreadyPurchasedException is 409 already_purchased: this user reached the SKU's per-user limit (held and sold units count). Nothing was bought.
 */
final class AlreadyPurchasedException extends InvledgerException
{
}
