<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * InternalException is 500 internal: a bug on the server; $traceId finds its log lines.
 */
final class InternalException extends InvledgerException
{
}
