<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * CorruptLedgerException is a corrupt_ledger answer: the ledger's hash chain does not verify; an operator must look.
 */
final class CorruptLedgerException extends InvledgerException
{
}
