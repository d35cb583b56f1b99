<?php

declare(strict_types=1);

// The front controller, and the router script of PHP's built-in server:
//   php -S 127.0.0.1:8000 clients/php/examples/shop/public/index.php

use Illuminate\Contracts\Http\Kernel;
use Illuminate\Http\Request;

$app = require __DIR__ . '/../bootstrap/app.php';
$kernel = $app->make(Kernel::class);
$response = $kernel->handle($request = Request::capture());
$response->send();
$kernel->terminate($request, $response);
