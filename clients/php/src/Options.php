<?php

declare(strict_types=1);

namespace Invledger;

use Psr\Log\LoggerInterface;

/**
 * Options tune a Client's retries. Every call is retried on a 503 and on a
 * transport error (no answer), with the same request id, until it gets a
 * definite answer or $deadline seconds have passed since it started.
 */
final class Options
{
    /**
     * @param float                $deadline      seconds a call may take, retries included (default 10)
     * @param float                $retryWait     the wait before the first retry, doubled after each (default 0.2)
     * @param float                $maxRetryWait  the longest wait between two tries; a Retry-After above it is cut to it (default 5)
     * @param float                $timeout       seconds one try may take, for the Guzzle client of Client::create (default 5)
     * @param LoggerInterface|null $logger        gets one warning per retry (never the token)
     * @param (\Closure(float):void)|null $sleep  waits the given seconds between tries; default usleep
     */
    public function __construct(
        public readonly float $deadline = 10.0,
        public readonly float $retryWait = 0.2,
        public readonly float $maxRetryWait = 5.0,
        public readonly float $timeout = 5.0,
        public readonly ?LoggerInterface $logger = null,
        public readonly ?\Closure $sleep = null,
    ) {
        $errs = [];
        if (!($deadline > 0)) {
            $errs[] = 'deadline must be above 0 seconds';
        }
        if (!($retryWait > 0) || $maxRetryWait < $retryWait) {
            $errs[] = 'retryWait must be above 0 and at most maxRetryWait';
        }
        if (!($timeout > 0)) {
            $errs[] = 'timeout must be above 0 seconds';
        }
        if ($errs !== []) {
            throw new \InvalidArgumentException('invledger options: ' . implode('; ', $errs));
        }
    }

    /**
     * fromArray builds Options from an array such as config('invledger'):
     * keys deadline, retry_wait, max_retry_wait, timeout (seconds); absent
     * keys keep their defaults. $a is a SensitiveParameter, as such an array
     * may hold the token too.
     *
     * @param array<string,mixed> $a
     */
    public static function fromArray(#[\SensitiveParameter] array $a, ?LoggerInterface $logger = null): self
    {
        $f = static fn (string $k, float $d): float => isset($a[$k]) && $a[$k] !== '' ? (float) $a[$k] : $d;
        return new self($f('deadline', 10.0), $f('retry_wait', 0.2), $f('max_retry_wait', 5.0), $f('timeout', 5.0), $logger);
    }
}
