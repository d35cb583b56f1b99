<?php

declare(strict_types=1);

namespace Invledger\Tests;

use Invledger\Options;
use PHPUnit\Framework\TestCase;

/**
 * KillServeTest kills -9 the serve process while gateways buy through it,
 * and starts it again on the same address: every purchase ends with one
 * receipt, made once, that a retry with its request id answers again.
 */
final class KillServeTest extends TestCase
{
    public function testRetriesAcrossAKillOfServeAnswerTheOriginalReceipts(): void
    {
        $workers = 4;
        $each = 40;
        $sku = Stack::sku('kill', 1000, 1);
        $args = [];
        for ($w = 0; $w < $workers; $w++) {
            $args[] = [$sku, (string) $w, (string) $each];
        }
        $before = Stack::servePid();
        $killed = 0;
        // serve dies once the workers have bought a few units (each takes
        // half a second or more for its 40), and stays down half a second.
        $outs = Stack::php(__DIR__ . '/bin/steady-buyer.php', $args, static function () use ($sku, &$killed): void {
            Stack::waitFor('the workers to buy', static fn (): bool => Stack::view($sku)['redis_stock'] <= 1000 - 8);
            $killed = Stack::killServe(0.5);
        });
        self::assertSame($before, $killed, 'the control endpoint killed the serve of the moment');
        self::assertNotSame($before, Stack::servePid(), 'serve runs again as a new process');

        $receipts = [];
        $retries = 0;
        foreach ($outs as $out) {
            foreach (explode("\n", trim($out)) as $line) {
                $o = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
                if (isset($o['retries'])) {
                    $retries += $o['retries'];
                    continue;
                }
                $receipts[$o['request_id']] = $o;
            }
        }
        self::assertCount($workers * $each, $receipts, 'every purchase got a receipt');
        self::assertGreaterThan(0, $retries, 'no purchase met the dead serve: the kill came too late');

        $inv = Stack::gateway(new Options(deadline: 10.0));
        foreach ($receipts as $id => $r) {
            [, $w, $i] = explode('-', $id);
            $again = $inv->deduct($sku, "user-$w-$i", 1, $id);
            self::assertTrue($again->replayed, $id);
            self::assertSame([$r['seq'], $r['remaining'], $r['event_id']], [$again->seq, $again->remaining, $again->eventId], $id);
        }
        $view = Stack::projected($sku);
        self::assertSame(1000 - $workers * $each, $view['redis_stock'], 'each purchase was made once');
        self::assertSame($view['redis_stock'], $view['ledger_stock']);
        self::assertSame(1 + $workers * $each, $view['ledger_seq'], 'the warm\'s stocking and one event per purchase');
    }
}
