<?php

declare(strict_types=1);

namespace Invledger\Laravel;

use Illuminate\Contracts\Container\Container;
use Illuminate\Support\ServiceProvider;
use Invledger\Client;
use Invledger\Options;
use Psr\Log\LoggerInterface;

/**
 * InvledgerServiceProvider binds one Invledger\Client, built from
 * config('invledger') (config/invledger.php, read from INVLEDGER_*), as a
 * singleton that the facade and type-hinted constructors and job handlers
 * get. Retries are logged to the application's log, without the token.
 */
final class InvledgerServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->mergeConfigFrom(__DIR__ . '/../../config/invledger.php', 'invledger');
        $this->app->singleton(Client::class, static function (Container $app): Client {
            $cfg = (array) $app->make('config')->get('invledger', []);
            $logger = $app->bound(LoggerInterface::class) ? $app->make(LoggerInterface::class) : null;
            // The options are read without the token, so that no frame of
            // an exception of theirs carries it.
            $token = (string) ($cfg['token'] ?? '');
            unset($cfg['token']);
            return Client::create((string) ($cfg['url'] ?? ''), $token, Options::fromArray($cfg, $logger));
        });
        $this->app->alias(Client::class, 'invledger');
    }

    public function boot(): void
    {
        if (function_exists('config_path')) {
            $this->publishes([__DIR__ . '/../../config/invledger.php' => config_path('invledger.php')], 'invledger-config');
        }
    }

}
