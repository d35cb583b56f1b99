<?php

// The invledger client's settings, from INVLEDGER_* environment variables.
// Publish it with: php artisan vendor:publish --tag=invledger-config
return [
    // The API's base URL.
    'url' => env('INVLEDGER_URL', 'http://127.0.0.1:8080'),
    // A gateway token's secret (the third part of name:gateway:secret).
    'token' => env('INVLEDGER_TOKEN'),
    // Seconds a call may take, retries of 503s and transport errors included.
    'deadline' => env('INVLEDGER_DEADLINE', 10),
    // Seconds one try may take.
    'timeout' => env('INVLEDGER_TIMEOUT', 5),
    // The first wait between tries, doubled after each, and the longest.
    'retry_wait' => env('INVLEDGER_RETRY_WAIT', 0.2),
    'max_retry_wait' => env('INVLEDGER_MAX_RETRY_WAIT', 5),
];
