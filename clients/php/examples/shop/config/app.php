<?php

return [
    'name' => 'shop',
    'env' => 'local',
    'debug' => false,
    'providers' => [
        Illuminate\Bus\BusServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Queue\QueueServiceProvider::class,
        Illuminate\View\ViewServiceProvider::class,
        // Package discovery needs Composer; without it the provider is listed here.
        Invledger\Laravel\InvledgerServiceProvider::class,
        App\Providers\ShopServiceProvider::class,
    ],
    'aliases' => [],
];
