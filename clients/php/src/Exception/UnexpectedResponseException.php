<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * UnexpectedResponseException is an answer that is not one of the API's: an
 * error code this client does not know (a newer server), a body that is not
 * the API's error JSON (a proxy's page; code http_error), or a success whose
 * body cannot be read (code bad_answer).
 */
final class UnexpectedResponseException extends InvledgerException
{
}
