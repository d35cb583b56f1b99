<?php

// The sync queue runs DeductStockJob within the request, so the app needs
// no worker; a shop's queue is redis or database, with `php artisan queue:work`.
return [
    'default' => 'sync',
    'connections' => ['sync' => ['driver' => 'sync']],
];
