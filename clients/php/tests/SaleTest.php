<?php

declare(strict_types=1);

namespace Invledger\Tests;

use PHPUnit\Framework\TestCase;

/**
 * SaleTest is a flash sale of 500 units to 2,000 buyers from 50 PHP
 * processes at once, each a gateway with its own client.
 */
final class SaleTest extends TestCase
{
    public function testFiftyProcessesSellExactlyTheStockAndNeverOversell(): void
    {
        $stock = 500;
        $buyers = 2000;
        $processes = 50;
        $sku = Stack::sku('flash', $stock, 1);
        $per = intdiv($buyers, $processes);
        $args = [];
        for ($p = 0; $p < $processes; $p++) {
            $args[] = [$sku, (string) ($p * $per), (string) $per];
        }
        $outcomes = [];
        $seqs = [];
        $remaining = [];
        foreach (Stack::php(__DIR__ . '/bin/buyer.php', $args) as $out) {
            foreach (explode("\n", trim($out)) as $line) {
                $o = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
                $outcomes[$o['outcome']] = ($outcomes[$o['outcome']] ?? 0) + 1;
                if ($o['outcome'] === 'ok') {
                    $seqs[] = $o['seq'];
                    $remaining[] = $o['remaining'];
                }
            }
        }
        ksort($outcomes);
        self::assertSame(['ok' => $stock, 'sold_out' => $buyers - $stock], $outcomes, 'every buyer got a receipt or sold_out');
        sort($remaining);
        self::assertSame(range(0, $stock - 1), $remaining, 'each unit was sold once: the receipts count down from 499 to 0');
        self::assertCount($stock, array_unique($seqs));

        $view = Stack::projected($sku);
        self::assertSame(0, $view['redis_stock']);
        self::assertSame(0, $view['ledger_stock'], 'the ledger in PostgreSQL says the same: sold out, no unit oversold');
        self::assertSame(1 + $stock, $view['ledger_seq'], 'the ledger holds the warm\'s stocking and one event per sale');
        $page = Stack::operator()->call('GET', '/v1/skus/' . $sku . '/buyers?limit=1000');
        self::assertCount($stock, $page['buyers']);
        self::assertSame([1], array_values(array_unique(array_column($page['buyers'], 'qty'))));
    }
}
