<?php

// The client's retries and the job's failures go to standard error, which
// php -S shows.
return [
    'default' => 'stderr',
    'channels' => [
        'stderr' => ['driver' => 'monolog', 'handler' => Monolog\Handler\StreamHandler::class, 'with' => ['stream' => 'php://stderr']],
    ],
];
