<?php

declare(strict_types=1);

// The suite runs with Composer's autoloader of this package (built by
// php_test.go with `composer dump-autoload` into a temporary vendor
// directory, INVLEDGER_PHP_AUTOLOAD) and the autoloaders of Debian's
// packages under /usr/share/php: Guzzle and the PSR interfaces here,
// Laravel in LaravelTest (the buyer processes need none of it).
$autoload = getenv('INVLEDGER_PHP_AUTOLOAD') ?: __DIR__ . '/../vendor/autoload.php';
require $autoload;
require_once 'GuzzleHttp/autoload.php';
require_once 'Psr/Http/Message/factory-autoload.php';
require_once 'Psr/Log/autoload.php';
require_once __DIR__ . '/Stack.php';
require_once __DIR__ . '/MemoryLogger.php';
