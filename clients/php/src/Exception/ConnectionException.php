<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * ConnectionException is a call that got no answer until the client's
 * deadline: the server could not be reached, or the connection broke before
 * the answer came. A purchase may or may not have been made; retry it with
 * the same $requestId to learn which. Its code is "connection", which the API
 * never answers.
 */
final class ConnectionException extends UnavailableException
{
}
