<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * RequestTimeoutException is 408 request_timeout: the request's body did not reach the server in time; nothing was done.
 */
final class RequestTimeoutException extends InvledgerException
{
}
