<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * NeedsRestoreException is 409 needs_restore: the SKU's Redis state is gone and must be restored from the ledger by an operator.
 */
final class NeedsRestoreException extends InvledgerException
{
}
