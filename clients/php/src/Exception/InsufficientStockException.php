<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * InsufficientStockException is 409 insufficient_stock: an adjustment would take the stock below zero (an operator route).
 */
final class InsufficientStockException extends InvledgerException
{
}
