<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * SelfApprovalException is 403 self_approval: an adjustment's requester may not decide it (an operator route).
 */
final class SelfApprovalException extends InvledgerException
{
}
