<?php

declare(strict_types=1);

namespace Invledger\Tests;

use App\Jobs\DeductStockJob;
use App\Orders\OrderBook;
use Illuminate\Bus\BusServiceProvider;
use Illuminate\Config\Repository;
use Illuminate\Events\EventServiceProvider;
use Illuminate\Foundation\Application;
use Illuminate\Queue\QueueServiceProvider;
use Illuminate\Support\Facades\Facade;
use Invledger\Client;
use Invledger\DeductReceipt;
use Invledger\Laravel\Facades\Invledger;
use Invledger\Laravel\InvledgerServiceProvider;
use PHPUnit\Framework\TestCase;

require_once 'Illuminate/autoload.php';
require_once __DIR__ . '/../examples/Laravel/OrderBook.php';
require_once __DIR__ . '/../examples/Laravel/DeductStockJob.php';

/**
 * LaravelTest boots a Laravel application (Debian's php-laravel-framework)
 * with the package's service provider and config, reading INVLEDGER_*,
 * then buys through the facade and runs DeductStockJob on the sync queue.
 */
final class LaravelTest extends TestCase
{
    private Application $app;

    protected function setUp(): void
    {
        putenv('INVLEDGER_URL=' . Stack::url());
        putenv('INVLEDGER_TOKEN=' . Stack::gatewayToken());
        putenv('INVLEDGER_DEADLINE=5');
        $app = new Application(sys_get_temp_dir());
        $app->instance('config', new Repository([
            'queue' => ['default' => 'sync', 'connections' => ['sync' => ['driver' => 'sync']]],
        ]));
        $app->register(EventServiceProvider::class);
        $app->register(BusServiceProvider::class);
        $app->register(QueueServiceProvider::class);
        $app->register(InvledgerServiceProvider::class);
        $app->singleton(OrderBook::class, MemoryOrderBook::class);
        $app->boot();
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        $this->app = $app;
    }

    protected function tearDown(): void
    {
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication(null);
        foreach (['INVLEDGER_URL', 'INVLEDGER_TOKEN', 'INVLEDGER_DEADLINE'] as $name) {
            putenv($name);
        }
    }

    public function testTheConfigReadsTheEnvironmentAndTheFacadeBuys(): void
    {
        self::assertSame(Stack::url(), config('invledger.url'));
        self::assertSame('5', (string) config('invledger.deadline'));
        self::assertSame($this->app->make(Client::class), $this->app->make('invledger'), 'one client per application');
        $sku = Stack::sku('laravel', 5);
        $r = Invledger::deduct($sku, 'lara', 1, 'lara-1');
        self::assertSame(4, $r->remaining);
    }

    public function testDeductStockJobCreatesTheOrderOnceFromTheReceipt(): void
    {
        $sku = Stack::sku('job', 1);
        $first = Invledger::deduct($sku, 'otto', 1, 'otto-1');
        DeductStockJob::dispatch($sku, 'otto', 1, 'otto-1');
        DeductStockJob::dispatch($sku, 'otto', 1, 'otto-1'); // a job run twice
        DeductStockJob::dispatch($sku, 'pia', 1, 'pia-1');
        $orders = $this->app->make(OrderBook::class);
        self::assertSame(['otto-1' => $first->seq], $orders->orders, 'one order, of the original receipt');
        self::assertSame(['pia-1' => 'sold_out'], $orders->refused);
    }

    public function testAFailedJobGivesTheUnitsBack(): void
    {
        $sku = Stack::sku('job-fails', 3);
        $orders = $this->app->make(OrderBook::class);
        $orders->failWith = new \RuntimeException("orders table is down\n(connection refused)");
        try {
            DeductStockJob::dispatch($sku, 'quin', 1, 'quin-1');
            self::fail('the job did not fail');
        } catch (\RuntimeException $e) {
            self::assertSame($orders->failWith, $e);
        }
        $replay = Invledger::deduct($sku, 'quin', 1, 'quin-1');
        self::assertTrue($replay->replayed && $replay->released, 'failed() released the purchase');
        self::assertSame(3, Stack::view($sku)['redis_stock']);
    }
}

/** MemoryOrderBook is the test's order table, in memory. */
final class MemoryOrderBook implements OrderBook
{
    /** @var array<string,int> request id => the receipt's seq */
    public array $orders = [];
    /** @var array<string,string> request id => reason */
    public array $refused = [];
    public ?\Throwable $failWith = null;

    public function record(string $requestId, string $sku, string $userId, int $qty, DeductReceipt $receipt): void
    {
        if ($this->failWith !== null) {
            throw $this->failWith;
        }
        $this->orders[$requestId] ??= $receipt->seq;
    }

    public function refuse(string $requestId, string $sku, string $userId, string $reason): void
    {
        $this->refused[$requestId] = $reason;
    }
}
