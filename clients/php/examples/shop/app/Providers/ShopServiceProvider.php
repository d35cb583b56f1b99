<?php

declare(strict_types=1);

namespace App\Providers;

use App\Http\Controllers\BuyController;
use App\Http\Middleware\DemoUser;
use App\Orders\JsonFileOrderBook;
use App\Orders\OrderBook;
use Illuminate\Support\Facades\Route;
use Illuminate\Support\ServiceProvider;

/** ShopServiceProvider binds the order book and declares the shop's two routes. */
final class ShopServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->app->singleton(JsonFileOrderBook::class, fn () => new JsonFileOrderBook(storage_path('orders.json')));
        $this->app->alias(JsonFileOrderBook::class, OrderBook::class);
    }

    public function boot(): void
    {
        Route::post('/buy/{sku}', [BuyController::class, 'buy'])->middleware(DemoUser::class);
        // What the queued jobs wrote, to see them work.
        Route::get('/orders', fn (JsonFileOrderBook $orders) => response()->json($orders->all()));
    }
}
