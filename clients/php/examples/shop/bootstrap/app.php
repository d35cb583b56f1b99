<?php

declare(strict_types=1);

/*
 * The shop's application: Debian's Laravel (php-laravel-framework) and
 * Guzzle (php-guzzlehttp-guzzle) from /usr/share/php, the invledger client
 * from this checkout, and no Composer, so it runs offline. A Composer
 * project loads the same classes through vendor/autoload.php instead.
 */

require_once 'Illuminate/autoload.php';
require_once 'GuzzleHttp/autoload.php';
require_once 'Psr/Http/Message/factory-autoload.php';

spl_autoload_register(static function (string $class): void {
    $roots = [
        'Invledger\\' => __DIR__ . '/../../../src/',
        'App\\Jobs\\' => __DIR__ . '/../../Laravel/',   // DeductStockJob, the example docs/php.md links to
        'App\\Orders\\OrderBook' => __DIR__ . '/../../Laravel/OrderBook.php',
        'App\\' => __DIR__ . '/../app/',
    ];
    foreach ($roots as $prefix => $path) {
        if (!str_starts_with($class, $prefix)) {
            continue;
        }
        $file = str_ends_with($path, '.php') ? $path : $path . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
            return;
        }
    }
});

// Laravel writes its provider and package manifests, the compiled views
// and the shop's orders under the storage path, never into the checkout.
$storage = getenv('SHOP_STORAGE') ?: sys_get_temp_dir() . '/invledger-example-shop';
if (!is_dir($storage) && !mkdir($storage, 0o700, true) && !is_dir($storage)) {
    throw new RuntimeException("cannot create the storage directory $storage (SHOP_STORAGE)");
}
$_SERVER['APP_SERVICES_CACHE'] = $storage . '/services.php';
$_SERVER['APP_PACKAGES_CACHE'] = $storage . '/packages.php';

$app = new Illuminate\Foundation\Application(dirname(__DIR__));
$app->useStoragePath($storage);
$app->singleton(Illuminate\Contracts\Http\Kernel::class, App\Http\Kernel::class);
$app->singleton(Illuminate\Contracts\Debug\ExceptionHandler::class, Illuminate\Foundation\Exceptions\Handler::class);

return $app;
