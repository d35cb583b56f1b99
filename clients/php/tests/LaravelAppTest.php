<?php

declare(strict_types=1);

namespace Invledger\Tests;

use PHPUnit\Framework\TestCase;

/**
 * LaravelAppTest boots the example shop (clients/php/examples/shop, on
 * Debian's Laravel, no Composer) with PHP's built-in server as docs/php.md
 * says, with only INVLEDGER_URL and INVLEDGER_TOKEN set, and buys through
 * its controller, which is docs/php.md's as written: the job it dispatches
 * writes the order once.
 */
final class LaravelAppTest extends TestCase
{
    private const APP = __DIR__ . '/../examples/shop';

    /** @var resource|null */
    private $server = null;
    private string $url = '';
    private string $storage = '';
    private string $log = '';

    /** startShop serves the shop with php -S on a free port, as docs/php.md does on 8000. */
    private function startShop(): void
    {
        $this->storage = sys_get_temp_dir() . '/invledger-shop-test-' . bin2hex(random_bytes(4));
        $this->log = $this->storage . '.log';
        $sock = stream_socket_server('tcp://127.0.0.1:0');
        $addr = (string) stream_socket_get_name($sock, false);
        fclose($sock);
        $env = array_filter(getenv(), static fn (string $name) => !str_starts_with($name, 'INVLEDGER_'), ARRAY_FILTER_USE_KEY);
        $env['INVLEDGER_URL'] = Stack::url();
        $env['INVLEDGER_TOKEN'] = Stack::gatewayToken();
        $env['SHOP_STORAGE'] = $this->storage;
        $p = proc_open([PHP_BINARY, '-S', $addr, self::APP . '/public/index.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->log, 'w'], 2 => ['file', $this->log, 'a']], $pipes, null, $env);
        self::assertNotFalse($p, 'cannot start php -S');
        $this->server = $p;
        $this->url = 'http://' . $addr;
        Stack::waitListening($addr);
    }

    protected function tearDown(): void
    {
        if ($this->server === null) {
            return; // no shop was started, so nothing was written
        }
        proc_terminate($this->server);
        proc_close($this->server);
        // The files the shop writes, by name: Laravel's manifests and the orders.
        foreach (['services.php', 'packages.php', 'orders.json'] as $file) {
            @unlink($this->storage . '/' . $file);
        }
        @rmdir($this->storage);
        @unlink($this->log);
    }

    public function testTheShopBuysThroughTheDocsController(): void
    {
        $this->startShop();
        $sku = Stack::sku('shop', 1);
        self::assertSame([200, ['status' => 'ok', 'remaining' => 0]], $this->buy($sku, 'ada', 'checkout-1'));
        self::assertSame([200, ['status' => 'ok', 'remaining' => 0]], $this->buy($sku, 'ada', 'checkout-1'), 'a reloaded page');
        self::assertSame([409, ['status' => 'sold_out']], $this->buy($sku, 'bob', 'checkout-2'));
        [$status, $answer] = $this->buy($sku, '', 'checkout-3');
        self::assertSame([400, 'X-User'], [$status, $answer['field'] ?? null], 'no buyer');
        [$status, $orders] = $this->call('GET', '/orders', [], '');
        self::assertSame(200, $status);
        self::assertSame(['checkout-1' => ['status' => 'ordered', 'sku' => $sku, 'user_id' => 'ada', 'qty' => 1, 'seq' => 2]], $orders,
            "one order, written by the job of the first request (seq 1 is the warm's stocking)\n" . file_get_contents($this->log));
    }

    public function testTheControllerIsTheDocs(): void
    {
        $page = (string) file_get_contents((string) getenv('INVLEDGER_TEST_DOCS'));
        self::assertSame(1, preg_match('/^```php\n(?:use [^\n]*\n)*\n(public function buy\(.*?^})\n```$/ms', $page, $doc),
            'docs/php.md has the controller\'s buy()');
        $controller = (string) file_get_contents(self::APP . '/app/Http/Controllers/BuyController.php');
        self::assertSame(1, preg_match('/^    (public function buy\(.*?^    })\n/ms', $controller, $app));
        self::assertSame($doc[1], preg_replace('/^    /m', '', $app[1]), 'BuyController::buy() is docs/php.md\'s');
    }

    /** @return array{int, mixed} */
    private function buy(string $sku, string $user, string $checkout): array
    {
        return $this->call('POST', '/buy/' . rawurlencode($sku), $user === '' ? [] : ['X-User: ' . $user], http_build_query(['checkout_id' => $checkout]));
    }

    /**
     * call makes one request to the shop and returns its status and its
     * JSON body, decoded.
     *
     * @param list<string> $headers
     * @return array{int, mixed}
     */
    private function call(string $method, string $path, array $headers, string $body): array
    {
        $headers[] = 'Accept: application/json';
        if ($body !== '') {
            $headers[] = 'Content-Type: application/x-www-form-urlencoded';
        }
        $ctx = stream_context_create(['http' => ['method' => $method, 'header' => $headers, 'content' => $body, 'ignore_errors' => true, 'timeout' => 20]]);
        $out = file_get_contents($this->url . $path, false, $ctx);
        self::assertNotFalse($out, "$method $path: no answer\n" . file_get_contents($this->log));
        preg_match('{^HTTP/\S+ (\d+)}', $http_response_header[0] ?? '', $m);
        return [(int) ($m[1] ?? 0), json_decode($out, true)];
    }
}
