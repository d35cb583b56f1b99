<?php

declare(strict_types=1);

namespace Invledger\Tests;

use Psr\Log\AbstractLogger;

/** MemoryLogger keeps every line logged, message and context as JSON. */
final class MemoryLogger extends AbstractLogger
{
    /** @var list<string> */
    public array $lines = [];

    public function log($level, $message, array $context = []): void
    {
        $this->lines[] = $level . ' ' . $message . ' ' . json_encode($context);
    }
}
