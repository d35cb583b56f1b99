<?php

declare(strict_types=1);

// steady-buyer.php SKU WORKER COUNT: one gateway process of KillServeTest.
// It buys one unit for each of COUNT users, one after
// another, each with a request id of its own, retrying for up to 30 s, and
// prints one JSON line per receipt and a last line with the retries made.
require __DIR__ . '/../bootstrap.php';

use Invledger\Options;
use Invledger\Tests\MemoryLogger;
use Invledger\Tests\Stack;

[, $sku, $worker, $count] = $argv;
$log = new MemoryLogger();
$inv = Stack::gateway(new Options(deadline: 30.0, retryWait: 0.05, maxRetryWait: 0.5, timeout: 2.0, logger: $log));
for ($i = 0; $i < (int) $count; $i++) {
    $id = "kill-$worker-$i";
    $r = $inv->deduct($sku, "user-$worker-$i", 1, $id);
    echo json_encode(['request_id' => $id, 'seq' => $r->seq, 'remaining' => $r->remaining, 'event_id' => $r->eventId]), "\n";
    usleep(10_000);
}
echo json_encode(['retries' => count($log->lines)]), "\n";
